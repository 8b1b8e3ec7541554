"""Adapter kinds by name: every trial of every agent goes through one of them.

An adapter turns a contract request into a contract outcome:
`await adapter.attempt(request, context) -> AdapterOutcome`. A kind is a class registered with
`@adapter("<kind>")` (in the style of `graders/registry.register`), built once per run and
agent as `cls(settings, setup)` from the agent table's adapter settings (the union in
core/adapter_settings.py) and closed with `aclose()` at the end of the run. The built-in kinds
are the modules of `optimizer/adapters/kinds/`, loaded on first use.

The caller (`run/trial.py`, one function for every kind) sets the time limit in the request,
grades the outcome and classifies what went wrong; a kind only answers an `AdapterOutcome`:
ok (grade `result.outcome`), failed (the agent caused it), errored (it could not run), with
`timed_out` when the limit was reached. What a kind raises is classified there as well: a
`ModelError` (the model, infrastructure), `AgentRaised` (the agent's own code), an
`AdapterConfigError` (the configuration), anything else (a promptloop bug).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from promptloop.optimizer.adapters.contract import TrialContext, TrialRequest
from promptloop.optimizer.adapters.outcome import AdapterConfigError, AdapterOutcome
from promptloop.optimizer.core.adapter_settings import AdapterSettingsBase

_BUILTIN_MODULES = tuple(f"promptloop.optimizer.adapters.kinds.{m}"
                         for m in ("command", "worker", "http", "python", "session"))


@dataclass(frozen=True)
class AdapterSetup:
    """What a kind is built with besides its settings."""

    repo_root: Path
    """The repository the agent's files are read from (argv paths, python entries)."""
    agent: str
    """The agent's name (messages)."""
    workers: int = 1
    """Trials that may run at once (a worker pool's size)."""


class Adapter:
    """One agent's adapter for one run (subclass and register with `@adapter(kind)`)."""

    kind: ClassVar[str] = ""
    uses_gateway: ClassVar[bool] = True
    """The agent calls the model over HTTP through promptloop's loopback gateway (False: it
    gets the trial's model client in-process, `TrialContext.model`)."""

    def __init__(self, settings: AdapterSettingsBase, setup: AdapterSetup) -> None:
        self.settings = settings
        self.setup = setup

    async def attempt(self, request: TrialRequest, context: TrialContext | None
                      ) -> AdapterOutcome:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the run held (processes, pools)."""


A = TypeVar("A", bound=type[Adapter])
_KINDS: dict[str, type[Adapter]] = {}


def adapter(kind: str) -> Callable[[A], A]:
    """Register an adapter class under `kind` (the `adapter = "<kind>"` of an agent table)."""

    def register(cls: A) -> A:
        if kind in _KINDS and _KINDS[kind] is not cls:
            raise ValueError(f"adapter kind {kind!r} is registered twice")
        cls.kind = kind
        _KINDS[kind] = cls
        return cls

    return register


def _load_builtin() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def registered() -> tuple[str, ...]:
    """Every registered adapter kind."""
    _load_builtin()
    return tuple(_KINDS)


def adapter_class(kind: str) -> type[Adapter]:
    _load_builtin()
    try:
        return _KINDS[kind]
    except KeyError:
        raise AdapterConfigError(f"no adapter kind {kind!r} is registered "
                                 f"(known: {', '.join(_KINDS)})") from None


def open_adapter(settings: AdapterSettingsBase, setup: AdapterSetup) -> Adapter:
    """The adapter `settings.adapter` names, built for one run."""
    return adapter_class(settings.adapter)(settings, setup)


def settings_of(adapter_: Adapter, cls: type[Any]) -> Any:
    """The adapter's settings as the kind's own model (a kind built with another's settings
    is a bug in promptloop)."""
    if not isinstance(adapter_.settings, cls):
        raise TypeError(f"adapter {adapter_.kind!r} was given {type(adapter_.settings).__name__}")
    return adapter_.settings


__all__ = ["Adapter", "AdapterSetup", "adapter", "adapter_class", "open_adapter",
           "registered", "settings_of"]
