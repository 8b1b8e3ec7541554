"""`promptloop graduate`: apply a graduation as a commit on a new branch.

Everything is read from the object database at the base ref; the change is made in a
temporary worktree on a new `promptloop/graduate/...` branch (optimizer/git.py), so the
user's checkout and current branch are never touched. The PR body and a record (format
`promptloop.graduation/1`) go to `graduations/<id>/` in the state folder.
"""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.core.names import agent_names
from promptloop.optimizer.core.suites import SuiteError, load_suite
from promptloop.optimizer.git import GitOps, GitOpsError
from promptloop.optimizer.lifecycle.errors import (
    GraduationRefused,
    LifecycleError,
    NoLineageError,
    UnknownNameError,
)
from promptloop.optimizer.lifecycle.files import safe_stem
from promptloop.optimizer.lifecycle.graduation import (
    DeclaredRoots,
    GraduationPlan,
    GraduationProposal,
    Readiness,
    declare_suite,
    declared_roots,
    new_regression_suite,
    plan_graduation,
    propose_graduations,
    readiness,
    task_files,
)
from promptloop.optimizer.lifecycle.health import HealthPolicy, RunPoint, SuiteHealth
from promptloop.optimizer.lifecycle.health_io import build_health
from promptloop.optimizer.lifecycle.lineage import DEFAULT_WINDOW
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.markdown import cell, table_lines
from promptloop.optimizer.report.table import Table

GRADUATION_FORMAT = "promptloop.graduation/1"
GRADUATIONS_DIR = "graduations"


@dataclass(frozen=True)
class GraduateRequest:
    repo: Path
    state_dir: Path
    agent: str
    bucket: str
    copy: bool = False
    force: bool = False
    base: str = "HEAD"
    window: int = DEFAULT_WINDOW
    agent_model: str | None = None
    dry_run: bool = False


class MovedFiles(BaseModel):
    source: str
    destination: str
    kind: Literal["task", "fixture"]
    removed_source: bool


class GraduationRecord(BaseModel):
    format: str = GRADUATION_FORMAT
    created_at: datetime
    agent: str
    bucket: str
    mode: Literal["move", "copy"]
    forced: bool
    dry_run: bool
    base_ref: str
    base_commit: str
    branch: str | None
    commit: str | None
    source_suite: str
    target_suite: str
    task_ids: list[str]
    files: list[MovedFiles]
    ready: bool
    reasons: list[str]
    evidence_runs: list[RunPoint]
    lineage: str
    pr_body_path: str | None = None


@dataclass(frozen=True)
class _Base:
    sha: str
    source: dict[str, str]
    target: dict[str, str]
    tasks: dict[str, dict[str, Any]]
    source_name: str
    target_name: str
    roots: DeclaredRoots


def _read_base(git: GitOps, req: GraduateRequest) -> _Base:
    if req.agent not in agent_names():
        raise UnknownNameError("suite", req.agent, list(agent_names()))
    sha = git.resolve(req.base)
    roots = declared_roots(req.agent, git, sha)  # the suites promptloop.toml declares
    src_root, dst_root = roots.source, roots.target
    names = [str(roots.source_config.get("name", ""))]
    if roots.new_target:
        names.append(str(new_regression_suite(req.agent, roots)["name"]))
    else:
        try:
            names.append(str(json.loads(git.read_file(sha, f"{dst_root}/suite.json"))["name"]))
        except (GitOpsError, json.JSONDecodeError, KeyError, TypeError) as err:
            raise LifecycleError(f"{dst_root}/suite.json at {req.base}: no readable suite "
                                 f"({err})") from err
    source, target = git.list_files(sha, src_root), git.list_files(sha, dst_root)
    tasks: dict[str, dict[str, Any]] = {}
    for path in [*task_files(source, src_root), *task_files(target, dst_root)]:
        try:
            data = json.loads(git.read_file(sha, path))
        except json.JSONDecodeError as err:
            raise LifecycleError(f"{path}: invalid JSON at line {err.lineno}") from err
        if not isinstance(data, dict):
            raise LifecycleError(f"{path}: must hold a JSON object")
        tasks[path] = data
    return _Base(sha, source, target, tasks, names[0], names[1], roots)


