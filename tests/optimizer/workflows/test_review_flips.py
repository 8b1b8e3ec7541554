"""The review comment's newly failing and fixed trials include harm detection's later head
trials, which have no base trial of their index: a team's review listed "Newly failing
trials (0) None" while two head trials of a task that always passed on the base failed."""

from __future__ import annotations

from promptloop.optimizer.workflows.review_models import trial_flips
from tests.optimizer.lifecycle.helpers import run


def test_a_later_head_trial_is_compared_with_the_tasks_base_trials() -> None:
    base = run("base", {"a-1": [True, True], "b-1": [False, False], "c-1": [True, False]})
    head = run("head", {"a-1": [True, True, False, True, False],
                        "b-1": [False, False, True], "c-1": [True, False, False, True]})
    broken, fixed = trial_flips(base, head)
    # a-1 always passed on the base: its failed later trials are newly failing
    assert [(c.task_id, c.trial_index) for c in broken] == [("a-1", 2), ("a-1", 4)]
    # b-1 always failed: its passing later trial is fixed; c-1's base disagrees with itself
    assert [(c.task_id, c.trial_index) for c in fixed] == [("b-1", 2)]


def test_a_paired_trial_is_still_compared_with_its_twin() -> None:
    base = run("base", {"a-1": [True, False]})
    head = run("head", {"a-1": [False, True]})
    broken, fixed = trial_flips(base, head)
    assert [(c.task_id, c.trial_index) for c in broken] == [("a-1", 0)]
    assert [(c.task_id, c.trial_index) for c in fixed] == [("a-1", 1)]
