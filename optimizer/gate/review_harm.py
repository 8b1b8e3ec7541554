"""Harm detection over every bucket, with no target: the gate `review` decides with. Pure.

A prompt PR under review has no target bucket: every task is a harm task. Both refs have
already run every task at the suite's trials when this starts, so the first look judges each
task on those trials against its own record (lineage history + the base ref's trials), with
exactly the rules of optimize's harm stage (`gate.tasks.judge_task`, `gate.harm`):

- each task: break, no harm or undecided (`tasks.judge_task`, the suite-wide drift
  estimated over all tasks and subtracted first, as optimize does);
- each bucket: "regressed", "no harm" or "harm not ruled out" (`harm.bucket_statement`), with
  the adaptive (aGRAPA) sign-flip betting tests of each bucket and of all buckets pooled in
  one weighted Holm family (`harm.HarmEvidence`, anytime-valid at every look);
- while a task is undecided and under `harm_max_trials`, a round adds up to `round_trials`
  head trials to it (at least `sweep_trials`, else the trials its clean path needs), and fresh
  base trials to a suspect (a task whose Bayes factor leans to harm) whose record is
  ambiguous (`tasks.classify`: shorter than `history_min` or too wide to decide against).

`HarmOnlyGate.first(obs)` then `step(obs)` until a `HarmResult` comes back; the I/O loop is
`optimizer.workflows.gating.run_harm`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from optimizer.gate.compare import GatePolicy
from optimizer.gate.harm import BucketHarm, HarmEvidence, bucket_statement, summary
from optimizer.gate.pairing import Pair
from optimizer.gate.policy import sensitivity_statement
from optimizer.gate.sequential import Observations, TrialAsk
from optimizer.gate.tasks import (
    HarmScale,
    TaskFinding,
    TaskKey,
    TaskRecord,
    ambiguous,
    estimate_scale,
    judge_task,
)
from optimizer.gate.verdict import HARM_ORDER, POOLED, BucketVerdict


@dataclass(frozen=True)
class HarmResult:
    """Every bucket's statement, and the pooled test's rejection."""

    statements: list[BucketHarm]
    pooled_rejected: bool
    pooled_p: float
    rounds: int
    stopped: str
    """"decided" (every bucket regressed or said no harm), "regressed" (a bucket regressed
    while others were still open: no more trials were spent) or "max trials"."""
    ruled_out: str = ""
    """What harm detection is built to rule out and what not (`policy.sensitivity_statement`)."""

    @property
    def regressed(self) -> list[str]:
        out = [s.bucket for s in self.statements if s.state == "regressed"]
        return [*out, POOLED] if self.pooled_rejected else out

    @property
    def open(self) -> list[str]:
        return [s.bucket for s in self.statements if s.state == "harm not ruled out"]

    @property
    def buckets(self) -> list[BucketVerdict]:
        return [BucketVerdict(bucket=s.bucket, state=s.state, statement=s.statement)
                for s in self.statements]

    def reasons(self) -> list[str]:
        """Each bucket's statement (regressed and open ones first), then the pooled test."""
        out = [s.statement for s in sorted(self.statements, key=lambda s: HARM_ORDER[s.state])]
        if self.pooled_rejected:
            out.append(f"all buckets together regressed (adaptive betting sign-flip test "
                       f"p={self.pooled_p:.3g}, weighted Holm)")
        if self.statements:
            out.append("harm detection: " + summary(self.statements))
        if self.ruled_out:
            out.append(self.ruled_out)
        return out


@dataclass
class HarmOnlyGate:
    """Harm detection on every task of `bucket_tasks`; `ran[k]` = (base, head) trials of the
    task that already ran (indices 0..n-1 on each side)."""

    policy: GatePolicy
    bucket_tasks: Mapping[str, Sequence[str]]
    ran: Mapping[TaskKey, tuple[int, int]]
    rounds: int = 0
    _cand_n: dict[TaskKey, int] = field(default_factory=dict)
    _base_n: dict[TaskKey, int] = field(default_factory=dict)
    _evidence: HarmEvidence | None = None

    _scale: HarmScale = field(default_factory=HarmScale)

    def __post_init__(self) -> None:
        for k in self.keys:
            self._base_n[k], self._cand_n[k] = self.ran.get(k, (0, 0))
        self._evidence = HarmEvidence(self.policy)

    @property
    def keys(self) -> list[TaskKey]:
        return [(b, t) for b, ts in self.bucket_tasks.items() for t in ts]

    def _findings(self, obs: Observations) -> dict[str, list[TaskFinding]]:
        records = [obs.get(k, TaskRecord(k)) for k in self.keys]
        self._scale = estimate_scale(records, self.policy)
        out: dict[str, list[TaskFinding]] = {b: [] for b in self.bucket_tasks}
        for k, rec in zip(self.keys, records, strict=True):
            out[k[0]].append(judge_task(replace(rec, shift=self._scale.drift_of(rec)),
                                        self.policy, self._scale))
        return out

    @staticmethod
    def _pairs(obs: Observations, keys: Sequence[TaskKey]) -> list[Pair]:
        return [p for k in keys if k in obs for p in obs[k].pairs()]

    def step(self, obs: Observations) -> TrialAsk | HarmResult:
        """Judge every task on the observations so far; more trials or the result."""
        assert self._evidence is not None
        p = self.policy
        self.rounds += 1
        by_bucket = self._findings(obs)
        self._evidence.look({b: self._pairs(obs, [f.key for f in fs])
                             for b, fs in by_bucket.items()})
        rejected = set(self._evidence.family(sorted(by_bucket)))
        statements = [bucket_statement(b, fs, self._evidence.p_bucket(b)
                                       if b in rejected else None, p)
                      for b, fs in by_bucket.items()]
        open_ = [f for s in statements if s.state == "harm not ruled out" for f in s.findings
                 if f.state == "undecided"]
        result = HarmResult(statements, POOLED in rejected, self._evidence.p_pooled(),
                            self.rounds, "regressed" if open_ else "decided",
                            sensitivity_statement(p))
        if not open_ or result.regressed:
            return result
        req = self._request(open_, obs)
        return req if req is not None else replace(result, stopped="max trials")

    def _request(self, open_: Sequence[TaskFinding], obs: Observations) -> TrialAsk | None:
        p = self.policy
        cand: dict[TaskKey, list[int]] = {}
        base: dict[TaskKey, list[int]] = {}
        for f in open_:
            k = f.key
            start = self._cand_n[k]
            more = min(p.round_trials, max(p.sweep_trials, f.need))
            stop = min(start + more, max(p.harm_max_trials, self.ran.get(k, (0, 0))[1]))
            if stop <= start:
                continue
            cand[k] = list(range(start, stop))
            self._cand_n[k] = stop
            rec = obs.get(k)
            thin = rec is None or ambiguous(rec, p, self._scale)
            if f.suspect and thin:
                extra = [i for i in cand[k] if i >= self._base_n[k]]
                if extra:
                    base[k] = extra
                    self._base_n[k] = max(self._base_n[k], stop)
        if not cand:
            return None
        names = ", ".join(k[1] for k in list(cand)[:8]) + (", ..." if len(cand) > 8 else "")
        return TrialAsk(cand, "harm", f"harm not yet ruled out on {len(cand)} task(s): "
                            f"{names}", base)