def _readiness(req: GraduateRequest, base: _Base, plan: GraduationPlan) -> tuple[Readiness, str]:
    try:
        health: SuiteHealth = build_health(req.state_dir, base.source_name, repo=req.repo,
                                           ref=base.sha, agent_model=req.agent_model,
                                           window=req.window)
    except LifecycleError as err:
        need = HealthPolicy().graduation_runs
        return Readiness(req.bucket, False, 0, need, None, 0, (), plan.task_ids,
                         (f"no lineage to judge maturity: {err}",)), ""
    return readiness(health, req.bucket, plan.task_ids), health.lineage.definition


def _apply(plan: GraduationPlan, root: Path) -> None:
    for move in plan.moves:
        src, dst = root / move.source, root / move.destination
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst)
            if move.remove_source:
                shutil.rmtree(src)
        else:
            shutil.copy2(src, dst)
            if move.remove_source:
                src.unlink()


def _validate(plan: GraduationPlan, root: Path) -> None:
    for rel in (plan.source_root, plan.target_root):
        try:
            load_suite(root / rel)
        except SuiteError as err:
            raise LifecycleError(f"after the change, {rel} would not load: {err}") from err


def _new_suite(req: GraduateRequest, roots: DeclaredRoots, root: Path) -> list[str]:
    """A regression suite the agent did not have yet: its suite.json, and its folder added to
    the agent's `suites` in promptloop.toml when that lists suite folders one by one; the
    paths written."""
    if not roots.new_target:
        return []
    rel = f"{roots.target}/suite.json"
    config = new_regression_suite(req.agent, roots)
    (root / rel).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    written = [rel]
    if roots.declare:
        from promptloop.optimizer.core.config import ConfigError
        from promptloop.optimizer.core.project import active_project, parse_project

        project = active_project()
        if project.path is None:
            raise LifecycleError(f"{req.agent}: no promptloop.toml to add {roots.target} to")
        top = (project.root or req.repo).resolve()
        toml = project.path.resolve().relative_to(top).as_posix()
        text = declare_suite((root / toml).read_text(encoding="utf-8"), req.agent,
                             roots.target)
        try:
            parse_project(text, root / toml)
        except ConfigError as err:
            raise LifecycleError(f"adding {roots.target} to {toml} would break it: {err}"
                                 ) from None
        (root / toml).write_text(text, encoding="utf-8")
        written.append(toml)
    return written


def graduate(req: GraduateRequest) -> GraduationRecord:
    """Check readiness, then move (or copy) the bucket's tasks on a new branch."""
    with GitOps(req.repo) as git:
        base = _read_base(git, req)
        plan = plan_graduation(req.agent, req.bucket, copy=req.copy, source=base.source,
                               target=base.target, tasks=base.tasks,
                               roots=(base.roots.source, base.roots.target))
        ready, lineage = _readiness(req, base, plan)
        if not ready.ready and not req.force:
            raise GraduationRefused(
                f"bucket {req.bucket} of {base.source_name} is not ready to graduate: "
                f"{ready.figures()}. Pass --force to graduate it anyway.")
        record = GraduationRecord(
            created_at=datetime.now(UTC), agent=req.agent, bucket=req.bucket, mode=plan.mode,
            forced=req.force and not ready.ready, dry_run=req.dry_run, base_ref=req.base,
            base_commit=base.sha, branch=None, commit=None, source_suite=base.source_name,
            target_suite=base.target_name, task_ids=list(plan.task_ids),
            files=[MovedFiles(source=m.source, destination=m.destination, kind=m.kind,
                              removed_source=m.remove_source) for m in plan.moves],
            ready=ready.ready, reasons=list(ready.reasons), evidence_runs=list(ready.runs),
            lineage=lineage)
        if req.dry_run:
            return record
        branch = git.unique_branch_name("graduate", f"{req.agent}-{req.bucket}",
                                        uuid.uuid4().hex[:8])
        try:
            with git.candidate(base.sha, branch) as cand:
                _apply(plan, cand.path)
                extra = _new_suite(req, base.roots, cand.path)
                _validate(plan, cand.path)
                commit = git.commit(cand, [*plan.paths, *extra], commit_message(record))
        except BaseException:
            if git.branch_exists(branch):
                git.delete_branch(branch)
            raise
    record = record.model_copy(update={"branch": branch, "commit": commit})
    return save_record(req.state_dir, record)


