"""Flaky trials, disagreeing graders and humans, and the optimizer's flakiness check."""

from __future__ import annotations

from datetime import timedelta

import pytest

from promptloop.graders.base import Score
from promptloop.optimizer.lifecycle.flaky import (
    AmbiguityPolicy,
    bucket_flakiness,
    flaky_tasks,
    grader_disagreements,
    grader_family,
    human_disagreements,
)
from promptloop.optimizer.lifecycle.labels import LabelledItem
from tests.optimizer.lifecycle.helpers import T0, run, trial

T, F = True, False


def test_flaky_task_listed_with_the_disagreeing_trials() -> None:
    runs = [run("r1", {"event-a": [T, F, T, F], "event-b": [T, T, T, T],
                       "event-c": [F, F, F, F]}),
            run("r2", {"event-a": [F, T, T, F]}, day=1)]
    found = flaky_tasks(runs)
    assert [a.task_id for a in found] == ["event-a"]
    a = found[0]
    assert a.kind == "flaky_trials" and a.trials == 8 and a.k == 2
    assert a.pass_at_k == pytest.approx(1 - 6 / 28) and a.pass_hat_k == pytest.approx(1 / 4)
    assert "4 of 8 trials passed on one prompt (2 run(s))" in a.summary
    ids = [e.trial_id for e in a.evidence]
    assert ids[:2] == ["r1/event-a#0", "r1/event-a#1"] and len(ids) == 8
    assert [e.status for e in a.evidence[:2]] == ["passed", "failed"]
    assert "card_completion 0.00 fail" in a.evidence[1].cells["failing graders"]


def test_mostly_passing_or_failing_tasks_are_not_flaky() -> None:
    runs = [run("r1", {"x-1": [T] * 8 + [F] * 2, "x-2": [F] * 8 + [T] * 2,
                       "x-3": [T] * 7 + [F] * 3})]
    assert [a.task_id for a in flaky_tasks(runs)] == ["x-3"]
    assert flaky_tasks(runs, AmbiguityPolicy(min_spread=0.5)) == []


def test_only_the_newest_prompt_counts() -> None:
    old = run("old", {"x-1": [T, F]}, prompt="old prompt")
    new = run("new", {"x-1": [T, T]}, day=1)
    assert flaky_tasks([old, new]) == []
    assert [a.task_id for a in flaky_tasks([new, old.model_copy(
        update={"started_at": T0 + timedelta(days=3)})])] == ["x-1"]


def _scored(task: str, index: int, pairs: dict[str, float]) -> object:
    scores = [Score(grader=g, value=v, passed=v >= 1.0) for g, v in pairs.items()]
    passed = all(s.passed for s in scores)
    return trial(task, "facts", index, passed, T0, scores=scores)


def test_graders_of_one_family_disagreeing() -> None:
    assert grader_family("card_visible_must_contain") == "card_must_contain"
    assert grader_family("pkm_insight_quality_plus") == "pkm_insight_quality"
    trials = [
        _scored("facts-a", 0, {"card_must_contain": 1.0, "card_visible_must_contain": 0.5}),
        _scored("facts-a", 1, {"card_must_contain": 1.0, "card_visible_must_contain": 0.5}),
        _scored("facts-a", 2, {"card_must_contain": 1.0, "card_visible_must_contain": 1.0}),
        _scored("facts-b", 0, {"card_must_contain": 1.0, "card_visible_must_contain": 0.5}),
        _scored("facts-b", 1, {"card_must_contain": 0.0, "card_completion": 1.0}),
    ]
    r = run("r", {}, trials=trials)  # type: ignore[arg-type]
    found = grader_disagreements([r])
    assert [a.task_id for a in found] == ["facts-a"]
    a = found[0]
    assert (a.trials, a.disagreeing) == (3, 2)
    assert a.graders == ["card_must_contain", "card_visible_must_contain"]
    assert a.evidence[0].cells == {"card_must_contain": "1.00 pass",
                                   "card_visible_must_contain": "0.50 fail"}
    loose = grader_disagreements([r], AmbiguityPolicy(grader_min_disagreements=1))
    assert [a.task_id for a in loose] == ["facts-a", "facts-b"]


def test_one_grader_named_twice_is_two_checks_not_a_disagreement() -> None:
    """Two json_path graders on different paths (docs/agents.md shows several per task) were
    read as one family disagreeing on every trial where one path failed."""
    trials = [trial("tickets-a", "facts", i, False, T0, scores=[
        Score(grader="json_path", value=1.0, passed=True),
        Score(grader="json_path", value=0.0, passed=False)]) for i in range(5)]
    r = run("r", {}, trials=trials)  # type: ignore[arg-type]
    assert grader_disagreements([r], AmbiguityPolicy(grader_min_disagreements=1)) == []


def _item(task: str, index: int, human: float, judge: float) -> LabelledItem:
    return LabelledItem(
        trial_id=f"run/{task}#{index}", run_name="run", task_id=task, bucket="insight",
        trial_index=index, lines=[index + 1], labelers=["ana"], human={"groundedness": human},
        judge={"groundedness": judge}, human_value=human, judge_value=judge,
        human_passed=human >= 0.6, judge_passed=judge >= 0.6)


def test_human_and_judge_disagreeing() -> None:
    items = [_item("i-1", 0, 0.9, 0.2), _item("i-1", 1, 0.8, 0.9), _item("i-2", 0, 0.1, 0.2)]
    found = human_disagreements(items, "pkm_insight_quality")
    assert [a.task_id for a in found] == ["i-1"]
    assert found[0].summary == ("the human and pkm_insight_quality disagree on 1 of 2 "
                                "labelled trials")
    assert found[0].evidence[0].cells == {"human": "0.90 pass", "judge": "0.20 fail",
                                          "groundedness (human/judge)": "0.90/0.20"}


def test_bucket_flakiness_for_the_optimizer() -> None:
    base = run("base", {"event-a": [T, F], "event-b": [F, T], "event-c": [F, F],
                        "link-a": [F, F]})
    check = bucket_flakiness([base], "event")
    assert check.failing_trials == 4 and check.flaky_failing_trials == 2
    assert check.flaky_tasks == ("event-a", "event-b") and not check.mostly_flaky
    assert check.share == pytest.approx(0.5)
    flaky = run("flaky", {"event-a": [T, F, F], "event-b": [F, T, T], "event-c": [T]})
    check = bucket_flakiness([flaky], "event")
    assert check.mostly_flaky and "may be ambiguous" in check.message
    assert not bucket_flakiness([flaky], "link").mostly_flaky
    reg = run("reg", {"plain-a": [T, F]}, kind="regression", suite="card_agent_regression")
    assert bucket_flakiness([flaky, reg], "regression/plain").mostly_flaky
    assert "no counted trials" in bucket_flakiness([flaky], "regression/plain").message
