"""The viewer's "health is stale" banner counts only runs a refreshed health would take in: a
run whose every trial came from the trial cache (nightly's unchanged baseline) is never in a
health's window, so it kept the banner up whatever the user refreshed (a team's nightly)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from promptloop.optimizer.report.store import list_runs
from promptloop.optimizer.view.health import newer_runs
from tests.optimizer.lifecycle.helpers import T0, run, save_all, trial


def test_a_cached_run_after_the_health_does_not_make_it_stale(tmp_path: Path) -> None:
    used = run("eval-1", {"event-a": [True, True]})
    cached = run("night-2", {"event-a": [True, True]}, day=1, trials=[
        trial("event-a", "event", i, True, T0 + timedelta(days=1), cached=True)
        for i in range(2)])
    fresh = run("eval-3", {"event-a": [True, False]}, day=2)
    save_all(tmp_path, [used, cached, fresh])
    entries = {e.run_name: e for e in list_runs(tmp_path / "runs")}
    assert entries["night-2"].fresh_trials == 0 and entries["eval-3"].fresh_trials == 2
    health: Any = SimpleNamespace(suite_name=used.suite_name, lineage=SimpleNamespace(
        runs=[SimpleNamespace(started_at=used.started_at)]))
    assert newer_runs(health, [entries["eval-1"], entries["night-2"]]) == 0
    assert newer_runs(health, list(entries.values())) == 1
