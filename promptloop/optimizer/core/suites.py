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

from promptloop.agents.data import data_dir
from promptloop.agents.trees import iter_entries
from promptloop.optimizer.core.names import agent_names, check_agent, did_you_mean
from promptloop.optimizer.core.suite_files import (
    MAX_JSON_BYTES,
    SuiteError,
    format_validation,
    read_json_line,
    read_json_object,
    unknown_key_warnings,
)
from promptloop.optimizer.core.suite_models import (
    CAMEL_ALIASES,
    DEFAULT_CLOCK,
    SOURCES,
    GraderSpec,
    ReferenceSolution,
    SuiteConfig,
    TaskInput,
    TaskSpec,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
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
    line: int | None = None
    """In a JSONL suite: the task's line in `path` (1-based)."""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def where(self) -> str:
        """The task's file (and line, in a JSONL suite), for error messages."""
        return f"{self.path} line {self.line}" if self.line is not None else str(self.path)

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
    def is_jsonl(self) -> bool:
        """A suite in one JSONL file (`root` is the file), not a folder."""
        return is_jsonl_suite(self.root)

    @property
    def suite_file(self) -> Path:
        """Where the suite's settings are: suite.json, or the JSONL file (its header line)."""
        return self.root if self.is_jsonl else self.root / "suite.json"

    @property
    def base(self) -> Path:
        """The folder fixture paths are relative to: the suite folder, or the JSONL file's."""
        return self.root.parent if self.is_jsonl else self.root

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
                hint = did_you_mean(bad[0], sorted(known_ids)) if len(bad) == 1 else ""
                shown = sorted(known_ids)
                listed = ", ".join(shown[:12]) + (", ..." if len(shown) > 12 else "")
                raise SuiteError(f"unknown task id(s) {', '.join(bad)} in suite {self.name};"
                                 f"{hint} tasks: {listed}")
            tasks = [t for t in tasks if t.id in task_ids]
        return Suite(self.root, self.config, tuple(tasks), self.content_hash, self.warnings)


JSONL_SUFFIX = ".jsonl"


def is_jsonl_suite(path: Path | str) -> bool:
    """Whether `path` names a JSONL suite (one file of tasks, one per line)."""
    return str(path).endswith(JSONL_SUFFIX)


def is_suite(path: Path) -> bool:
    """A suite folder (holding suite.json) or a JSONL suite file."""
    return path.is_file() if is_jsonl_suite(path) else (path / "suite.json").is_file()


def resolve_suite_path(suite: str, kind: str = "capability") -> Path:
    """An agent name (`pkm_agent`) -> tasks/<agent>/<kind>; anything else is a path (a suite
    folder or a `.jsonl` suite file)."""
    agents = agent_names()
    if suite in agents:
        return TASKS_DIR / suite / kind
    path = Path(suite)
    if is_jsonl_suite(path) and not path.is_file():
        raise SuiteError(f"{path}: JSONL suite file not found")
    if not is_suite(path):
        raise SuiteError(
            f"{path}: no suite.json here (give {', '.join(agents)}, a suite folder or a "
            ".jsonl suite file)"
        )
    return path


def check_runnable(suite: Suite, *, command_graders: bool = True) -> None:
    """Refuse to run a suite whose agent we cannot run, by name, before any trial (a suite
    for another agent still loads, as in the original: docs/compat.md); with
    `command_graders`, also one whose tasks name a `command` grader the agent's
    promptloop.toml table does not declare (it would error every trial)."""
    try:
        check_agent(suite.agent_name)
    except ValueError as err:
        raise SuiteError(f"{suite.suite_file}: field 'agent_name': {err}") from None
    if command_graders:
        check_command_graders(suite)


def check_command_graders(suite: Suite) -> None:
    """Every `command` grader a task names is declared in the agent's table
    (`[agents.<name>.graders.<grader>]`); the error names the task file, the key and the
    project file."""
    from promptloop.optimizer.core.project import active_project

    project = active_project()
    if suite.agent_name not in project.agents:
        return
    declared = sorted(project.agents[suite.agent_name].graders)
    for task in suite.tasks:
        for i, g in enumerate(task.spec.graders):
            name = g.config.get("grader") if g.name == "command" else None
            if name is None or name in declared:
                continue
            raise SuiteError(
                f"{task.where}: field 'graders.{i}.config.grader': command grader {name!r} is "
                f"not declared in {project.where} [agents.{suite.agent_name}.graders]."
                f"{did_you_mean(str(name), declared)} Declared: {', '.join(declared) or 'none'}"
                f". Add [agents.{suite.agent_name}.graders.{name}] with its command"
            )


# --- fixtures ---------------------------------------------------------------------------------


def _inside(path: Path, base: Path) -> bool:
    return path == base or path.is_relative_to(base)


def _resolve_fixture(root: Path, rel: str, task_path: Path | str, field: str,
                     shared: bool) -> Path:
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


def _check_graders(task_path: Path | str, spec: TaskSpec, raw: dict[str, Any],
                   known: Any) -> list[str]:
    """Every grader name is registered and every grader config validates; returns the
    warnings for config keys the graders ignore."""
    from promptloop.graders.pkm import expected_terminal_path
    from promptloop.graders.registry import config_warnings, graders_listing, validate_config

    warnings: list[str] = []
    for i, g in enumerate(spec.graders):
        where = f"{task_path}: field 'graders.{i}"
        if g.name not in known:
            raise SuiteError(
                f"{where}.name': unknown grader '{g.name}'.{did_you_mean(g.name, known)} "
                f"Known graders: {graders_listing()}"
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


def _task_warnings(task_path: Path | str, raw: dict[str, Any], spec: TaskSpec) -> list[str]:
    """Keys the original ignores and values it converts, in one task.json. Other keys of a
    task's `input` are the agent's (handed to it as declared), except in a task of the
    card/PKM shape (with `fact_id`), whose agents ignore them."""
    out = unknown_key_warnings(task_path, raw, TaskSpec, also=("bucket",))
    nested: list[tuple[str, type[Any]]] = [("reference_solution", ReferenceSolution)]
    if spec.input.fact_id is not None:
        nested.append(("input", TaskInput))
    for key, model in nested:
        if isinstance(raw.get(key), dict):
            out += unknown_key_warnings(task_path, raw[key], model, f"{key}.",
                                        also=("published_at",))
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


def _parse_task(where: Path | str, raw: dict[str, Any]) -> TaskSpec:
    try:
        return TaskSpec.model_validate(raw)
    except ValidationError as err:
        raise SuiteError(format_validation(where, err)) from err


def _load_task(
    root: Path, task_path: Path, config: SuiteConfig, known: Any,
    parsed: tuple[dict[str, Any], bytes] | None = None, line: int | None = None,
) -> tuple[LoadedTask, list[str]]:
    """The validated task with its fixtures resolved and its content hash, and its warnings.
    `parsed`: the task's JSON object and bytes when read already (a JSONL line), whose
    errors then name `task_path` and `line`."""
    raw, data = parsed if parsed is not None else read_json_object(task_path)
    where: Any = f"{task_path} line {line}" if line is not None else task_path
    spec = _parse_task(where, raw)
    if config.require_reference_solution and spec.reference_solution is None:
        raise SuiteError(f"{where}: field 'reference_solution': required by the suite's "
                         "require_reference_solution")
    warnings = _task_warnings(where, raw, spec) + _check_graders(where, spec, raw, known)
    th = hashlib.sha256(data)
    folders: list[Path | None] = []
    for field, shared in (("base_fixture", True), ("fixture_dir", False)):
        rel = getattr(spec.input, field)
        folder = _resolve_fixture(root, rel, where, field, shared) if rel else None
        if folder is not None:
            bases = [root, FIXTURES_DIR.resolve()] if shared else [root]
            _hash_fixture(th, folder, bases, f"{where}: field 'input.{field}'")
        folders.append(folder)
    task = LoadedTask(spec, task_path, folders[0], folders[1], th.hexdigest(), line)
    return task, warnings


def _add_task(tasks: list[LoadedTask], seen: dict[str, str], task: LoadedTask) -> None:
    if task.id in seen:
        raise SuiteError(
            f"{task.where}: field 'id': duplicate task id '{task.id}' (also in {seen[task.id]})"
        )
    seen[task.id] = task.where
    tasks.append(task)


def load_suite(path: Path | str, agent: str | None = None) -> Suite:
    """The suite in folder `path` (suite.json + tasks/**/task.json) or in the JSONL file
    `path`, validated whole. `agent`: who runs a JSONL suite whose header names none."""
    root = Path(path).resolve()
    if is_jsonl_suite(root):
        return load_jsonl_suite(root, agent)
    suite_file = root / "suite.json"
    config, suite_bytes, warnings = _load_config(suite_file)

    from promptloop.graders.registry import known_graders

    known = known_graders()
    tasks: list[LoadedTask] = []
    seen: dict[str, str] = {}
    suite_hash = hashlib.sha256(suite_bytes)
    task_root = root / "tasks"
    for task_path in _task_files(task_root):
        task, task_warnings = _load_task(root, task_path, config, known)
        _add_task(tasks, seen, task)
        warnings += task_warnings
        suite_hash.update(task.content_hash.encode())
    if not tasks:
        raise SuiteError(f"{task_root}: no task.json files found")
    return Suite(root, config, tuple(tasks), suite_hash.hexdigest(), tuple(warnings))


# --- JSONL suites ------------------------------------------------------------------------------


def _jsonl_lines(path: Path) -> list[tuple[int, bytes]]:
    """(line number, bytes) of every non-blank line of a JSONL suite file."""
    if not path.is_file():
        raise SuiteError(f"{path}: JSONL suite file not found")
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise SuiteError(f"{path}: {size / 2**20:.1f} MiB is over the limit of "
                         f"{MAX_JSON_BYTES // 2**20} MiB for a suite file")
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        raise SuiteError(f"{path}: starts with a byte order mark; save it as UTF-8 without one")
    return [(i, line) for i, line in enumerate(data.split(b"\n"), start=1) if line.strip()]


def _declaring_agent(path: Path) -> str | None:
    """The agent whose promptloop.toml `suites` lists the JSONL file `path`."""
    from promptloop.optimizer.core.project import active_project

    project = active_project()
    base = project.root or Path.cwd()
    for name, cfg in sorted(project.agents.items()):
        for entry in cfg.suites:
            if (base / entry).resolve() == path:
                return name
    return None


def load_jsonl_suite(path: Path, agent: str | None = None) -> Suite:
    """A suite in one JSONL file: one task per line (the task.json schema), and optionally a
    first header line `{"suite": {...suite.json keys...}, "graders": [...]}` whose graders a
    task without its own `graders` gets. Without a header (or without `name`/`agent_name` in
    it) the suite is named after the file and run by `agent`, else by the agent whose
    promptloop.toml `suites` lists the file. Errors name the file and the line."""
    from promptloop.graders.registry import known_graders

    lines = _jsonl_lines(path)
    if not lines:
        raise SuiteError(f"{path}: no tasks (one task JSON object per line)")
    objects: list[tuple[int, dict[str, Any], bytes]] = []
    for number, raw_line in lines:
        objects.append((number, *read_json_line(path, number, raw_line)))
    header: dict[str, Any] = {}
    header_bytes = b""
    warnings: list[str] = []
    if "suite" in objects[0][1] and "id" not in objects[0][1]:
        number, header, header_bytes = objects.pop(0)
        misplaced = [k for k in header if k in SuiteConfig.model_fields and k != "graders"]
        if misplaced:
            raise SuiteError(f"{path} line {number}: field '{misplaced[0]}': a suite.json key "
                             "belongs inside the header's 'suite' object: "
                             '{"suite": {"' + misplaced[0] + '": ...}, "graders": [...]}')
        for key in header:
            if key not in ("suite", "graders"):
                warnings.append(f"{path} line {number}: field '{key}': unknown header key, "
                                "ignored. A header holds 'suite' and 'graders'")
    config = _jsonl_config(path, header, agent)
    defaults = header.get("graders")
    if defaults is not None and not isinstance(defaults, list):
        raise SuiteError(f"{path} line 1: field 'graders': must be a list of graders")
    known = known_graders()
    tasks: list[LoadedTask] = []
    seen: dict[str, str] = {}
    suite_hash = hashlib.sha256(header_bytes + str(path.name).encode())
    for number, raw, data in objects:
        if "suite" in raw and "id" not in raw:
            raise SuiteError(f"{path} line {number}: field 'suite': only the first line may be "
                             "the suite header")
        if defaults is not None and raw.get("graders") is None:
            raw = {**raw, "graders": defaults}
            data = header_bytes + b"\n" + data  # the shared graders key its trials too
        task, task_warnings = _load_task(path.parent, path, config, known, (raw, data), number)
        _add_task(tasks, seen, task)
        warnings += task_warnings
        suite_hash.update(task.content_hash.encode())
    if not tasks:
        raise SuiteError(f"{path}: no tasks after the header line (one task JSON per line)")
    return Suite(path, config, tuple(tasks), suite_hash.hexdigest(), tuple(warnings))


def _jsonl_config(path: Path, header: dict[str, Any], agent: str | None) -> SuiteConfig:
    raw = header.get("suite", {})
    if not isinstance(raw, dict):
        raise SuiteError(f"{path} line 1: field 'suite': must be an object of suite.json keys")
    raw = dict(raw)
    raw.setdefault("name", path.name.removesuffix(JSONL_SUFFIX))
    if not raw.get("agent_name"):
        owner = agent or _declaring_agent(path)
        if owner is None:
            raise SuiteError(
                f"{path} line 1: field 'suite.agent_name': required: no agent's 'suites' in "
                "promptloop.toml lists this file; add a header line "
                '{"suite": {"agent_name": "<agent>"}} or list the file in the agent\'s suites'
            )
        raw["agent_name"] = owner
    try:
        return SuiteConfig.model_validate(raw)
    except ValidationError as err:
        raise SuiteError(format_validation(f"{path} line 1", err, "suite.")) from err


def wrong_agent(suite: Suite, agent: str) -> str:
    """What to say when `agent` was asked to run `suite`, whose `agent_name` names another:
    that agent, or, when promptloop.toml declares no agent of that name, the field to fix."""
    where = f"{suite.suite_file}: suite {suite.name!r}"
    declared = agent_names()
    if suite.agent_name not in declared:
        return (f"{where}: field 'agent_name': {suite.agent_name!r} is no agent of "
                f"promptloop.toml{did_you_mean(suite.agent_name, declared)} Write the name of "
                f"the agent that runs it ({agent!r} lists this suite)")
    return (f"{where} is for agent {suite.agent_name!r} (its agent_name), not {agent!r}: give "
            f"--agent {suite.agent_name}, or point {agent}'s suites at its own suite folders")


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
    "check_command_graders",
    "check_runnable",
    "is_jsonl_suite",
    "is_suite",
    "load_jsonl_suite",
    "load_suite",
    "resolve_suite_path",
    "task_json_schema",
    "write_task_schema",
    "wrong_agent",
]
