"""What a provider's factory takes and returns, below both the registry and the providers (so
neither imports the other at load time: the registry loads the providers, the providers never
import the registry)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from promptloop.agents.llm.types import ModelClient


@dataclass(frozen=True)
class ModelOptions:
    """Provider-independent client options (CLI flags / config)."""

    base_url: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 4


Factory = Callable[[str, ModelOptions], ModelClient]
"""`create(model_name, options)`: what each provider module exports and registers."""
