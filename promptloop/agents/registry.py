"""Python adapters: loading the `package.module:function` a promptloop.toml entry names.

Agents are declared in promptloop.toml (optimizer/core/project.py), not here; the bundled card
and PKM agents are entries like any other (`promptloop.agents.adapters:card_agent`), declared with
`adapter = "session"`: such an entry (`@session_factory`) builds an in-process session that
promptloop's agent loop runs. Which road an entry takes is the table's `adapter`, never read
from the module. `load_entry` is the one loader of an entry (both the `python` and the
`session` adapter use it).

`AgentOptions` are our opt-in agent behaviours (docs/compat.md: by default both agents behave
as the original harness). They reach a run through `session_builder(entry, options)`; the
runner takes them from `$PROMPTLOOP_AGENT_OPTIONS`, a comma-separated list of option names.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Protocol

from promptloop.agents.base import SESSION_FACTORY_MARK, AgentFactory, AgentInput, OutcomeSession
from promptloop.agents.names import did_you_mean
from promptloop.agents.workspace import Workspace

AGENT_OPTIONS_VAR = "PROMPTLOOP_AGENT_OPTIONS"


class AgentOptionsError(ValueError):
    """An unknown option name in an agent options list."""


@dataclass(frozen=True)
class AgentOptions:
    """Our stricter agent checks, each off by default (the original accepts these cases)."""

    strict_templates: bool = False
    """Card Agent: template data checks beyond types (hex colours, ISO-8601 start times,
    non-empty lists and strings, non-negative durations)."""
    strict_insight: bool = False
    """PKM Agent: the insight must be for this input's fact id, non-blank, and related ids must
    be fact ids."""
    require_skip_evidence: bool = False
    """PKM Agent: skip_pkm_organization refuses blank evidence."""

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def parse(cls, text: str) -> AgentOptions:
        """Options from "strict_templates,strict_insight" (blank -> all off)."""
        wanted = [w.strip() for w in text.replace(";", ",").split(",") if w.strip()]
        known = cls.names()
        for name in wanted:
            if name not in known:
                raise AgentOptionsError(f"unknown agent option {name!r}."
                                        f"{did_you_mean(name, known)} Known: {', '.join(known)}")
        return cls(**dict.fromkeys(wanted, True))

    @classmethod
    def from_env(cls) -> AgentOptions:
        """Options named in $PROMPTLOOP_AGENT_OPTIONS (unset -> the original's behaviour)."""
        try:
            return cls.parse(os.environ.get(AGENT_OPTIONS_VAR, ""))
        except AgentOptionsError as err:
            raise AgentOptionsError(f"${AGENT_OPTIONS_VAR}: {err}") from None

    def key(self) -> str:
        """The enabled option names, sorted and comma-joined ("" when none): a cache key part."""
        return ",".join(n for n in self.names() if getattr(self, n))


class SessionBuilder(Protocol):
    """A python adapter's in-process form (`@session_factory`): builds an agent session that
    promptloop's agent loop runs with the trial's model client."""

    def __call__(
        self,
        workspace: Workspace,
        agent_input: AgentInput,
        system_prompt: str,
        options: AgentOptions | None = None,
    ) -> OutcomeSession: ...


class EntryError(ValueError):
    """A python adapter's `entry` that cannot be imported or is not callable."""


def importable(root: Path | None) -> None:
    """Make the modules of the repository at `root` importable by an entry
    (`package.module:function` is looked up from the repository top, as a command's argv)."""
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))


def load_entry(entry: str, root: Path | None = None) -> Any:
    """The object `package.module:function` names (imported now; `root`: the repository whose
    modules it may name)."""
    importable(root)
    module, _, attr = entry.partition(":")
    if not module or not attr:
        raise EntryError(f"entry {entry!r} is not 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module)
    except Exception as err:  # the user's module: any import error is theirs to see
        raise EntryError(f"entry {entry!r}: cannot import {module}: "
                         f"{type(err).__name__}: {err}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise EntryError(f"entry {entry!r}: {module} has no {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise EntryError(f"entry {entry!r} is not callable")
    return obj


def is_session_factory(obj: object) -> bool:
    """Whether an entry is marked `@session_factory` (checked once loaded, for a clear error
    when the table's adapter does not fit it; the road is the table's choice)."""
    return bool(getattr(obj, SESSION_FACTORY_MARK, False))


def session_builder(entry: str, options: AgentOptions | None = None,
                    root: Path | None = None) -> AgentFactory:
    """The session factory `entry` names (an `adapter = "session"` agent's), building sessions
    with `options` (None: the original's behaviour)."""
    builder = load_entry(entry, root)
    if not is_session_factory(builder):
        raise EntryError(f"entry {entry!r} is not a session factory (@session_factory): "
                         "declare adapter = \"python\" for a (request, context) function")
    return functools.partial(builder, options=options)


__all__ = ["AGENT_OPTIONS_VAR", "AgentOptions", "AgentOptionsError", "EntryError",
           "SessionBuilder", "importable", "is_session_factory", "load_entry", "session_builder"]
