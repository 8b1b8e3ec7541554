"""What the command line needs from below the workflows, in one place.

The CLI calls workflows, never core or git internals (tests/test_import_contract.py checks
it); the few lookups a command makes before it starts a workflow live here: where the state
folder and the repository are, which agents and suites exist, the settings file, the default
agent model, and the errors a command turns into exit codes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from promptloop.optimizer.core.config import DEFAULT_AGENT_MODEL, STATE_ENV, ConfigError, load_toml
from promptloop.optimizer.core.names import agent_names, did_you_mean
from promptloop.optimizer.core.project import (
    Project,
    active_project,
    check_at_top,
    find_project,
    load_project,
    packaged_project,
    use_project,
    with_own_agents,
)
from promptloop.optimizer.core.redact import redact
from promptloop.optimizer.core.suites import (
    TASKS_DIR,
    SuiteError,
    is_jsonl_suite,
    is_suite,
    load_suite,
    resolve_suite_path,
)
from promptloop.optimizer.git import GitOpsError, repo_root
from promptloop.optimizer.git import state_dir as _state_dir

CREATED: list[tuple[Path, Path]] = []
"""(topmost folder created, state folder) of each state folder this command created
(`drop_created_state` removes them after a user error)."""


def drop_created_state() -> None:
    """Remove the state folders this command created (a command refused for a user error
    leaves no `.promptloop` behind: a mistyped bucket made one, with the prompt sources it had
    read); a folder that was there before is never touched. No run report is ever removed: a
    folder holding one stays."""
    from promptloop.agents import trees

    while CREATED:
        top, path = CREATED.pop()
        reports = path / "runs" / "reports"
        if path.is_dir() and not (reports.is_dir() and any(reports.iterdir())):
            with contextlib.suppress(OSError):
                trees.remove_tree(path)
        for folder in (path, *path.parents):
            try:
                folder.rmdir()  # only an empty folder goes
            except OSError:
                break
            if folder == top:
                break


def state_dir(explicit: Path | None = None, *, write: bool = True) -> Path:
    """The state folder (--state-dir, $PROMPTLOOP_HOME, or <repo>/.promptloop); with `write`
    (every command that runs or records something) created and checked to be writable, so a
    read-only or invalid folder is a user error naming it and where it came from, before
    anything runs (never a raw `[Errno 30]`)."""
    path = _state_dir(explicit)
    if not write:
        return path
    source = ("--state-dir" if explicit is not None else
              STATE_ENV if os.environ.get(STATE_ENV) else "the default, <repository>/.promptloop")
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        if missing:
            CREATED.append((missing[-1], path))
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        if isinstance(err, (FileExistsError, NotADirectoryError)):
            reason = "it, or a folder above it, is a file"
        raise ConfigError(f"state folder {path} ({source}) cannot be used: {reason}. Give a "
                          "writable folder with --state-dir (or PROMPTLOOP_HOME)") from None
    return path


def open_project(explicit: Path | None = None) -> Project | None:
    """Find (`explicit`, else upward from the current folder), validate and activate the
    project file; None when there is none (promptloop's own agents are then the project, read
    from the repository they would live in). ConfigError names the file, table and key."""
    found = find_project(explicit=explicit)
    load_dotenv(found.parent if found is not None else repo_root())
    if found is None:
        use_project(packaged_project())
        return None
    check_at_top(found)
    project = load_project(found)
    if not project.agents:  # a settings-only file: the agents are promptloop's own
        project = with_own_agents(project)
    use_project(project)
    return project


GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
                     "GIT_PREFIX", "GIT_NAMESPACE", "GIT_OBJECT_DIRECTORY",
                     "GIT_ALTERNATE_OBJECT_DIRECTORIES")
"""Variables that point git at another repository, index or work tree (a git hook sets them).
Every git command promptloop runs would obey them: with GIT_DIR set, a candidate was committed
onto the checked-out branch and its prompt written into the checkout; with GIT_INDEX_FILE, into
the user's index."""


def isolate_git() -> list[str]:
    """Unset `GIT_LOCATION_VARS` in promptloop's environment (so in every git command and agent
    it starts): the repository is the one the current folder is in, and a candidate's branch
    and worktree never touch the checkout or its index. The names unset, to say so once."""
    dropped = [name for name in GIT_LOCATION_VARS if name in os.environ]
    for name in dropped:
        del os.environ[name]
    return dropped


