"""Issue 30: a trial that wrote outside its workspace is errored with that cause
(optimizer/adapters/escape.py), counted as such in the run's summary, and a candidate with such
a trial is never accepted by optimize's gate (`workflows.gating.refuse_outside_writes`), where
an errored trial would otherwise only drop out of the comparison."""

from __future__ import annotations

import asyncio

from promptloop.optimizer.adapters.escape import OUTSIDE
from promptloop.optimizer.core.isolation import REFUSED_WRITE
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.core.suites import Suite
from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.report.markdown import render_markdown
from promptloop.optimizer.report.summary import failed_text, outside_text, summarize
from promptloop.optimizer.workflows.gating import GateRun, outside_writes, run_gate
from tests.optimizer.workflows.test_gating import BASE, CAND, SUITES, outcome_of, runner

WROTE = f"shell task c00-0 trial 0: {OUTSIDE}: /repo/agent/prompt.md"


def _errored(t: TrialResult, message: str) -> TrialResult:
    return t.model_copy(update={"status": "errored", "scores": [], "infra_error": message,
                                "failure_reason": message})


def gate(message: str | None, task: str = "c00-0") -> GateRun:
    """The gate over a good patch (the target fixed, nothing broken) whose candidate trial 0
    of `task` is errored with `message` (None: none is)."""
    run, _ = runner(SUITES, outcome_of(fixed=True))

    async def spoiled(sub: Suite, prompt: str, label: str,
                      indices: dict[str, list[int]] | None) -> RunResult:
        got = await run(sub, prompt, label, indices)
        if prompt != CAND or message is None:
            return got
        trials = [_errored(t, message) if (t.task_id, t.trial_index) == (task, 0) else t
                  for t in got.trials]
        return got.model_copy(update={"trials": trials})

    async def go() -> GateRun:
        base_runs = [await run(s, BASE, "baseline", None) for s in SUITES]
        return await run_gate(SUITES, base_runs, (BASE, CAND), "target", GatePolicy(),
                              spoiled)

    return asyncio.run(go())


def test_a_good_patch_is_accepted_and_other_errors_do_not_change_that() -> None:
    assert gate(None).verdict.decision == "accept"
    # an infrastructure error is no evidence either way: the pairs drop out, still accepted
    infra = gate("shell task c00-0 trial 0: model call failed: 503")
    assert infra.verdict.decision == "accept", infra.verdict.reasons
    assert not outside_writes(infra.cand_runs)


def test_a_candidate_whose_trial_wrote_outside_is_rejected() -> None:
    gated = gate(WROTE)
    v = gated.verdict
    assert v.decision == "reject", v.reasons
    assert v.reasons[0].startswith("rejected: ") and OUTSIDE in v.reasons[0]
    assert "/repo/agent/prompt.md" in v.reasons[0]
    assert OUTSIDE in v.stopped
    wrote = outside_writes(gated.cand_runs)
    assert [(t.task_id, t.trial_index) for t in wrote] == [("c00-0", 0)]
    # the same on a target task: scores cannot buy the write back
    assert gate(WROTE.replace("c00-0", "target-0"), task="target-0").verdict.decision == \
        "reject"


def test_the_summary_counts_outside_writes_among_the_errored() -> None:
    run = asyncio.run(runner(SUITES, outcome_of(fixed=True))[0](SUITES[0], BASE, "r", None))
    trials = list(run.trials)
    trials[0] = _errored(trials[0], WROTE)
    trials[1] = _errored(trials[1], "shell task x trial 1: model call failed: 503")
    trials[2] = trials[2].model_copy(update={"status": "failed", "agent_error": "tool Glob "
                                             "raised ValueError", "scores": []})
    spoiled = run.model_copy(update={"trials": trials})
    s = summarize(spoiled)
    assert (s.errored_trials, s.outside_write_trials, s.agent_error_trials) == (2, 1, 1)
    # not a tool exception: the failed text names only the real one
    assert failed_text(s).startswith(f"{s.failed_trials} failed (1 by an agent error")
    assert OUTSIDE not in failed_text(s)
    assert outside_text(s) == " (1 wrote outside its workspace)"
    report = render_markdown(spoiled, s)
    assert f"{s.errored_trials} errored (1 wrote outside its workspace)" in report


