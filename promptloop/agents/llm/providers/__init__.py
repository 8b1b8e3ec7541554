"""Built-in model providers: `anthropic:<model>`, `openai:<model>`, `local:smollm2`.

Each provider module imports its SDK lazily, so importing this package is cheap and a
missing SDK or key only matters for the provider actually chosen.
"""

from __future__ import annotations

from typing import Protocol

from promptloop.agents.llm.options import Factory


class Register(Protocol):
    def __call__(self, name: str, factory: Factory, *, accepts_seed: bool = False) -> None: ...


def register_all(register: Register) -> None:
    """Register the built-in factories with the model registry. OpenAI Chat Completions and
    OpenAI-compatible servers (llama.cpp, vLLM, Ollama) take a `seed`; Anthropic has none."""
    from promptloop.agents.llm.providers import anthropic_provider, local, openai_provider

    register("anthropic", anthropic_provider.create, accepts_seed=False)
    register("openai", openai_provider.create, accepts_seed=True)
    register("local", local.create, accepts_seed=True)


__all__ = ["register_all"]
