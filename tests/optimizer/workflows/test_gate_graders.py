"""Harm detection reads a task's kind from its graders, not from its trials' mean score: a
pass/fail task with two pass/fail graders whose trial fails one of them scores 0.5 (the mean),
and was read as a judge-scored task, tested on its mean score at a 0.25 tolerance: a task
that went from 10 of 10 to 2 of 3 was cleared as "no harm" and review said "improves" (a
team's review with a `json_path` and a `json_schema` grader per task)."""

from __future__ import annotations

from promptloop.graders.base import Score
from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.tasks import judge_task
from promptloop.optimizer.workflows.gating import graded_trial, observations
from tests.optimizer.lifecycle.helpers import T0, run, trial


def _two_graders(task: str, index: int, second_passes: bool):  # type: ignore[no-untyped-def]
    scores = [Score(grader="json_path", value=1.0, passed=True),
              Score(grader="json_schema", value=1.0 if second_passes else 0.0,
                    passed=second_passes)]
    return trial(task, "decisions", index, second_passes, T0, scores=scores)


def test_a_task_with_two_pass_fail_graders_takes_the_pass_rate_test() -> None:
    base = run("base", {"decisions-a": [True] * 10},
               trials=[_two_graders("decisions-a", i, True) for i in range(10)])
    head = run("head", {"decisions-a": [True, False, True]},
               trials=[_two_graders("decisions-a", 10 + i, ok)
                       for i, ok in enumerate([True, False, True])])
    assert head.trials[1].score == 0.5 and not graded_trial(head.trials[1])
    rec = observations([base], [head], {})[("decisions", "decisions-a")]
    assert not rec.graded
    found = judge_task(rec, GatePolicy())
    assert found.state != "no harm", found.why
    assert "pass rate" in found.why


def test_a_judge_scored_task_is_still_decided_on_its_scores() -> None:
    def judged(index: int, value: float):  # type: ignore[no-untyped-def]
        return trial("notes-a", "notes", index, value >= 0.6, T0,
                     scores=[Score(grader="rubric_judge", value=value, passed=value >= 0.6)])
    base = run("base", {"notes-a": [True] * 10},
               trials=[judged(i, 0.8 + 0.01 * (i % 3)) for i in range(10)])
    head = run("head", {"notes-a": [True] * 3}, trials=[judged(10 + i, 0.8) for i in range(3)])
    rec = observations([base], [head], {})[("notes", "notes-a")]
    assert rec.graded and graded_trial(head.trials[0])
