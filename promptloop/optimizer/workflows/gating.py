"""Drive the sequential gate with real suite runs: the I/O half of `optimizer.gate.sequential`.

The gate says which trials to run (the candidate's trial indices per task, and the baseline's
past its cached trials); this module runs them through the caller's `run` function, pools them
into the baseline and candidate runs, turns them with the lineage history into one record per
task, and steps the gate until it returns a verdict. It is the only driver: `optimize` and
`review` pass the runner (the trial cache serves anything already paid for), and the
calibration benchmark (bench/gate_calibration.py) passes the simulated world of
`promptloop.optimizer.sim.world`: only the trial runner differs. `run_harm` is review's driver: the
same harm detection on every bucket, with no target (`promptloop.optimizer.gate.review_harm`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from promptloop.optimizer.core.buckets import bucket_prefix
from promptloop.optimizer.core.isolation import OUTSIDE
from promptloop.optimizer.core.results import (
    RunResult,
    TrialResult,
    pairing_label,
    pairing_text,
    seeded_pairing,
)
from promptloop.optimizer.core.suites import Suite
from promptloop.optimizer.gate.compare import BucketComparison, GatePolicy
from promptloop.optimizer.gate.pairing import Pair, merge_runs, pair_runs
from promptloop.optimizer.gate.review_harm import HarmOnlyGate, HarmResult
from promptloop.optimizer.gate.sequential import SequentialGate, TaskKey, TrialAsk
from promptloop.optimizer.gate.tasks import TaskRecord
from promptloop.optimizer.gate.verdict import Verdict
from promptloop.optimizer.lifecycle.lineage import prompt_hash, trial_key
from promptloop.optimizer.report.store import ReportError, list_runs, load_run
from promptloop.optimizer.report.summary import escaped, wrote_outside
from promptloop.optimizer.workflows.paired import RunFn, compare_suite_runs

StageFn = Callable[[TrialAsk], None]


@dataclass(frozen=True)
class GateRun:
    """The verdict with the runs it was decided on (baseline pooled with its extensions)."""

    verdict: Verdict
    comparisons: list[BucketComparison]
    base_runs: list[RunResult]
    cand_runs: list[RunResult]
    trials_run: int
    """Trials actually run for the decision (served-from-cache trials excluded)."""
    seeded: bool = False
    """Every paired trial was sent the same seed on both sides (`results.seeded_pairing`)."""


def bucket_tasks(suites: Sequence[Suite]) -> tuple[dict[str, list[str]], dict[TaskKey, int]]:
    """Qualified bucket -> task ids, and each (bucket, task id) -> the index of its suite."""
    tasks: dict[str, list[str]] = {}
    where: dict[TaskKey, int] = {}
    for i, suite in enumerate(suites):
        prefix = bucket_prefix(suite.config.kind)
        for t in suite.tasks:
            tasks.setdefault(prefix + t.bucket, []).append(t.id)
            where[(prefix + t.bucket, t.id)] = i
    return tasks, where


HISTORY_WINDOW = 40
"""Runs of a prompt's lineage the gate reads per suite: the newest 40 (issue 31). Beyond 40
trials a task's record barely shortens its clean path (against a drop of half a passing
task's rate, a 40/40 record needs as many clean trials as a 12/12 one: 4 at noise 0, 5 at
0.1), and the pooled test's drift estimate is sharp from ~40 tasks' first trials; older runs
only reach further back into a provider's model updates, which the record would then carry
as the task's rate."""


def lineage_history(store_dir: Path, base_runs: Sequence[RunResult],
                    window: int | None = HISTORY_WINDOW) -> list[RunResult]:
    """Earlier live runs of each baseline's suite with the same agent model and the same
    prompt (its lineage): the newest `window` per suite (`HISTORY_WINDOW`; None: every one).
    Runs that cannot be read are skipped; the baseline's own trials are left out
    by `history_records`."""
    try:
        entries = list_runs(store_dir)
    except (OSError, ValueError, ReportError):
        return []
    out: list[RunResult] = []
    own = {r.run_name for r in base_runs}
    for base in base_runs:
        wanted = prompt_hash(base)
        if wanted is None:
            continue
        same = sorted((e for e in entries if e.suite_name == base.suite_name
                       and e.prompt_hash == wanted and e.run_name not in own
                       and e.agent_model == base.provenance.agent_model),
                      key=lambda e: e.started_at, reverse=True)[:window]  # None: all
        for entry in same:
            try:
                run = load_run(store_dir, entry.run_name)
            except (OSError, ValueError, ReportError):
                continue
            if run.provenance.mode != "replay":
                out.append(run)
    return out


TrialId = tuple[str, int, str]
"""(task id, trial index, start time): one trial, whichever run holds it (a cached copy too)."""
Past = dict[TaskKey, dict[TrialId, tuple[float, bool, bool]]]
"""(qualified bucket, task) -> each history trial (by its id) -> (score, passed, whether a
grader scored it between 0 and 1: `graded_trial`)."""


