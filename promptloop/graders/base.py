"""Score types every grader returns, the context graders read, and score-building helpers.

A score's `value` is in [0, 1], or None when the grader does not apply to the trial (then
`passed` is None too). The rationale is what the proposer learns from, so every helper here
fills it in with the failing checks rather than leaving it empty.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from promptloop.agents.llm.types import ModelClient, ModelSettings
from promptloop.agents.transcript import Transcript

JUDGE_SETTINGS = ModelSettings(temperature=0.0, max_tokens=600)
"""Default judge generation settings (docs/compat.md: temperature 0, ~600 output tokens)."""

_EPS = 1e-9


class Assertion(BaseModel):
    """One named check of a grader; `actual`/`expected` are shown in failure reports."""

    model_config = ConfigDict(extra="forbid")

    description: str
    passed: bool
    actual: Any = None
    expected: Any = None


class Score(BaseModel):
    """The result of one grader on one trial."""

    model_config = ConfigDict(extra="forbid")

    grader: str
    value: float | None
    passed: bool | None
    assertions: list[Assertion] = Field(default_factory=list)
    rationale: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Score:
        if self.value is None:
            if self.passed is not None:
                raise ValueError("a null score cannot be passed or failed")
        elif not (math.isfinite(self.value) and 0.0 <= self.value <= 1.0):
            raise ValueError(f"score value must be in [0, 1], got {self.value}")
        elif self.passed is None:
            raise ValueError("a decided score must say whether it passed")
        return self

    @property
    def decided(self) -> bool:
        return self.value is not None


class GraderConfig(BaseModel):
    """Base of every grader config. Unknown keys are ignored, as the original does (SPEC
    section 8); `registry.config_warnings` lists them so a loader can warn about typos."""

    model_config = ConfigDict(extra="ignore", frozen=True)


@dataclass(frozen=True, kw_only=True)
class GradeContext:
    """Everything a grader may look at for one trial. `input` is the task's input as the task
    declares it (any agent); `fact_id` is the card/PKM task shape's (None for a generic task:
    the card and PKM graders that need it say they do not apply)."""

    task_id: str
    agent_name: str = ""
    outcome: dict[str, Any]
    transcript: Transcript
    input: Mapping[str, Any] = field(default_factory=dict)
    fact_id: str | None = None
    input_content: str = ""
    expected_outcome: dict[str, Any] | None = None
    judge: ModelClient | None = None
    judge_settings: ModelSettings = JUDGE_SETTINGS

    def __post_init__(self) -> None:
        if not self.input_content and isinstance(self.input.get("content"), str):
            object.__setattr__(self, "input_content", self.input["content"])
        if self.fact_id is None and isinstance(self.input.get("fact_id"), str):
            object.__setattr__(self, "fact_id", self.input["fact_id"])


def passes(value: float, threshold: float) -> bool:
    """`value >= threshold`, tolerant of float noise (2/3 + 1/3 must reach 1.0)."""
    return value + _EPS >= threshold


def null_score(grader: str, rationale: str, **metadata: Any) -> Score:
    """A score that does not apply to this trial (or could not be decided)."""
    return Score(grader=grader, value=None, passed=None, rationale=rationale, metadata=metadata)


def describe_failures(assertions: Sequence[Assertion]) -> str:
    """A one-line rationale listing the failed assertions (or saying that all passed)."""
    failed = [a for a in assertions if not a.passed]
    if not failed:
        return f"all {len(assertions)} check(s) passed"
    parts = []
    for a in failed:
        detail = a.description
        if a.actual is not None or a.expected is not None:
            detail += f" (actual: {_short(a.actual)}; expected: {_short(a.expected)})"
        parts.append(detail)
    return f"failed {len(failed)}/{len(assertions)}: " + "; ".join(parts)


def assertion_score(
    grader: str,
    assertions: Sequence[Assertion],
    threshold: float,
    rationale: str = "",
    metadata: Mapping[str, Any] | None = None,
) -> Score:
    """Code-grader score: value = passed assertions / total, passed = value >= threshold."""
    if not assertions:
        raise ValueError(f"grader {grader} produced no assertions")
    value = sum(a.passed for a in assertions) / len(assertions)
    return value_score(grader, value, threshold, assertions, rationale, metadata)


def value_score(
    grader: str,
    value: float,
    threshold: float,
    assertions: Sequence[Assertion] = (),
    rationale: str = "",
    metadata: Mapping[str, Any] | None = None,
) -> Score:
    """A decided score with an explicit value (partial-credit graders, judges)."""
    meta = {"threshold": threshold, **(metadata or {})}
    return Score(
        grader=grader,
        value=value,
        passed=passes(value, threshold),
        assertions=list(assertions),
        rationale=rationale or describe_failures(assertions),
        metadata=meta,
    )


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- PKM path helpers shared by the PKM graders and judges -------------------------------


def pkm_relative(path: str) -> str:
    """A tool path or diff path as a path relative to PKM/ (virtual `/` is the PKM root)."""
    text = path.strip().replace("\\", "/")
    if not text:
        return ""
    normal = posixpath.normpath("/" + text.lstrip("/"))
    return normal.lstrip("/")


def routing_path(path: str) -> str:
    """SPEC routing normalisation: leading `/` stripped, first segment capitalised."""
    rel = path.strip().lstrip("/")
    if not rel:
        return rel
    head, sep, rest = rel.partition("/")
    return head[:1].upper() + head[1:] + sep + rest


def changed_paths(outcome: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(created, modified) paths relative to PKM/ from the outcome's workspace diff."""
    diff = outcome.get("workspace_diff") or {}
    if isinstance(diff, BaseModel):
        diff = diff.model_dump()
    created = [str(p) for p in diff.get("created", [])]
    modified = [str(p) for p in diff.get("modified", [])]
    return created, modified


def file_contents(outcome: Mapping[str, Any], key: str = "file_contents") -> dict[str, str]:
    """A path -> text map from the outcome, with paths made relative to PKM/."""
    raw = outcome.get(key) or {}
    return {pkm_relative(str(p)): str(t) for p, t in raw.items()}
