"""What review may run: the commands of promptloop.toml at the base ref, never the PR's head.

A pull request is reviewed on its head's prompts and suites, but every key that decides what
code promptloop runs for it (an agent's adapter: `command`, `url`, `entry`, its `env` list;
command graders: the keys marked `runs_code` on the models of core/adapter_settings.py and
core/project.AgentConfig, `trusted_keys()`) is taken from the project file at the base ref:
a PR cannot make a reviewer's CI run its code by editing promptloop.toml. What the head
changed there is ignored and said in the comment; `--trust-head` (unsafe for PRs from forks)
uses the head's file as it is.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptloop.optimizer.core.adapter_settings import code_keys, marked
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.project import (
    AgentConfig,
    Project,
    config_name,
    packaged_project,
    parse_project,
)
from promptloop.optimizer.core.suites import Suite
from promptloop.optimizer.git import GitOps, GitOpsError
from promptloop.optimizer.git_read import tree_files


def trusted_keys() -> tuple[str, ...]:
    """The keys of an agent table that decide what runs (taken from the base unless trusted):
    every field marked `runs_code` on the agent table and on the adapter settings union."""
    own = tuple(k for k, f in AgentConfig.model_fields.items() if k != "spec" and marked(f))
    return code_keys() + own


def _value(cfg: AgentConfig, key: str) -> Any:
    if key in AgentConfig.model_fields:
        return getattr(cfg, key)
    return getattr(cfg.spec, key, None)


def _with_base_code(head: AgentConfig, base: AgentConfig) -> AgentConfig:
    """The head's table with every `runs_code` key the base's (its whole adapter when the
    head changed the kind)."""
    spec_keys = [k for k, f in type(base.spec).model_fields.items() if marked(f)]
    spec = (head.spec.model_copy(update={k: getattr(base.spec, k) for k in spec_keys})
            if type(head.spec) is type(base.spec) else base.spec)
    own = {k: getattr(base, k) for k in trusted_keys() if k in AgentConfig.model_fields}
    return head.model_copy(update={**own, "spec": spec})


@dataclass
class ReviewProjects:
    base: Project
    head: Project
    """The head's agents and suites, with the base's commands (unless trusted)."""
    ignored: list[str] = field(default_factory=list)
    """What of the head's promptloop.toml was not used, one sentence each."""


def project_at(git: GitOps, sha: str, ref: str) -> Project:
    """promptloop.toml as commit `sha` holds it. Without one (or without agents), only
    promptloop's own agents are declared there, never the checkout's: a PR that adds
    promptloop.toml must not have its own commands run as if the base declared them."""
    name = config_name(git.root)
    try:
        text = git.read_file(sha, name)
    except GitOpsError:
        return Project(None, packaged_project().agents, {}, root_dir=git.root)
    project = parse_project(text, Path(f"{name}@{ref}"))
    # the label's folder is no folder ('promptloop.toml@pr' for ref 'pr/x'): commands run
    # from the repository
    agents = project.agents or packaged_project().agents
    return Project(project.path, agents, project.tables, root_dir=git.root)


def base_tree(git: GitOps, sha: str, cache: Path) -> Path:
    """The files of commit `sha`, exported once into `cache/<sha>/tree`: where the agents'
    commands run during a review, so the PR's own agent code never runs (a checkout of the
    head, as CI makes one, holds the head's scripts)."""
    dest = cache / sha / "tree"
    done = dest / ".promptloop-export"
    if done.is_file():
        return dest
    tmp = dest.with_name(f"tree.{os.getpid()}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    files = tree_files(git, sha, "") or {}
    for rel, data in files.items():
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if rel.endswith((".sh", ".py", ".js", ".mjs")) or data.startswith(b"#!"):
            target.chmod(0o755)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / ".promptloop-export").write_text(sha, encoding="utf-8")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def review_projects(git: GitOps, base: tuple[str, str], head: tuple[str, str],
                    trust_head: bool = False, cache: Path | None = None) -> ReviewProjects:
    """The projects of a review of `head` against `base` ((ref, sha) each). Unless trusted,
    the agents' commands are the base's and run from the base commit's files (`cache`: where
    that commit is exported)."""
    base_p = project_at(git, base[1], base[0])
    head_p = project_at(git, head[1], head[0])
    if trust_head:
        return ReviewProjects(base_p, head_p)
    agents: dict[str, AgentConfig] = {}
    ignored: list[str] = []
    for name, cfg in head_p.agents.items():
        known = base_p.agents.get(name)
        if known is None:
            ignored.append(f"agent {name!r} is not declared at the base ({base[0]}): its "
                           "adapter was ignored and it is not reviewed (--trust-head runs it)")
            continue
        changed = [k for k in trusted_keys() if _value(cfg, k) != _value(known, k)]
        if changed:
            ignored.append(f"the head's {', '.join(changed)} of [agents.{name}] "
                           f"{'was' if len(changed) == 1 else 'were'} ignored: the base's "
                           "are used (--trust-head uses the head's)")
        agents[name] = _with_base_code(cfg, known)
    root = base_tree(git, base[1], cache) if cache is not None else head_p.root_dir
    return ReviewProjects(base_p, Project(head_p.path, agents, head_p.tables, root), ignored)


def without_undeclared_graders(suites: list[Suite], project: Project, agent: str
                               ) -> tuple[list[Suite], list[str]]:
    """The suites with every `command` grader the base does not declare taken out of their
    tasks (never run), and one note per grader taken out."""
    named = {str(g.config.get("grader")) for s in suites for t in s.tasks
             for g in t.spec.graders if g.name == "command"}
    declared = set(project.agents[agent].graders) if agent in project.agents else set()
    ignored = named - declared
    if not ignored:
        return suites, []
    notes: list[str] = []
    out: list[Suite] = []
    for suite in suites:
        tasks = []
        for task in suite.tasks:
            kept = [g for g in task.spec.graders
                    if not (g.name == "command" and str(g.config.get("grader")) in ignored)]
            if len(kept) != len(task.spec.graders):
                dropped = sorted({str(g.config.get("grader")) for g in task.spec.graders
                                  if g not in kept})
                notes.append(f"task {task.id} names command grader(s) {', '.join(dropped)} "
                             "that the base does not declare: ignored (not run)")
            if kept:
                tasks.append(dataclasses.replace(
                    task, spec=task.spec.model_copy(update={"graders": kept})))
        out.append(dataclasses.replace(suite, tasks=tuple(tasks)))
    return out, notes


__all__ = ["ConfigError", "ReviewProjects", "base_tree", "project_at",
           "review_projects", "trusted_keys", "without_undeclared_graders"]