def history_records(history: Sequence[RunResult], base_runs: Sequence[RunResult]) -> Past:
    """(qualified bucket, task) -> every counted trial of the lineage history that is not one
    of the baseline's own trials, by trial id (each trial once)."""
    seen = {trial_key(t) for r in base_runs for t in r.trials}
    out: Past = {}
    for run in history:
        prefix = bucket_prefix(run.suite_kind)
        for t in run.trials:
            key = trial_key(t)
            if key in seen or not t.counts:
                continue
            seen.add(key)
            bucket = prefix + run.task_buckets.get(t.task_id, t.bucket)
            out.setdefault((bucket, t.task_id), {})[key] = (t.score, t.passed, graded_trial(t))
    return out


def graded_trial(t: TrialResult) -> bool:
    """Whether a grader gave this trial a score between 0 and 1 (a judge, partial credit):
    its task is decided on its scores. A trial's own score is the mean over its graders, so
    two pass/fail graders that split read 0.5 there: the task is still a pass/fail one, and
    its pass rate is what harm detection tests (issue 31, a team's review: a second grader
    had turned a pass/fail task's drop into a mean-score test that cleared it)."""
    return any(s.value is not None and 0.0 < s.value < 1.0 for s in t.scores)


def observations(base: Sequence[RunResult], cand: Sequence[RunResult | None],
                 history: Mapping[TaskKey, Mapping[TrialId, tuple[float, bool, bool]]]
                 ) -> dict[TaskKey, TaskRecord]:
    """One record per task: history, baseline and candidate trials (counted ones only), each
    trial once: a fresh baseline trial the cache served again (a second review, a resumed
    session) is the history's trial, so it leaves the history when it joins the baseline."""
    again = {trial_key(t) for r in base for t in r.trials}

    def past(key: TaskKey) -> list[tuple[float, bool]]:
        return [(s, ok) for tid, (s, ok, _) in history.get(key, {}).items() if tid not in again]

    def graded_past(key: TaskKey) -> bool:
        return any(g for tid, (_, _, g) in history.get(key, {}).items() if tid not in again)

    out: dict[TaskKey, TaskRecord] = {}
    for runs, side in ((base, "base"), (cand, "cand")):
        for r in runs:
            if r is None:
                continue
            prefix = bucket_prefix(r.suite_kind)
            for t in r.trials:
                if not t.counts:
                    continue
                key = (prefix + r.task_buckets.get(t.task_id, t.bucket), t.task_id)
                rec = out.get(key)
                if rec is None:
                    rec = out[key] = TaskRecord(key, past(key), scored=graded_past(key))
                getattr(rec, side)[t.trial_index] = (t.score, t.passed)
                rec.scored = rec.scored or graded_trial(t)
    for key in history:
        out.setdefault(key, TaskRecord(key, past(key), scored=graded_past(key)))
    return out


def paired(base: Sequence[RunResult], cand: Sequence[RunResult | None]) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for b, c in zip(base, cand, strict=True):
        if c is None:
            continue
        prefix = bucket_prefix(b.suite_kind)
        for bucket, pairs in pair_runs(b, c).items():
            out[prefix + bucket] = list(pairs)
    return out


def comparisons(base: Sequence[RunResult], cand: Sequence[RunResult | None],
                policy: GatePolicy) -> list[BucketComparison]:
    """Per-bucket comparisons (with the display interval) of every suite the candidate ran."""
    ran = [(b, c) for b, c in zip(base, cand, strict=True) if c is not None]
    return compare_suite_runs([b for b, _ in ran], [c for _, c in ran], policy)


async def run_gate(
    suites: Sequence[Suite],
    base_runs: Sequence[RunResult],
    prompts: tuple[str, str],
    target: str,
    policy: GatePolicy,
    run: RunFn,
    *,
    heldout: frozenset[str] = frozenset(),
    on_stage: StageFn | None = None,
    history: Sequence[RunResult] = (),
    display: bool = True,
) -> GateRun:
    """Evaluate the candidate prompt `prompts[1]` against the base `prompts[0]` sequentially.

    `history`: earlier runs of the base prompt's lineage (each task's measured flakiness).
    `display=False` skips the per-bucket comparison tables (display only, never part of the
    decision; the calibration benchmark runs thousands of gates)."""
    tasks, where = bucket_tasks(suites)
    past = history_records(history, base_runs)
    defaults = {key: base_runs[i].trials_per_task.get(key[1], 1) for key, i in where.items()}
    gate = SequentialGate(policy, target, tasks, defaults, heldout)
    base = list(base_runs)
    cand: list[RunResult | None] = [None] * len(suites)
    spent = 0
    step: TrialAsk | Verdict = gate.first()
    while isinstance(step, TrialAsk):
        if on_stage is not None:
            on_stage(step)
        for i, suite in enumerate(suites):
            extend = {t: ids for (b, t), ids in step.base.items() if where[(b, t)] == i}
            if extend:
                extra = await run(suite.select(task_ids=list(extend)), prompts[0],
                                  "gate base", extend)
                base[i] = merge_runs(base[i], extra)
                spent += sum(not t.cached for t in extra.trials)
            indices = {t: ids for (b, t), ids in step.indices.items() if where[(b, t)] == i}
            if indices:
                got = await run(suite.select(task_ids=list(indices)), prompts[1],
                                f"candidate ({step.stage})", indices)
                before = cand[i]
                cand[i] = got if before is None else merge_runs(before, got)
                spent += sum(not t.cached for t in got.trials)
        step = gate.step(observations(base, cand, past))
    ran = [i for i, c in enumerate(cand) if c is not None]
    base_ran, cand_ran = [base[i] for i in ran], [c for c in cand if c is not None]
    seeded = seeded_pairing(base_ran, cand_ran)
    verdict = step.model_copy(update={
        "model_trials": spent,
        "reasons": [*step.reasons, pairing_text(seeded)],
        "test": "; ".join(x for x in (step.test, pairing_label(seeded)) if x),
    })
    verdict = refuse_outside_writes(verdict, cand_ran)
    tables = comparisons(base, cand, policy) if display else []
    return GateRun(verdict, tables, base_ran, cand_ran, spent, seeded)


