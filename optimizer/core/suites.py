"""Load and validate suites (docs/compat.md), compatible with the original framework.

A suite is loaded completely or not at all: every task is parsed and every grader config is
validated before anything runs, and each error names the file and the field. What the original
accepts loads here too (suite_models.py lists the rules); what it ignores becomes a warning in
`Suite.warnings`. Fixture folders must lie inside the suite root (the shared base fixtures may
also come from the repository's fixtures/ folder), and no symlink in them may point out of it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agents.data import data_dir
from agents.trees import iter_entries
from optimizer.core.names import agent_names, check_agent, did_you_mean
from optimizer.core.suite_files import (
    SuiteError,
    format_validation,
    read_json_object,
    unknown_key_warnings,
)
from optimizer.core.suite_models import (
    CAMEL_ALIASES,
    DEFAULT_CLOCK,
    SOURCES,
    GraderSpec,
    ReferenceSolution,
    SuiteConfig,
    TaskInput,
    TaskSpec,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
TASKS_DIR = data_dir("tasks")
FIXTURES_DIR = data_dir("fixtures")


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
    warnings: tuple[str, ...] = ()
    """What the loader ignored or converted, one `file: field 'x': problem` line each."""

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
        return Suite(self.root, self.config, tuple(tasks), self.content_hash, self.warnings)


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


def check_runnable(suite: Suite) -> None:
    """Refuse to run a suite whose agent we cannot run, by name, before any trial (a suite
    for another agent still loads, as in the original: docs/compat.md)."""
    try:
        check_agent(suite.agent_name)
    except ValueError as err:
        raise SuiteError(f"{suite.root / 'suite.json'}: field 'agent_name': {err}") from None


# --- fixtures ---------------------------------------------------------------------------------


def _inside(path: Path, base: Path) -> bool:
    return path == base or path.is_relative_to(base)


def _resolve_fixture(root: Path, rel: str, task_path: Path, field: str, shared: bool) -> Path:
    """The fixture folder `rel`, relative to the suite root (a base fixture may also name one
    of the repository's fixtures/); a path that leads outside is refused, existing or not."""
    where = f"{task_path}: field 'input.{field}'"
    bases = [root, FIXTURES_DIR.resolve()] if shared else [root]
    for base in bases:
        candidate = (base / rel).resolve()
        if Path(rel).is_absolute() or not _inside(candidate, base):
            raise SuiteError(
                f"{where}: fixture folder '{rel}' is outside the suite root {root} "
                "(fixture paths are relative to it)"
            )
        if candidate.is_dir():
            return candidate
    raise SuiteError(
        f"{where}: fixture folder '{rel}' not found (relative to the suite root {root}"
        + (f" or {FIXTURES_DIR})" if shared else ")")
    )


def _hash_fixture(h: Any, folder: Path, bases: list[Path], where: str) -> None:
    """Hash every file of a fixture folder (path and bytes, in path order); a symlink pointing
    outside `bases` is refused: it would hand the agent a file of the host."""
    for p in sorted(iter_entries(folder)):  # never follows symlinked folders, never recurses
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink() and not any(_inside(p.resolve(), b) for b in bases):
            raise SuiteError(
                f"{where}: symlink '{rel}' in fixture {folder} points outside the suite root"
            )
        if p.is_file():
            h.update(rel.encode() + b"\0")
            h.update(p.read_bytes())


# --- suite.json and task.json -----------------------------------------------------------------


def _task_files(task_root: Path) -> list[Path]:
    """Every task.json below tasks/ (not inside a task's workspace/ overlay), in path order."""
    if not task_root.is_dir():
        return []
    return sorted(
        (
            p
            for p in task_root.rglob("*.json")
            if "workspace" not in p.relative_to(task_root).parts and p.is_file()
        ),
        key=lambda p: p.as_posix(),
    )


def _load_config(suite_file: Path) -> tuple[SuiteConfig, bytes, list[str]]:
    if not suite_file.is_file():
        raise SuiteError(f"{suite_file}: not found")
    raw, data = read_json_object(suite_file)
    try:
        config = SuiteConfig.model_validate(raw)
    except ValidationError as err:
        raise SuiteError(format_validation(suite_file, err)) from err
    warnings = unknown_key_warnings(suite_file, raw, SuiteConfig)
    warnings += [
        f"{suite_file}: field '{camel}': ignored, '{snake}' is also set"
        for camel, snake in CAMEL_ALIASES.items()
        if camel in raw and snake in raw
    ]
    return config, data, warnings


def _check_graders(task_path: Path, spec: TaskSpec, raw: dict[str, Any], known: Any) -> list[str]:
    """Every grader name is registered and every grader config validates; returns the
    warnings for config keys the graders ignore."""
    from graders.pkm import expected_terminal_path
    from graders.registry import config_warnings, validate_config

    warnings: list[str] = []
    for i, g in enumerate(spec.graders):
        where = f"{task_path}: field 'graders.{i}"
        if g.name not in known:
            raise SuiteError(
                f"{where}.name': unknown grader '{g.name}'.{did_you_mean(g.name, known)} "
                f"Known graders: {', '.join(sorted(known))}"
            )
        try:
            parsed = validate_config(g.name, g.config)
            if g.name == "terminal_path":
                expected_terminal_path(
                    parsed,  # type: ignore[arg-type]
                    spec.reference_solution.expected_outcome if spec.reference_solution else None,
                )
        except Exception as err:
            raise SuiteError(f"{where}.config': {err}") from err
        entry = raw["graders"][i]
        warnings += unknown_key_warnings(task_path, entry, GraderSpec, f"graders.{i}.")
        warnings += [f"{where}.config': {w}" for w in config_warnings(g.name, g.config)]
    return warnings


def _task_warnings(task_path: Path, raw: dict[str, Any], spec: TaskSpec) -> list[str]:
    """Keys the original ignores and values it converts, in one task.json."""
    out = unknown_key_warnings(task_path, raw, TaskSpec)
    nested: list[tuple[str, type[Any]]] = [
        ("input", TaskInput), ("reference_solution", ReferenceSolution)
    ]
    for key, model in nested:
        if isinstance(raw.get(key), dict):
            out += unknown_key_warnings(task_path, raw[key], model, f"{key}.")
    source = (raw.get("reference_solution") or {}).get("source")
    if source is not None and source not in SOURCES:
        out.append(
            f"{task_path}: field 'reference_solution.source': unknown source "
            f"{json.dumps(source)[:40]} read as 'manual'"
        )
    trials = raw.get("trials_per_run")
    if trials is not None and not isinstance(trials, int):
        out.append(f"{task_path}: field 'trials_per_run': {json.dumps(trials)[:40]} read as "
                   f"{spec.trials_per_run}")
    return out


def _parse_task(task_path: Path) -> tuple[TaskSpec, dict[str, Any], bytes]:
    raw, data = read_json_object(task_path)
    try:
        return TaskSpec.model_validate(raw), raw, data
    except ValidationError as err:
        raise SuiteError(format_validation(task_path, err)) from err


def _load_task(
    root: Path, task_path: Path, config: SuiteConfig, known: Any
) -> tuple[LoadedTask, list[str]]:
    """The validated task with its fixtures resolved and its content hash, and its warnings."""
    spec, raw, data = _parse_task(task_path)
    if config.require_reference_solution and spec.reference_solution is None:
        raise SuiteError(f"{task_path}: field 'reference_solution': required by suite.json")
    warnings = _task_warnings(task_path, raw, spec) + _check_graders(task_path, spec, raw, known)
    th = hashlib.sha256(data)
    folders: list[Path | None] = []
    for field, shared in (("base_fixture", True), ("fixture_dir", False)):
        rel = getattr(spec.input, field)
        folder = _resolve_fixture(root, rel, task_path, field, shared) if rel else None
        if folder is not None:
            bases = [root, FIXTURES_DIR.resolve()] if shared else [root]
            _hash_fixture(th, folder, bases, f"{task_path}: field 'input.{field}'")
        folders.append(folder)
    task = LoadedTask(spec, task_path, folders[0], folders[1], th.hexdigest())
    return task, warnings


def load_suite(path: Path | str) -> Suite:
    root = Path(path).resolve()
    suite_file = root / "suite.json"
    config, suite_bytes, warnings = _load_config(suite_file)

    from graders.registry import known_graders

    known = known_graders()
    tasks: list[LoadedTask] = []
    seen: dict[str, Path] = {}
    suite_hash = hashlib.sha256(suite_bytes)
    task_root = root / "tasks"
    for task_path in _task_files(task_root):
        task, task_warnings = _load_task(root, task_path, config, known)
        if task.id in seen:
            raise SuiteError(
                f"{task_path}: field 'id': duplicate task id '{task.id}' (also in {seen[task.id]})"
            )
        seen[task.id] = task_path
        warnings += task_warnings
        suite_hash.update(task.content_hash.encode())
        tasks.append(task)
    if not tasks:
        raise SuiteError(f"{task_root}: no task.json files found")
    return Suite(root, config, tuple(tasks), suite_hash.hexdigest(), tuple(warnings))


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


__all__ = [
    "DEFAULT_CLOCK",
    "FIXTURES_DIR",
    "REPO_ROOT",
    "SCHEMA_PATH",
    "TASKS_DIR",
    "GraderSpec",
    "LoadedTask",
    "ReferenceSolution",
    "Suite",
    "SuiteConfig",
    "SuiteError",
    "TaskInput",
    "TaskSpec",
    "check_runnable",
    "load_suite",
    "resolve_suite_path",
    "task_json_schema",
    "write_task_schema",
]
