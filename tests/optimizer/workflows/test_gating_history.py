"""The window of lineage history the gate reads (issue 31): the newest HISTORY_WINDOW runs."""

from __future__ import annotations

from pathlib import Path

from promptloop.optimizer.core.results import Provenance, RunResult
from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.sequential import heldout_tasks
from promptloop.optimizer.report.store import save_run
from promptloop.optimizer.sim.world import build_world
from promptloop.optimizer.workflows.gating import HISTORY_WINDOW, lineage_history


def _own(run: RunResult, prompt: str = "h1") -> RunResult:
    prov = Provenance(agent_model="scripted:m", prompt_hashes={run.agent_name: prompt})
    return run.model_copy(update={"provenance": prov})


def test_the_gate_reads_the_newest_window_of_the_lineage(tmp_path: Path) -> None:
    policy = GatePolicy()
    runs = HISTORY_WINDOW + 5
    world = build_world("card", 3, 0.0, 7, lambda ids, r: heldout_tasks(ids, policy, "7", r),
                        None, runs)
    suite = world.suites[0].name
    history = [_own(r) for r in world.history if r.suite_name == suite]
    assert len(history) == runs
    for r in history:
        save_run(r, tmp_path)
    other = _own(world.history[-1], prompt="h2")  # another prompt: not the lineage
    save_run(other.model_copy(update={"run_name": "other-prompt"}), tmp_path)
    base = _own(world.baseline[0])
    got = lineage_history(tmp_path, [base])
    newest = sorted(history, key=lambda r: r.started_at)[-HISTORY_WINDOW:]
    assert [r.run_name for r in got] == [r.run_name for r in reversed(newest)]
    assert len(lineage_history(tmp_path, [base], window=None)) == runs