def outside_writes(runs: Sequence[RunResult]) -> list[TrialResult]:
    """The trials of `runs` errored because they wrote outside their workspace
    (optimizer/adapters/escape.py), or tried to and their sandbox refused it."""
    return [t for r in runs for t in r.trials if escaped(t)]


def refuse_outside_writes(verdict: Verdict, cand_runs: Sequence[RunResult]) -> Verdict:
    """`verdict`, or a rejection when a trial of the candidate wrote outside its workspace.
    Such a trial is errored (no evidence about the prompt's quality, so it would otherwise
    only drop out of the comparison): the prompt drove the agent to touch what it must not,
    and no score makes up for that."""
    wrote = outside_writes(cand_runs)
    if not wrote:
        return verdict
    first = wrote[0].infra_error or wrote[0].failure_reason or OUTSIDE
    how = (f"{OUTSIDE} (the write undone where possible" if any(map(wrote_outside, wrote))
           else "tried to write outside its workspace (refused by its sandbox")
    reason = (f"rejected: {len(wrote)} candidate trial(s) {how}; whatever the scores say), "
              f"first: {first}")
    return verdict.model_copy(update={
        "decision": "reject", "reasons": [reason, *verdict.reasons],
        "stopped": f"{OUTSIDE} ({len(wrote)} trial(s))"})


def _next_index(run: RunResult, task_id: str) -> int:
    """The first trial index of `task_id` not yet in `run`."""
    return max((t.trial_index + 1 for t in run.trials if t.task_id == task_id), default=0)


@dataclass(frozen=True)
class HarmRun:
    """Review's harm detection with the runs it was decided on (each side pooled with the
    trials harm detection added)."""

    result: HarmResult
    base_runs: list[RunResult]
    head_runs: list[RunResult]
    trials_run: int
    """Trials run for harm detection (served-from-cache trials excluded)."""


async def run_harm(
    suites: Sequence[Suite],
    base_runs: Sequence[RunResult],
    head_runs: Sequence[RunResult],
    prompts: tuple[str, str],
    policy: GatePolicy,
    run: RunFn,
    *,
    history: Sequence[RunResult] = (),
    on_stage: StageFn | None = None,
) -> HarmRun:
    """Harm detection on every bucket of `suites` (no target), after both prompts ran:
    `promptloop.optimizer.gate.review_harm.HarmOnlyGate` says which trials to add, this runs them
    (base side with `prompts[0]`, head side with `prompts[1]`) until every bucket has its
    statement. `history`: earlier runs of the base prompt's lineage."""
    tasks, where = bucket_tasks(suites)
    past = history_records(history, base_runs)
    ran = {key: (_next_index(base_runs[i], key[1]), _next_index(head_runs[i], key[1]))
           for key, i in where.items()}
    gate = HarmOnlyGate(policy, tasks, ran)
    base, head = list(base_runs), list(head_runs)
    spent = 0
    step: TrialAsk | HarmResult = gate.step(observations(base, head, past))
    while isinstance(step, TrialAsk):
        if on_stage is not None:
            on_stage(step)
        for i, suite in enumerate(suites):
            for side, wanted, prompt in (("base", step.base, prompts[0]),
                                         ("head", step.indices, prompts[1])):
                ids = {t: n for (b, t), n in wanted.items() if where[(b, t)] == i}
                if not ids:
                    continue
                got = await run(suite.select(task_ids=list(ids)), prompt,
                                f"harm {side} {gate.rounds}", ids)
                spent += sum(not t.cached for t in got.trials)
                runs = base if side == "base" else head
                runs[i] = merge_runs(runs[i], got)
        step = gate.step(observations(base, head, past))
    return HarmRun(step, base, head, spent)
