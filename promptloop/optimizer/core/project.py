"""The project file: `promptloop.toml` declares the agents promptloop evaluates and optimizes.

One `[agents.<name>]` table per agent: its prompt targets (a file, a string literal named by its
variable, or the text between two marker comments), its suite folders, how one trial runs (an
adapter: `session`, `python`, `command`, `worker` or `http`, core/adapter_settings.py and
docs/agents.md), the models it needs and the
command graders its tasks may name. promptloop's own two agents are declared the same way, in
the repository's promptloop.toml (`packaged_project()` reads it; the wheel ships it as
core/default_project.toml): no agent is special-cased.

Every command finds the file from the current folder upward (`find_project`; `--config` picks
one), validates it whole before anything runs, and names the file, the table and the key of
every problem (with a did-you-mean for misspelled keys). `active_project()` is the project the
running command uses; `use_project` sets it.
"""

from __future__ import annotations

import contextlib
import functools
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from promptloop.agents.names import did_you_mean
from promptloop.optimizer.core.adapter_settings import (
    RUNS_CODE,
    AdapterSettings,
    keys_of,
    kinds,
    plain,
    runs_code,
    settings_keys,
)
from promptloop.optimizer.core.config import CONFIG_FILE, ConfigError

AGENT_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def inside_repo(v: str) -> str:
    """A prompt path as promptloop.toml may give it: relative to the repository root, inside
    it (optimize patches it on a branch of that repository)."""
    p = Path(v)
    if not v.strip() or p.is_absolute() or ".." in p.parts:
        raise ValueError("must be a path relative to the repository root, inside it")
    return p.as_posix()


class PromptTarget(_Strict):
    """One prompt promptloop may patch: a whole file, a string literal named by `variable`, or
    the lines between the `begin` and `end` marker lines."""

    name: str = "system"
    path: str
    variable: str | None = None
    begin: str | None = None
    end: str | None = None

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        return inside_repo(v)

    def describe(self) -> str:
        if self.variable:
            return f"literal {self.variable} in {self.path}"
        if self.begin:
            return f"text between {self.begin!r} and {self.end!r} in {self.path}"
        return self.path

    @property
    def whole_file(self) -> bool:
        return self.variable is None and self.begin is None


class CommandGrader(_Strict):
    command: list[str] = Field(min_length=1, json_schema_extra={RUNS_CODE: True})
    """The argv (run from the repository top; the task's config sets its time limit,
    `timeout_s`, 30 s by default)."""


