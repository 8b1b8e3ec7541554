"""`promptloop eval` as a Python API: load a suite, build the models, run, save the report."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from optimizer.core.events import EventSink, RunWarning, ignore
from optimizer.core.results import RunResult
from optimizer.core.suites import Suite, check_runnable, load_suite, resolve_suite_path
from optimizer.git import provenance
from optimizer.report.summary import RunSummary
from optimizer.run.models import ModelIds, ModelSet
from optimizer.run.runner import RunOptions, needs_judge
from optimizer.workflows.paired import run_and_save


@dataclass(frozen=True)
class EvalRequest:
    suite: str
    kind: str = "capability"
    buckets: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()
    models: ModelIds = field(default_factory=ModelIds)
    options: RunOptions | None = None


def load_selected(request: EvalRequest) -> Suite:
    """The requested suite (or its selected buckets and tasks), checked to be runnable."""
    suite = load_suite(resolve_suite_path(request.suite, request.kind))
    check_runnable(suite)
    if request.buckets or request.task_ids:
        suite = suite.select(
            buckets=list(request.buckets) or None, task_ids=list(request.task_ids) or None
        )
    return suite


async def evaluate(
    request: EvalRequest, state: Path, emit: EventSink | None = None
) -> tuple[RunResult, RunSummary, Path]:
    suite = load_selected(request)
    emit = emit or ignore
    for warning in suite.warnings:  # keys the original ignores, values it converts
        emit(RunWarning(message=warning))
    base = request.options or RunOptions(agent_model=request.models.agent)
    options = replace(base, state_dir=state, label=base.label or f"eval {request.suite}")
    async with ModelSet(request.models) as models:
        if options.mode != "replay":  # a bad key or model fails here, before any trial
            await models.preflight("agent", *(("judge",) if needs_judge(suite) else ()))
        saved = await run_and_save(suite, options, models, emit, provenance())
    return saved.run, saved.summary, saved.path


__all__ = ["EvalRequest", "evaluate", "load_selected"]