DOTENV = ".env"
_DOTENV_NAME = re.compile(r"^(?:[A-Z][A-Z0-9_]*_API_KEY|OPENAI_BASE_URL|ANTHROPIC_BASE_URL)$")
"""What promptloop takes from a .env file: provider keys and base URLs, nothing else (the
rest of a team's .env is not promptloop's business, and never reaches an agent through it)."""
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def load_dotenv(root: Path | None) -> list[str]:
    """Provider keys from `<root>/.env` (`NAME=value`, `export NAME=value`, quoted or not,
    `#` comments) into the environment, where a variable already set wins; every value read
    is registered for redaction (never stored: core/redact.py). The names set are returned."""
    from promptloop.agents.secrets import FROM_DOTENV
    from promptloop.optimizer.core.redact import register_secret

    if root is None:
        return []
    path = root / DOTENV
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    loaded: list[str] = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None or not _DOTENV_NAME.match(m.group(1)):
            continue
        name, value = m.group(1), m.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        register_secret(value)
        if value and name not in os.environ:
            os.environ[name] = value
            loaded.append(name)
            FROM_DOTENV[name] = (str(path), value)
    return loaded


_SCRIPT = re.compile(r"\.(?:py|js|mjs|cjs|ts|sh|rb|dart|php|pl|exe|jar)$")


def check_command(agent: str, sandbox: bool = True) -> None:
    """Before any trial, what would make every trial of `agent` fail for its configuration,
    as a ConfigError naming promptloop.toml's key (or the variable): the files its `command`
    names (`example_agent/agent.py`, `./run.sh`) exist under the repository root it runs from
    (a trial would blame a path in a temporary folder), its `views` module can be found, and
    $PROMPTLOOP_SANDBOX names a box that works here (unless `sandbox` is False: doctor says
    that once, not per agent)."""
    project = active_project()
    cfg = project.agents.get(agent)
    root = project.root
    if cfg is not None and project.path is not None:
        _check_views(project.where, agent, cfg.views, root)
    command: list[str] = list(getattr(cfg.spec, "command", None) or []) if cfg else []
    if command and sandbox:
        from promptloop.optimizer.adapters.box import SandboxUnavailable, for_trials

        try:
            for_trials()
        except SandboxUnavailable as err:
            raise ConfigError(str(err)) from None
    if not command or root is None or project.path is None:
        return
    key = f"{project.where}: [agents.{agent}] key 'command'"
    program = command[0]
    if program and "/" not in program and shutil.which(program) is None:
        raise ConfigError(f"{key}: the program {program!r} is not found on PATH (give an "
                          "installed program, e.g. python3 or node, or a path relative to "
                          "the repository root such as ./run.sh)")
    for i, arg in enumerate(command):
        if (not arg or arg.startswith("-") or os.path.isabs(arg) or "=" in arg
                or "://" in arg or (i == 0 and "/" not in arg)):
            continue
        if ("/" in arg or _SCRIPT.search(arg)) and not (root / arg).exists():
            raise ConfigError(f"{key}: {arg!r} does not exist in {root} (paths in 'command' "
                              "are relative to the repository root)")
        if i == 0 and (root / arg).is_dir():
            raise ConfigError(f"{key}: {arg!r} is a folder, not a program to run")
        if i == 0 and (root / arg).exists() and not os.access(root / arg, os.X_OK):
            raise ConfigError(f"{key}: {arg!r} is not executable: make it so (chmod +x {arg}, "
                              f"and commit that) or run it through its interpreter, e.g. "
                              f"[\"python3\", \"{arg}\"]")


