"""Graduation of a mature capability bucket into the regression suite: is it ready, which
buckets to propose, and which files move where (pure functions; graduate_git.py applies them).

A bucket is ready after `graduation_runs` (5) consecutive mature runs in the capability suite's
lineage (health.py) and when every task the bucket has now was tried in the window. Its tasks
keep their ids and their folders' paths relative to the suite root, so `fixture_dir` paths
stay valid; fixture folders outside a moved task folder (and suite-local base fixtures) are
copied to the same place in the regression suite, never removed (other tasks may share them).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from promptloop.optimizer.git import GitOps, GitOpsError
from promptloop.optimizer.lifecycle.errors import LifecycleError, UnknownNameError
from promptloop.optimizer.lifecycle.health import RunPoint, SuiteHealth
from promptloop.optimizer.report import fmt


@dataclass(frozen=True)
class Readiness:
    bucket: str
    ready: bool
    streak: int
    needed: int
    pass_rate: float | None
    trials: int
    runs: tuple[RunPoint, ...]
    """The consecutive mature runs (newest last): the evidence a PR cites."""
    untested: tuple[str, ...]
    reasons: tuple[str, ...]

    def figures(self) -> str:
        return "; ".join(self.reasons)


def readiness(health: SuiteHealth, bucket: str,
              task_ids: Sequence[str] | None = None) -> Readiness:
    """Whether `bucket` of the health's suite may graduate; `task_ids` are the bucket's tasks
    in the suite now (tasks the window never tried block graduation)."""
    need = health.policy.graduation_runs
    b = next((x for x in health.buckets if x.bucket == bucket), None)
    if b is None or not b.series:
        return Readiness(bucket, False, 0, need, None, 0, (), tuple(task_ids or ()),
                         (f"no counted trials of bucket {bucket} in the lineage "
                          f"({len(health.lineage.runs)} run(s))",))
    untested = tuple(t for t in (task_ids or ()) if t not in b.task_ids)
    span = b.mature_streak if b.streak_runs is None else b.streak_runs
    runs = tuple(b.series[len(b.series) - span:]) if span else ()
    last = b.series[-1]
    reasons = [f"{b.mature_streak} consecutive mature run(s) at >= "
               f"{fmt.pct(health.policy.mature, 0)} (needs {need})",
               f"newest run {last.run_name}: {last.passed}/{last.trials} trials "
               f"({fmt.pct(last.pass_rate)})",
               f"window: {b.passed}/{b.trials} trials ({fmt.pct(b.pass_rate)}) over "
               f"{len(b.series)} run(s)"]
    if untested:
        reasons.append(f"never tried in the window: {', '.join(untested)}")
    ready = b.mature_streak >= need and not untested
    return Readiness(bucket, ready, b.mature_streak, need, b.pass_rate, b.trials, runs,
                     untested, tuple(reasons))


class GraduationProposal(BaseModel):
    """A bucket nightly may propose to graduate (never applied unattended)."""

    suite_name: str
    agent_name: str
    bucket: str
    task_ids: list[str]
    streak: int
    pass_rate: float | None
    trials: int
    runs: list[str]
    reason: str
    command: str


MANUAL = "a JSONL suite: move the bucket's lines to its regression suite by hand"
"""What stands for the command where graduate cannot move the tasks (JSONL suites)."""


def graduate_command(agent: str, bucket: str) -> str:
    """The command that graduates `bucket`, or `MANUAL` when the agent's suites are JSONL
    files (graduation moves task folders)."""
    from promptloop.optimizer.core.project import active_project

    table = active_project().agents.get(agent)
    if table is not None and all(s.endswith(".jsonl") for s in table.suites):
        return MANUAL
    return f"promptloop graduate --agent {agent} --bucket {bucket}"


def propose_graduations(health: SuiteHealth) -> list[GraduationProposal]:
    """The buckets of a capability suite's health that are ready to graduate."""
    if health.suite_kind != "capability":
        return []
    out = []
    for b in health.buckets:
        r = readiness(health, b.bucket, b.task_ids)
        if r.ready:
            out.append(GraduationProposal(
                suite_name=health.suite_name, agent_name=health.agent_name, bucket=b.bucket,
                task_ids=list(b.task_ids), streak=r.streak, pass_rate=r.pass_rate,
                trials=r.trials, runs=[p.run_name for p in r.runs], reason=r.figures(),
                command=graduate_command(health.agent_name, b.bucket)))
    return out


# --- the file plan ---------------------------------------------------------------------