def test_review_regresses_a_head_that_wrote_outside_and_names_the_namespaced_bucket() -> None:
    """`review.regress_on_outside_writes`: a head trial that wrote outside on a task whose
    base never did makes the verdict "regresses", the bucket named as review names it
    (regression buckets namespaced); a task whose base trial wrote outside too does not."""
    from promptloop.optimizer.gate.verdict import ReviewVerdict
    from promptloop.optimizer.workflows.review import regress_on_outside_writes

    run, _ = runner(SUITES, outcome_of(fixed=True))

    async def both() -> tuple[list[RunResult], list[RunResult]]:
        return ([await run(s, BASE, "base", None) for s in SUITES],
                [await run(s, CAND, "head", None) for s in SUITES])

    base, head = asyncio.run(both())
    reg = next(i for i, s in enumerate(SUITES) if s.config.kind == "regression")
    task = head[reg].trials[0].task_id
    wrote = f"shell task {task} trial 0: {OUTSIDE}: /repo/x"

    def spoil(r: RunResult) -> RunResult:
        return r.model_copy(update={"trials": [
            _errored(t, wrote) if (t.task_id, t.trial_index) == (task, 0) else t
            for t in r.trials]})

    neutral = ReviewVerdict(decision="improves", improved=["target"])
    head[reg] = spoil(head[reg])
    got = regress_on_outside_writes(neutral, base, head)
    assert got.decision == "regresses" and got.regressed == ["regression/r00"]
    assert got.reasons[0].startswith("regresses: 1 head trial(s) wrote outside their "
                                     "workspace") and task in got.reasons[0]
    assert regress_on_outside_writes(neutral, base, base) is neutral  # nothing wrote
    base[reg] = spoil(base[reg])  # the base wrote there too: not the head's doing
    assert regress_on_outside_writes(neutral, base, head) is neutral


REFUSED = ("shell task c00-0 trial 0: command exited 1: Error: EROFS: read-only file system, "
           f"open '/repo/x' ({REFUSED_WRITE}: in its sandbox only the workspace, HOME and "
           "TMPDIR are writable)")


def test_a_write_the_sandbox_refused_rejects_the_candidate_too() -> None:
    """In a box the write fails; an agent that lets it end its trial errors the trial with the
    refusal named. That is the same prompt driving the agent outside: optimize rejects, and
    the reason says the write was refused, not undone (a team's optimize under bwrap ended
    as an infrastructure error when every candidate trial did it)."""
    gated = gate(REFUSED)
    v = gated.verdict
    assert v.decision == "reject", v.reasons
    assert v.reasons[0].startswith("rejected: 1 candidate trial(s) tried to write outside")
    assert "refused by its sandbox" in v.reasons[0]
    # counted by the gate, not by the summary (nothing was written)
    assert [t.task_id for t in outside_writes(gated.cand_runs)] == ["c00-0"]
    assert summarize(gated.cand_runs[0]).outside_write_trials == 0


def test_review_regresses_a_head_whose_writes_the_sandbox_refused() -> None:
    from promptloop.optimizer.gate.verdict import ReviewVerdict
    from promptloop.optimizer.workflows.review import regress_on_outside_writes

    run, _ = runner(SUITES, outcome_of(fixed=True))

    async def both() -> tuple[list[RunResult], list[RunResult]]:
        return ([await run(s, BASE, "base", None) for s in SUITES],
                [await run(s, CAND, "head", None) for s in SUITES])

    base, head = asyncio.run(both())
    task = head[0].trials[0].task_id
    head[0] = head[0].model_copy(update={"trials": [
        _errored(t, REFUSED) if (t.task_id, t.trial_index) == (task, 0) else t
        for t in head[0].trials]})
    got = regress_on_outside_writes(ReviewVerdict(decision="neutral"), base, head)
    assert got.decision == "regresses", got.reasons
    assert "tried to write outside their workspace (refused by the sandbox" in got.reasons[0]


def test_optimizes_sentence_names_the_outside_write_first() -> None:
    """The verdict's reason came first, but the one sentence optimize prints said "too few
    to show an improvement" (a team with --concurrency 1 and the sandbox off)."""
    from promptloop.optimizer.report.plain import optimize_headline

    said = optimize_headline(gate(WROTE).verdict)
    assert "write outside its workspace" in said and "too few" not in said, said
