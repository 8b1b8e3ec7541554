"""Built-in model providers: `anthropic:<model>`, `openai:<model>`, `local:smollm2`.

Each provider module imports its SDK lazily, so importing this package is cheap and a
missing SDK or key only matters for the provider actually chosen.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.llm.registry import Factory


def register_all(register: Callable[[str, Factory], None]) -> None:
    """Register the built-in factories with the model registry."""
    from agents.llm.providers import anthropic_provider, local, openai_provider

    register("anthropic", anthropic_provider.create)
    register("openai", openai_provider.create)
    register("local", local.create)


__all__ = ["register_all"]
