"""The sequential gate: stages, stopping rules, held-out tasks, and a fast calibration slice."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from optimizer.gate.simulate import (
    build_world,
    hurt_pass_probability,
    reference_trials,
    run_cell,
    run_iteration,
)

from optimizer.gate.compare import GatePolicy
from optimizer.gate.pairing import Pair
from optimizer.gate.policy import Verdict
from optimizer.gate.sequential import SequentialGate, TaskKey, TrialRequest, heldout_tasks

BUCKETS = {"target": ["t0", "t1", "t2"], "other": ["o0", "o1", "o2"],
           "regression/plain": ["r0", "r1"]}


def gate(policy: GatePolicy | None = None, heldout: frozenset[str] = frozenset()
         ) -> SequentialGate:
    return SequentialGate(policy or GatePolicy(), "target", BUCKETS,
                          {(b, t): 2 for b, ts in BUCKETS.items() for t in ts}, heldout)


Outcome = Callable[[TaskKey, int], bool]


def drive(g: SequentialGate, base: dict[TaskKey, bool] | Outcome,
          cand: dict[TaskKey, bool] | Outcome) -> tuple[Verdict, list[TrialRequest]]:
    """Deterministic agents: a trial passes as given per task (or per task and index). The
    baseline's first `default_trials` trials exist before the gate starts (the cached
    baseline); the gate must ask for every other trial exactly once."""
    def call(f: dict[TaskKey, bool] | Outcome, key: TaskKey, i: int) -> bool:
        return f[key] if isinstance(f, dict) else f(key, i)

    have = {(k, i, "base") for k, n in g.default_trials.items() for i in range(n)}
    pairs: dict[str, list[Pair]] = {}
    requests: list[TrialRequest] = []
    step: TrialRequest | Verdict = g.first()
    while isinstance(step, TrialRequest):
        requests.append(step)
        for side, wanted in (("base", step.base), ("cand", step.indices)):
            for key, indices in wanted.items():
                for i in indices:
                    assert (key, i, side) not in have, (key, i, side)
                    have.add((key, i, side))
        for key, indices in step.indices.items():
            for i in indices:
                assert (key, i, "base") in have, f"candidate trial {key} #{i} has no pair"
                bp, cp = call(base, key, i), call(cand, key, i)
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
    # the first pass over the other buckets is one candidate trial per task, paired with the
    # cached baseline: no baseline trial is run
    assert set(map(tuple, rest.indices.values())) == {(0,)} and rest.base == {}
    assert rest.sides == ("cand",)
    assert "sign-flip" in v.test and v.test in v.reasons
    assert v.target is not None and v.target.fixed == 6
    assert "no bucket regressed" in v.reasons[0] and "over 5 pairs" in v.reasons[0]


def test_sequential_rounds_touch_only_the_deciding_tasks() -> None:
    strict = GatePolicy(alpha=0.01)  # 1/64 no longer enough at the first look
    v, reqs = drive(gate(strict), *world(target_fixed=True))
    assert v.decision == "accept"
    target_rounds = [r for r in reqs if r.stage == "target"]
    assert target_rounds, [r.stage for r in reqs]
    for r in target_rounds:
        assert {k[0] for k in r.indices} == {"target"}
        assert r.sides == ("base", "cand") and r.base == r.indices
        assert all(i >= 2 for ids in r.indices.values() for i in ids)


def test_a_clear_regression_elsewhere_rejects() -> None:
    v, _ = drive(gate(), *world(target_fixed=True, other_broken={"o0", "o1", "o2"}))
    assert v.decision == "reject" and v.stopped == "regression", v.reasons


def many_buckets(n: int) -> dict[str, list[str]]:
    out = {"target": ["t0", "t1", "t2"]}
    out |= {f"b{k:02d}": [f"b{k:02d}-{i}" for i in range(3)] for k in range(n)}
    return out


def big_gate(buckets: dict[str, list[str]], policy: GatePolicy | None = None) -> SequentialGate:
    return SequentialGate(policy or GatePolicy(), "target", buckets,
                          {(b, t): 2 for b, ts in buckets.items() for t in ts})


def fixes_target(key: TaskKey, i: int) -> bool:
    return True


def base_passes_others(key: TaskKey, i: int) -> bool:
    return key[0] != "target"


def test_a_thin_harm_everywhere_is_caught_by_the_pooled_test() -> None:
    """One trial in eight breaks, spread over the other buckets: no bucket shows much, the
    pooled betting test does once the sweep has added trials (9 of 72 broken pairs give
    p = 1.5^-9 = 0.026, just short of the pooled test's 0.025)."""
    buckets = many_buckets(24)

    def thin(key: TaskKey, i: int) -> bool:
        if key[0] == "target":
            return True
        j = 3 * int(key[0][1:]) + int(key[1][-1])
        return (j + 5 * i) % 8 != 0

    v, reqs = drive(big_gate(buckets), base_passes_others, thin)
    assert v.decision == "reject" and v.stopped == "regression", v.reasons
    assert "all other buckets together regressed" in v.reasons[0]
    assert "anytime-valid sign-flip betting test" in v.reasons[0]
    sweep = [r for r in reqs if r.stage == "rest"]
    assert len(sweep) >= 2
    for r in sweep[1:]:  # one more trial for about a third of the tasks, whole buckets
        assert all(len(ids) == 1 for ids in r.indices.values())
        assert len(r.indices) >= math.ceil(72 / 3)
        assert {b for b, _ in r.indices} <= set(buckets) - {"target"}
        assert all(len([k for k in r.indices if k[0] == b]) == 3 for b, _ in r.indices)
        # the baseline runs exactly the indices past its two cached trials
        assert r.base == {k: [i for i in ids if i >= 2] for k, ids in r.indices.items()
                          if any(i >= 2 for i in ids)}


def test_a_bucket_past_the_margin_is_confirmed_on_its_own_tasks() -> None:
    buckets = many_buckets(30)

    def flaky(key: TaskKey, i: int) -> bool:  # b07 fails its first trial only
        return key[0] == "target" or not (key[0] == "b07" and i == 0)

    v, reqs = drive(big_gate(buckets), base_passes_others, flaky)
    assert v.decision == "accept", v.reasons
    assert v.suspected_regressions == ["b07"]
    confirm = [r for r in reqs if r.stage == "confirm"]
    assert len(confirm) == 1 and {b for b, _ in confirm[0].indices} == {"b07"}
    # index 1 pairs with the cached baseline, index 2 needs a baseline trial
    assert set(map(tuple, confirm[0].indices.values())) == {(1, 2)}
    assert set(map(tuple, confirm[0].base.values())) == {(2,)}

    def broken(key: TaskKey, i: int) -> bool:  # b07 fails every trial
        return key[0] != "b07"

    v, reqs = drive(big_gate(buckets), base_passes_others, broken)
    assert v.decision == "reject" and v.stopped == "regression", v.reasons
    assert "'b07'" in v.reasons[0]
    assert {b for r in reqs if r.stage == "confirm" for b, _ in r.indices} == {"b07"}


def test_one_broken_pair_is_never_a_regression_on_its_own() -> None:
    """A single pass -> fail pair (or a few identical ones) is what noise looks like: it makes
    a suspect at most, and a suspect whose fresh trials do not fall is cleared."""
    for buckets in (BUCKETS, many_buckets(24)):
        other = list(buckets)[1]
        flaky = (other, buckets[other][0])  # fails its first candidate trial only

        def once(key: TaskKey, i: int, flaky: TaskKey = flaky) -> bool:
            return key[0] == "target" or (key, i) != (flaky, 0)

        v, _ = drive(big_gate(dict(buckets)), base_passes_others, once)
        assert v.decision == "accept", v.reasons


def test_harm_neither_shown_nor_ruled_out_at_max_trials_is_inconclusive() -> None:
    pol = GatePolicy(max_trials=2)
    v, _ = drive(gate(pol), *world(target_fixed=True, other_broken={"o0"}))
    assert v.decision == "inconclusive" and v.stopped == "max trials", v.reasons
    assert "neither shown nor ruled out" in v.reasons[0]


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
    """A fast slice of bench/gate_calibration.py at the hardest noise (the full table is in
    bench/RESULTS.md): the must-holds with some slack for the small samples."""
    pol = GatePolicy()
    good = run_cell("good", 3, 0.2, 40, pol)
    broad = run_cell("broad", 3, 0.2, 40, pol)
    null = run_cell("null", 10, 0.2, 40, pol)
    assert good["accepted"] >= 0.85
    assert broad["accepted"] == 0.0
    assert null["accepted"] <= 0.05
    assert good["cost_ratio"] <= 0.6 and broad["cost_ratio"] <= 0.6
    assert null["cost_ratio"] <= 0.3


def test_broad_patches_hurt_measured_pass_rates_by_30_percent() -> None:
    """The broad patch is defined on what the suite measures: every other bucket's expected
    pass rate, noise included, drops by 30% of its value at every noise level."""
    for noise in (0.0, 0.1, 0.2):
        q = hurt_pass_probability(noise)
        before = 0.8 * (1 - noise) + 0.2 * noise
        after = 0.8 * (q * (1 - noise) + (1 - q) * noise) + 0.2 * noise
        assert after == pytest.approx(0.7 * before)
    assert hurt_pass_probability(0.0) == pytest.approx(0.7)
    buckets, w = build_world("broad-raw", 3, 0.2, random.Random(1))
    assert {p for (b, _), p in w.cand_p.items() if b != "target"} <= {0.0, 0.7}
    assert len(buckets) == 25 and reference_trials(3) == 2 * 75 * 2


def test_simulated_iterations_are_reproducible() -> None:
    pol = GatePolicy()
    a, sa = run_iteration("good", 3, 0.2, 7, pol)
    b, sb = run_iteration("good", 3, 0.2, 7, pol)
    assert (a.decision, a.reasons, sa) == (b.decision, b.reasons, sb)