@dataclass(frozen=True)
class FileMove:
    source: str
    destination: str
    kind: Literal["task", "fixture"]
    remove_source: bool


@dataclass(frozen=True)
class GraduationPlan:
    agent: str
    bucket: str
    mode: Literal["move", "copy"]
    source_root: str
    target_root: str
    task_ids: tuple[str, ...]
    moves: tuple[FileMove, ...]

    @property
    def paths(self) -> list[str]:
        """Every path the commit touches."""
        out = [m.destination for m in self.moves]
        out += [m.source for m in self.moves if m.remove_source]
        return sorted(set(out))


def suite_roots(agent: str) -> tuple[str, str]:
    """The bundled layout (tasks/<agent>/capability, tasks/<agent>/regression)."""
    return f"tasks/{agent}/capability", f"tasks/{agent}/regression"


@dataclass(frozen=True)
class DeclaredRoots:
    """The agent's capability and regression suite folders as its promptloop.toml `suites`
    declares them at a commit; `new_target`: the regression suite does not exist yet (the
    graduation creates it), `declare`: it must also be added to the agent's `suites`."""

    source: str
    target: str
    source_config: dict[str, Any]
    new_target: bool = False
    declare: bool = False


def declared_roots(agent: str, git: GitOps, sha: str) -> DeclaredRoots:
    """Where `agent`'s capability and regression suites are at `sha`, read from the suites
    its promptloop.toml table lists: the suite named `capability` (`regression`), else the
    first whose suite.json has that kind. Without a regression suite, one is planned beside
    the capability suite: `<folder>/regression` when the agent lists the folder holding its
    suites, else `<capability folder>-regression`, added to its `suites`."""
    from promptloop.optimizer.core.project import active_project

    declared = active_project().agent(agent)
    found: list[tuple[str, str, dict[str, Any], bool]] = []  # rel, name, config, listed
    for entry in declared.config.suites:
        entry = entry.strip("/")
        if entry.endswith(".jsonl"):
            continue
        files = git.list_files(sha, entry)
        if f"{entry}/suite.json" in files:
            found.append((entry, posixpath.basename(entry), _config(git, sha, entry), True))
            continue
        for path in sorted(files):
            name, _, rest = path[len(entry) + 1:].partition("/")
            if rest == "suite.json":
                found.append((f"{entry}/{name}", name, _config(git, sha, f"{entry}/{name}"),
                              False))

    def pick(kind: str) -> tuple[str, str, dict[str, Any], bool] | None:
        return (next((f for f in found if f[1] == kind), None)
                or next((f for f in found if f[2].get("kind") == kind), None))

    cap, reg = pick("capability"), pick("regression")
    if cap is None:
        listed = ", ".join(declared.config.suites)
        raise LifecycleError(
            f"{agent} has no capability suite folder at {sha[:7]}: {declared.project.where} "
            f"{declared.table} key 'suites' lists {listed} (graduation moves task folders; "
            "a JSONL suite's lines are moved by hand)")
    if reg is not None:
        return DeclaredRoots(cap[0], reg[0], cap[2])
    if cap[3]:  # the agent lists the suite folder itself
        return DeclaredRoots(cap[0], f"{cap[0]}-regression", cap[2], True, True)
    return DeclaredRoots(cap[0], f"{posixpath.dirname(cap[0])}/regression", cap[2], True)


def _config(git: GitOps, sha: str, rel: str) -> dict[str, Any]:
    try:
        data = json.loads(git.read_file(sha, f"{rel}/suite.json"))
    except (GitOpsError, ValueError) as err:
        raise LifecycleError(f"{rel}/suite.json at {sha[:7]}: no readable suite ({err})") from err
    if not isinstance(data, dict):
        raise LifecycleError(f"{rel}/suite.json at {sha[:7]}: must hold a JSON object")
    return data


def new_regression_suite(agent: str, roots: DeclaredRoots) -> dict[str, Any]:
    """The suite.json of a regression suite made by a graduation: the capability suite's
    settings (its clock above all, so the graduated tasks keep their publish times)."""
    config = {k: v for k, v in roots.source_config.items() if k not in ("name", "kind")}
    name = str(roots.source_config.get("name", agent))
    return {"name": f"{name}_regression", **config, "agent_name": agent, "kind": "regression"}


