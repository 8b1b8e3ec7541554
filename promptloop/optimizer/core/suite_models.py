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

from promptloop.agents.workspace import FactId, FactIdError
from promptloop.optimizer.core.suite_files import dart_string, drop_nulls, whole_number

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


def check_iso_time(value: str) -> str:
    """An ISO 8601 date-time (`2026-05-25T09:00:00`, an offset allowed)."""
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value[:40]!r} is not an ISO 8601 date-time such as "
                         "2026-05-25T09:00:00") from None
    return value


def check_task_id(value: str) -> str:
    """A task id names folders and files (cache, reports, graduation): no path characters."""
    if not value.strip():
        raise ValueError("a task id must not be blank (only whitespace)")
    if "/" in value or "\\" in value or ".." in value:
        raise ValueError(f"{value[:60]!r}: a task id may not contain '/', '\\' or '..' "
                         "(it names files and branches)")
    if any(ord(c) < 32 for c in value):
        raise ValueError(f"{value[:60]!r}: a task id may not contain control characters")
    return value


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
    """What the agent is given. A generic task needs none of these keys: any other key is kept
    and handed to the agent as the task declares it (the trial request's `task.input`). A
    string input is short for `{"content": "..."}`. `fact_id` is the bundled agents' (the
    card/PKM world): a `YYYY/MM/DD.md#ts_N` id naming the fact entry; a task without one gets
    the publish time from `published_at`, else the suite's clock."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    fact_id: Annotated[str, AfterValidator(check_fact_id)] | None = None
    content: str = ""
    fixture_dir: str | None = None
    base_fixture: str | None = None

    @model_validator(mode="after")
    def _published_iso(self) -> TaskInput:
        value = (self.model_extra or {}).get("published_at")
        if value is not None and not isinstance(value, str):
            raise ValueError("published_at: must be an ISO 8601 date-time string")
        if value is not None:
            check_iso_time(value)
        return self

    @property
    def published_at(self) -> str | None:
        """`input.published_at`, read when the task has no top-level one."""
        value = (self.model_extra or {}).get("published_at")
        return value if isinstance(value, str) else None

    def declared(self) -> dict[str, Any]:
        """The input as the task declares it (keys it did not give left out)."""
        return self.model_dump(mode="json", exclude_unset=True)


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

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        """A grader without `name` is most often written in another harness's shape
        (`{"type": "json_path", "path": ...}`): say what the shape is here."""
        if isinstance(data, dict) and "name" not in data:
            alias = next((k for k in ("type", "grader", "kind") if k in data), None)
            others = sorted(k for k in data if k not in ("config", alias))
            keys = ", ".join(repr(k) for k in others)
            moved = f" and put {keys} under 'config'" if others else ""
            if alias is not None:
                raise ValueError(f"a grader is {{\"name\": ..., \"config\": {{...}}}}: write "
                                 f"'name' instead of {alias!r}{moved}")
        return data


class TaskSpec(_Lenient):
    """A task.json in its canonical form. The loader also reads what the original harness
    reads (unknown keys, nulls, numbers as metadata values, `trials_per_run` as text)."""

    id: str = Field(min_length=1)
    description: str = ""
    """What the task checks, for people. A generic task needs only an id, an input and
    graders; a task of the card/PKM shape (with `input.fact_id`) needs it, as in the original."""
    trials_per_run: int = Field(1, ge=1, le=MAX_TRIALS_PER_RUN)
    timeout_seconds: float = Field(300, gt=0, allow_inf_nan=False)
    metadata: dict[str, str] = Field(default_factory=dict)
    input: TaskInput
    published_at: str | None = None
    """Ours: the task's own publish time (ISO 8601), for any agent; see
    `run/trial_input.published_at_for`."""
    reference_solution: ReferenceSolution | None = None
    graders: list[GraderSpec] = Field(min_length=1)

    @field_validator("id")
    @classmethod
    def _id_usable(cls, v: str) -> str:
        return check_task_id(v)

    @model_validator(mode="before")
    @classmethod
    def _bucket_key(cls, data: Any) -> Any:
        """Ours: `"bucket": "x"` is short for `metadata.failure_bucket` (which wins)."""
        if isinstance(data, dict) and isinstance(data.get("bucket"), str):
            data = dict(data)
            bucket = data.pop("bucket")
            meta = data.get("metadata")
            meta = dict(meta) if isinstance(meta, dict) else {}
            meta.setdefault("failure_bucket", bucket)
            data["metadata"] = meta
        return data

    @field_validator("input", mode="before")
    @classmethod
    def _text_input(cls, v: Any) -> Any:
        return {"content": v} if isinstance(v, str) else v

    @field_validator("published_at")
    @classmethod
    def _published_iso(cls, v: str | None) -> str | None:
        return check_iso_time(v) if v is not None else v

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

    @model_validator(mode="after")
    def _card_world_rules(self) -> TaskSpec:
        if self.input.fact_id is not None and not self.description:
            raise ValueError("description: Field required for a task with input.fact_id (the "
                             "card/PKM task shape, as in the original harness)")
        return self

    @property
    def bucket(self) -> str:
        return self.metadata.get("failure_bucket", "unbucketed")

    @property
    def own_published_at(self) -> str | None:
        """The publish time the task itself gives (top-level, else in its input)."""
        return self.published_at or self.input.published_at


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
    "check_iso_time",
    "check_task_id",
]
