"""`promptloop runs` at 80 columns (issue 26, point 7): every line fits, and the model, the
prompt hash and the commit still show; run names are never split."""

from __future__ import annotations

from datetime import UTC, datetime

from promptloop.optimizer.cli.runs import render_table
from promptloop.optimizer.report.store import RunIndexEntry

NAMES = ("pkm_agent_capability-review-20261127T101010-1a2b3c-confirm-head",
         "card_agent_regression-20261127T090909-abcdef")


def _entry(name: str) -> RunIndexEntry:
    at = datetime(2026, 11, 27, 10, 10, tzinfo=UTC)
    return RunIndexEntry(
        run_name=name, suite_name=name.split("-")[0], suite_kind="capability", started_at=at,
        ended_at=at, task_pass_rate=0.5, trial_pass_rate=0.625, num_trials=16,
        agent_name="pkm_agent", agent_model="anthropic:claude-haiku-4-5",
        prompt_hash="9f8e7d6c5b4a39281706", git_commit="0123456789abcdef0123", role="candidate",
        candidate_commit="fedcba9876543210fedc")


def test_runs_fit_80_columns_and_keep_prompt_model_and_commit() -> None:
    text = render_table([_entry(n) for n in NAMES], 80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    header = " ".join(lines[:2])
    for column in ("run", "role", "model", "prompt", "commit", "pass", "started"):
        assert column in header, text
    for name in NAMES:
        assert name in lines  # a whole line: never cut
    assert text.count("anthropic:claude-haiku-4-5") == 2
    assert text.count("9f8e7d6") == 2 and text.count("candidate") == 2
    assert text.count("11-27 10:10") == 2  # the start time, role kept at 80 columns
    assert text.count("fedcba9") == 2  # a candidate shows its own commit
    wide = render_table([_entry(n) for n in NAMES], 250).splitlines()
    assert len(wide) == 3 and wide[1].startswith(NAMES[0] + " ")


def test_a_mostly_errored_run_does_not_read_100_percent() -> None:
    """1 passed and 6 errored of 7 read '100.0%' (the errored-excluded rate): runs shows the
    rate eval prints first, errored trials counted as failed, and keeps the errored count."""
    e = _entry(NAMES[1]).model_copy(update={
        "trial_pass_rate": 1.0, "task_pass_rate": 1.0, "original_trial_pass_rate": 1 / 7,
        "original_task_pass_rate": 1 / 7, "num_trials": 7, "errored_trials": 6})
    for width in (80, 250):
        text = render_table([e], width)
        assert "100.0%" not in text and "14.3%" in text, text
        assert "6 err" in text or " 6 " in text.splitlines()[-1], text
