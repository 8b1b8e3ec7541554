"""Graders by name, so task.json can name them; config validation; running and trial verdicts.

Each grader registers its name, kind ("code" or "model"), pass threshold, the agent it grades
and a pydantic config model. Suites validate every config up-front with `validate_config`, so a
bad value fails loading instead of silently grading with defaults. Unknown config keys are
ignored, as the original does (docs/compat.md); `config_warnings` names them for the loader.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from promptloop.agents.names import did_you_mean
from promptloop.graders.base import GradeContext, GraderConfig, Score, null_score, passes

GraderKind = Literal["code", "model"]
AgentName = Literal["card_agent", "pkm_agent"]
GradeFn = Callable[[GradeContext, Any], Awaitable[Score]]
C = TypeVar("C", bound=GraderConfig)

_BUILTIN_MODULES = ("promptloop.graders.card", "promptloop.graders.pkm",
                    "promptloop.graders.judge", "promptloop.graders.general")


class GraderError(ValueError):
    """A grader configuration problem (unknown name, invalid config): raised, never scored."""


class UnknownGraderError(GraderError):
    pass


class GraderConfigError(GraderError):
    pass


@dataclass(frozen=True)
class GraderSpec:
    name: str
    kind: GraderKind
    threshold: float
    config_model: type[GraderConfig]
    grade: GradeFn
    agent: AgentName | None
    description: str


_REGISTRY: dict[str, GraderSpec] = {}


def register(
    name: str,
    *,
    kind: GraderKind,
    threshold: float,
    config: type[C],
    agent: AgentName | None,
) -> Callable[
    [Callable[[GradeContext, C], Awaitable[Score]]], Callable[[GradeContext, C], Awaitable[Score]]
]:
    """Decorator registering `async def grade(ctx, config) -> Score` under `name`."""

    def wrap(
        fn: Callable[[GradeContext, C], Awaitable[Score]],
    ) -> Callable[[GradeContext, C], Awaitable[Score]]:
        if name in _REGISTRY and _REGISTRY[name].grade is not fn:
            raise GraderError(f"grader {name!r} is registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = GraderSpec(
            name=name,
            kind=kind,
            threshold=threshold,
            config_model=config,
            grade=fn,
            agent=agent,
            description=doc[0] if doc else "",
        )
        return fn

    return wrap


def _load_builtin() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def known_graders() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def graders_listing() -> str:
    """The known graders as a user reads them: the general ones any agent's tasks may name
    first, then the card/PKM ones with the agent each is for."""
    _load_builtin()
    general = sorted(n for n, g in _REGISTRY.items() if g.agent is None)
    parts = [f"general (any agent): {', '.join(general)}"]
    for agent in sorted({g.agent for g in _REGISTRY.values() if g.agent is not None}):
        own = sorted(n for n, g in _REGISTRY.items() if g.agent == agent)
        parts.append(f"for the bundled {agent} only: {', '.join(own)}")
    return "; ".join(parts)


def get_grader(name: str) -> GraderSpec:
    """The registered grader called `name`; unknown names fail with the list of known ones."""
    _load_builtin()
    spec = _REGISTRY.get(name)
    if spec is None:
        known = sorted(_REGISTRY)
        raise UnknownGraderError(
            f"unknown grader {name!r}.{did_you_mean(name, known)} "
            f"Known graders: {graders_listing()}"
        )
    return spec


def is_judge(name: str) -> bool:
    """The one test of "is this grader an LLM judge" (kind "model"). An unknown name counts as
    a judge: a report may name a grader this version no longer has, and a judge is the
    cautious reading (calibration asked for, not waived)."""
    _load_builtin()
    spec = _REGISTRY.get(name)
    return spec is None or spec.kind == "model"


def judge_graders() -> list[str]:
    """Every registered judge grader, sorted."""
    return [g for g in known_graders() if is_judge(g)]


def validate_config(name: str, config: Mapping[str, Any] | BaseModel | None) -> GraderConfig:
    """Validate a task.json grader config; errors name the grader and the offending field."""
    spec = get_grader(name)
    if isinstance(config, spec.config_model):
        return config
    if isinstance(config, BaseModel):
        config = config.model_dump()
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise GraderConfigError(
            f"grader {name!r}: config must be a JSON object, got {type(config).__name__}"
        )
    try:
        return spec.config_model.model_validate(dict(config))
    except ValidationError as err:
        problems = []
        for e in err.errors():
            loc = ".".join(str(p) for p in e["loc"])
            where = f"config field {loc!r}" if loc else "config"
            problems.append(f"{where}: {e['msg']}")
        unknown = config_warnings(name, config)
        raise GraderConfigError(f"grader {name!r}: " + "; ".join(problems)
                                + "".join("; " + w.split(": ", 1)[1].replace(" ignored", "")
                                          for w in unknown)) from err


def config_warnings(name: str, config: Mapping[str, Any] | BaseModel | None) -> list[str]:
    """Warnings for the keys of a task.json grader config that the grader ignores (with the
    known key a misspelling most likely meant)."""
    if not isinstance(config, Mapping):
        return []
    model = get_grader(name).config_model
    known = set(model.model_fields)
    known |= {f.alias for f in model.model_fields.values() if f.alias}
    out = []
    for key in config:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        out.append(f"grader {name!r}: unknown config key {key!r} ignored{hint}")
    return out


async def run_grader(
    name: str, config: Mapping[str, Any] | BaseModel | None, ctx: GradeContext
) -> Score:
    """Grade one trial. Unknown names and bad configs raise; a grader exception becomes a null
    score whose rationale is the exception (the trial is not failed by a broken grader)."""
    spec = get_grader(name)
    parsed = validate_config(name, config)
    try:
        score = await spec.grade(ctx, parsed)
    except Exception as err:
        return null_score(
            name,
            f"grader raised {type(err).__name__}: {err}",
            error_type=type(err).__name__,
            error_module=type(err).__module__,
        )
    if score.grader != name:
        score = score.model_copy(update={"grader": name})
    return score


def trial_passed(scores: Sequence[Score], threshold: float = 1.0) -> bool:
    """docs/compat.md: a trial passes when every decided grader passed; completion is itself a
    grader, nothing else is required (so a trial with no decided score passes, as in the
    original). With a suite `task_pass_threshold` below 1.0 the trial passes instead when the
    mean of its decided scores reaches the threshold (no decided score: no mean, not passed)."""
    decided = [s.value for s in scores if s.value is not None]
    if threshold < 1.0:
        return bool(decided) and passes(sum(decided) / len(decided), threshold)
    return all(s.passed for s in scores if s.value is not None)