class AgentConfig(_Strict):
    """One `[agents.<name>]` table. Its adapter keys (`adapter`, `command`, `entry`, ...) are
    written in the table itself and validated once, as the discriminated union `spec`
    (core/adapter_settings.py). Every field carries a `runs_code` mark, as the adapter
    settings do (review keeps the marked ones from the base ref)."""

    description: str = plain("")
    prompt: str | None = plain(None)
    """Short form: one prompt target, a whole file."""
    prompts: list[PromptTarget] = plain(default_factory=list)
    suites: list[str] = plain(min_length=1)
    """Suite folders (each with a suite.json) or folders of suite folders."""
    spec: AdapterSettings = plain()
    """How one trial runs: the table's adapter keys (marked one by one in their models)."""
    concurrency: int | None = plain(None, ge=1)
    """Trials at once for this agent (a worker adapter: processes in its pool)."""
    model: str | None = plain(None)
    judge: str | None = plain(None)
    graders: dict[str, CommandGrader] = runs_code(default_factory=dict)
    views: str | None = runs_code(None)
    """Any adapter: `package.module:function`, the agent's failure-package hook (views of a
    trial's outcome only this agent knows how to show); default: `<entry>_views` of a python
    or session entry."""
    code: list[str] = plain(default_factory=list)
    """Files or folders (relative to the repository root) whose change makes cached trials of
    this agent stale (run/external.adapter_variant): an `http` agent's service source, which
    promptloop cannot see from its table (without it, every code file of the repository
    counts), or anything a command reads beyond the folders of its own files."""

    @field_validator("prompt")
    @classmethod
    def _prompt_inside(cls, value: str | None) -> str | None:
        """The short form's path, checked as a [[prompts]] table's (a path outside raised
        from `targets()` later, as a traceback of every command)."""
        return None if value is None else inside_repo(value)

    @field_validator("code")
    @classmethod
    def _code_inside(cls, value: list[str]) -> list[str]:
        return [inside_repo(v) for v in value]

    @field_validator("model", "judge")
    @classmethod
    def _model_id(cls, value: str | None) -> str | None:
        """A model id the providers know (`openai:gpt-4o-mini`), checked when the file loads,
        not at the first trial."""
        if value is not None:
            from promptloop.agents.llm.registry import ModelConfigError, parse_model_id

            try:
                parse_model_id(value)
            except ModelConfigError as err:
                raise ValueError(str(err)) from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        """The table's adapter keys into `spec` (the TOML table is flat)."""
        if not isinstance(data, dict) or "spec" in data:
            return data
        adapter_keys = set(settings_keys())
        spec = {k: v for k, v in data.items() if k in adapter_keys}
        return {**{k: v for k, v in data.items() if k not in adapter_keys}, "spec": spec}

    @property
    def adapter(self) -> str:
        """The adapter kind (`command`, `worker`, `http`, `python`, `session`)."""
        return self.spec.adapter

    def flat(self) -> dict[str, Any]:
        """The table as written: the adapter keys beside the others (JSON values)."""
        data = self.model_dump(mode="json", exclude={"spec"})
        return {**data, **self.spec.model_dump(mode="json")}

    def targets(self) -> list[PromptTarget]:
        if self.prompt is not None:
            return [PromptTarget(name="system", path=self.prompt), *self.prompts]
        return list(self.prompts)


@dataclass(frozen=True)
class Agent:
    """A declared agent, with the file it was declared in."""

    name: str
    config: AgentConfig
    project: Project

    @property
    def table(self) -> str:
        return f"[agents.{self.name}]"

    def targets(self) -> list[PromptTarget]:
        return self.config.targets()

    def target(self, name: str | None = None) -> PromptTarget:
        """The prompt target `name` (None: the agent's first)."""
        targets = self.targets()
        if name is None:
            return targets[0]
        for t in targets:
            if t.name == name:
                return t
        known = [t.name for t in targets]
        raise ConfigError(f"{self.project.where}: {self.table} has no prompt {name!r}."
                          f"{did_you_mean(name, known)} Prompts: {', '.join(known)}")

    @property
    def prompt_path(self) -> str:
        return self.target().path

    def target_key(self, target: PromptTarget) -> str:
        """Where `target` is declared, for an error: `[agents.x] key 'prompt'`, or
        `[[agents.x.prompts]] 'system' key 'path'` for a target of the prompts array."""
        if self.config.prompts and not self.config.prompt:
            return f"[[agents.{self.name}.prompts]] {target.name!r} key 'path'"
        return f"{self.table} key 'prompt'"


@dataclass(frozen=True)
class Project:
    """A validated promptloop.toml: its agents and the command tables (settings)."""

    path: Path | None
    """The file (None: the packaged project, when no promptloop.toml was found)."""
    agents: dict[str, AgentConfig]
    tables: dict[str, Any]
    """Every other top-level table: command settings (`[optimize]`, ...)."""
    root_dir: Path | None = None
    """The repository the agents' commands run from, when `path` is only a label (a file read
    at a git ref, `promptloop.toml@main`); default: the file's folder."""

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else f"{CONFIG_FILE} (packaged)"

    @property
    def root(self) -> Path | None:
        if self.root_dir is not None:
            return self.root_dir
        return self.path.parent if self.path is not None else None

    def agent_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.agents))

    def agent(self, name: str) -> Agent:
        try:
            return Agent(name, self.agents[name], self)
        except KeyError:
            known = self.agent_names()
            raise ConfigError(
                f"{self.where}: no table [agents.{name}]: unknown agent {name!r}."
                f"{did_you_mean(name, known)} Agents declared: {', '.join(known) or 'none'}"
            ) from None



