"""Model ids -> clients. `anthropic:<model>`, `openai:<model>`, `local:smollm2`, `scripted:<name>`.

SDKs are imported lazily inside the factories, so a missing package or key only matters when
that provider is actually chosen.
"""

from __future__ import annotations

from collections.abc import Callable

from promptloop.agents.llm.errors import ModelConfigError
from promptloop.agents.llm.options import Factory, ModelOptions
from promptloop.agents.llm.types import ModelClient
from promptloop.agents.names import did_you_mean

_PROVIDERS: dict[str, Factory] = {}
_SEEDED: dict[str, bool] = {"scripted": True}
"""Per provider: whether it sends `ModelSettings.seed` to the model (scripted models see the
seed in every recorded request, so a script can draw its randomness from it)."""
SCRIPTED_MODELS: dict[str, Callable[[], ModelClient]] = {}
"""Named scripted models usable from the CLI as `scripted:<name>` (tests and demos)."""


def register_provider(name: str, factory: Factory, *, accepts_seed: bool = False) -> None:
    """Register `name:<model>` ids; `accepts_seed`: the provider sends `ModelSettings.seed`."""
    _PROVIDERS[name] = factory
    _SEEDED[name] = accepts_seed


def accepts_seed(model_id: str) -> bool:
    """Whether calls to `model_id` carry `ModelSettings.seed` to the model, so two trials sent
    the same seed share their random draws where the provider honours it (Anthropic has no
    seed parameter: False)."""
    provider, _ = parse_model_id(model_id)
    return _SEEDED.get(provider, False)


def parse_model_id(model_id: str) -> tuple[str, str]:
    provider, sep, name = model_id.partition(":")
    provider = provider.strip().lower()
    if provider not in _known_providers():
        public = [p for p in _known_providers() if p != "scripted"]  # tests' own, not listed
        extra = did_you_mean(provider, public)
        if not sep:  # a bare model name: say which provider serves it
            from promptloop.agents.llm.providers.local import MODEL_NAME

            extra = (f" Did you mean 'local:{MODEL_NAME}'?" if provider == MODEL_NAME
                     else f" A model id is '<provider>:<model>', e.g. 'openai:{model_id}'.")
        raise ModelConfigError(
            f"unknown model provider '{provider}' in model id '{model_id}'. "
            f"Known providers: {', '.join(public)}.{extra}"
        )
    if provider != "scripted" and (not sep or not name.strip()):
        raise ModelConfigError(f"model id '{model_id}' has no model name; use '{provider}:<model>'")
    return provider, name.strip()


def _known_providers() -> list[str]:
    _load_builtin()
    return sorted([*_PROVIDERS, "scripted"])


def create_client(model_id: str, options: ModelOptions | None = None) -> ModelClient:
    options = options or ModelOptions()
    provider, name = parse_model_id(model_id)
    if provider == "scripted":
        key = name or "default"
        if key not in SCRIPTED_MODELS:
            raise ModelConfigError(
                f"unknown scripted model '{key}'. "
                f"Known: {', '.join(sorted(SCRIPTED_MODELS)) or '(none)'}"
            )
        return SCRIPTED_MODELS[key]()
    return _PROVIDERS[provider](name, options)


_loaded = False


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from promptloop.agents.llm import providers  # registers anthropic, openai, local

    providers.register_all(register_provider)
