"""Aggregation as the original harness does it (docs/compat.md; issue 21).

The original-shaped fields (the index line, the trace's run_end, the summary's
`task_pass_rate` / `trial_pass_rate`) hold the original's rates: every trial counts, an errored
trial is a failed one, a timed-out trial is graded (its scores count in grader means), and with
a `task_pass_threshold` below 1.0 each trial passes by its mean decided score, then the kind's
rule combines the trials (capability: any; regression/mixed: every). Ours stand beside them as
`counted_*` ("errored excluded"). Each case states both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.report.shapes import index_docs
from promptloop.optimizer.report.store import list_runs, save_run
from promptloop.optimizer.report.summary import summarize
from tests.optimizer.report.test_report import mk_run, sc, tr

BOOM = "ProviderUnavailable: 503 after 4 retries"


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    threshold: float
    trials: list[tuple[str, int, str, list[float]]]
    """(task, index, status, decided score values) per trial."""
    original: tuple[float, float]
    """The original's (task pass rate, trial pass rate)."""
    ours: tuple[float | None, float | None]
    """Ours, errored excluded."""


CASES = [
    # the example: 1 pass + 1 errored on a regression suite
    Case("errored-regression", "regression", 1.0,
         [("a", 0, "passed", [1.0]), ("a", 1, "errored", [])], (0.0, 0.5), (1.0, 1.0)),
    Case("errored-capability", "capability", 1.0,
         [("a", 0, "passed", [1.0]), ("a", 1, "errored", [])], (1.0, 0.5), (1.0, 1.0)),
    Case("all-errored", "regression", 1.0,
         [("a", 0, "errored", []), ("b", 0, "errored", [])], (0.0, 0.0), (None, None)),
    # a timed-out trial is graded and never passes at threshold 1.0 (ours too)
    Case("timed-out-regression", "regression", 1.0,
         [("a", 0, "passed", [1.0]), ("a", 1, "timedOut", [1.0, 0.0])], (0.0, 0.5), (0.0, 0.5)),
    # below 1.0 the original passes a timed-out trial whose mean reaches the threshold
    Case("timed-out-threshold-regression", "regression", 0.6,
         [("a", 0, "passed", [1.0]), ("a", 1, "timedOut", [1.0, 0.5])], (1.0, 1.0), (0.0, 0.5)),
    Case("timed-out-threshold-capability", "capability", 0.6,
         [("a", 0, "failed", [0.5, 0.0]), ("a", 1, "timedOut", [0.8]),
          ("b", 0, "failed", [0.2])], (0.5, 1 / 3), (0.0, 0.0)),
    # capability below 1.0: any trial whose mean decided score reaches it (a failing grader
    # among them does not matter); an errored trial never passes
    Case("capability-threshold-mean", "capability", 0.75,
         [("a", 0, "passed", [1.0, 0.5]), ("a", 1, "failed", [0.5]),
          ("b", 0, "failed", [0.7, 0.7]), ("b", 1, "errored", [])], (0.5, 0.25), (0.5, 1 / 3)),
]


def _run(case: Case) -> RunResult:
    trials = [tr(task, i, status, scores=[sc(f"g{n}", v) for n, v in enumerate(values)],
                 infra_error=BOOM if status == "errored" else None)
              for task, i, status, values in case.trials]
    return mk_run(trials, kind=case.kind, threshold=case.threshold)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rates_as_the_original_and_ours_beside_them(case: Case, tmp_path: Path) -> None:
    run = _run(case)
    s = summarize(run)
    assert (s.task_pass_rate, s.trial_pass_rate) == pytest.approx(case.original)
    assert (s.original.task_pass_rate, s.original.trial_pass_rate) == pytest.approx(case.original)
    ours = (s.counted_task_pass_rate, s.counted_trial_pass_rate)
    assert ours == tuple(None if v is None else pytest.approx(v) for v in case.ours)
    line, extras = index_docs(run, s)
    assert (line["taskPassRate"], line["trialPassRate"]) == pytest.approx(case.original)
    assert (extras["countedTaskPassRate"], extras["countedTrialPassRate"]) == ours
    save_run(run, tmp_path / "store", summary=s)
    [entry] = list_runs(tmp_path / "store")
    assert (entry.original_task_pass_rate, entry.original_trial_pass_rate) == pytest.approx(
        case.original)


def test_timed_out_trials_count_in_grader_means() -> None:
    s = summarize(_run(CASES[3]))
    assert s.original.grader_means == {"g0": 1.0, "g1": 0.0}
    assert {g.grader: g.mean for g in s.graders} == {"g0": 1.0, "g1": 0.0}
