"""The sequential gate: stages, stopping rules, held-out tasks, and a fast calibration slice."""

from __future__ import annotations

from optimizer.gate.compare import GatePolicy
from optimizer.gate.pairing import Pair
from optimizer.gate.policy import Verdict
from optimizer.gate.sequential import SequentialGate, TaskKey, TrialRequest, heldout_tasks
from optimizer.gate.simulate import run_cell, run_iteration

BUCKETS = {"target": ["t0", "t1", "t2"], "other": ["o0", "o1", "o2"],
           "regression/plain": ["r0", "r1"]}


def gate(policy: GatePolicy | None = None, heldout: frozenset[str] = frozenset()
         ) -> SequentialGate:
    return SequentialGate(policy or GatePolicy(), "target", BUCKETS,
                          {(b, t): 2 for b, ts in BUCKETS.items() for t in ts}, heldout)


def drive(g: SequentialGate, base: dict[TaskKey, bool], cand: dict[TaskKey, bool]
          ) -> tuple[Verdict, list[TrialRequest]]:
    """Deterministic agents: every trial of a task passes or fails as given."""
    pairs: dict[str, list[Pair]] = {}
    have: set[tuple[TaskKey, int]] = set()
    requests: list[TrialRequest] = []
    step: TrialRequest | Verdict = g.first()
    while isinstance(step, TrialRequest):
        requests.append(step)
        for key, indices in step.indices.items():
            for i in indices:
                if (key, i) in have:
                    continue
                have.add((key, i))
                bp, cp = base[key], cand[key]
                pairs.setdefault(key[0], []).append(
                    Pair(key[1], i, float(bp), float(cp), bp, cp))
        step = g.step(pairs)
    return step, requests


def world(target_fixed: bool, other_broken: set[str] = frozenset()  # type: ignore[assignment]
          ) -> tuple[dict[TaskKey, bool], dict[TaskKey, bool]]:
    base = {(b, t): b != "target" for b, ts in BUCKETS.items() for t in ts}
    cand = dict(base)
    for key in cand:
        if key[0] == "target" and target_fixed:
            cand[key] = True
        if key[1] in other_broken:
            cand[key] = False
    return base, cand


def test_a_null_patch_is_rejected_by_the_screen_without_running_the_rest() -> None:
    v, reqs = drive(gate(), *world(target_fixed=False))
    assert v.decision == "reject" and v.stopped == "screen"
    assert len(reqs) == 1 and reqs[0].stage == "screen" and reqs[0].sides == ("cand",)
    assert {k[0] for k in reqs[0].indices} == {"target"}


def test_a_good_patch_adds_target_trials_then_checks_the_rest() -> None:
    v, reqs = drive(gate(), *world(target_fixed=True))
    assert v.decision == "accept", v.reasons
    stages = [r.stage for r in reqs]
    assert stages[0] == "screen" and stages[-1] == "rest"
    # 6 pairs give p = 1/64 = 0.0156 <= the first look's 0.0179 (Pocock spending)
    assert stages == ["screen", "rest"]
    rest = reqs[-1]
    assert {k[0] for k in rest.indices} == {"other", "regression/plain"}
    assert "sign-flip" in v.test and v.test in v.reasons
    assert v.target is not None and v.target.fixed == 6


def test_sequential_rounds_touch_only_the_deciding_tasks() -> None:
    strict = GatePolicy(alpha=0.01)  # 1/64 no longer enough at the first look
    v, reqs = drive(gate(strict), *world(target_fixed=True))
    assert v.decision == "accept"
    target_rounds = [r for r in reqs if r.stage == "target"]
    assert target_rounds, [r.stage for r in reqs]
    for r in target_rounds:
        assert {k[0] for k in r.indices} == {"target"}
        assert r.sides == ("base", "cand")
        assert all(i >= 2 for ids in r.indices.values() for i in ids)


def test_a_clear_regression_elsewhere_rejects() -> None:
    v, _ = drive(gate(), *world(target_fixed=True, other_broken={"o0", "o1", "o2"}))
    assert v.decision == "reject" and v.stopped == "regression", v.reasons


def test_max_trials_bounds_the_gate() -> None:
    pol = GatePolicy(alpha=1e-6, max_trials=4)
    v, reqs = drive(gate(pol), *world(target_fixed=True))
    assert v.decision == "inconclusive" and v.stopped == "max trials"
    assert v.trials_per_task == 4
    assert max(i for r in reqs for ids in r.indices.values() for i in ids) == 3


def test_heldout_share_is_fixed_and_seeded() -> None:
    pol = GatePolicy()
    tasks = [f"t{i}" for i in range(10)]
    h = heldout_tasks(tasks, pol, salt="x")
    assert len(h) == 3 and h == heldout_tasks(list(reversed(tasks)), pol, salt="x")
    assert heldout_tasks(tasks[:3], pol) == frozenset()
    assert len(heldout_tasks(tasks, pol.model_copy(update={"seed": 1}), salt="x")) == 3


def test_heldout_tasks_that_get_worse_block_acceptance() -> None:
    buckets = {"target": [f"t{i}" for i in range(10)], "other": ["o0"]}
    g = SequentialGate(GatePolicy(), "target", buckets,
                       {(b, t): 2 for b, ts in buckets.items() for t in ts},
                       frozenset({"t7", "t8", "t9"}))
    # 7 visible tasks and t7 fixed; held-out t8, t9 broken
    base = {("target", f"t{i}"): i >= 8 for i in range(10)} | {("other", "o0"): True}
    cand = {("target", f"t{i}"): i < 8 for i in range(10)} | {("other", "o0"): True}
    pairs: dict[str, list[Pair]] = {}
    step: TrialRequest | Verdict = g.first()
    while isinstance(step, TrialRequest):
        for key, ids in step.indices.items():
            for i in ids:
                pairs.setdefault(key[0], []).append(
                    Pair(key[1], i, float(base[key]), float(cand[key]), base[key], cand[key]))
        step = g.step(pairs)
    assert step.decision == "reject" and step.stopped == "held-out", step.reasons
    assert step.heldout is not None and step.heldout.delta is not None
    assert step.heldout.delta < 0
    assert step.visible is not None and step.visible.delta == 1.0


def test_calibration_slice() -> None:
    """A fast slice of bench/gate_calibration.py (the full table is in bench/RESULTS.md)."""
    pol = GatePolicy()
    good = run_cell("good", 3, 0.1, 40, pol)
    null = run_cell("null", 3, 0.2, 60, pol)
    broad = run_cell("broad", 10, 0.1, 30, pol)
    assert good["accepted"] >= 0.9
    assert null["accepted"] <= 0.05
    assert broad["accepted"] == 0.0
    assert null["cost_ratio"] < 0.2 and good["cost_ratio"] < 0.8


def test_simulated_iterations_are_reproducible() -> None:
    pol = GatePolicy()
    a, sa = run_iteration("good", 3, 0.2, 7, pol)
    b, sb = run_iteration("good", 3, 0.2, 7, pol)
    assert (a.decision, a.reasons, sa) == (b.decision, b.reasons, sb)
