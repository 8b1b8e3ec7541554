"""What a night learns about its suites beyond tonight's patches: suite health (slope,
maturity, stragglers, flaky tasks) and the buckets ready to graduate into the regression suite.

Nothing here changes a suite: graduations are proposed with the command that applies them.
Suites without a stored lineage yet are skipped silently (a first night has none).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from promptloop.optimizer.lifecycle.errors import NoLineageError
from promptloop.optimizer.lifecycle.graduate_git import graduation_proposals
from promptloop.optimizer.lifecycle.graduation import GraduationProposal
from promptloop.optimizer.lifecycle.health_io import health_markdown, refresh_health
from promptloop.optimizer.report.store import default_store_dir, list_runs


class NightLifecycle(BaseModel):
    """The lifecycle part of a night's summary."""

    health_markdown: str = ""
    """One 'Suite health' section per suite with a lineage (Markdown)."""
    health_files: list[str] = Field(default_factory=list)
    graduations: list[GraduationProposal] = Field(default_factory=list)


def suite_names(state: Path, agents: Iterable[str]) -> list[str]:
    """The stored suite names of `agents` (capability and regression), oldest first."""
    wanted = set(agents)
    names: list[str] = []
    for entry in list_runs(default_store_dir(state)):
        if entry.agent_name in wanted and entry.suite_name not in names:
            names.append(entry.suite_name)
    return names


def night_lifecycle(state: Path, repo: Path, agents: Iterable[str]) -> NightLifecycle:
    """Refresh and save every suite's health, and list the graduations to propose."""
    agents = list(agents)
    out = NightLifecycle()
    sections: list[str] = []
    for name in suite_names(state, agents):
        try:
            health, path = refresh_health(state, name, repo=repo)
        except NoLineageError:  # none of its runs belongs to the prompt's lineage yet
            continue
        sections.append(health_markdown(health, heading_level=3))
        out.health_files.append(str(path))
    out.health_markdown = "\n".join(sections)
    for agent in agents:
        out.graduations += graduation_proposals(state, agent, repo=repo)
    return out


__all__ = ["NightLifecycle", "night_lifecycle", "suite_names"]
