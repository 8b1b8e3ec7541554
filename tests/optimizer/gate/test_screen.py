"""Successive halving over candidate patches (optimizer/gate/screen.py), driven by callbacks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.gate.pairing import Pair
from promptloop.optimizer.gate.screen import (
    SCREEN_INDEX_OFFSET,
    Screening,
    ScreenPlan,
    screen_pairs,
    simulate,
)

TASKS = ["t1", "t2", "t3", "t4"]


def world(fixes: dict[str, set[str]], breaks: dict[str, set[str]] | None = None):
    """Every target task fails on the baseline; candidate c passes the tasks it fixes."""
    calls: list[tuple[str, str, int]] = []

    def trial(cand: str, task: str, slot: int) -> Pair:
        calls.append((cand, task, slot))
        ok = task in fixes.get(cand, set()) and task not in (breaks or {}).get(cand, set())
        return Pair(task, SCREEN_INDEX_OFFSET + slot, 0.0, float(ok), False, ok)

    return trial, calls


def test_successive_halving_order_and_trials() -> None:
    fixes = {"a": {"t1"}, "b": {"t1", "t2", "t3"}, "c": {"t1", "t2"}, "d": {"t1", "t2", "t3",
                                                                             "t4"}}
    trial, calls = world(fixes)
    out = simulate(list(fixes), TASKS, trial)
    assert out.winner == "d"
    # round 1: 4 candidates x 4 tasks x 1 slot; round 2: the better half (d, b) x 4 tasks x 2
    assert out.trials == 16 + 2 * 4 * 2 == len(calls)
    round2 = {c for c, _, s in calls if s >= 1}
    assert round2 == {"d", "b"}
    assert sorted({s for _, _, s in calls}) == [0, 1, 2]
    assert out.standings["a"].stopped.startswith("ranked in the lower half after round 1")
    assert out.standings["b"].stopped.startswith("ranked in the lower half after round 2")
    assert out.standings["d"].stopped == ""


def test_a_candidate_fixing_nothing_drops_out_in_round_1() -> None:
    trial, calls = world({"good": {"t1", "t2"}, "null": set(), "null2": set()})
    out = simulate(["null", "good", "null2"], TASKS, trial)
    assert out.winner == "good"
    assert "fixed no target trial in round 1" in out.standings["null"].stopped
    assert {c for c, _, s in calls if s > 0} == set()  # one survivor: no second round
    trial, _ = world({})
    assert simulate(["x", "y"], TASKS, trial).winner is None


def test_one_candidate_is_not_screened() -> None:
    trial, calls = world({})
    out = simulate(["only"], TASKS, trial)
    assert out.winner == "only" and out.trials == 0 and calls == []


def test_ties_are_broken_by_a_seeded_draw_not_by_position() -> None:
    """Two candidates that fix the same task tie: the seed decides, whatever order the
    proposer listed them in, and the same seed decides the same way every time."""
    trial, _ = world({"a": {"t1"}, "b": {"t1"}})
    winners = {seed: simulate(["b", "a"], TASKS, trial, seed=seed).winner for seed in range(8)}
    assert set(winners.values()) == {"a", "b"}  # not always the first listed
    for seed, won in winners.items():
        assert simulate(["a", "b"], TASKS, trial, seed=seed).winner == won  # order-free
        assert simulate(["b", "a"], TASKS, trial, seed=seed).winner == won  # reproducible


def test_fallbacks_are_the_other_candidates_that_fixed_the_target() -> None:
    trial, _ = world({"a": {"t1", "t2"}, "b": {"t1"}, "c": set()})
    s = Screening(["a", "b", "c"], ScreenPlan(first=2))
    while (req := s.request()) is not None:
        s.feed({n: [trial(n, t, x) for t in TASKS for x in slots]
                for n, slots in req.slots.items()})
        if s.merge_wanted() is not None:
            s.decline_merge()
    assert s.winner == "a"
    assert s.fallbacks(exclude=["a"]) == ["b"]  # c fixed nothing


def test_merge_is_asked_for_disjoint_fixes_and_screened() -> None:
    fixes = {"a": {"t1", "t2"}, "b": {"t3", "t4"}, "m": set(TASKS)}
    trial, calls = world(fixes)
    asked: list[tuple[str, str]] = []

    def merge(x: str, y: str) -> str:
        asked.append((x, y))
        return "m"

    out = simulate(["a", "b"], TASKS, trial, merge=merge)
    assert asked == [("a", "b")] and out.merge_calls == 1
    assert out.winner == "m"
    assert [(c, s) for c, _, s in calls if c == "m"][:4] == [("m", 0)] * 4  # round 1 first
    assert any(line.startswith("merge: m states") for line in out.log)


def test_no_merge_when_a_candidate_fixes_both_sets_or_sets_nest() -> None:
    for fixes in ({"a": {"t1"}, "b": {"t2"}, "c": {"t1", "t2"}},
                  {"a": {"t1"}, "b": {"t1", "t2"}}):
        trial, _ = world(fixes)
        asked: list[tuple[str, str]] = []

        def merge(x: str, y: str, seen: list[tuple[str, str]] = asked) -> None:
            seen.append((x, y))

        simulate(list(fixes), TASKS, trial, merge=merge)
        assert asked == []


def test_a_declined_merge_halves() -> None:
    trial, _ = world({"a": {"t1", "t2"}, "b": {"t3"}})
    out = simulate(["a", "b"], TASKS, trial, merge=lambda _x, _y: None)
    assert out.winner == "a" and out.merge_calls == 1
    assert "no merged candidate" in " ".join(out.log)


def test_the_state_machine_refuses_misuse() -> None:
    s = Screening(["a", "b"], ScreenPlan(first=2))
    req = s.request()
    assert req is not None and req.slots == {"a": [0, 1], "b": [0, 1]}
    with pytest.raises(ValueError, match="no screening pairs"):
        s.feed({"a": []})
    with pytest.raises(ValueError, match="unique"):
        Screening(["a", "a"])
    with pytest.raises(RuntimeError, match="no merge"):
        s.decline_merge()


def _trial(task: str, index: int, status: str, score: float) -> TrialResult:
    now = datetime.now(UTC)
    return TrialResult.model_validate({
        "task_id": task, "trial_index": index, "bucket": "b", "status": status,
        "started_at": now, "ended_at": now,
        "scores": [{"grader": "g", "value": score, "passed": score > 0}],
    })


def _run(trials: list[TrialResult]) -> RunResult:
    now = datetime.now(UTC)
    ids = sorted({t.task_id for t in trials})
    return RunResult(run_name="r", suite_name="s", suite_kind="capability", suite_root=".",
                     agent_name="pkm_agent", task_ids=ids, task_buckets=dict.fromkeys(ids, "b"),
                     started_at=now, ended_at=now, trials=trials)


def test_screen_pairs_cycle_over_the_baseline_and_skip_errors() -> None:
    base = _run([_trial("t1", 0, "failed", 0.0), _trial("t1", 1, "passed", 1.0),
                 _trial("t2", 0, "errored", 0.0)])
    cand = _run([_trial("t1", SCREEN_INDEX_OFFSET + s, "passed", 1.0) for s in range(3)]
                + [_trial("t2", SCREEN_INDEX_OFFSET, "passed", 1.0)])
    pairs = screen_pairs(base, cand, ["t1", "t2"])
    assert [(p.task_id, p.base_passed) for p in pairs] == [("t1", False), ("t1", True),
                                                           ("t1", False)]


def test_a_disqualified_candidate_is_never_the_winner_nor_a_fallback() -> None:
    """A candidate whose screening trial wrote outside its workspace leaves for good, its
    pending trials unfed, however well it scored (issue 30: screening trials are refused as
    the gate refuses them)."""
    trial, _ = world({"a": {"t1", "t2", "t3"}, "b": {"t1"}, "c": {"t1"}})
    s = Screening(["a", "b", "c"], ScreenPlan(first=1), seed=3)
    req = s.request()
    assert req is not None and set(req.slots) == {"a", "b", "c"}
    gone = s.disqualify("a", "1 screening trial(s) wrote outside its workspace")
    assert gone.disqualified and s.pending_names == ["b", "c"]
    s.feed({n: [trial(n, t, x) for t in TASKS for x in slots]
            for n, slots in s.request().slots.items()})  # type: ignore[union-attr]
    while (req := s.request()) is not None:
        s.feed({n: [trial(n, t, x) for t in TASKS for x in slots]
                for n, slots in req.slots.items()})
    assert s.winner in ("b", "c") and "a" not in s.fallbacks()
    assert any("a disqualified" in line for line in s.log)
    # every candidate of a round disqualified: no winner, nothing left to run
    lone = Screening(["x", "y"], ScreenPlan(first=1))
    lone.request()
    lone.disqualify("x", "wrote outside")
    lone.disqualify("y", "wrote outside")
    assert lone.feed({}) == [] and lone.request() is None and lone.winner is None
