"""The one driver: `run_gate` (optimize) and `run_harm` (review) over real runs.

A deterministic agent answers every trial; these tests check that the drivers run exactly the
trials the gate asks for (the baseline's past its cached ones), count what they paid, feed the
lineage history into each task's record, and reach the verdicts the world calls for.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from pathlib import Path

from promptloop.graders.base import Score
from promptloop.optimizer.core.buckets import bucket_prefix
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.core.suites import (
    GraderSpec,
    LoadedTask,
    Suite,
    SuiteConfig,
    TaskInput,
    TaskSpec,
)
from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.sequential import TaskKey
from promptloop.optimizer.workflows.gating import run_gate, run_harm

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


SUITES = [suite("capability", {"target": 3, "c00": 3, "c01": 2}),
          suite("regression", {"r00": 2})]


def outcome_of(fixed: bool, broken: set[str] = frozenset()):  # type: ignore[no-untyped-def,assignment]
    def outcome(key: TaskKey, index: int, side: str) -> bool:
        if key[0] == "target":
            return side == "cand" and fixed
        return not (side == "cand" and key[1] in broken)
    return outcome


def gate_over_runs(outcome, history: bool = False,  # type: ignore[no-untyped-def]
                   policy: GatePolicy | None = None):
    run, calls = runner(SUITES, outcome)

    async def go():  # type: ignore[no-untyped-def]
        past = [await run(s, BASE, "history", {t.id: list(range(100, 110)) for t in s.tasks})
                for s in SUITES] if history else []
        base_runs = [await run(s, BASE, "baseline", None) for s in SUITES]
        before = sum(calls)
        gated = await run_gate(SUITES, base_runs, (BASE, CAND), "target",
                               policy or GatePolicy(), run, history=past)
        return gated, sum(calls) - before

    return asyncio.run(go())


def test_run_gate_accepts_a_good_patch_and_pays_what_it_ran() -> None:
    # O'Brien-Fleming looks: the target's first look cannot decide, so its second look asks
    # fresh baseline trials beside the candidate's (a thin record), which must come back
    # pooled with the cached ones
    gated, paid = gate_over_runs(outcome_of(fixed=True),
                                 policy=GatePolicy(spending="obrien-fleming"))
    v = gated.verdict
    assert v.decision == "accept", v.reasons
    assert paid == gated.trials_run == v.model_trials > 0
    assert any(r.startswith("no bucket regressed") for r in v.reasons)
    assert [r.split(":")[0] for r in v.reasons if r.startswith("paired (")] == [
        "paired (unseeded)"]
    # the baseline runs came back pooled with the fresh baseline trials the gate asked for
    target = [t for r in gated.base_runs for t in r.trials if t.bucket == "target"]
    assert len(target) > 3 * 2


def test_run_gate_rejects_a_break_and_history_makes_it_quick() -> None:
    thin, paid_thin = gate_over_runs(outcome_of(fixed=True, broken={"c01-1"}))
    assert thin.verdict.decision == "reject" and "'c01-1'" in thin.verdict.reasons[0]
    rich, paid_rich = gate_over_runs(outcome_of(fixed=True, broken={"c01-1"}), history=True)
    assert rich.verdict.decision == "reject" and "'c01-1'" in rich.verdict.reasons[0]
    # with 10 recorded passes per task, a few failures are a break on their own record (the
    # task's Bayes factor at the Bonferroni level): fewer trials paid than with only the 2
    # cached baseline trials, whose thin record needs fresh baseline trials first
    assert "Bayes factor of a drop" in rich.verdict.reasons[0]
    assert paid_rich < paid_thin


def test_run_harm_for_review() -> None:
    outcome = outcome_of(fixed=True, broken={"r00-0"})
    run, calls = runner(SUITES, outcome)

    async def go():  # type: ignore[no-untyped-def]
        base = [await run(s, BASE, "base", None) for s in SUITES]
        head = [await run(s, CAND, "head", None) for s in SUITES]
        before = sum(calls)
        got = await run_harm(SUITES, base, head, (BASE, CAND), GatePolicy(), run)
        return got, sum(calls) - before

    harm, paid = asyncio.run(go())
    # the broken bucket regressed; the pooled test over every pair (its drop included) may
    # reject beside it, never another bucket
    assert harm.result.regressed[0] == "regression/r00"
    assert set(harm.result.regressed) <= {"regression/r00", "(buckets pooled)"}
    assert paid == harm.trials_run > 0
    statements = {s.bucket: s.state for s in harm.result.statements}
    assert statements["regression/r00"] == "regressed"
    assert set(statements) == {"target", "c00", "c01", "regression/r00"}
    assert len(harm.head_runs[1].trials) > 4  # head trials added on the suspect


def test_a_baseline_trial_served_again_from_the_cache_counts_once() -> None:
    """A second review (or a resumed session) asks again for fresh baseline trials an earlier
    one made: the cache serves copies of trials that the lineage history already holds, and a
    task's record counted them twice (15 'recorded trials' of 9 distinct, a smaller p)."""
    from promptloop.optimizer.workflows.gating import history_records, observations
    from tests.optimizer.lifecycle.helpers import run as make_run

    earlier = make_run("earlier", {"dates-a": [False] * 6}, suite="s", kind="capability")
    baseline = make_run("base", {"dates-a": [False, False]}, suite="s", kind="capability",
                        day=1)
    past = history_records([earlier], [baseline])
    assert len(past[("dates", "dates-a")]) == 6
    assert len(observations([baseline], [], past)[("dates", "dates-a")].ref_passes) == 8
    # the session's fresh baseline twins: indices 4 and 5 again, served from the cache
    twins = baseline.model_copy(update={"run_name": "twins", "trials": [
        t.model_copy(update={"cached": True}) for t in earlier.trials[4:]]})
    rec = observations([baseline, twins], [], past)[("dates", "dates-a")]
    assert len(rec.history) == 4 and len(rec.base) == 4  # the copies moved to the baseline
    assert len(rec.ref_passes) == 8  # 6 distinct history trials + 2 baseline, not 10