def commit_message(record: GraduationRecord) -> str:
    verb = "copy" if record.mode == "copy" else "move"
    runs = ", ".join(p.run_name for p in record.evidence_runs) or "none"
    forced = "\nForced: the bucket was not ready (" + "; ".join(record.reasons) + ")\n" \
        if record.forced else ""
    return (f"promptloop(graduate): {verb} {record.bucket} of {record.agent} to regression "
            f"({len(record.task_ids)} tasks)\n\nTasks (ids kept): {', '.join(record.task_ids)}\n"
            f"Mature runs: {runs}\n{forced}")


def pr_body(record: GraduationRecord) -> str:
    verb = "Copies" if record.mode == "copy" else "Moves"
    lines = [f"## promptloop: graduate `{record.bucket}` of {record.agent}", "",
             f"{verb} {len(record.task_ids)} task(s) from `{record.source_suite}` to "
             f"`{record.target_suite}`, ids kept: "
             + ", ".join(f"`{t}`" for t in record.task_ids) + ". From now on they must keep "
             "passing on every trial instead of being hill-climbed.", ""]
    if record.forced:
        lines += ["**Forced:** the bucket was not ready to graduate: "
                  + cell("; ".join(record.reasons)) + ".", ""]
    lines += [f"### Why: {len(record.evidence_runs)} consecutive mature run(s)", ""]
    lines += ["; ".join(record.reasons) + ".", ""]
    if record.evidence_runs:
        lines += table_lines(Table.of(
            ["Run", "Started", "Trials", "Passed", "Pass rate"],
            [[p.run_name, f"{p.started_at:%Y-%m-%d %H:%M}", p.trials, p.passed,
              fmt.pct(p.pass_rate)] for p in record.evidence_runs]))
        lines.append("")
    if record.lineage:
        lines += [f"Lineage: {record.lineage}.", ""]
    lines += ["### Files", ""]
    lines += [f"- `{m.source}` -> `{m.destination}`"
              + (" (copied; source kept)" if not m.removed_source else "") for m in record.files]
    lines += ["", f"Branch `{record.branch}` from `{record.base_commit[:12]}`.", "",
              "_Generated by `promptloop graduate`._"]
    return "\n".join(lines) + "\n"


def save_record(state_dir: Path, record: GraduationRecord) -> GraduationRecord:
    folder = state_dir / GRADUATIONS_DIR / safe_stem((record.branch or "dry-run")
                                                      .removeprefix("promptloop/"))
    pr = atomic_write_text(folder / "PR.md", pr_body(record))
    record = record.model_copy(update={"pr_body_path": str(pr)})
    atomic_write_text(folder / "graduation.json", record.model_dump_json(indent=2) + "\n")
    return record


def graduation_proposals(state_dir: Path, agent: str, *, repo: Path, ref: str = "HEAD",
                         window: int = DEFAULT_WINDOW) -> list[GraduationProposal]:
    """The buckets of `agent`'s capability suite at `ref` ready to graduate (nightly shows
    them; nothing is applied). Empty when the suite has no lineage yet."""
    with GitOps(repo) as git:
        try:
            roots = declared_roots(agent, git, git.resolve(ref))
            name = str(roots.source_config["name"])
        except (GitOpsError, LifecycleError, KeyError):
            return []
    try:
        health = build_health(state_dir, name, repo=repo, ref=ref, window=window)
    except (NoLineageError, UnknownNameError):  # no run of this suite stored yet
        return []
    return propose_graduations(health)
