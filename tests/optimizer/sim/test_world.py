"""Calibration world v2 (optimizer.sim.world): its definitions, and run_gate driving it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from itertools import combinations

import pytest

from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.sequential import heldout_tasks, record_rates
from promptloop.optimizer.gate.verdict import Verdict
from promptloop.optimizer.sim import world as W
from promptloop.optimizer.workflows.gating import bucket_tasks, run_gate
from promptloop.optimizer.workflows.nightly.config import rank_buckets
from promptloop.optimizer.workflows.optimize_models import Baseline

POLICY = GatePolicy()


def heldout_of(ids: Sequence[str], rates: Mapping[str, float] | None = None
               ) -> frozenset[str]:
    return heldout_tasks(ids, POLICY, salt="test", rates=rates)


def no_heldout(ids: Sequence[str], rates: Mapping[str, float] | None = None
               ) -> frozenset[str]:
    return frozenset()


def test_layout_and_api_shape() -> None:
    w = W.build_world("card", 10, 0.1, 1, heldout_of, "good-all")
    cap, reg = w.suites
    assert (cap.config.kind, reg.config.kind) == ("capability", "regression")
    # card with a 10-task target: 10 + 19 x 2 + 1 tasks, 21 buckets as issue 18 fixes
    assert (len(cap.tasks), len(cap.buckets), len(reg.tasks), len(reg.buckets)) == (49, 21, 8, 4)
    assert sorted(len(ts) for ts in cap.buckets.values()) == [1] + [2] * 19 + [10]
    c = W.build_world("card", 2, 0.0, 1, no_heldout)
    assert sorted(len(ts) for ts in c.suites[0].buckets.values()) == [2] * 14 + [3] * 7
    p = W.build_world("pkm", 3, 0.0, 1, no_heldout)
    assert sorted(len(ts) for ts in p.suites[0].buckets.values()) == [2] * 10 + [3] * 8
    q = W.build_world("pkm", 10, 0.0, 1, no_heldout)
    assert sorted(len(ts) for ts in q.suites[0].buckets.values()) == [2] * 17 + [10]
    tasks, _ = bucket_tasks(w.suites)
    assert w.target in tasks and len(tasks[w.target]) == 10
    assert set(w.truth) == {(b, t) for b, ts in tasks.items() for t in ts}
    assert len({t for _, t in w.truth}) == 57
    assert [r.trials_per_task[t.id] for r, s in zip(w.baseline, w.suites, strict=True)
            for t in s.tasks] == [2] * 57
    assert all(t.cached for r in w.baseline for t in r.trials)
    assert len(w.history) == 20 and len({r.run_name for r in w.history}) == 20
    assert all(h.started_at < w.baseline[0].started_at for h in w.history)
    assert all({t.trial_index for t in h.trials} == {0} for h in w.history)
    assert w.heldout == heldout_of(tasks[w.target], record_rates([*w.history, *w.baseline],
                                                                  set(tasks[w.target])))
    assert w.heldout
    assert W.SCENARIOS[0] == "good-all" and len(W.SCENARIOS) == 10


def test_same_seed_same_world() -> None:
    a = W.build_world("pkm", 2, 0.1, 7, no_heldout, "narrow-1")
    b = W.build_world("pkm", 2, 0.1, 7, no_heldout, "narrow-1")
    assert a.target == b.target and a.truth == b.truth
    assert [t.status for r in a.baseline + a.history for t in r.trials] == \
        [t.status for r in b.baseline + b.history for t in r.trials]


def test_type_shares_judge_share_and_error_rate() -> None:
    kinds: dict[str, int] = {}
    statuses: dict[str, int] = {}
    for seed in range(40):
        w = W.build_world("card", 3, 0.1, seed, no_heldout)
        for t in w.truth.values():
            kinds[t.kind] = kinds.get(t.kind, 0) + 1
        judged = sum(t.judge for t in w.truth.values())
        assert 3 * judged >= len(w.truth) and 3 * (judged - 3) < len(w.truth)
        for r in w.baseline + w.history:
            for tr in r.trials:
                statuses[tr.status] = statuses.get(tr.status, 0) + 1
    n = sum(kinds.values())
    for kind, share in (("pass", 0.45), ("fail", 0.25), ("flaky", 0.30)):
        assert kinds[kind] / n == pytest.approx(share, abs=0.035)
    assert statuses["errored"] / sum(statuses.values()) == pytest.approx(0.03, abs=0.005)


def test_correlation_within_a_bucket_in_one_run() -> None:
    w = W.build_world("card", 3, 0.0, 3, no_heldout)
    suite = w.suites[0]
    plan: W.Plan = {t.id: (0.0, False, 0.0) for t in suite.tasks}  # p = 0.5, code-graded
    rng = random.Random(5)
    runs = [W.draw_run(rng, suite, plan, {t.id: [0] for t in suite.tasks}, 0.0, "x", W._T0)
            for _ in range(600)]
    by_task = [{t.task_id: t for t in r.trials} for r in runs]
    outcome = {t.id: [x[t.id].passed for x in by_task if x[t.id].counts] for t in suite.tasks}

    def corr(a: str, b: str) -> float:
        both = [(float(x[a].passed), float(x[b].passed)) for x in by_task
                if x[a].counts and x[b].counts]
        mx = sum(x for x, _ in both) / len(both)
        my = sum(y for _, y in both) / len(both)
        cov = sum((x - mx) * (y - my) for x, y in both)
        vx = sum((x - mx) ** 2 for x, _ in both)
        vy = sum((y - my) ** 2 for _, y in both)
        return cov / (vx * vy) ** 0.5

    assert all(len(v) > 500 for v in outcome.values())
    groups = list(suite.buckets.values())
    within = [corr(a.id, b.id) for g in groups for a, b in combinations(g, 2)]
    across = [corr(g[0].id, h[0].id) for g, h in combinations(groups[:8], 2)]
    # latent correlation 0.3 -> about 0.19 between pass indicators at p = 0.5
    assert sum(within) / len(within) == pytest.approx(0.19, abs=0.06)
    assert abs(sum(across) / len(across)) < 0.04


def test_drift_only_in_run_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(W, "DRIFT", 0.5)
    w = W.build_world("card", 3, 0.0, 11, no_heldout)
    code_fail = {t for (_, t), tr in w.truth.items() if tr.kind == "fail" and not tr.judge}

    def rate(runs: list[W.RunResult]) -> float:
        got = [t.passed for r in runs for t in r.trials if t.task_id in code_fail and t.counts]
        return sum(got) / len(got)

    assert rate(w.baseline) < 0.05 and rate(w.history) < 0.05
    fresh = [asyncio.run(w.run(s, w.base_prompt, "fresh", {t.id: [2, 3, 4, 5] for t in s.tasks}))
             for s in w.suites]
    assert rate(fresh) == pytest.approx(0.5 if w.drift > 0 else 0.0, abs=0.15)
    assert w.calls == 57 * 4


@pytest.mark.parametrize(("agent", "size"), [("card", 2), ("card", 10), ("pkm", 3)])
def test_target_chosen_as_nightly_would(agent: str, size: int) -> None:
    for seed in range(4):
        w = W.build_world(agent, size, 0.1, seed, no_heldout)
        ranks, _ = rank_buckets({agent: Baseline("sha", w.base_prompt, w.suites, w.baseline)},
                                limit=100)
        sizes = {b: len(ts) for b, ts in w.suites[0].buckets.items()}
        assert next(r.bucket for r in ranks if sizes.get(r.bucket) == size) == w.target


def effects(w: W.World, prompt: str = "candidate") -> dict[tuple[str, str], W.Effect]:
    return {k: t.effects[prompt] for k, t in w.truth.items()}


def failing_target(w: W.World) -> list[tuple[str, str]]:
    return [k for k, t in w.truth.items() if t.target and t.failing]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scenario_truth(seed: int) -> None:
    for scenario in W.SCENARIOS:
        w = W.build_world("card", 10, 0.1, seed, heldout_of, scenario)
        e = effects(w)
        fixed = {k for k, x in e.items() if x.fixed}
        broken = {k for k, x in e.items() if x.broken}
        fail = failing_target(w)
        visible = [k for k in fail if k[1] not in w.heldout]
        want_fixed = {"null": set(), "overfit": set(visible),
                      "good-partial": fixed}.get(scenario, set(fail))
        assert fixed == want_fixed, scenario
        assert all(e[k].p == (0.9 if scenario == "flaky-target" else 0.98) for k in fixed)
        if scenario == "good-partial":
            assert len(fixed) == round(2 / 3 * len(fail)) and fixed <= set(fail)
        if scenario in ("narrow-1", "narrow-3", "half-break"):
            n = 3 if scenario == "narrow-3" else 1
            assert len(broken) == n and len({b for b, _ in broken}) == n
            assert all(w.truth[k].kind == "pass" and not w.truth[k].target for k in broken)
            assert all(e[k].p == (0.5 if scenario == "half-break" else 0.1) for k in broken)
            if scenario != "half-break":
                assert all("/" not in b for b, _ in broken)
        elif scenario == "broad":
            passing = {k for k, t in w.truth.items() if t.kind == "pass" and not t.target}
            assert broken == passing
            assert all(e[k].p == pytest.approx(max(0.0, w.truth[k].p - 0.3)) for k in broken)
        elif scenario == "score-drop":
            (bucket,) = {b for b, _ in broken}
            assert bucket != w.target and broken == {k for k in w.truth if k[0] == bucket}
            assert all(w.truth[k].judge and e[k].shift == -0.25 for k in broken)
        else:
            assert not broken, scenario
        if scenario == "overfit":
            assert not any(x.fixed for k, x in e.items() if k[1] in w.heldout)
        if scenario == "flaky-target":
            assert fail and all(w.truth[k].kind == "flaky" and w.truth[k].p == 0.5 for k in fail)
            assert w.target == W.choose_target(
                w.baseline[0], {b: len(ts) for b, ts in w.suites[0].buckets.items()}, 10)


def test_candidates_dispatch_and_duplicates_raise() -> None:
    w = W.build_world("pkm", 3, 0.1, 5, no_heldout, "good-all")
    w.add_candidate("other", "narrow-1")
    with pytest.raises(ValueError, match="already registered"):
        w.add_candidate("other", "null")
    with pytest.raises(W.InfeasibleScenario):
        w.add_candidate("third", "flaky-target")
    suite = w.suites[0].select(task_ids=[w.suites[0].tasks[0].id])
    tid = suite.tasks[0].id
    a = asyncio.run(w.run(suite, "candidate", "c", {tid: [0, 1]}))
    b = asyncio.run(w.run(suite, "other", "o", {tid: [0, 1]}))
    assert (a.run_name != b.run_name and a.task_buckets == {tid: suite.tasks[0].bucket}
            and a.trials_per_task == {tid: 2})
    with pytest.raises(AssertionError, match="twice"):
        asyncio.run(w.run(suite, "candidate", "c", {tid: [1]}))
    with pytest.raises(AssertionError, match="twice"):  # the cached baseline holds 0 and 1
        asyncio.run(w.run(suite, w.base_prompt, "b", {tid: [0]}))
    with pytest.raises(ValueError, match="unknown prompt"):
        asyncio.run(w.run(suite, "nobody", "x", None))
    assert w.calls == 4


@pytest.mark.parametrize("scenario", ["good-all", "null"])
def test_run_gate_reaches_a_verdict(scenario: str) -> None:
    w = W.build_world("card", 10, 0.1, 2, heldout_of, scenario)
    gate = asyncio.run(run_gate(w.suites, w.baseline, (w.base_prompt, "candidate"), w.target,
                                POLICY, w.run, heldout=w.heldout))
    assert isinstance(gate.verdict, Verdict)
    assert gate.trials_run == w.calls > 0
    if scenario == "null":
        assert gate.verdict.decision != "accept"