def _check_views(where: str, agent: str, views: str | None, root: Path | None) -> None:
    """`views = "package.module:function"`: its module is found under the repository top or
    installed (found, not imported: review reads the key from the base, and importing runs
    code), else a ConfigError naming the key (a team's `agents.adapters:...`, copied from an
    older doc, failed only at `report --failing`)."""
    if not views or ":" not in views:
        return
    module = views.split(":", 1)[0]
    parts = module.split(".")
    top = root / Path(*parts) if root is not None else None
    if top is not None and (top.with_suffix(".py").is_file() or (top / "__init__.py").is_file()):
        return
    import importlib.util

    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        spec = None
    found = spec is not None
    if found and len(parts) > 1 and spec is not None:
        places = [Path(p) for p in (spec.submodule_search_locations or [])]
        rest = Path(*parts[1:])
        found = any((p / rest).with_suffix(".py").is_file() or (p / rest / "__init__.py").is_file()
                    for p in places)
    if not found:
        hint = (f" (promptloop's own: 'promptloop.{views}')"
                if parts[0] == "agents" else "")
        raise ConfigError(f"{where}: [agents.{agent}] key 'views': module {module!r} is found "
                          f"neither under the repository top nor installed{hint}")


def extra_settings(command: str) -> list[str]:
    """Keys a command's promptloop.toml table may hold that are no option of it."""
    if command == "nightly":
        from promptloop.optimizer.workflows.nightly.config import NightlyConfig

        return list(NightlyConfig.model_fields)
    return []


def split_suite(agent: str | None, suite: str | None) -> tuple[str | None, str | None]:
    """`--agent` and `--suite` -> (agent name, suite name or path). `--suite` is an agent
    (all its suites), one of its suites (`pkm_agent/quickstart`, or `--agent pkm_agent --suite
    quickstart`), or a suite folder (a path holding suite.json) or JSONL suite file: a suite
    an agent's `suites` lists becomes (that agent, its suite name); another names its agent
    by its `agent_name` (the path kept)."""
    project = active_project()
    names = project.agent_names()
    if agent is not None and agent not in names:
        if project.path is None:  # no promptloop.toml at all: the first-day slip
            raise no_project_here()
        project.agent(agent)  # ConfigError naming the file and the missing table
    if suite is None:
        return agent, None
    if agent is None and suite in names:
        return suite, None
    head, sep, tail = suite.partition("/")
    path = Path(suite)
    if agent is None and sep and head in names and not is_suite(path):
        return head, tail
    if agent is not None and sep and head == agent and not is_suite(path):
        return agent, tail  # --agent A --suite A/SUITE: the same spelling, said twice
    if agent is not None and suite == agent:
        return agent, None
    if is_suite(path):
        return _suite_owner(agent, path, names)
    return agent, suite


def _suite_owner(agent: str | None, path: Path, names: tuple[str, ...]
                 ) -> tuple[str | None, str]:
    """(agent, suite name) for a suite folder or file an agent declares; else (the agent its
    `agent_name` names, the path)."""
    from promptloop.optimizer.workflows.sources import RepoSource

    target = path.resolve()
    root = repo_root(path.parent if path.is_file() else path)
    with RepoSource(root, None, Path(os.devnull)) as source:
        for name in ([agent] if agent is not None else list(names)):
            for suite_name, rel in source.suite_folders(name).items():
                base = root if root is not None else Path.cwd()
                if (base / rel).resolve() == target:
                    return name, suite_name
    if agent is None:
        owner = suite_agent_name(path)
        agent = owner if owner in names else None
    return agent, str(path)


def declared_suite_name(agent: str, suite: str) -> str:
    """The name (as runs are stored) of `agent`'s suite `suite` (one of its suite names, a
    kind, or a suite path) in the working tree; a ConfigError naming the agent's `suites` key
    when it has none, a SuiteError when it does not load."""
    from promptloop.optimizer.workflows.sources import project_suite

    return load_suite(project_suite(agent, suite), agent).name


