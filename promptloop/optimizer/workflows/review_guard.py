"""Review's first stage: the head's prompt sources pass the region guard optimize uses.

Before any trial, every prompt target of a reviewed agent that is a region of a source file (a
string literal, the lines between two markers) is read at both refs and judged by
`propose.region_guard.check_head_file`: a head whose region closes the literal early, gains an
interpolation or a stray `$` (Dart), cannot be found any more, or whose edit reaches outside
the region fails it. Such an agent gets the verdict "broken" (`AgentReview.head_breaks` names
the file, the region and the line) and no trial is run for it. A head that changes only code
around an unchanged region passes, with a note saying the PR changes code, not the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from promptloop.optimizer.core.events import EventSink, Phase, RunWarning
from promptloop.optimizer.core.project import Agent, Project
from promptloop.optimizer.core.prompt_target import region_spec
from promptloop.optimizer.git import GitOps, GitOpsError
from promptloop.optimizer.propose.region_guard import check_head_file
from promptloop.optimizer.workflows.review_models import AgentReview, HeadBreak


@dataclass
class HeadGuard:
    """What the guard found for the reviewed agents."""

    broken: dict[str, list[HeadBreak]] = field(default_factory=dict)
    """Agent -> its prompt targets whose head fails the guard (the agent is not evaluated)."""
    notes: list[str] = field(default_factory=list)
    """Source files changed outside an unchanged region: code, not a prompt change."""

    @property
    def paths(self) -> list[str]:
        return sorted({b.path for breaks in self.broken.values() for b in breaks})

    def reviews(self) -> list[AgentReview]:
        """One "broken" AgentReview per failing agent, no trial run."""
        return [broken_review(agent, breaks) for agent, breaks in self.broken.items()]


def guard_agent(git: GitOps, agent: str, base: Project, head: Project, base_sha: str,
                head_sha: str, guard: HeadGuard) -> None:
    """Judge each region target of `agent` (as the head's promptloop.toml declares it, read
    against the base's declaration of the same name) into `guard`."""
    head_agent = head.agent(agent)
    base_agent: Agent = base.agent(agent) if agent in base.agents else head_agent
    for target in head_agent.targets():
        if target.whole_file:
            continue
        base_target = next((t for t in base_agent.targets() if t.name == target.name), target)
        try:
            base_file = git.read_file(base_sha, base_target.path)
            head_file = git.read_file(head_sha, target.path)
        except GitOpsError:
            continue  # missing at a ref: the review says so when it compares the texts
        check = check_head_file(region_spec(base_target), base_file, region_spec(target),
                                head_file)
        if check is None or check.code == "ok":
            continue
        if check.code == "code_changed":
            guard.notes.append(f"{agent}: {check.reason}")
            continue
        assert check.code in ("breaks_literal", "outside_region")
        guard.broken.setdefault(agent, []).append(HeadBreak(
            path=target.path, region=check.region, line=check.line, code=check.code,
            reason=check.reason))


def guard_heads(git: GitOps, agents: list[str], base: Project, head: Project, base_sha: str,
                head_sha: str, emit: EventSink) -> HeadGuard:
    """The guard for every agent of `agents` that the head's project declares; a failing
    agent is announced as a phase, a note as a warning."""
    guard = HeadGuard()
    for agent in agents:
        if agent in head.agents:
            guard_agent(git, agent, base, head, base_sha, head_sha, guard)
    for agent, breaks in guard.broken.items():  # the reasons follow in the review's result
        where = ", ".join(f"{b.path}:{b.line}" if b.line else b.path for b in breaks)
        emit(Phase(message=f"{agent}: the head breaks {where}; no trial is run for it"))
    for note in guard.notes:
        emit(RunWarning(message=note))
    return guard


def broken_review(agent: str, breaks: list[HeadBreak]) -> AgentReview:
    return AgentReview(
        agent=agent, prompt_path=breaks[0].path, decision="broken",
        reasons=[f"{b.where}: {b.reason}" for b in breaks], regressed=[], improved=[],
        comparisons=[], base_runs=[], head_runs=[], base_trials=0, base_cached_trials=0,
        head_trials=0, head_cached_trials=0, head_breaks=breaks)


def broken_message(guard: HeadGuard) -> str:
    """The review's one-line message when some agent's head is broken."""
    where = "; ".join(f"{b.where}, {b.region}" for breaks in guard.broken.values()
                      for b in breaks)
    return (f"broken: the head breaks the prompt source of {', '.join(guard.broken)} (no "
            f"trial was run): {where}")


__all__ = ["HeadGuard", "broken_message", "broken_review", "guard_agent", "guard_heads"]
