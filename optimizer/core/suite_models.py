"""The pydantic models of suite.json and task.json, read as the original harness reads them
(docs/compat.md): unknown keys are ignored (the loader warns about them), `key: null`
means the key's default, `taskPassThreshold` and `requireReferenceSolution` may be camelCase,
metadata values are stringified, `config: null` is `{}`, an unknown `reference_solution.source`
is `manual`, `trials_per_run` is coerced to int, and any non-empty `agent_name` loads (an agent
we cannot run fails when the suite is run; see `suites.check_runnable`).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from agents.workspace import FactId, FactIdError
from optimizer.core.suite_files import dart_string, drop_nulls, whole_number

DEFAULT_CLOCK = "2026-03-14T09:30:00"
MAX_NAME_BYTES = 200
"""Ours: a suite's name starts every run name, which names the run's report file."""
MAX_TRIALS_PER_RUN = 1000
"""Ours: more trials of one task than this is a typo (10**12 once ran out of memory)."""
SOURCES = ("manual", "captured", "synthesized")
CAMEL_ALIASES = {"taskPassThreshold": "task_pass_threshold",
                 "requireReferenceSolution": "require_reference_solution"}


class _Lenient(BaseModel):
    """Unknown keys are ignored and `null` stands for a missing optional key."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_missing(cls, data: Any) -> Any:
        optional = set()
        for name, f in cls.model_fields.items():
            if not f.is_required():
                optional |= {name, f.alias} if f.alias else {name}
        return drop_nulls(data, optional)


class SuiteConfig(_Lenient):
    name: str
    agent_name: str = Field(min_length=1)
    """Any non-empty name loads (docs/compat.md); `check_runnable` refuses to run an unknown one."""
    kind: Literal["capability", "regression", "mixed"] = "mixed"
    task_pass_threshold: float = Field(
        1.0, alias="taskPassThreshold", ge=0.0, le=1.0, allow_inf_nan=False
    )
    require_reference_solution: bool = Field(False, alias="requireReferenceSolution")
    clock: str = DEFAULT_CLOCK
    """Ours: the fixed publish time of every trial, so relative dates resolve the same way."""

    @model_validator(mode="before")
    @classmethod
    def _snake_case_wins(cls, data: Any) -> Any:
        """With both spellings present, the snake_case key is read (the loader warns)."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items()
                    if not (k in CAMEL_ALIASES and CAMEL_ALIASES[k] in data)}
        return data

    @field_validator("name")
    @classmethod
    def _usable_in_file_names(cls, v: str) -> str:
        """Refused here rather than after every trial ran, when the report cannot be saved."""
        if "/" in v or "\\" in v or v.startswith(".") or any(ord(c) < 32 for c in v):
            raise ValueError(
                "starts every run's file name: no '/', '\\', control characters or leading '.'"
            )
        if len(v.encode("utf-8")) > MAX_NAME_BYTES:
            raise ValueError(f"starts every run's file name: at most {MAX_NAME_BYTES} bytes")
        return v

    @field_validator("clock")
    @classmethod
    def _clock_iso(cls, v: str) -> str:
        datetime.fromisoformat(v)
        return v


def check_fact_id(value: str) -> str:
    """`YYYY/MM/DD.md#ts_N` with a real calendar date (docs/suites.md)."""
    try:
        fact = FactId.parse(value)
    except FactIdError as err:
        raise ValueError(str(err)) from None
    try:
        date(int(fact.year), int(fact.month), int(fact.day))
    except ValueError:
        raise ValueError(f"fact id {value!r}: {fact.fact_file} is not a calendar date") from None
    return value


class TaskInput(_Lenient):
    fact_id: Annotated[str, AfterValidator(check_fact_id)]
    content: str = ""
    fixture_dir: str | None = None
    base_fixture: str | None = None


class ReferenceSolution(_Lenient):
    expected_outcome: dict[str, Any] = Field(default_factory=dict)
    source: Literal["manual", "captured", "synthesized"] = "manual"

    @field_validator("source", mode="before")
    @classmethod
    def _unknown_source_is_manual(cls, v: Any) -> Any:
        return v if v in SOURCES else "manual"


class GraderSpec(_Lenient):
    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    """`config: null` (or no config) is `{}`; the grader's own model validates the keys."""


class TaskSpec(_Lenient):
    """A task.json in its canonical form. The loader also reads what the original harness
    reads (unknown keys, nulls, numbers as metadata values, `trials_per_run` as text)."""

    id: str = Field(min_length=1)
    description: str = Field(min_length=1)
    trials_per_run: int = Field(1, ge=1, le=MAX_TRIALS_PER_RUN)
    timeout_seconds: float = Field(300, gt=0, allow_inf_nan=False)
    metadata: dict[str, str] = Field(default_factory=dict)
    input: TaskInput
    reference_solution: ReferenceSolution | None = None
    graders: list[GraderSpec] = Field(min_length=1)

    @field_validator("id")
    @classmethod
    def _id_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a task id must not be blank (only whitespace)")
        return v

    @field_validator("trials_per_run", mode="before")
    @classmethod
    def _coerce_trials(cls, v: Any) -> Any:
        return whole_number(v)

    @field_validator("metadata", mode="before")
    @classmethod
    def _stringify_metadata(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): dart_string(item) for k, item in v.items()}
        return v

    @property
    def bucket(self) -> str:
        return self.metadata.get("failure_bucket", "unbucketed")


__all__ = [
    "CAMEL_ALIASES",
    "DEFAULT_CLOCK",
    "MAX_NAME_BYTES",
    "MAX_TRIALS_PER_RUN",
    "GraderSpec",
    "ReferenceSolution",
    "SuiteConfig",
    "TaskInput",
    "TaskSpec",
    "check_fact_id",
]