def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _table_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A location as the table writes it: the adapter keys sit in the table itself
    (`spec.worker.timeout` -> `timeout`)."""
    if loc[:1] == ("spec",):
        rest = loc[1:]
        if rest and rest[0] in kinds():
            rest = rest[1:]
        return rest or ("adapter",)
    return loc


def _known_keys(loc: tuple[Any, ...], kind: str | None) -> list[str]:
    if "prompts" in loc:
        return list(PromptTarget.model_fields)
    if "graders" in loc:
        return list(CommandGrader.model_fields)
    agent_keys = [k for k in AgentConfig.model_fields if k != "spec"]
    return agent_keys + list(keys_of(kind) if kind else settings_keys())


def _errors(where: str, name: str, err: ValidationError, table: dict[str, Any]) -> str:
    lines = []
    kind = table.get("adapter") if table.get("adapter") in kinds() else None
    for e in err.errors():
        raw = tuple(e["loc"])
        loc = _table_loc(raw)
        key = _loc(loc) or "(table)"
        if e["type"] == "extra_forbidden":
            last = str(loc[-1])
            options = _known_keys(loc, kind)
            why = (f"not a key of adapter = {kind!r}" if kind and last in settings_keys()
                   else "unknown key")
            lines.append(f"{where}: [agents.{name}] key '{key}': {why}."
                         f"{did_you_mean(last, options)} Known keys: {', '.join(options)}")
        elif e["type"] in ("union_tag_not_found", "missing") and loc == ("adapter",):
            lines.append(f"{where}: [agents.{name}] key 'adapter': required, missing (one of "
                         f"{', '.join(kinds())})")
        elif e["type"] == "union_tag_invalid":
            lines.append(f"{where}: [agents.{name}] key 'adapter': {table.get('adapter')!r} is "
                         f"not an adapter.{did_you_mean(str(table.get('adapter')), kinds())} "
                         f"Adapters: {', '.join(kinds())}")
        elif e["type"] == "missing":
            needed = f" by adapter = {kind!r}" if raw[:1] == ("spec",) and kind else ""
            lines.append(f"{where}: [agents.{name}] key '{key}': required{needed}, missing")
        else:
            msg = e["msg"].removeprefix("Value error, ")  # pydantic's wording, not ours
            lines.append(f"{where}: [agents.{name}] key '{key}': {msg} "
                         f"(got {e.get('input')!r})")
    return "\n".join(lines)


def _check_agent(where: str, name: str, cfg: AgentConfig) -> list[str]:
    """What one model cannot say: the prompt targets together."""
    table = f"{where}: [agents.{name}]"
    problems: list[str] = []
    if not cfg.targets():
        problems.append(f"{table} key 'prompt': required (a prompt file, or [[agents.{name}."
                        "prompts]] tables)")
    names = [t.name for t in cfg.targets()]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{table} key 'prompts': the name {dup!r} is used twice")
    for i, t in enumerate(cfg.prompts):
        if t.variable and (t.begin or t.end):
            problems.append(f"{table} key 'prompts[{i}]': give 'variable' or 'begin'/'end', "
                            "not both")
        if bool(t.begin) != bool(t.end):
            problems.append(f"{table} key 'prompts[{i}]': 'begin' and 'end' go together")
    if cfg.views is not None and ":" not in cfg.views:
        problems.append(f"{table} key 'views': {cfg.views!r} is not 'package.module:function'")
    return problems


def parse_project(text: str, path: Path | None) -> Project:
    """Validate the text of a promptloop.toml; every problem in one ConfigError (exit 1)."""
    where = str(path) if path is not None else f"{CONFIG_FILE} (packaged)"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{where}: invalid TOML: {err}") from None
    raw_agents = data.pop("agents", {})
    if not isinstance(raw_agents, dict):
        raise ConfigError(f"{where}: key 'agents' must be a table of [agents.<name>] tables")
    agents: dict[str, AgentConfig] = {}
    problems: list[str] = []
    for name, table in raw_agents.items():
        if not re.match(AGENT_NAME_PATTERN, name):
            problems.append(f"{where}: [agents.{name}]: an agent name is letters, digits, "
                            "'_' and '-', starting with a letter")
            continue
        if not isinstance(table, dict):
            problems.append(f"{where}: [agents.{name}] must be a table")
            continue
        try:
            cfg = AgentConfig.model_validate(table)
        except ValidationError as err:
            problems.append(_errors(where, name, err, table))
            continue
        found = _check_agent(where, name, cfg)
        problems += found
        if not found:
            agents[name] = cfg
    for key, value in data.items():
        if not isinstance(value, dict):
            problems.append(f"{where}: top-level key '{key}' must be a table "
                            "([agents.<name>] or a command's settings such as [optimize])")
    if problems:
        raise ConfigError("\n".join(problems))
    return Project(path, agents, data)


def find_project(start: Path | None = None, explicit: Path | None = None) -> Path | None:
    """`explicit` (must exist), else the nearest promptloop.toml from `start` upward, stopping
    at the repository top (a folder holding .git)."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: config file not found (--config)")
        return explicit
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists():
            return None
    return None