def declare_suite(text: str, agent: str, rel: str) -> str:
    """promptloop.toml's text with `rel` added to `[agents.<agent>]`'s `suites` list."""
    table = re.search(rf"^\[agents\.{re.escape(agent)}\][ \t]*$", text, re.M)
    if table is None:
        raise LifecycleError(f"promptloop.toml: no [agents.{agent}] table to add {rel} to")
    key = re.compile(r"^(\s*suites\s*=\s*\[)(.*?)(\])", re.M | re.S)
    found = key.search(text, table.end())
    if found is None:
        raise LifecycleError(f"promptloop.toml: [agents.{agent}] has no 'suites' list")
    items = found[2].rstrip()
    sep = "" if not items.strip() else (" " if items.endswith(",") else ", ")
    return text[:found.start(2)] + f"{items}{sep}{json.dumps(rel)}" + text[found.end(2):]


def task_files(files: Mapping[str, str], root: str) -> list[str]:
    """The task JSON files of a suite, as the loader finds them (not under `workspace/`)."""
    prefix = f"{root}/tasks/"
    return [p for p in files if p.startswith(prefix) and p.endswith(".json")
            and "workspace" not in p[len(prefix):].split("/")]


def bucket_of(task: Mapping[str, Any]) -> str:
    meta = task.get("metadata")
    value = meta.get("failure_bucket") if isinstance(meta, dict) else None
    return "unbucketed" if value is None else str(value)


def _under(files: Mapping[str, str], folder: str) -> dict[str, str]:
    return {p[len(folder) + 1:]: sha for p, sha in files.items() if p.startswith(folder + "/")}


def _fixture(rel: str | None, unit: str, src_root: str, dst_root: str,
             src: Mapping[str, str], dst: Mapping[str, str]) -> FileMove | None:
    """The copy of a suite-local fixture folder the task needs, if it does not move with it."""
    if not rel:
        return None
    folder = posixpath.normpath(posixpath.join(src_root, rel))
    if folder.startswith(unit + "/") or not _under(src, folder):
        return None  # moves with the task, or a shared fixture outside the suite
    target = dst_root + folder[len(src_root):]
    existing = _under(dst, target)
    if existing == _under(src, folder):
        return None
    if existing:
        raise LifecycleError(f"{target} already exists in the regression suite with other "
                             f"content than {folder}")
    return FileMove(folder, target, "fixture", False)


def _unit(path: str, all_tasks: Sequence[str]) -> str:
    """The task's folder when it holds no other task file, else the task file alone."""
    folder = posixpath.dirname(path)
    shares = any(o != path and o.startswith(folder + "/") for o in all_tasks)
    return path if shares else folder


def plan_graduation(agent: str, bucket: str, *, copy: bool, source: Mapping[str, str],
                    target: Mapping[str, str],
                    tasks: Mapping[str, Mapping[str, Any]],
                    roots: tuple[str, str] | None = None) -> GraduationPlan:
    """The files to move (or copy) from the capability suite to the regression suite.

    `source`/`target`: the files of the two suites (path -> blob id); `tasks`: every task JSON
    of both suites, by path; `roots`: the two suite folders (default: the bundled layout)."""
    src_root, dst_root = roots or suite_roots(agent)
    src_tasks = task_files(source, src_root)
    mine = [p for p in src_tasks if bucket_of(tasks[p]) == bucket]
    if not mine:
        raise UnknownNameError("bucket", bucket, [bucket_of(tasks[p]) for p in src_tasks])
    taken = {str(tasks[p].get("id")): p for p in task_files(target, dst_root)}
    moves: list[FileMove] = []
    for path in mine:
        task = tasks[path]
        tid = str(task.get("id"))
        if tid in taken:
            raise LifecycleError(f"task id '{tid}' already exists in the regression suite "
                                 f"({taken[tid]})")
        unit = _unit(path, src_tasks)
        dest = dst_root + unit[len(src_root):]
        if dest in target or _under(target, dest):
            raise LifecycleError(f"{dest} already exists in the regression suite")
        moves.append(FileMove(unit, dest, "task", not copy))
        inp = task.get("input") if isinstance(task.get("input"), dict) else {}
        assert isinstance(inp, dict)
        for key in ("fixture_dir", "base_fixture"):
            rel = inp.get(key)
            fx = _fixture(rel if isinstance(rel, str) else None, unit, src_root, dst_root,
                          source, target)
            if fx is not None and fx.destination not in {m.destination for m in moves}:
                moves.append(fx)
    return GraduationPlan(agent, bucket, "copy" if copy else "move", src_root, dst_root,
                          tuple(str(tasks[p].get("id")) for p in mine), tuple(moves))
