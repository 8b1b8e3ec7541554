"""The per-task harm rules, the per-bucket statements and the sequential gate (issue 18)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from optimizer.gate.compare import GatePolicy
from optimizer.gate.harm import bucket_statement
from optimizer.gate.review_harm import HarmOnlyGate, HarmResult
from optimizer.gate.sequential import SequentialGate, TaskKey, TrialRequest, heldout_tasks
from optimizer.gate.tasks import TaskRecord, judge_task
from optimizer.gate.verdict import Verdict

POLICY = GatePolicy()


def record(key: TaskKey = ("b", "t"), history: list[bool] = (), base: list[bool] = (),  # type: ignore[assignment]
           cand: list[bool] = ()) -> TaskRecord:  # type: ignore[assignment]
    return TaskRecord(key, [(float(x), x) for x in history],
                      {i: (float(x), x) for i, x in enumerate(base)},
                      {i: (float(x), x) for i, x in enumerate(cand)})


# --- one task against its own record ---------------------------------------------------------

def test_a_task_passing_12_of_12_that_fails_twice_is_a_break() -> None:
    f = judge_task(record(history=[True] * 10, base=[True] * 2, cand=[False, False]), POLICY)
    assert f.state == "break"
    assert f.p_break == pytest.approx(1 / 91)  # Fisher: C(14, 2) = 91 ways, one this extreme
    assert f.cand_failed == [0, 1] and "Fisher" in f.why
    assert "failed trial(s) #0, #1" in f.describe() and "'t'" in f.describe()
    # 10 of 10 recorded: 1/66, still a break; 2 of 2 recorded: 1/6, not one
    assert judge_task(record(history=[True] * 8, base=[True] * 2, cand=[False] * 2),
                      POLICY).p_break == pytest.approx(1 / 66)
    assert judge_task(record(base=[True] * 2, cand=[False] * 2), POLICY).state == "undecided"


def test_a_flaky_task_failing_as_often_as_its_record_says_no_harm() -> None:
    flaky = {"history": [True, False] * 5, "base": [True, False]}
    one = judge_task(record(**flaky, cand=[False]), POLICY)  # type: ignore[arg-type]
    assert one.state == "undecided" and one.need == POLICY.flaky_trials - 1
    enough = judge_task(record(**flaky, cand=[True, False]), POLICY)  # type: ignore[arg-type]
    assert enough.state == "no harm" and "flakiness" in enough.why
    # failing every trial where it passed half of 12 is outside the band its flakiness predicts
    worse = judge_task(record(**flaky, cand=[False] * 4), POLICY)  # type: ignore[arg-type]
    assert worse.state != "no harm"


def test_a_task_never_run_never_says_no_harm() -> None:
    steady = judge_task(record(history=[True] * 10, base=[True] * 2), POLICY)
    assert steady.state == "undecided" and steady.need >= 1 and steady.cand_mean is None
    assert judge_task(record(), POLICY).state == "undecided"  # no record at all
    statement = bucket_statement("b", [steady], None, POLICY)
    assert statement.state == "harm not ruled out" and "would need" in statement.statement
    # a task failing all of its record cannot lose a drop of half its pass rate
    assert judge_task(record(history=[False] * 10, base=[False] * 2), POLICY).state == "no harm"


def test_clean_candidate_trials_rule_the_drop_out() -> None:
    f = judge_task(record(history=[True] * 10, base=[True] * 2, cand=[True] * 3), POLICY)
    assert f.state == "no harm" and "Wald" in f.why
    statement = bucket_statement("b", [f], None, POLICY)
    assert statement.state == "no harm" and "no harm" in statement.statement
    broken = bucket_statement("b", [f, judge_task(record(
        ("b", "u"), history=[True] * 10, base=[True] * 2, cand=[False] * 2), POLICY)], None,
        POLICY)
    assert broken.state == "regressed" and "'u'" in broken.statement


# --- held-out tasks -----------------------------------------------------------------------------

def test_heldout_tasks_are_drawn_among_failing_tasks_and_never_all_of_them() -> None:
    ids = [f"t{i}" for i in range(9)]
    for n_failing in range(2, 10):
        rates = {t: (0.0 if i < n_failing else 1.0) for i, t in enumerate(ids)}
        failing = {t for t, r in rates.items() if r < 0.5}
        for salt in ("a", "b", "c"):
            held = heldout_tasks(ids, POLICY, salt=salt, rates=rates)
            assert held and held & failing and not failing <= held, (n_failing, salt, held)
            assert held == heldout_tasks(ids, POLICY, salt=salt, rates=rates)  # seeded
    assert heldout_tasks(["a", "b"], POLICY) == frozenset()  # under heldout_min_tasks
    assert len(heldout_tasks(["a", "b", "c"], POLICY)) == 1


# --- the gate, driven by a deterministic agent ---------------------------------------------------

BUCKETS = {"target": ["t0", "t1", "t2"], "other": ["o0", "o1", "o2"],
           "regression/plain": ["r0", "r1"]}
Outcome = Callable[[TaskKey, str], bool]


def drive(g: SequentialGate | HarmOnlyGate, outcome: Outcome, ran: int = 2
          ) -> tuple[Verdict | HarmResult, list[TrialRequest]]:
    """A deterministic agent: `outcome(key, side)` for every trial. The baseline's first `ran`
    trials exist before the gate starts (the candidate's too for a harm-only gate); the gate
    must ask for every other trial exactly once."""
    obs = {(b, t): TaskRecord((b, t)) for b, ts in BUCKETS.items() for t in ts}
    sides = ("base", "cand") if isinstance(g, HarmOnlyGate) else ("base",)
    for key, rec in obs.items():
        for side in sides:
            for i in range(ran):
                ok = outcome(key, side)
                getattr(rec, side)[i] = (float(ok), ok)
    requests: list[TrialRequest] = []
    step = g.first() if isinstance(g, SequentialGate) else g.step(obs)
    while isinstance(step, TrialRequest):
        requests.append(step)
        for side, wanted in (("base", step.base), ("cand", step.indices)):
            for key, indices in wanted.items():
                for i in indices:
                    assert i not in getattr(obs[key], side), (key, i, side)
                    ok = outcome(key, side)
                    getattr(obs[key], side)[i] = (float(ok), ok)
        step = g.step(obs)
    return step, requests


def gate(heldout: frozenset[str] = frozenset()) -> SequentialGate:
    return SequentialGate(POLICY, "target", BUCKETS,
                          {(b, t): 2 for b, ts in BUCKETS.items() for t in ts}, heldout)


def agent(fixed: set[str], broken: set[str] = frozenset()) -> Outcome:  # type: ignore[assignment]
    def outcome(key: TaskKey, side: str) -> bool:
        if key[0] == "target":
            return side == "cand" and key[1] in fixed
        return not (side == "cand" and key[1] in broken)
    return outcome


def test_a_null_patch_is_rejected_by_the_screen_without_running_the_rest() -> None:
    v, reqs = drive(gate(), agent(fixed=set()))
    assert isinstance(v, Verdict) and v.decision == "reject" and v.stopped == "screen"
    assert len(reqs) == 1 and {k[0] for k in reqs[0].indices} == {"target"}


def test_a_good_patch_is_accepted_only_once_every_bucket_says_no_harm() -> None:
    v, reqs = drive(gate(), agent(fixed={"t0", "t1", "t2"}))
    assert isinstance(v, Verdict) and v.decision == "accept", v.reasons
    assert [b.state for b in v.buckets] == ["no harm"] * 2
    assert any(r.startswith("no bucket regressed") for r in v.reasons)
    harm = [r for r in reqs if r.stage == "harm"]
    assert harm  # the target's passing tasks (all fixed here) are none of harm's business
    assert "stratified Fisher" in v.test and "Wald" in v.test and "never decide" in v.test


def test_one_broken_task_elsewhere_rejects_and_is_named() -> None:
    v, reqs = drive(gate(), agent(fixed={"t0", "t1", "t2"}, broken={"o1"}))
    assert isinstance(v, Verdict) and v.decision == "reject" and v.stopped == "regression"
    assert "'o1'" in v.reasons[0] and "failed trial(s) #0" in v.reasons[0]
    assert {b.bucket: b.state for b in v.buckets}["other"] == "regressed"
    assert not any(r.startswith("no bucket regressed") for r in v.reasons)
    # the suspect's thin record (2 baseline trials) got fresh baseline trials
    assert any(("other", "o1") in r.base for r in reqs if r.stage == "harm")


def test_an_unchanged_failing_heldout_task_rejects() -> None:
    v, _ = drive(gate(frozenset({"t2"})), agent(fixed={"t0", "t1"}))
    assert isinstance(v, Verdict) and v.decision == "reject" and v.stopped == "held-out"
    assert "did not improve" in v.reasons[0] and "t2" not in " ".join(v.reasons)
    assert v.heldout is not None and v.heldout.delta == 0
    assert v.visible is not None and v.visible.delta == 1.0


def test_harm_only_gate_for_review() -> None:
    g = HarmOnlyGate(POLICY, BUCKETS, {(b, t): (2, 2) for b, ts in BUCKETS.items()
                                        for t in ts})
    res, reqs = drive(g, agent(fixed={"t0"}, broken={"r1"}))
    assert isinstance(res, HarmResult) and res.regressed == ["regression/plain"]
    assert "'r1'" in " ".join(res.reasons())
    g = HarmOnlyGate(POLICY, BUCKETS, {(b, t): (2, 2) for b, ts in BUCKETS.items()
                                        for t in ts})
    clean, reqs = drive(g, agent(fixed={"t0"}))
    assert isinstance(clean, HarmResult) and clean.regressed == [] and clean.open == []
    assert all(min(r.indices[k]) >= 2 for r in reqs for k in r.indices)
    strict = POLICY.model_copy(update={"harm_max_trials": 2, "harm_task_beta": 0.01,
                                       "harm_steady_beta": 0.01})
    capped = HarmOnlyGate(strict, BUCKETS,
                          {(b, t): (2, 2) for b, ts in BUCKETS.items() for t in ts})
    open_, reqs = drive(capped, agent(fixed=set()))
    assert isinstance(open_, HarmResult) and not reqs and open_.stopped == "max trials"
    assert "other" in open_.open and math.isfinite(open_.pooled_p)
