"""`promptloop eval` as a Python API: load a suite, build the models, run, save the report.

The prompt and the suite come from the repository holding the current folder, in its working
tree or at `--ref` (`workflows/sources.py`), and the output says which; a prompt or suite the
repository lacks is an error (only outside any repository is promptloop's bundled copy used).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.events import EventSink, Phase, RunWarning, ignore
from promptloop.optimizer.core.names import agent_names, did_you_mean
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.core.suites import (
    Suite,
    check_runnable,
    load_suite,
    resolve_suite_path,
    wrong_agent,
)
from promptloop.optimizer.git import provenance
from promptloop.optimizer.report.summary import RunSummary
from promptloop.optimizer.run.models import ModelIds, ModelSet
from promptloop.optimizer.run.runner import RunOptions, needs_judge
from promptloop.optimizer.workflows.context import check_command
from promptloop.optimizer.workflows.estimate import estimate, suite_trials
from promptloop.optimizer.workflows.paired import run_and_save
from promptloop.optimizer.workflows.sources import RepoSource


@dataclass(frozen=True)
class EvalRequest:
    suite: str
    kind: str = "capability"
    buckets: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()
    models: ModelIds = field(default_factory=ModelIds)
    options: RunOptions | None = None
    ref: str | None = None
    """Read the prompt and the suite at this git ref; None: the working tree."""
    repo: Path | None = None
    """A folder inside the repository to read from (default: the current folder)."""
    prompt: str | None = None
    """The agent's prompt target to evaluate (default: its first)."""


def _suite_folder(request: EvalRequest, source: RepoSource) -> Path:
    """The folder of the requested suite as `source` sees it."""
    if request.suite in agent_names():
        found = source.suite(request.suite, request.kind)
        if found is None or found.folder is None:
            raise ConfigError(source.missing_suite(request.suite, request.kind))
        return found.folder
    path = resolve_suite_path(request.suite, request.kind).resolve()
    if source.root is not None and path.is_relative_to(source.root.resolve()):
        found = source.suite_at(path.relative_to(source.root.resolve()).as_posix())
        if found is not None and found.folder is not None:
            return found.folder
    return path


def load_selected(request: EvalRequest, source: RepoSource) -> Suite:
    """The requested suite (or its selected buckets and tasks), checked to be runnable."""
    folder = _suite_folder(request, source)
    suite = load_suite(folder, request.suite if request.suite in agent_names() else None)
    if request.suite in agent_names() and suite.agent_name != request.suite:
        raise ConfigError(wrong_agent(suite, request.suite))
    check_runnable(suite)
    _check_names(request, suite)
    if request.buckets or request.task_ids:
        suite = suite.select(
            buckets=list(request.buckets) or None, task_ids=list(request.task_ids) or None
        )
    return suite


def _check_names(request: EvalRequest, suite: Suite) -> None:
    """`--bucket` and `--task` name what the suite holds: else the error the other commands
    give (`unknown bucket 'x'. Known buckets: ...`), with a did-you-mean."""
    buckets = sorted({t.bucket for t in suite.tasks})
    for b in request.buckets:
        if b not in buckets:
            raise ConfigError(f"{suite.name}: unknown bucket '{b}'.{did_you_mean(b, buckets)} "
                              f"Known buckets: {', '.join(buckets)}")
    ids = [t.id for t in suite.tasks]
    for t in request.task_ids:
        if t not in ids:
            shown = ", ".join(ids[:12]) + (f" and {len(ids) - 12} more" if len(ids) > 12 else "")
            raise ConfigError(f"{suite.name}: unknown task '{t}'.{did_you_mean(t, ids)} "
                              f"Tasks: {shown}")


async def evaluate(
    request: EvalRequest, state: Path, emit: EventSink | None = None
) -> tuple[RunResult, RunSummary, Path]:
    """Run the suite; the run's provenance lists where its prompt and tasks were read."""
    with RepoSource.find(request.ref, state, request.repo) as source:
        suite = load_selected(request, source)
        if request.ref is None:
            check_command(suite.agent_name)
        prompt = source.prompt(suite.agent_name, request.prompt)
    sources = [s.line() for s in source.served]
    emit = emit or ignore
    for line in sources:
        emit(Phase(message=line))
    for warning in suite.warnings:  # keys the original ignores, values it converts
        emit(RunWarning(message=warning))
    prov = provenance(source.root).model_copy(update={"role": "eval"})
    if source.sha is not None:
        prov = prov.model_copy(update={"git_commit": source.sha, "git_dirty": False,
                                       "branch": request.ref})
    base = request.options or RunOptions(agent_model=request.models.agent)
    options = replace(base, state_dir=state, label=base.label or f"eval {request.suite}",
                      prompt_text=prompt.text if base.prompt_text is None else base.prompt_text,
                      prompt_source=prompt)
    emit(estimate(f"eval {request.suite}", request.models.agent, state,
                  [(suite, suite_trials(suite, base.trials))]))
    async with ModelSet(request.models) as models:
        if options.mode != "replay":  # a bad key or model fails here, before any trial
            await models.preflight("agent", *(("judge",) if needs_judge(suite) else ()))
        saved = await run_and_save(suite, options, models, emit,
                                   prov.model_copy(update={"sources": sources}))
    return saved.run, saved.summary, saved.path


__all__ = ["EvalRequest", "evaluate", "load_selected"]
