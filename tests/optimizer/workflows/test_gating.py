"""run_gate (the gate over real runs) and the calibration simulator pay for the same trials.

bench/gate_calibration.py counts what an optimize iteration costs by answering the sequential
gate's requests itself (`optimizer.gate.simulate.drive`). These tests drive the same gate
through `optimizer.workflows.gating.run_gate`, with runs built from the same outcomes, and
check that both reach the same verdict with the same number of trials run.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from optimizer.gate.simulate import drive

from graders.base import Score
from optimizer.core.buckets import bucket_prefix
from optimizer.core.results import RunResult, TrialResult
from optimizer.core.suites import GraderSpec, LoadedTask, Suite, SuiteConfig, TaskInput, TaskSpec
from optimizer.gate.compare import GatePolicy
from optimizer.gate.sequential import SequentialGate, TaskKey, heldout_tasks
from optimizer.workflows.gating import bucket_tasks, run_gate

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BASE, CAND = "base prompt", "candidate prompt"


def suite(kind: str, buckets: dict[str, int]) -> Suite:
    tasks = []
    for bucket, n in buckets.items():
        for i in range(n):
            spec = TaskSpec(id=f"{bucket}-{i}", description=bucket, trials_per_run=2,
                            metadata={"failure_bucket": bucket},
                            input=TaskInput(fact_id=f"2026/01/01.md#ts_{len(tasks) + 1}"),
                            graders=[GraderSpec(name="g")])
            tasks.append(LoadedTask(spec, Path("/x"), None, None, spec.id))
    config = SuiteConfig(name=f"pkm_agent_{kind}", agent_name="pkm_agent", kind=kind)
    return Suite(Path(f"/suites/{kind}"), config, tuple(tasks), kind)


def world(kind: str, noise: float, seed: int):  # type: ignore[no-untyped-def]
    """Deterministic outcomes per (task, index, side): the simulator's population."""
    def outcome(key: TaskKey, index: int, side: str) -> bool:
        bucket, task = key
        passing = bucket != "target" and random.Random(f"{seed}:{task}").random() < 0.8
        if bucket == "target":
            p = 1.0 if side == "cand" and kind != "null" else 0.0
        else:
            p = (0.55 if kind == "broad" and side == "cand" else 1.0) if passing else 0.0
        draw = random.Random(f"{seed}:{task}:{index}:{side}")
        passed = draw.random() < p
        return not passed if draw.random() < noise else passed

    return outcome


def runner(suites: list[Suite], outcome):  # type: ignore[no-untyped-def]
    calls: list[int] = []

    async def run(sub: Suite, prompt: str, label: str,
                  indices: dict[str, list[int]] | None) -> RunResult:
        side = "base" if prompt == BASE else "cand"
        prefix = bucket_prefix(sub.config.kind)
        trials = []
        for t in sub.tasks:
            for i in (indices or {}).get(t.id, range(t.spec.trials_per_run)):
                ok = outcome((prefix + t.bucket, t.id), i, side)
                trials.append(TrialResult(task_id=t.id, bucket=t.bucket, trial_index=i,
                                          status="passed" if ok else "failed",
                                          scores=[Score(grader="g", value=float(ok), passed=ok)],
                                          started_at=T0, ended_at=T0))
        calls.append(len(trials))
        return RunResult(run_name=label, suite_name=sub.name, suite_kind=sub.config.kind,
                         agent_name=sub.agent_name, suite_root=str(sub.root),
                         task_ids=[t.id for t in sub.tasks],
                         task_buckets={t.id: t.bucket for t in sub.tasks},
                         trials_per_task={t.id: t.spec.trials_per_run for t in sub.tasks},
                         started_at=T0, ended_at=T0, trials=trials)

    return run, calls


@pytest.mark.parametrize(("kind", "noise", "seed"), [
    ("good", 0.0, 1), ("good", 0.2, 2), ("good", 0.2, 3), ("broad", 0.1, 4),
    ("broad", 0.2, 5), ("null", 0.2, 6),
])
def test_run_gate_pays_what_the_simulator_counts(kind: str, noise: float, seed: int) -> None:
    suites = [suite("capability", {"target": 4} | {f"c{k:02d}": 3 for k in range(12)}),
              suite("regression", {f"r{k:02d}": 3 for k in range(12)})]
    policy = GatePolicy()
    tasks, _ = bucket_tasks(suites)
    held = heldout_tasks(tasks["target"], policy, salt="target")
    outcome = world(kind, noise, seed)
    run, calls = runner(suites, outcome)

    async def gate_over_runs():  # type: ignore[no-untyped-def]
        base_runs = [await run(s, BASE, "baseline", None) for s in suites]
        paid_before = sum(calls)
        gated = await run_gate(suites, base_runs, (BASE, CAND), "target", policy, run,
                               heldout=held)
        return gated, sum(calls) - paid_before

    gated, paid = asyncio.run(gate_over_runs())
    gate = SequentialGate(policy, "target", tasks,
                          {(b, t): 2 for b, ts in tasks.items() for t in ts}, held)
    verdict, spent = drive(gate, outcome)
    assert (verdict.decision, verdict.stopped) == (gated.verdict.decision,
                                                   gated.verdict.stopped)
    # over real runs the verdict also says whether the pairs shared seeds (these runs carry no
    # seed: the pairing is called unseeded); the simulator has no providers to ask
    pairing = [r for r in gated.verdict.reasons if r.startswith("paired (")]
    assert [r.split(":")[0] for r in pairing] == ["paired (unseeded)"]
    assert verdict.reasons == [r for r in gated.verdict.reasons if r not in pairing]
    assert spent == paid == gated.trials_run == gated.verdict.model_trials
    assert any("regression/r" in b for b in tasks) and "target" in tasks
