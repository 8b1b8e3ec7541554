"""The acceptance gate on whole runs: pairing, bootstrap, McNemar, bucket status, verdicts
(through the sequential gate at a single look), pooling."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from promptloop.graders.base import Score
from promptloop.optimizer.core.results import RunResult, TrialResult, TrialStatus
from promptloop.optimizer.gate.compare import (
    GatePolicy,
    compare_bucket,
    compare_runs,
    paired_bootstrap_ci,
)
from promptloop.optimizer.gate.exact import mcnemar_pvalue
from promptloop.optimizer.gate.pairing import Pair, merge_runs, pair_runs
from promptloop.optimizer.gate.sequential import SequentialGate

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

# (bucket, task_id, trial_index, status, value)
Spec = tuple[str, str, int, TrialStatus, float]


def trial(bucket: str, task_id: str, index: int, status: TrialStatus, value: float) -> TrialResult:
    scores = [] if status in ("errored", "skipped") else [
        Score(grader="g", value=value, passed=status == "passed")
    ]
    return TrialResult(task_id=task_id, bucket=bucket, trial_index=index, status=status,
                       started_at=T0, ended_at=T0 + timedelta(seconds=1), scores=scores)


def run(name: str, specs: list[Spec], suite: str = "pkm_regression") -> RunResult:
    trials = [trial(*s) for s in specs]
    task_ids = list(dict.fromkeys(t.task_id for t in trials))
    return RunResult(
        run_name=name, suite_name=suite, suite_kind="regression", agent_name="pkm_agent",
        suite_root="/suites/pkm", task_ids=task_ids,
        task_buckets={t.task_id: t.bucket for t in trials},
        trials_per_task={tid: sum(t.task_id == tid for t in trials) for tid in task_ids},
        started_at=T0, ended_at=T0 + timedelta(minutes=1), trials=trials,
    )


def outcome(bucket: str, n_tasks: int, results: list[tuple[bool, bool]],
            prefix: str = "") -> tuple[list[Spec], list[Spec]]:
    """Base/candidate specs for `n_tasks` tasks x trials; results cycle over (base, cand)."""
    base: list[Spec] = []
    cand: list[Spec] = []
    trials = len(results) // n_tasks
    for k, (b, c) in enumerate(results):
        task, index = f"{prefix or bucket}_{k // trials}", k % trials
        base.append((bucket, task, index, "passed" if b else "failed", 1.0 if b else 0.0))
        cand.append((bucket, task, index, "passed" if c else "failed", 1.0 if c else 0.0))
    return base, cand


def pairs_from_diffs(diffs: list[float]) -> list[Pair]:
    return [Pair(f"t{i}", 0, 0.5, 0.5 + d, False, False) for i, d in enumerate(diffs)]


# --- statistics -------------------------------------------------------------------------


@pytest.mark.parametrize(("fixed", "broken", "expected"), [
    (5, 0, 0.0625),
    (6, 0, 0.03125),
    (0, 6, 0.03125),
    (7, 2, 2 * (1 + 9 + 36) / 512),
    (3, 3, 1.0),
    (1, 0, 1.0),
    (0, 0, 1.0),
])
def test_mcnemar_exact_matches_hand_computed(fixed: int, broken: int, expected: float) -> None:
    assert mcnemar_pvalue(fixed, broken) == pytest.approx(expected, abs=1e-12)


def test_bootstrap_is_reproducible_with_a_seed() -> None:
    gen = random.Random(3)
    diffs = [gen.gauss(0.1, 0.3) for _ in range(40)]
    first = paired_bootstrap_ci(diffs, seed=11)
    assert paired_bootstrap_ci(diffs, seed=11) == first
    assert paired_bootstrap_ci(diffs, seed=12) != first
    low, high = first
    assert low < sum(diffs) / len(diffs) < high


def test_bootstrap_interval_covers_the_true_delta() -> None:
    """Synthetic pairs with a known population delta of 0.2: the 90% interval covers it in most
    of 100 independent samples, and excludes 0 in most of them too."""
    gen = random.Random(2025)
    covered = excludes_zero = 0
    for rep in range(100):
        base = [gen.random() * 0.6 for _ in range(40)]
        diffs = [0.2 + gen.uniform(-0.25, 0.25) for _ in base]
        low, high = paired_bootstrap_ci(diffs, confidence=0.9, n_boot=400, seed=rep)
        covered += low <= 0.2 <= high
        excludes_zero += low > 0
    assert 80 <= covered <= 98
    assert excludes_zero >= 95


def test_degenerate_and_empty_buckets() -> None:
    same = compare_bucket("b", pairs_from_diffs([0.25] * 6))
    # equal differences: no bootstrap interval (its zero width used to count as significant)
    assert (same.ci_low, same.ci_high) == (None, None)
    assert same.p_improve == pytest.approx(2.0**-6)
    assert same.delta == pytest.approx(0.25)
    empty = compare_bucket("b", [], n_dropped=3)
    assert empty.n_pairs == 0 and empty.n_dropped == 3
    assert empty.delta is None and empty.ci_low is None and empty.base_pass_rate is None
    assert empty.p_value == 1.0 and empty.status == "inconclusive"


def test_compare_bucket_counts_flips_and_rates() -> None:
    pairs = [Pair("a", 0, 0.0, 1.0, False, True)] * 5 + [Pair("b", 0, 1.0, 1.0, True, True)] * 5
    c = compare_bucket("x", pairs)
    assert (c.fixed, c.broken) == (5, 0)
    assert c.p_value == pytest.approx(0.0625)
    assert c.base_pass_rate == pytest.approx(0.5) and c.cand_pass_rate == pytest.approx(1.0)
    assert c.pass_delta == pytest.approx(0.5) and c.delta == pytest.approx(0.5)
    assert c.ci_low is not None and c.ci_low > 0
    assert c.status == "improved"


# --- pairing ----------------------------------------------------------------------------


def test_errored_and_skipped_pairs_are_dropped_and_counted() -> None:
    base = run("base", [
        ("routing", "r1", 0, "passed", 1.0),
        ("routing", "r1", 1, "errored", 0.0),
        ("routing", "r2", 0, "failed", 0.5),
        ("routing", "r2", 1, "timedOut", 0.0),
        ("routing", "r2", 2, "passed", 1.0),   # no candidate trial 2: unpaired, not dropped
        ("skip", "s1", 0, "passed", 1.0),      # task absent from the candidate run
    ])
    cand = run("cand", [
        ("routing", "r1", 0, "failed", 0.5),
        ("routing", "r1", 1, "passed", 1.0),
        ("routing", "r2", 0, "skipped", 0.0),
        ("routing", "r2", 1, "passed", 1.0),
        ("routing", "r3", 0, "passed", 1.0),   # task absent from the base run
    ])
    paired = pair_runs(base, cand)
    assert set(paired) == {"routing"}
    assert paired.dropped == {"routing": 2}
    assert paired["routing"] == [
        Pair("r1", 0, 1.0, 0.5, True, False),
        Pair("r2", 1, 0.0, 1.0, False, True),  # a timeout is evidence: score 0, failed
    ]
    [comparison] = compare_runs(base, cand)
    assert comparison.n_pairs == 2 and comparison.n_dropped == 2
    assert pair_runs(base, cand, buckets={"skip"}) == {}


def test_bucket_with_only_dropped_pairs_still_appears() -> None:
    base = run("base", [("b", "t", 0, "passed", 1.0)])
    cand = run("cand", [("b", "t", 0, "errored", 0.0)])
    [c] = compare_runs(base, cand)
    assert (c.bucket, c.n_pairs, c.n_dropped, c.delta) == ("b", 0, 1, None)


def test_task_in_different_buckets_is_an_error() -> None:
    base = run("base", [("a", "t", 0, "passed", 1.0)])
    cand = run("cand", [("b", "t", 0, "passed", 1.0)])
    with pytest.raises(ValueError, match="not the same suite"):
        pair_runs(base, cand)


# --- bucket status and verdicts ---------------------------------------------------------

IMPROVE = [(False, True)] * 8 + [(True, True)] * 4 + [(False, False)] * 4
STEADY = [(True, True)] * 12
REGRESS = [(True, False)] * 4 + [(True, True)] * 8


def runs(**buckets: list[tuple[bool, bool]]) -> tuple[RunResult, RunResult]:
    base: list[Spec] = []
    cand: list[Spec] = []
    for name, results in buckets.items():
        b, c = outcome(name, 4, results)
        base += b
        cand += c
    return run("base", base), run("cand", cand)


def test_bucket_status_from_paired_runs() -> None:
    base, cand = runs(routing=IMPROVE, skip=STEADY, notes=REGRESS)
    comps = {c.bucket: c for c in compare_runs(base, cand, GatePolicy())}
    assert comps["routing"].status == "improved" and comps["routing"].fixed == 8
    assert comps["skip"].status == "unchanged"
    assert comps["notes"].broken == 4 and comps["notes"].p_regress == pytest.approx(1 / 16)


def test_pass_rate_drop_flags_regression_even_with_a_small_score_delta() -> None:
    # Ten of twenty trials flip to failed but keep most partial credit: the sign-flip test
    # sees ten falling pairs (p = 2^-10) although the mean score moved by only 0.05.
    pairs = [Pair(f"t{i}", 0, 1.0, 0.9, True, False) for i in range(10)]
    pairs += [Pair(f"u{i}", 0, 1.0, 1.0, True, True) for i in range(10)]
    c = compare_bucket("card_fields", pairs)
    assert c.delta == pytest.approx(-0.05) and c.pass_delta == pytest.approx(-0.5)
    assert c.p_regress == pytest.approx(2.0**-10)
    assert c.status == "regressed"
    # One flip in 21 pairs is p = 0.5 and a tiny delta: not a regression, and not
    # "unchanged" either while a pair broke.
    diluted = compare_bucket("card_fields", [*pairs[9:], *pairs[-2:]])
    assert diluted.status == "inconclusive"


def test_a_noisy_improvement_is_not_significant() -> None:
    noisy = [(False, True)] * 3 + [(True, False)] * 1 + [(True, True)] * 4
    base, cand = runs(routing=noisy, skip=STEADY)
    comps = compare_runs(base, cand)
    target = next(c for c in comps if c.bucket == "routing")
    assert target.delta == pytest.approx(0.25)
    assert target.p_improve == pytest.approx(5 / 16)
    assert target.status == "inconclusive"


def test_missing_target_is_an_error_and_dropped_pairs_are_reported() -> None:
    with pytest.raises(ValueError, match="'routing'"):
        SequentialGate(GatePolicy(), "routing", {"skip": ["skip_0"]}, {("skip", "skip_0"): 2})
    dropped = compare_bucket("routing", [], n_dropped=4)
    assert dropped.n_pairs == 0 and dropped.n_dropped == 4 and dropped.status == "inconclusive"


# --- pooling ----------------------------------------------------------------------------


def test_merge_runs_pools_confirmation_trials() -> None:
    noisy = [(False, True)] * 3 + [(True, False)] * 1 + [(True, True)] * 4
    base, cand = runs(routing=noisy, skip=STEADY)

    # A confirmation rerun of the routing tasks with trial indices 2..5.
    extra_b: list[Spec] = []
    extra_c: list[Spec] = []
    for task in range(4):
        for index in range(2, 6):
            extra_b.append(("routing", f"routing_{task}", index, "failed", 0.0))
            extra_c.append(("routing", f"routing_{task}", index, "passed", 1.0))
    base2 = merge_runs(base, run("base-confirm", extra_b))
    cand2 = merge_runs(cand, run("cand-confirm", extra_c))

    assert len(base2.trials) == len(base.trials) + 16
    assert base2.trials[: len(base.trials)] == base.trials
    assert base2.trials_per_task["routing_0"] == 6 and base2.trials_per_task["skip_0"] == 3
    assert base2.run_name == "base"
    comps = compare_runs(base2, cand2)
    routing = next(c for c in comps if c.bucket == "routing")
    assert routing.n_pairs == 24 and routing.fixed == 19


def test_merge_runs_replaces_nothing() -> None:
    base = run("base", [("b", "t", 0, "passed", 1.0)])
    with pytest.raises(ValueError, match="t#0"):
        merge_runs(base, run("again", [("b", "t", 0, "failed", 0.0)]))
    with pytest.raises(ValueError, match="cannot merge"):
        merge_runs(base, run("other", [("b", "t", 1, "passed", 1.0)], suite="card_regression"))