def load_project(path: Path) -> Project:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    return parse_project(text, path)


def check_at_top(path: Path) -> None:
    """ConfigError when the file sits in a subfolder of a git repository: optimize, review,
    nightly and graduate read promptloop.toml, and every path in it, from commits at the
    repository root, so a file elsewhere would be read by some commands and not others."""
    folder = path.resolve().parent
    if (folder / ".git").exists():
        return  # the top of its repository (a nested repository's too)
    for above in folder.parents:
        if (above / ".git").exists():
            rel = folder.relative_to(above).as_posix()
            raise ConfigError(
                f"{path}: promptloop.toml must be at the repository root ({above}), not in "
                f"{rel}/: optimize, review and nightly read it from commits there. Move it "
                f"to the root and write its paths from there (e.g. '{rel}/...'; `command` "
                "runs from the root too)")


@functools.cache
def packaged_project() -> Project:
    """promptloop's own promptloop.toml (its two agents), as shipped in the package."""
    path = Path(__file__).with_name("default_project.toml")  # a link to the repository's file
    return parse_project(path.read_text(encoding="utf-8"), None)


_ACTIVE: list[Project] = []


def config_name(root: Path) -> str:
    """The project file's path from the repository top `root`, as commits hold it: the
    running command's (`--config promptloop.ci.toml`, PROMPTLOOP_CONFIG) when it lives inside
    the repository, else promptloop.toml (a team's --config file was never read at a ref:
    optimize fell back to promptloop's own agents, review found nothing to review)."""
    path = active_project().path
    if path is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return CONFIG_FILE


def active_project() -> Project:
    """The project of the running command: set by `use_project`, else the nearest
    promptloop.toml with agents from the current folder, else the packaged project."""
    if _ACTIVE:
        return _ACTIVE[-1]
    found = find_project()
    if found is None:
        return packaged_project()
    check_at_top(found)
    stat = found.stat()
    return _project_file(found.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _project_file(path: Path, mtime_ns: int, size: int) -> Project:
    """A promptloop.toml read once per version of the file (runs ask per trial)."""
    project = load_project(path)
    return project if project.agents else with_own_agents(project)


def with_own_agents(project: Project) -> Project:
    """A settings-only project file: the agents are promptloop's own."""
    return Project(project.path, packaged_project().agents, project.tables, project.root_dir)


def use_project(project: Project) -> None:
    """Make `project` the running command's (replacing any earlier one)."""
    _ACTIVE[:] = [project]


@contextlib.contextmanager
def project_scope(project: Project) -> Iterator[Project]:
    """`project` active inside the block (tests, review's two refs)."""
    saved = list(_ACTIVE)
    _ACTIVE[:] = [project]
    try:
        yield project
    finally:
        _ACTIVE[:] = saved


__all__ = [
    "Agent",
    "AgentConfig",
    "CommandGrader",
    "Project",
    "PromptTarget",
    "active_project",
    "config_name",
    "find_project",
    "load_project",
    "packaged_project",
    "parse_project",
    "project_scope",
    "use_project",
]
