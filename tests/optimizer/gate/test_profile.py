"""`gate.profile.plan`: extra baseline trials go where a record leaves the gate undecided."""

from __future__ import annotations

from promptloop.optimizer.gate.policy import GatePolicy
from promptloop.optimizer.gate.profile import plan, record_value
from promptloop.optimizer.gate.tasks import HarmScale, TaskRecord

POLICY = GatePolicy()


def rec(task: str, passes: int, fails: int) -> TaskRecord:
    return TaskRecord(("b", task), [(1.0, True)] * passes + [(0.0, False)] * fails)


def test_a_decided_record_is_worth_nothing_and_an_undecided_one_a_bit() -> None:
    scale = HarmScale()
    assert record_value(rec("reliable", 40, 0), POLICY, scale) < 0.01
    assert record_value(rec("failing", 0, 40), POLICY, scale) < 0.01
    coin = record_value(rec("flaky", 6, 6), POLICY, scale)
    assert 0.4 < coin <= 1.0
    assert record_value(rec("short", 2, 0), POLICY, scale) == 1.0  # under history_min


def test_the_budget_goes_to_the_least_decided_records_first() -> None:
    records = [rec("reliable", 40, 0), rec("failing", 0, 40), rec("flaky", 6, 6),
               rec("short", 2, 0)]
    picks = plan(records, POLICY, 12)
    assert sum(p.trials for p in picks) == 12
    assert {p.key[1] for p in picks} <= {"flaky", "short"}
    assert picks[0].key[1] == "short" and picks[0].record_class == "ambiguous"
    assert plan(records, POLICY, 0) == []
    # nothing undecided: nothing spent
    assert plan([rec("reliable", 40, 0), rec("failing", 0, 40)], POLICY, 10) == []


def test_a_small_budget_over_equal_records_spreads_over_buckets() -> None:
    """Six equally undecided records, two per bucket in file order, and three chunks: one
    task of each bucket gets a chunk (file order alone gave both of bucket a's and one of b's)."""
    records = [TaskRecord((b, f"{b}{i}"), [(1.0, True)] * 2) for b in "abc" for i in (1, 2)]
    picks = plan(records, POLICY, 6)
    assert sorted(p.key[0] for p in picks) == ["a", "b", "c"]
    assert all(p.trials == 2 for p in picks)
