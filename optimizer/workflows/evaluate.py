"""`promptloop eval` as a Python API: load a suite, build the models, run, save the report."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from agents.llm.types import ModelClient
from optimizer.core.config import default_judge, make_client, provenance
from optimizer.core.results import RunResult
from optimizer.core.suites import Suite, load_suite, resolve_suite_path
from optimizer.report.summary import RunSummary
from optimizer.run.runner import ProgressFn, RunOptions, needs_judge
from optimizer.workflows.paired import run_and_save


@dataclass(frozen=True)
class Models:
    """Model ids of one evaluation (+ where an OpenAI-compatible server lives)."""

    agent: str
    judge: str | None = None
    base_url: str | None = None

    @property
    def judge_id(self) -> str:
        return self.judge or default_judge(self.agent)


@asynccontextmanager
async def open_clients(
    models: Models, suite: Suite | None, mode: str
) -> AsyncIterator[tuple[ModelClient | None, ModelClient | None]]:
    """Agent and judge clients (None in replay mode / when no judge grader is used)."""
    if mode == "replay":
        yield None, None
        return
    agent = make_client(models.agent, models.base_url)
    judge: ModelClient | None = None
    try:
        if suite is None or needs_judge(suite):
            judge = (
                agent
                if models.judge_id == models.agent
                else make_client(models.judge_id, models.base_url)
            )
        yield agent, judge
    finally:
        await agent.aclose()
        if judge is not None and judge is not agent:
            await judge.aclose()


@dataclass(frozen=True)
class EvalRequest:
    suite: str
    kind: str = "capability"
    buckets: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()
    models: Models = field(default_factory=lambda: Models(agent="local:smollm2"))
    options: RunOptions | None = None


def load_selected(request: EvalRequest) -> Suite:
    suite = load_suite(resolve_suite_path(request.suite, request.kind))
    if request.buckets or request.task_ids:
        suite = suite.select(
            buckets=list(request.buckets) or None, task_ids=list(request.task_ids) or None
        )
    return suite


async def evaluate(
    request: EvalRequest, state: Path, progress: ProgressFn | None = None
) -> tuple[RunResult, RunSummary, Path]:
    suite = load_selected(request)
    base = request.options or RunOptions(agent_model=request.models.agent)
    async with open_clients(request.models, suite, base.mode) as (agent, judge):
        options = replace(
            base,
            agent_model=request.models.agent,
            judge_model=request.models.judge_id if (judge or base.mode == "replay") else None,
            state_dir=state,
        )
        saved = await run_and_save(suite, options, agent, judge, progress, provenance())
    return saved.run, saved.summary, saved.path


__all__ = ["EvalRequest", "Models", "evaluate", "load_selected", "open_clients"]