def suite_agent_name(path: Path) -> str | None:
    """The `agent_name` a suite folder's suite.json or a JSONL suite's header line gives."""
    import json

    try:
        if is_jsonl_suite(path):
            first = path.read_text(encoding="utf-8").lstrip().split("\n", 1)[0]
            data = json.loads(first).get("suite") or {}
        else:
            data = json.loads((path / "suite.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, AttributeError):
        return None
    name = data.get("agent_name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


__all__ = [
    "DEFAULT_AGENT_MODEL",
    "GIT_LOCATION_VARS",
    "TASKS_DIR",
    "ConfigError",
    "GitOpsError",
    "Project",
    "SuiteError",
    "active_project",
    "agent_names",
    "declared_suite_name",
    "did_you_mean",
    "extra_settings",
    "isolate_git",
    "load_suite",
    "load_toml",
    "open_project",
    "redact",
    "repo_root",
    "resolve_suite_path",
    "split_suite",
    "state_dir",
    "suite_agent_name",
]


# --- first-day checks: what a command that reads a commit would not find there ---------------

COMMIT_HINT = "git add -A && git commit -m 'promptloop init'"


def no_project_here() -> ConfigError:
    """The error for a name no promptloop.toml declares when there is none at all."""
    bundled = ", ".join(packaged_project().agent_names())
    return ConfigError(f"no promptloop.toml here ({Path.cwd()} or a folder above it): run "
                       f"`promptloop init` to declare an agent (promptloop's own agents: "
                       f"{bundled})")


def uncommitted(root: Path, ref: str = "HEAD",
                agent: str | None = None) -> tuple[bool, list[str]]:
    """(whether the repository has a commit, the files the working tree's promptloop.toml
    declares that commit `ref` lacks): promptloop.toml itself, the prompt files and suite
    folders of `agent` (None: of every agent), as paths relative to `root`; only those present
    in the working tree (a file missing from both is another error)."""
    from promptloop.optimizer.git import GitOps

    active = active_project().path
    found = active if active is not None and active.is_file() else find_project(start=root)
    with GitOps(root) as git:
        try:
            sha = git.resolve(ref)
        except GitOpsError:
            try:
                git.resolve("HEAD")
            except GitOpsError:
                return False, []
            raise
        if found is None:
            return True, []
        project = load_project(found)
        here = project.root or root
        agents = [cfg for name, cfg in project.agents.items() if agent in (None, name)]
        # a settings-only file declares no agent: HEAD needs it no more than the working tree
        paths = [found] if project.agents else []
        paths += [here / t.path for cfg in agents for t in cfg.targets()]
        paths += [here / s / "suite.json" for cfg in agents for s in cfg.suites]
        missing: list[str] = []
        for path in paths:
            try:
                rel = path.resolve().relative_to(root.resolve()).as_posix()
            except ValueError:
                continue  # outside the repository: not read at a commit
            shown = rel.removesuffix("/suite.json")
            if not path.exists() or shown in missing:
                continue
            if not git.list_files(sha, rel):
                missing.append(shown if path.name == "suite.json" else rel)
        return True, missing


def require_committed(root: Path, ref: str, command: str, agent: str | None = None) -> None:
    """Before `command` reads the prompt, promptloop.toml and the suites at `ref`: a
    ConfigError (exit 1) saying what to commit when the repository has no commit, when `ref`
    lacks promptloop.toml or a file it declares, or when `agent` is declared in the working
    tree only."""
    from promptloop.optimizer.core.project import config_name
    from promptloop.optimizer.git import GitOps

    name = config_name(root)  # the project file as commits hold it (--config names it)
    has_commit, missing = uncommitted(root, ref, agent)
    if not has_commit:
        raise ConfigError(f"this repository ({root}) has no commit yet: {command} reads "
                          f"promptloop.toml, the prompt and the suites from a commit ({ref}). "
                          f"Commit them first: {COMMIT_HINT}")
    where = "HEAD" if ref == "HEAD" else ref
    if name in missing:
        others = [m for m in missing if m != name]
        also = f" and {', '.join(others)}" if others else ""
        raise ConfigError(f"commit {name} first ({command} reads {where}, which lacks "
                          f"it{also}): {COMMIT_HINT}")
    if agent is not None and (active_project().path is not None
                              or find_project(start=root) is not None):
        with GitOps(root) as git:
            try:
                text = git.read_file(ref, name)
            except GitOpsError:
                text = None
        if text is not None:
            from promptloop.optimizer.core.project import parse_project

            try:
                declared = parse_project(text, Path(f"{name}@{ref}")).agents
            except ConfigError:
                declared = {}
            if agent not in declared and agent in active_project().agents:
                raise ConfigError(f"agent {agent!r} is declared in the working tree's "
                                  f"{name} but not in {where}'s: commit {name} "
                                  f"first ({command} reads {where}): {COMMIT_HINT}")
    if missing:
        raise ConfigError(f"commit {', '.join(missing)} first ({command} reads {where}, which "
                          f"lacks {'it' if len(missing) == 1 else 'them'}): {COMMIT_HINT}")
