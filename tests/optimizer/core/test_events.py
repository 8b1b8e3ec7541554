"""Typed events: the JSON-lines log holds one object per event and reads back typed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from promptloop.optimizer.core.events import (
    Event,
    EventLog,
    Phase,
    TrialFinished,
    VerdictReached,
    fan_out,
    parse_event,
)
from promptloop.optimizer.core.names import check_agent, did_you_mean


def test_log_appends_json_lines_that_read_back_typed(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"event": "phase", "at": "2026-03-14T09:30:00Z", "message": "earlier"}\n')
    seen: list[Event] = []
    with EventLog(path) as log:
        sink = fan_out(seen.append, None, log)
        sink(Phase(message="baseline"))
        sink(TrialFinished(run="r", task="t", trial=0, bucket="b", status="passed", cached=True))
        sink(VerdictReached(iteration=1, decision="accept", reasons=["ok"], branch=None))
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and len(seen) == 3
    back = [parse_event(line) for line in lines]
    assert isinstance(back[0], Phase) and back[0].message == "earlier"
    assert back[1:] == seen
    assert lines[2].startswith('{"event":"trial_end","at":"')


def test_events_are_checked() -> None:
    with pytest.raises(ValidationError):
        Phase(mesage="typo")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        parse_event('{"event": "phaze", "at": "2026-03-14T09:30:00Z", "message": "x"}')


def test_names() -> None:
    assert did_you_mean("skip_trival", ["skip_trivial", "short_fact"]) == (
        " Did you mean 'skip_trivial'?"
    )
    assert did_you_mean("zzz", ["skip_trivial"]) == ""
    assert check_agent("pkm_agent") == "pkm_agent"
    with pytest.raises(ValueError, match=r"Did you mean 'pkm_agent'.*card_agent, pkm_agent"):
        check_agent("pkm_agnet")
