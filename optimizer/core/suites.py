"""Load and validate suites (SPEC section 2), compatible with the original framework's layout.

A suite is loaded completely or not at all: every task is parsed and every grader config is
validated before anything runs, and each error names the file and the field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agents.data import data_dir
from optimizer.core.names import AgentName, agent_names, did_you_mean

REPO_ROOT = Path(__file__).resolve().parents[2]
TASKS_DIR = data_dir("tasks")
FIXTURES_DIR = data_dir("fixtures")
DEFAULT_CLOCK = "2026-03-14T09:30:00"


class SuiteError(Exception):
    """A suite or task file is invalid. The message names the file and the field."""


class SuiteConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    agent_name: AgentName
    kind: Literal["capability", "regression", "mixed"] = "mixed"
    task_pass_threshold: float = Field(
        1.0, alias="taskPassThreshold", ge=0.0, le=1.0, allow_inf_nan=False
    )
    require_reference_solution: bool = Field(False, alias="requireReferenceSolution")
    clock: str = DEFAULT_CLOCK
    """Ours: the fixed publish time of every trial, so relative dates resolve the same way."""

    @field_validator("kind", mode="before")
    @classmethod
    def _missing_kind(cls, v: Any) -> Any:
        return "mixed" if v is None else v

    @field_validator("clock")
    @classmethod
    def _clock_iso(cls, v: str) -> str:
        datetime.fromisoformat(v)
        return v


class TaskInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fact_id: str
    content: str = ""
    fixture_dir: str | None = None
    base_fixture: str | None = None


class ReferenceSolution(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expected_outcome: dict[str, Any] = Field(default_factory=dict)
    source: Literal["manual", "captured", "synthesized"] = "manual"


class GraderSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    config: dict[str, Any] = Field(default_factory=dict)


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    description: str = Field(min_length=1)
    trials_per_run: int = Field(1, ge=1)
    timeout_seconds: float = Field(300, gt=0)
    metadata: dict[str, str] = Field(default_factory=dict)
    input: TaskInput
    reference_solution: ReferenceSolution | None = None
    graders: list[GraderSpec] = Field(min_length=1)

    @property
    def bucket(self) -> str:
        return self.metadata.get("failure_bucket", "unbucketed")


@dataclass(frozen=True)
class LoadedTask:
    spec: TaskSpec
    path: Path
    base_fixture: Path | None
    fixture_dir: Path | None
    content_hash: str
    """Hash of task.json plus every fixture file it uses: the cache key of its trials."""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def bucket(self) -> str:
        return self.spec.bucket


@dataclass(frozen=True)
class Suite:
    root: Path
    config: SuiteConfig
    tasks: tuple[LoadedTask, ...]
    content_hash: str

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def agent_name(self) -> str:
        return self.config.agent_name

    @property
    def buckets(self) -> dict[str, list[LoadedTask]]:
        out: dict[str, list[LoadedTask]] = {}
        for t in self.tasks:
            out.setdefault(t.bucket, []).append(t)
        return out

    @property
    def published_at(self) -> datetime:
        return datetime.fromisoformat(self.config.clock)

    def select(
        self, *, buckets: list[str] | None = None, task_ids: list[str] | None = None
    ) -> Suite:
        """A sub-suite; unknown bucket or task names are errors listing the valid ones."""
        tasks = list(self.tasks)
        if buckets:
            known = sorted(self.buckets)
            bad = [b for b in buckets if b not in known]
            if bad:
                hint = did_you_mean(bad[0], known) if len(bad) == 1 else ""
                raise SuiteError(
                    f"unknown bucket(s) {', '.join(bad)} in suite {self.name};{hint} "
                    f"known: {', '.join(known)}"
                )
            tasks = [t for t in tasks if t.bucket in buckets]
        if task_ids:
            known_ids = {t.id for t in self.tasks}
            bad = [t for t in task_ids if t not in known_ids]
            if bad:
                raise SuiteError(f"unknown task id(s) {', '.join(bad)} in suite {self.name}")
            tasks = [t for t in tasks if t.id in task_ids]
        return Suite(self.root, self.config, tuple(tasks), self.content_hash)


def resolve_suite_path(suite: str, kind: str = "capability") -> Path:
    """An agent name (`pkm_agent`) -> tasks/<agent>/<kind>; anything else is a path."""
    agents = agent_names()
    if suite in agents:
        return TASKS_DIR / suite / kind
    path = Path(suite)
    if not (path / "suite.json").is_file():
        raise SuiteError(
            f"{path}: no suite.json here (give {', '.join(agents)} or a suite folder)"
        )
    return path


def _fmt_validation(path: Path, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(root)"
        parts.append(f"field '{loc}': {e['msg']}")
    return f"{path}: " + "; ".join(parts)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise SuiteError(
            f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}"
        ) from err
    except OSError as err:
        raise SuiteError(f"{path}: cannot read ({err.strerror})") from err


def _hash_tree(h: Any, root: Path) -> None:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode())
            h.update(b"\0")
            h.update(p.read_bytes())


def _resolve_fixture(root: Path, rel: str, task_path: Path, field: str, shared: bool) -> Path:
    candidate = (root / rel).resolve()
    if not candidate.is_dir() and shared:
        candidate = (FIXTURES_DIR / rel).resolve()
    if not candidate.is_dir():
        raise SuiteError(
            f"{task_path}: field 'input.{field}': fixture folder '{rel}' not found "
            f"(relative to the suite root {root}" + (f" or {FIXTURES_DIR})" if shared else ")")
        )
    return candidate


def _task_files(task_root: Path) -> list[Path]:
    """Every task.json below tasks/ (not inside a task's workspace/ overlay), in path order."""
    if not task_root.is_dir():
        return []
    return sorted(
        (p for p in task_root.rglob("*.json") if "workspace" not in p.relative_to(task_root).parts),
        key=lambda p: p.as_posix(),
    )


def _load_config(suite_file: Path) -> SuiteConfig:
    if not suite_file.is_file():
        raise SuiteError(f"{suite_file}: not found")
    raw = _read_json(suite_file)
    if not isinstance(raw, dict):
        raise SuiteError(f"{suite_file}: must hold a JSON object")
    try:
        return SuiteConfig.model_validate(raw)
    except ValidationError as err:
        raise SuiteError(_fmt_validation(suite_file, err)) from err


def _check_graders(task_path: Path, spec: TaskSpec, known: Any) -> None:
    """Every grader name is registered and every grader config validates."""
    from graders.pkm import expected_terminal_path
    from graders.registry import validate_config

    for i, g in enumerate(spec.graders):
        if g.name not in known:
            raise SuiteError(
                f"{task_path}: field 'graders.{i}.name': unknown grader "
                f"'{g.name}'; known graders: {', '.join(sorted(known))}"
            )
        try:
            parsed = validate_config(g.name, g.config)
            if g.name == "terminal_path":
                expected_terminal_path(
                    parsed,  # type: ignore[arg-type]
                    spec.reference_solution.expected_outcome if spec.reference_solution else None,
                )
        except Exception as err:
            raise SuiteError(f"{task_path}: field 'graders.{i}.config': {err}") from err


def _parse_task(task_path: Path) -> TaskSpec:
    data = _read_json(task_path)
    if not isinstance(data, dict):
        raise SuiteError(f"{task_path}: must hold a JSON object")
    try:
        return TaskSpec.model_validate(data)
    except ValidationError as err:
        raise SuiteError(_fmt_validation(task_path, err)) from err


def _load_task(
    root: Path, task_path: Path, spec: TaskSpec, config: SuiteConfig, known: Any
) -> LoadedTask:
    """The validated task with its fixtures resolved and its content hash."""
    if config.require_reference_solution and spec.reference_solution is None:
        raise SuiteError(f"{task_path}: field 'reference_solution': required by suite.json")
    _check_graders(task_path, spec, known)
    base = (
        _resolve_fixture(root, spec.input.base_fixture, task_path, "base_fixture", True)
        if spec.input.base_fixture
        else None
    )
    overlay = (
        _resolve_fixture(root, spec.input.fixture_dir, task_path, "fixture_dir", False)
        if spec.input.fixture_dir
        else None
    )
    th = hashlib.sha256(task_path.read_bytes())
    for fx in (base, overlay):
        if fx is not None:
            _hash_tree(th, fx)
    return LoadedTask(spec, task_path, base, overlay, th.hexdigest())


def load_suite(path: Path | str) -> Suite:
    root = Path(path).resolve()
    suite_file = root / "suite.json"
    config = _load_config(suite_file)

    from graders.registry import known_graders

    known = known_graders()
    tasks: list[LoadedTask] = []
    seen: dict[str, Path] = {}
    suite_hash = hashlib.sha256(suite_file.read_bytes())
    task_root = root / "tasks"
    for task_path in _task_files(task_root):
        spec = _parse_task(task_path)
        if spec.id in seen:
            raise SuiteError(
                f"{task_path}: field 'id': duplicate task id '{spec.id}' (also in {seen[spec.id]})"
            )
        seen[spec.id] = task_path
        task = _load_task(root, task_path, spec, config, known)
        suite_hash.update(task.content_hash.encode())
        tasks.append(task)
    if not tasks:
        raise SuiteError(f"{task_root}: no task.json files found")
    return Suite(root, config, tuple(tasks), suite_hash.hexdigest())


def task_json_schema() -> dict[str, Any]:
    """The JSON schema of task.json (checked in as tasks/task.schema.json)."""
    schema = TaskSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "promptloop task.json"
    return schema


SCHEMA_PATH = TASKS_DIR / "task.schema.json"


def write_task_schema(path: Path = SCHEMA_PATH) -> Path:
    """Write the JSON schema of task.json (tests/optimizer/run/test_runner.py checks it is current).

    Regenerate the checked-in copy after changing TaskSpec:
    `python -m optimizer.core.suites --write-schema [PATH]`.
    """
    text = json.dumps(task_json_schema(), indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def _main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m optimizer.core.suites")
    parser.add_argument(
        "--write-schema",
        nargs="?",
        const=str(SCHEMA_PATH),
        metavar="PATH",
        help=f"write the task.json schema (default: {SCHEMA_PATH})",
    )
    args = parser.parse_args(argv)
    if args.write_schema is None:
        parser.print_usage()
        return 2
    write_task_schema(Path(args.write_schema))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
