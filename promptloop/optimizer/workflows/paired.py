"""An agent's suites evaluated under two prompts: load them, compare per bucket, confirm suspects.

Shared by `optimize` (baseline vs candidate) and `review` (base ref vs head ref), so both gate
prompt changes the same way. Bucket names of non-capability suites are qualified with the
suite kind (`regression/plain`) so buckets of different suites never merge.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from promptloop.optimizer.core.buckets import BucketId, bucket_prefix
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.events import ConfirmStarted, EventSink
from promptloop.optimizer.core.results import Provenance, RunResult
from promptloop.optimizer.core.suites import Suite, check_runnable, load_suite, wrong_agent
from promptloop.optimizer.gate.compare import BucketComparison, GatePolicy, compare_runs
from promptloop.optimizer.gate.pairing import merge_runs
from promptloop.optimizer.report.store import default_store_dir, save_run
from promptloop.optimizer.report.summary import RunSummary, escaped, summarize
from promptloop.optimizer.run.models import ModelSet
from promptloop.optimizer.run.runner import (
    AllTrialsErroredError,
    RunOptions,
    needs_judge,
    run_suite,
)
from promptloop.optimizer.workflows.sources import RepoSource

RunFn = Callable[[Suite, str, str, dict[str, list[int]] | None], Awaitable[RunResult]]
"""(suite, prompt text, label, trial indices per task or None) -> the run."""


def agent_suites(agent: str, kinds: Sequence[str], source: RepoSource, *,
                 command_graders: bool = True) -> list[Suite]:
    """The agent's suites of `kinds` (tasks/<agent>/<kind>) as `source` sees them: at its git
    ref or in its working tree (the bundled ones only outside any repository).

    An unknown kind fails with the list of kinds that exist (a typo in `--suites` must never
    silently drop the regression check)."""
    out: list[Suite] = []
    for kind in kinds:
        found = source.suite(agent, kind)
        if (found is None or found.folder is None) and kind == "regression" and out:
            continue  # an agent without a regression suite yet: its capability suite gates
        if found is None or found.folder is None:
            raise ConfigError(source.missing_suite(agent, kind))
        suite = load_suite(found.folder, agent)
        if suite.agent_name != agent:
            raise ConfigError(wrong_agent(suite, agent))
        check_runnable(suite, command_graders=command_graders)
        out.append(suite)
    if not out:
        raise ConfigError(f"no suites found for {agent}")
    return out


def compare_suite_runs(
    base: Sequence[RunResult], cand: Sequence[RunResult], policy: GatePolicy
) -> list[BucketComparison]:
    """Paired per-bucket comparisons of runs of the same suites, in order."""
    return [comp for b, c in zip(base, cand, strict=True)
            for comp in compare_runs(b, c, policy, prefix=bucket_prefix(b.suite_kind))]


async def confirm_suspects(
    suites: Sequence[Suite],
    base: Sequence[RunResult],
    cand: Sequence[RunResult],
    prompts: tuple[str, str],
    suspected: Sequence[str],
    *,
    extra_trials: int,
    run: RunFn,
    emit: EventSink | None = None,
    labels: tuple[str, str] = ("confirm base", "confirm candidate"),
) -> tuple[list[RunResult], list[RunResult]]:
    """Re-run the tasks of suspected regressions with `extra_trials` more trials per task on
    both sides (new trial indices, so the pairs stay aligned) and pool them into the runs."""
    new_base, new_cand = list(base), list(cand)
    if not extra_trials:
        return new_base, new_cand
    for i, suite in enumerate(suites):
        ids = [BucketId.parse(s) for s in suspected]
        buckets = {b.name for b in ids if b.kind == suite.config.kind}
        tasks = [t for t in suite.tasks if t.bucket in buckets]
        if not tasks:
            continue
        indices = {}
        for t in tasks:
            n = max((tr.trial_index for tr in base[i].trials_of(t.id)), default=-1) + 1
            indices[t.id] = list(range(n, n + extra_trials))
        sub = suite.select(task_ids=[t.id for t in tasks])
        if emit is not None:
            emit(ConfirmStarted(buckets=sorted(buckets), tasks=len(tasks)))
        extra_b = await run(sub, prompts[0], labels[0], indices)
        extra_c = await run(sub, prompts[1], labels[1], indices)
        new_base[i] = merge_runs(base[i], extra_b)
        new_cand[i] = merge_runs(cand[i], extra_c)
    return new_base, new_cand


@dataclass(frozen=True)
class SavedRun:
    """A finished, saved run and its summary."""

    run: RunResult
    summary: RunSummary
    path: Path


async def run_and_save(
    suite: Suite,
    options: RunOptions,
    models: ModelSet,
    emit: EventSink | None,
    provenance: Provenance | None,
    *,
    writes_decide: bool = False,
) -> SavedRun:
    """Run a suite and save its report. The one place eval, optimize and review run suites.

    The agent and the judge (only for suites with judge graders) come from `models`, and their
    ids go into the options; replay mode calls no model. A run whose every trial errored
    raises: it is an infrastructure failure, not a 0% rate; except, with `writes_decide` (a
    candidate's or a review head's runs), when some of its trials errored because they wrote
    outside their workspace: the prompt under test drove that, and the caller's gate turns it
    into a rejection or a regression, never an infrastructure failure."""
    replay = options.mode == "replay"
    agent = None if replay else models.agent
    judge = models.judge if agent is not None and needs_judge(suite) else None
    options = replace(
        options,
        agent_model=models.ids.agent,
        judge_model=models.ids.judge_id if judge is not None or replay else None,
    )
    run = await run_suite(suite, options, agent, judge, emit, provenance)
    summary = summarize(run)
    path = save_run(run, default_store_dir(options.state_dir), summary=summary)
    if run.all_errored and not (writes_decide and any(map(escaped, run.trials))):
        first = next(iter(summary.infra_errors), "unknown error")
        raise AllTrialsErroredError(
            f"every trial of {run.run_name} errored ({first}); report: {path}"
        )
    return SavedRun(run, summary, path)
