"""Ambiguous and flaky tasks, listed with the evidence a user needs to fix the task spec.

Three signals, each per task:
- flaky trials: trials of the task on one and the same prompt disagree. Over the distinct
  counted trials of the task on its newest prompt (n trials, c passed; k = 2 by default), the
  task is flagged when pass@k - pass^k >= `min_spread` (0.4): it neither passes reliably nor
  fails reliably. With k = 2 that is a pass rate between about 30% and 70% on 10 trials, and
  any split of 2 or 3 trials.
- grader disagreement: graders that check the same thing (one family: a name, its `_plus`
  variant and its `visible_` variant, e.g. card_must_contain and card_visible_must_contain)
  decide a trial differently, on at least `grader_min_disagreements` trials and at least
  `grader_min_share` of the trials where two of them decided.
- human disagreement: a human label (see labels.py) passes a trial the judge failed, or the
  other way round.
`bucket_flakiness` tells the optimizer whether a bucket's failures are mostly on flaky tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from promptloop.optimizer.core.buckets import BucketId
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.lifecycle.labels import LabelledItem
from promptloop.optimizer.lifecycle.lineage import distinct_trials, prompt_hash, trial_id
from promptloop.optimizer.report.summary import pass_at_k, pass_hat_k

AmbiguityKind = Literal["flaky_trials", "grader_disagreement", "human_disagreement"]


@dataclass(frozen=True)
class AmbiguityPolicy:
    k: int = 2
    min_spread: float = 0.4
    min_trials: int = 2
    grader_min_disagreements: int = 2
    grader_min_share: float = 0.25
    mostly: float = 0.5
    """`bucket_flakiness`: share of failing trials above which failures are 'mostly flaky'."""
    max_evidence: int = 12


class EvidenceRow(BaseModel):
    """One trial, shown side by side with the others of the same task."""

    trial_id: str
    status: str
    cells: dict[str, str] = Field(default_factory=dict)


class AmbiguousTask(BaseModel):
    task_id: str
    bucket: str
    kind: AmbiguityKind
    summary: str
    trials: int
    """Trials the signal was computed on."""
    disagreeing: int
    k: int | None = None
    pass_at_k: float | None = None
    pass_hat_k: float | None = None
    graders: list[str] = Field(default_factory=list)
    evidence: list[EvidenceRow] = Field(default_factory=list)


def grader_family(name: str) -> str:
    return name.removesuffix("_plus").replace("_visible_", "_")


def _fmt(value: float | None, passed: bool | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f} {'pass' if passed else 'fail'}"


def _trial_row(run: RunResult, t: TrialResult) -> EvidenceRow:
    failing = [f"{s.grader} {_fmt(s.value, s.passed)}" + (f": {s.rationale[:120]}"
                                                         if s.rationale else "")
               for s in t.scores if s.passed is False]
    cells = {"score": f"{t.score:.2f}", "failing graders": "; ".join(failing) or "-"}
    if t.failure_reason:
        cells["failure reason"] = t.failure_reason[:160]
    return EvidenceRow(trial_id=trial_id(run.run_name, t), status=t.status, cells=cells)


def flaky_tasks(runs: Sequence[RunResult],
                policy: AmbiguityPolicy | None = None) -> list[AmbiguousTask]:
    """Tasks whose trials disagree on the same prompt (runs oldest first)."""
    policy = policy or AmbiguityPolicy()
    newest: dict[str, str | None] = {}
    pairs = [(r, t) for r, t in distinct_trials(runs) if t.counts]
    for run, t in pairs:
        newest[t.task_id] = prompt_hash(run)
    out = []
    for task, phash in newest.items():
        group = [(r, t) for r, t in pairs if t.task_id == task and prompt_hash(r) == phash]
        n, c = len(group), sum(t.passed for _, t in group)
        if n < policy.min_trials or c in (0, n):
            continue
        k = min(n, policy.k)
        at, hat = pass_at_k(n, c, k), pass_hat_k(n, c, k)
        if at - hat < policy.min_spread:
            continue
        nruns = len({r.run_name for r, _ in group})
        out.append(AmbiguousTask(
            task_id=task, bucket=group[-1][1].bucket, kind="flaky_trials",
            summary=(f"{c} of {n} trials passed on one prompt ({nruns} run(s)): "
                     f"pass@{k} {at:.2f}, pass^{k} {hat:.2f}"),
            trials=n, disagreeing=min(c, n - c), k=k, pass_at_k=at, pass_hat_k=hat,
            evidence=[_trial_row(r, t) for r, t in group[-policy.max_evidence:]]))
    return out


def _split_families(t: TrialResult) -> tuple[bool, list[str]]:
    """(some family had two decided graders, graders of the families that disagreed)."""
    families: dict[str, dict[str, set[bool]]] = {}
    for s in t.scores:
        if s.passed is not None:
            names = families.setdefault(grader_family(s.grader), {})
            names.setdefault(s.grader, set()).add(s.passed)
    # one grader named twice is two checks (two json_path paths), not two judges of one thing:
    # a family pairs only graders of different names (a grader and its `_plus` variant)
    paired = any(len(names) >= 2 for names in families.values())
    split = [g for names in families.values()
             if len(names) >= 2 and len(set().union(*names.values())) > 1 for g in names]
    return paired, split


def grader_disagreements(runs: Sequence[RunResult],
                         policy: AmbiguityPolicy | None = None) -> list[AmbiguousTask]:
    """Tasks where graders of one family decide the same trials differently."""
    policy = policy or AmbiguityPolicy()
    seen: dict[str, int] = {}
    split: dict[str, list[tuple[RunResult, TrialResult, list[str]]]] = {}
    for run, t in distinct_trials(runs):
        if not t.counts:
            continue
        paired, graders = _split_families(t)
        if paired:
            seen[t.task_id] = seen.get(t.task_id, 0) + 1
        if graders:
            split.setdefault(t.task_id, []).append((run, t, graders))
    out = []
    for task, rows in split.items():
        n, d = seen[task], len(rows)
        if d < policy.grader_min_disagreements or d / n < policy.grader_min_share:
            continue
        names = sorted({g for _, _, gs in rows for g in gs})
        evidence = []
        for run, t, gs in rows[-policy.max_evidence:]:
            cells = {s.grader: _fmt(s.value, s.passed) for s in t.scores if s.grader in gs}
            evidence.append(EvidenceRow(trial_id=trial_id(run.run_name, t), status=t.status,
                                        cells=cells))
        out.append(AmbiguousTask(
            task_id=task, bucket=rows[-1][1].bucket, kind="grader_disagreement",
            summary=f"{', '.join(names)} disagree on {d} of {n} trials",
            trials=n, disagreeing=d, graders=names, evidence=evidence))
    return out


def human_disagreements(items: Sequence[LabelledItem], grader: str) -> list[AmbiguousTask]:
    """Tasks where a human label and the judge decide a trial differently."""
    by_task: dict[str, list[LabelledItem]] = {}
    for item in items:
        if item.human_passed is not None and item.judge_passed is not None:
            by_task.setdefault(item.task_id, []).append(item)
    out = []
    for task, group in by_task.items():
        split = [i for i in group if i.human_passed != i.judge_passed]
        if not split:
            continue
        evidence = [EvidenceRow(
            trial_id=i.trial_id, status="labelled",
            cells={"human": _fmt(i.human_value, i.human_passed),
                   "judge": _fmt(i.judge_value, i.judge_passed),
                   **{f"{d} (human/judge)": f"{_num(i.human.get(d))}/{_num(i.judge.get(d))}"
                      for d in i.judge}}) for i in split]
        out.append(AmbiguousTask(
            task_id=task, bucket=split[-1].bucket, kind="human_disagreement",
            summary=f"the human and {grader} disagree on {len(split)} of {len(group)} "
                    "labelled trials",
            trials=len(group), disagreeing=len(split), graders=[grader], evidence=evidence))
    return out


def _num(v: float | None) -> str:
    return "?" if v is None else f"{v:.2f}"


@dataclass(frozen=True)
class FlakinessCheck:
    bucket: str
    failing_trials: int
    """Failing counted trials of the bucket in the newest run that holds it."""
    flaky_failing_trials: int
    flaky_tasks: tuple[str, ...]
    mostly_flaky: bool
    message: str

    @property
    def share(self) -> float | None:
        return self.flaky_failing_trials / self.failing_trials if self.failing_trials else None


def bucket_flakiness(runs: Sequence[RunResult], bucket: str,
                     policy: AmbiguityPolicy | None = None) -> FlakinessCheck:
    """Whether the failures of `bucket` (qualified as in core.buckets: `template_event`,
    `regression/plain_event`) are mostly on flaky tasks. `runs`: the suite's runs, oldest
    first (a baseline alone works when its tasks have several trials)."""
    policy = policy or AmbiguityPolicy()
    target = BucketId.parse(bucket)
    mine = sorted((r for r in runs if r.suite_kind == target.kind),
                  key=lambda r: (r.started_at, r.run_name))
    holding = [r for r in mine if any(t.bucket == target.name and t.counts for t in r.trials)]
    flaky = sorted(a.task_id for a in flaky_tasks(mine, policy) if a.bucket == target.name)
    if not holding:
        return FlakinessCheck(bucket, 0, 0, tuple(flaky), False,
                              f"no counted trials of bucket {bucket} in the runs given")
    failing = [t for t in holding[-1].trials
               if t.bucket == target.name and t.counts and not t.passed]
    on_flaky = [t for t in failing if t.task_id in flaky]
    mostly = bool(failing) and len(on_flaky) / len(failing) > policy.mostly
    if not failing:
        message = f"bucket {bucket} has no failing trials in {holding[-1].run_name}"
    else:
        message = (f"{len(on_flaky)} of {len(failing)} failing trials of bucket {bucket} are on "
                   f"flaky tasks" + (f" ({', '.join(flaky)})" if flaky else ""))
        if mostly:
            message += ("; their trials disagree on the same prompt, so the task specs may be "
                        "ambiguous and a prompt change may not fix them")
    return FlakinessCheck(bucket, len(failing), len(on_flaky), tuple(flaky), mostly, message)
