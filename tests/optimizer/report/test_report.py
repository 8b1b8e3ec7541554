"""Run aggregation, pricing, the report store, Markdown and the failing-trial export."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.types import Message, ToolCall, Usage
from promptloop.agents.transcript import Event, Metrics, ToolCallRecord, Transcript
from promptloop.graders.base import Assertion, Score
from promptloop.optimizer.core.pricing import ModelPrice, estimate_cost, price_for
from promptloop.optimizer.core.results import Provenance, RunResult, TrialResult
from promptloop.optimizer.propose.package import (
    export_failing,
    extract_input,
    render_failing_markdown,
)
from promptloop.optimizer.report.markdown import render_markdown
from promptloop.optimizer.report.store import (
    RunNotFoundError,
    list_runs,
    load_run,
    save_run,
    trace_path,
)
from promptloop.optimizer.report.summary import pass_at_k, pass_hat_k, summarize, task_passed

T0 = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
FACT = "2026/03/14.md#ts_3"


def sc(grader: str, value: float | None, threshold: float = 1.0, rationale: str = "",
       assertions: Sequence[Assertion] = ()) -> Score:
    passed = None if value is None else value >= threshold
    return Score(grader=grader, value=value, passed=passed, rationale=rationale,
                 assertions=list(assertions))


def tr(task: str, index: int, status: str, *, bucket: str = "alpha",
       scores: Sequence[Score] | None = None, **extra: Any) -> TrialResult:
    if scores is None:
        scores = [sc("g", 1.0 if status == "passed" else 0.0)] if status in (
            "passed", "failed") else []
    start = T0 + timedelta(seconds=10 * index)
    return TrialResult(task_id=task, bucket=bucket, trial_index=index, status=status,  # type: ignore[arg-type]
                       started_at=start, ended_at=start + timedelta(seconds=5),
                       scores=list(scores), **extra)


def mk_run(trials: Sequence[TrialResult], *, kind: str = "capability", threshold: float = 1.0,
           name: str = "demo-1", model: str = "scripted:demo", **extra: Any) -> RunResult:
    ids = list(dict.fromkeys(t.task_id for t in trials))
    return RunResult(
        run_name=name, suite_name="demo", suite_kind=kind, agent_name="pkm_agent",
        suite_root="/suites/demo", task_ids=ids,
        task_buckets={t.task_id: t.bucket for t in trials}, task_pass_threshold=threshold,
        started_at=T0, ended_at=T0 + timedelta(minutes=2),
        provenance=Provenance(agent_model=model, git_commit="abc123def4567890",
                              prompt_hashes={"pkm_agent": "f" * 64}),
        trials=list(trials), **extra)


MIXED = [tr("a", 0, "passed"), tr("a", 1, "failed"), tr("a", 2, "failed"),
         tr("b", 0, "failed"), tr("b", 1, "failed")]


# --- task pass semantics ---------------------------------------------------------------


def test_capability_task_passes_when_any_trial_passes() -> None:
    s = summarize(mk_run(MIXED, kind="capability"))
    assert [(t.task_id, t.passed) for t in s.tasks] == [("a", True), ("b", False)]
    assert s.task_pass_rate == 0.5
    assert s.trial_pass_rate == pytest.approx(1 / 5)
    assert (s.num_trials, s.counted_trials, s.passed_trials) == (5, 5, 1)


@pytest.mark.parametrize("kind", ["regression", "mixed"])
def test_regression_and_mixed_need_every_trial(kind: str) -> None:
    s = summarize(mk_run(MIXED, kind=kind))
    assert [t.passed for t in s.tasks] == [False, False]
    assert s.task_pass_rate == 0.0
    only_passes = summarize(mk_run([tr("a", 0, "passed"), tr("a", 1, "passed")], kind=kind))
    assert only_passes.task_pass_rate == 1.0


def test_threshold_below_one_is_per_trial_then_the_kind_rule() -> None:
    # docs/compat.md: a threshold below 1.0 decides each trial's pass when it is graded (the
    # trial's status); the task then passes by the kind's rule. It is no longer the mean
    # score over a task's trials: task "a" has a mean of 0.675 >= 0.6 but one failed trial.
    half = [sc("g1", 1.0), sc("g2", 0.5, threshold=0.5)]
    trials = [
        tr("a", 0, "passed", scores=half),  # trial mean 0.75 >= 0.6
        tr("a", 1, "failed", scores=[sc("g1", 0.2), sc("g2", 0.8), sc("judge", None)]),  # 0.5
        tr("b", 0, "passed", scores=[sc("g1", 0.6), sc("g2", 1.0)]),  # 0.8
        tr("b", 1, "passed", scores=[sc("g1", 0.7, threshold=0.8)]),  # 0.7: passed, though g1 not
    ]
    s = summarize(mk_run(trials, kind="regression", threshold=0.6))
    assert [t.passed for t in s.tasks] == [False, True]
    assert s.tasks[0].mean_score == pytest.approx(0.625)
    assert task_passed(trials[:2], "capability") is True
    assert task_passed(trials[:2], "regression") is False


def test_original_rates_count_errored_trials_as_not_passed() -> None:
    # docs/compat.md: the original's rates are reported beside ours (errored trials excluded)
    boom = "ModelAuthError: key rejected"
    trials = [
        tr("a", 0, "passed"), tr("a", 1, "errored", infra_error=boom),
        tr("b", 0, "passed"), tr("b", 1, "passed"),
        tr("c", 0, "errored", infra_error=boom),
    ]
    s = summarize(mk_run(trials, kind="regression"))
    assert (s.counted_task_pass_rate, s.counted_trial_pass_rate) == (1.0, 1.0)
    # the summary's own rates are the original's (issue 21)
    assert (s.task_pass_rate, s.trial_pass_rate) == (pytest.approx(1 / 3), pytest.approx(3 / 5))
    o = s.original
    assert (o.passed_tasks, o.task_pass_rate) == (1, pytest.approx(1 / 3))
    assert (o.passed_trials, o.trial_pass_rate) == (3, pytest.approx(3 / 5))
    # per task over all trials: a 1/2, b 2/2, c 0/1 -> k stops at 1
    assert [(p.k, p.pass_at_k) for p in o.pass_at_k] == [(1, pytest.approx((0.5 + 1 + 0) / 3))]
    assert o.grader_means == {"g": 1.0}
    capability = summarize(mk_run(trials, kind="capability")).original
    assert capability.task_pass_rate == pytest.approx(2 / 3)
    empty = summarize(mk_run([tr("a", 0, "errored", infra_error=boom)])).original
    assert (empty.task_pass_rate, empty.trial_pass_rate) == (0.0, 0.0)


def test_errored_trials_are_excluded_and_counted_apart() -> None:
    boom = "ModelAuthError: key rejected"
    trials = [
        tr("a", 0, "passed"), tr("a", 1, "errored", infra_error=boom),
        tr("b", 0, "failed"),
        tr("c", 0, "errored", infra_error=boom), tr("c", 1, "errored", infra_error=boom),
    ]
    s = summarize(mk_run(trials, kind="regression"))
    assert [t.passed for t in s.tasks] == [True, False, None]
    assert (s.decided_tasks, s.passed_tasks, s.counted_task_pass_rate) == (2, 1, 0.5)
    assert (s.counted_trials, s.errored_trials, s.counted_trial_pass_rate) == (2, 3, 0.5)
    assert (s.task_pass_rate, s.trial_pass_rate) == (0.0, pytest.approx(1 / 5))
    assert s.failed_trials == 1
    assert s.infra_errors == {boom: 3}
    assert not s.all_errored

    dead = summarize(mk_run([tr("a", 0, "errored", infra_error=boom)]))
    assert dead.all_errored
    assert dead.counted_task_pass_rate is None and dead.counted_trial_pass_rate is None
    assert (dead.task_pass_rate, dead.trial_pass_rate) == (0.0, 0.0)
    assert dead.pass_at_k == []


# --- pass@k / pass^k -------------------------------------------------------------------


def test_pass_at_k_formulas() -> None:
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(3, 3, 1) == 1.0
    assert pass_hat_k(5, 2, 3) == pytest.approx(0.064)
    assert pass_at_k(2, 1, 3) == 0.0 and pass_hat_k(2, 1, 3) == 0.0  # k > n


def test_pass_at_k_table_is_averaged_and_stops_at_fewest_trials() -> None:
    trials = [
        tr("a", 0, "passed"), tr("a", 1, "failed"), tr("a", 2, "failed"),  # n=3 c=1
        tr("b", 0, "passed"), tr("b", 1, "passed"), tr("b", 2, "failed"),  # n=3 c=2
        tr("c", 0, "failed"), tr("c", 1, "failed"),  # n=2 c=0
        tr("c", 2, "errored", infra_error="down"),  # not counted: c stays at n=2
    ]
    table = summarize(mk_run(trials)).pass_at_k
    assert [p.k for p in table] == [1, 2]
    assert table[0].pass_at_k == pytest.approx(1 / 3)
    assert table[0].pass_hat_k == pytest.approx(1 / 3)
    assert table[1].pass_at_k == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert table[1].pass_hat_k == pytest.approx((1 / 9 + 4 / 9 + 0) / 3)
    assert all(p.tasks == 3 for p in table)


# --- buckets and graders ---------------------------------------------------------------


def test_bucket_table_and_grader_means() -> None:
    trials = [
        tr("a", 0, "passed", bucket="skip", scores=[sc("path", 1.0), sc("judge", None)]),
        tr("a", 1, "failed", bucket="skip", scores=[sc("path", 0.0), sc("judge", 0.4, 0.6)]),
        tr("b", 0, "passed", bucket="skip", scores=[sc("path", 1.0), sc("judge", 0.8, 0.6)]),
        tr("c", 0, "failed", bucket="route", scores=[sc("path", 0.5)]),
        tr("c", 1, "errored", bucket="route", infra_error="x"),
    ]
    s = summarize(mk_run(trials, kind="capability"))
    by = {b.bucket: b for b in s.buckets}
    assert [b.bucket for b in s.buckets] == ["route", "skip"]
    skip, route = by["skip"], by["route"]
    assert (skip.tasks, skip.trials, skip.passed_trials) == (2, 3, 2)
    assert skip.trial_pass_rate == pytest.approx(2 / 3)
    assert skip.task_pass_rate == 1.0
    # trial scores: a0 = 1.0, a1 = mean(0, 0.4) = 0.2, b0 = mean(1, 0.8) = 0.9
    assert skip.mean_score == pytest.approx((1.0 + 0.2 + 0.9) / 3)
    assert (route.tasks, route.trials, route.errored_trials) == (1, 1, 1)
    assert route.trial_pass_rate == 0.0 and route.task_pass_rate == 0.0
    assert route.mean_score == pytest.approx(0.5)

    graders = {g.grader: g for g in s.graders}
    assert graders["judge"].mean == pytest.approx(0.6)
    assert (graders["judge"].scores, graders["judge"].decided) == (3, 2)
    assert graders["judge"].pass_rate == 0.5
    assert graders["path"].mean == pytest.approx(2.5 / 4)
    assert graders["path"].pass_rate == 0.5


# --- tokens and cost -------------------------------------------------------------------


def usage_transcript(inp: int, out: int, cache_read: int = 0, calls: int = 1) -> Transcript:
    return Transcript(metrics=Metrics(
        n_model_calls=calls, n_retries=1,
        usage=Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=cache_read)))


def test_cost_with_a_known_price() -> None:
    trials = [
        tr("a", 0, "passed", transcript=usage_transcript(600_000, 100_000, cache_read=1_000_000)),
        tr("a", 1, "failed", transcript=usage_transcript(400_000, 100_000), cached=True),
    ]
    s = summarize(mk_run(trials, model="anthropic:claude-sonnet-4-5-20250929"))
    assert (s.usage.input_tokens, s.usage.output_tokens) == (1_000_000, 200_000)
    assert s.usage.cache_read_tokens == 1_000_000
    assert (s.usage.model_calls, s.usage.retries) == (2, 2)
    # $3/M in, $15/M out, cache reads at a tenth of the input price
    assert s.cost.total_usd == pytest.approx(3.0 + 3.0 + 0.3)
    assert s.cost.spent_usd == pytest.approx(1.8 + 1.5 + 0.3)  # the cached trial is excluded
    assert s.cached_trials == 1


def test_price_lookup_overrides_and_unknown_models() -> None:
    usage = Usage(input_tokens=2_000_000, output_tokens=1_000_000)
    assert estimate_cost("local:smollm2", usage).usd == 0.0
    assert estimate_cost("openai:gpt-4o-mini", usage).usd == pytest.approx(0.3 + 0.6)
    unknown = estimate_cost("openai:gpt-5.1-turbo", usage)
    assert unknown.usd is None and unknown.note and "gpt-5.1-turbo" in unknown.note
    overrides = {"openai:gpt-5.1-turbo": {"input": 1.0, "output": 2.0}}
    assert estimate_cost("openai:gpt-5.1-turbo", usage, overrides).usd == pytest.approx(4.0)
    assert price_for("gpt-4o", {"gpt-4o": ModelPrice(input=9, output=9)}) == ModelPrice(
        input=9, output=9)
    s = summarize(mk_run([tr("a", 0, "passed", transcript=usage_transcript(10, 10))],
                         model="openai:mystery"))
    assert s.cost.total_usd is None and any("mystery" in n for n in s.cost.notes)


# --- report store ----------------------------------------------------------------------


def rich_trial(
    task: str, index: int, status: str, bucket: str = "alpha", **extra: Any
) -> TrialResult:
    call = ToolCall(id="call_1", name="Edit", arguments={"file_path": "/Areas/Health/sleep.md",
                                                         "old_string": "## Log",
                                                         "new_string": "## Log\n- slept 5h"})
    transcript = Transcript(
        messages=[
            Message.system("You organise notes."),
            Message.user("<system-reminder>tree</system-reminder>\nPublished Time: x\n"
                         f"Raw Input ID (fact_id): {FACT}\nRaw Input Content:\nslept 5h, tired"),
            Message.assistant("", (call,)),
            Message.tool(call, "old_string not found", is_error=True),
            Message.assistant("I could not edit the file."),
        ],
        tool_calls=[ToolCallRecord(call_id="call_1", tool_name="Edit",
                                   arguments=dict(call.arguments), result="old_string not found",
                                   is_error=True, started_at=T0, ended_at=T0),
                    ToolCallRecord(call_id="call_2", tool_name="Write",
                                   arguments={"file_path": "/2026-03-14.md", "content": "x"},
                                   result="wrote 1 line", is_error=False, started_at=T0,
                                   ended_at=T0)],
        events=[Event(kind="reminder", at=T0, detail="missing updated_insight",
                      data={"run": 1})],
        metrics=Metrics(n_turns=3, n_tool_calls=2, n_model_calls=3,
                        usage=Usage(input_tokens=1200, output_tokens=80)),
    )
    outcome = {
        "is_complete": False, "wrote_para": True, "skipped_pkm": False,
        "missing_requirements": ["updated_insight"],
        "file_contents": {"2026-03-14.md": "x"},
        "workspace_diff": {"created": ["2026-03-14.md"], "modified": [], "deleted": [],
                           "snippets": {"2026-03-14.md": f"slept 5h <!-- fact_id: {FACT} -->"}},
    }
    scores = [
        sc("pkm_completion", 0.6, rationale="insight was never updated",
           assertions=[Assertion(description="updated_insight or skipped", passed=False,
                                 actual={"updated_insight": False}, expected=True),
                       Assertion(description="wrote_para or skipped", passed=True)]),
        sc("pkm_routed_correctly", 0.0, 0.5, rationale="date-named file at the PKM root"),
        sc("pkm_insight_quality", None, rationale="no insight to judge"),
    ] if status in ("failed", "timedOut") else [sc("pkm_completion", 1.0)]
    return tr(task, index, status, bucket=bucket, scores=scores, transcript=transcript,
              outcome=outcome, failure_reason="failed graders: pkm_completion"
              if status == "failed" else None, **extra)


def rich_run(name: str = "demo-1") -> RunResult:
    return mk_run([
        rich_trial("sleep_note", 0, "passed", bucket="route_health"),
        rich_trial("sleep_note", 1, "failed", bucket="route_health"),
        rich_trial("gym_note", 0, "failed", bucket="route_health", cached=True),
        tr("gym_note", 1, "errored", bucket="route_health",
           infra_error="ProviderUnavailable: 503 from upstream"),
        rich_trial("hello", 0, "passed", bucket="skip_trivial"),
    ], kind="mixed", name=name, model="openai:gpt-4.1")


def test_save_load_roundtrip_and_report_shape(tmp_path: Path) -> None:
    run = rich_run()
    path = save_run(run, tmp_path)
    assert path == tmp_path / "reports" / "demo-1.json"
    assert load_run(tmp_path, "demo-1") == run
    assert load_run(tmp_path, "latest") == run
    assert load_run(tmp_path, str(path)) == run

    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["suite"] == {"name": "demo", "kind": "mixed",
                               "taskIds": ["sleep_note", "gym_note", "hello"],
                               "taskPassThreshold": 1.0, "requireReferenceSolution": False}
    first = report["trials"][1]
    assert first["trial"] == {"runName": "demo-1", "suiteName": "demo", "taskId": "sleep_note",
                              "trialIndex": 1, "startedAt": first["trial"]["startedAt"],
                              "endedAt": first["trial"]["endedAt"], "status": "failed",
                              "failureReason": "failed graders: pkm_completion"}
    call = first["transcript"]["toolCalls"][0]
    # docs/compat.md shapes: a failed call carries errorMessage, a result is an object
    assert set(call) == {"callId", "toolName", "arguments", "startedAt", "endedAt", "isError",
                         "errorMessage"}
    assert call["arguments"]["old_string"] == "## Log"
    assert first["transcript"]["toolCalls"][1]["result"] == {"text": "wrote 1 line"}
    messages = first["transcript"]["messages"]
    assert messages[1]["contents"][0]["text"].startswith("<system-reminder>")
    assert messages[2]["functionCalls"][0]["name"] == "Edit" and "content" not in messages[2]
    [result] = messages[3]["results"]
    assert (result["id"], result["isError"]) == ("call_1", True)
    assert json.loads(result["arguments"])["old_string"] == "## Log"
    metrics = first["transcript"]["metrics"]
    assert metrics == {"nTurns": 3, "nToolCalls": 2, "nTotalTokens": 1280}
    assert first["transcript"]["events"][0] == {"at": T0.isoformat(), "kind": "reminder",
                                                "message": "missing updated_insight",
                                                "details": {"run": 1}}
    assert "workspace_diff" not in first["outcome"]["environmentState"]
    assert first["outcome"]["environmentState"]["missing_requirements"] == ["updated_insight"]
    assert first["outcome"]["workspaceDiff"]["created"] == ["2026-03-14.md"]
    assert "contentSnippets" in first["outcome"]["workspaceDiff"]
    # assertion values are strings in the report; the typed ones live in our extras
    assert first["scores"][0]["assertions"][0]["actual"] == '{"updated_insight": false}'
    assert set(report) == {"runName", "suite", "startedAt", "endedAt", "trials"}
    assert "promptloop" not in json.dumps(report)  # no copy of the run inside the report
    extras = json.loads((tmp_path / "reports" / "demo-1.promptloop.json").read_text())
    assert extras["trials"][3]["infraError"].startswith("ProviderUnavailable")
    assert extras["trials"][2]["cached"] is True
    assert extras["trials"][1]["assertionValues"]["0"]["0"]["actual"] == {"updated_insight": False}
    assert extras["provenance"]["agentModel"] == "openai:gpt-4.1"
    assert "messages" not in json.dumps(extras)  # transcripts are stored once, in the report


def test_index_lines_and_missing_run(tmp_path: Path) -> None:
    first, second = rich_run("demo-1"), rich_run("demo-2")
    save_run(first, tmp_path)
    save_run(second, tmp_path)
    save_run(first, tmp_path)  # re-saving replaces its line instead of duplicating it
    lines = [json.loads(x) for x in (tmp_path / "index.jsonl").read_text().splitlines()]
    assert [x["runName"] for x in lines] == ["demo-1", "demo-2"]
    line = lines[1]
    # docs/compat.md: exactly the original's keys, its rates (errored trials not passed)
    assert list(line) == ["runName", "suiteName", "suiteKind", "startedAt", "endedAt",
                          "taskPassRate", "trialPassRate", "numTrials"]
    assert line["taskPassRate"] == pytest.approx(1 / 3)  # gym_note's errored trial fails it
    assert line["trialPassRate"] == pytest.approx(2 / 5)
    assert line["numTrials"] == 5
    ours = [json.loads(x) for x in (tmp_path / "index.promptloop.jsonl").read_text().splitlines()]
    assert [x["runName"] for x in ours] == ["demo-1", "demo-2"]
    entry = list_runs(tmp_path)[1]
    # mixed kind: sleep_note has a failed trial, gym_note's counted trial failed, hello passed
    assert entry.task_pass_rate == pytest.approx(1 / 3)
    assert entry.trial_pass_rate == pytest.approx(2 / 4)
    assert (entry.original_task_pass_rate, entry.original_trial_pass_rate) == (
        pytest.approx(1 / 3), pytest.approx(2 / 5))
    assert (entry.num_trials, entry.errored_trials) == (5, 1)
    assert entry.prompt_hash == "f" * 64 and entry.agent_model == "openai:gpt-4.1"
    assert [r.run_name for r in list_runs(tmp_path)] == ["demo-1", "demo-2"]
    assert load_run(tmp_path, "latest").run_name == "demo-2"

    with pytest.raises(RunNotFoundError) as err:
        load_run(tmp_path, "demo-3")
    assert "demo-2" in str(err.value) and "demo-1" in str(err.value)
    with pytest.raises(RunNotFoundError, match="no saved runs"):
        load_run(tmp_path / "empty", "latest")


def test_trace_lines(tmp_path: Path) -> None:
    run = rich_run()
    save_run(run, tmp_path)
    lines = [json.loads(x) for x in trace_path(tmp_path, run.run_name).read_text().splitlines()]
    assert all({"kind", "at"} <= set(x) for x in lines)
    starts = [x for x in lines if x["kind"] == "trial_start"]
    assert len(starts) == 5
    assert starts[0]["task"] == {"id": "sleep_note", "description": "",
                                 "metadata": {"failure_bucket": "route_health"}}
    ends = [x for x in lines if x["kind"] == "trial_end"]
    assert len(ends) == 5 and all(set(x) == {"kind", "at", "trial", "transcript", "outcome",
                                             "scores"} for x in ends)
    errored = next(x for x in ends if x["trial"]["status"] == "errored")
    assert errored["trial"]["taskId"] == "gym_note" and errored["scores"] == []
    end = lines[-1]
    assert end["kind"] == "run_end" and set(end) == {"kind", "at", "runName", "suiteName",
                                                     "aggregateScores"}
    assert end["aggregateScores"] == {
        "task_pass_rate": pytest.approx(1 / 3), "trial_pass_rate": pytest.approx(2 / 5),
        "grader_mean.pkm_completion": pytest.approx((1.0 + 0.6 + 0.6 + 1.0) / 4),
        "grader_mean.pkm_routed_correctly": 0.0}
    times = [x["at"] for x in lines[:-1]]
    assert times == sorted(times)


# --- Markdown and failing export --------------------------------------------------------


def test_markdown_summary() -> None:
    run = rich_run()
    md = render_markdown(run, summarize(run))
    # docs/compat.md: the original's rates first, ours beside them
    assert "**Task pass rate: 33.3%** (1/3 tasks); errored excluded: 33.3% (1/3)" in md
    assert "**Trial pass rate: 40.0%** (2/5 trials); errored excluded: 50.0% (2/4)" in md
    assert "Trial outcomes: 2 passed, 2 failed, 0 timed out, 1 errored" in md
    assert "1 TRIAL(S) ERRORED" in md and "ProviderUnavailable" in md
    assert "| 1 | 0.500 | 0.500 |" in md  # pass@1 / pass^1 over 3 tasks, k stops at 1
    assert "| 2 |" not in md.split("## pass@k")[1].split("##")[0]
    # bucket names are identifiers, shown as code in every table
    assert "| `route_health` | 2 | 3 | 33.3% | 0.0% |" in md
    assert "insight was never updated" in md
    # non-string values are previewed as JSON in every output (was Python repr here)
    assert "updated_insight or skipped" in md and "expected: true" in md
    assert "openai:gpt-4.1" in md and "abc123def456" in md
    assert "### `sleep_note` #1 (route_health) — failed" in md


def test_failing_export_has_diff_trace_and_no_errored_trials() -> None:
    run = rich_run()
    export = export_failing(run, "route_health")
    assert [(t.task_id, t.trial_index) for t in export.trials] == [("sleep_note", 1),
                                                                   ("gym_note", 0)]
    assert [(x.task_id, x.trial_index) for x in export.infra] == [("gym_note", 1)]
    first = export.trials[0]
    assert first.input_content == "slept 5h, tired"
    assert (first.task_passed_trials, first.task_counted_trials) == (1, 2)
    assert first.diff is not None and first.diff.created == ["2026-03-14.md"]
    assert first.trace[0].startswith('1. Edit(file_path="/Areas/Health/sleep.md"')
    assert "-> ERROR: old_string not found" in first.trace[0]
    assert "file_contents" not in first.outcome

    md = render_failing_markdown(export)
    assert "Infrastructure errors (not agent failures, excluded):** 1" in md
    assert "ProviderUnavailable" in md
    assert "2026-03-14.md" in md and "<!-- fact_id: 2026/03/14.md#ts_3 -->" in md
    assert "2. Write(" in md and "-> ok: wrote 1 line" in md
    assert "date-named file at the PKM root" in md
    assert "## `gym_note` trial 1" not in md

    explicit = export_failing(run, "route_health", task_inputs={"sleep_note": "given text"})
    assert explicit.trials[0].input_content == "given text"
    assert export_failing(run, "skip_trivial").trials == []
    with pytest.raises(ValueError, match="known: route_health, skip_trivial"):
        export_failing(run, "nope")


def test_failing_export_caps_trials_and_size() -> None:
    trials = [rich_trial("a", i, "failed") for i in range(4)] + [rich_trial("b", 0, "failed")]
    run = mk_run(trials)
    capped = export_failing(run, "alpha", max_trials=2)
    assert [(t.task_id, t.trial_index) for t in capped.trials] == [("a", 0), ("b", 0)]
    assert capped.omitted == 3

    export = export_failing(run, "alpha")
    full = render_failing_markdown(export, max_chars=100_000)
    small = render_failing_markdown(export, max_chars=3000)
    assert len(small) < 3000 < len(full)
    assert "more failing trial(s) not shown: size cap 3000" in small
    tiny = render_failing_markdown(export, max_chars=700)
    assert "rest of this trial truncated" in tiny and len(tiny) <= 700


def test_timed_out_trials_are_failures_in_the_export() -> None:
    run = mk_run([tr("a", 0, "timedOut", failure_reason="trial exceeded 300s"),
                  tr("a", 1, "passed")], kind="regression")
    export = export_failing(run, "alpha")
    assert [(t.task_id, t.status) for t in export.trials] == [("a", "timedOut")]
    assert "trial exceeded 300s" in render_failing_markdown(export)
    assert summarize(run).tasks[0].passed is False


def test_extract_input_without_marker() -> None:
    plain = Transcript(messages=[Message.system("s"), Message.user("just text")])
    assert extract_input(plain) == "just text"
    assert extract_input(Transcript()) is None


def test_a_review_that_regressed_by_outside_writes_says_so_first() -> None:
    """A new-team trial's review headline read "the change made data and mixed worse (fixed 0
    and broke 0 of 2 paired trials)" when the head's trials had written outside their
    workspace: the headline now states the writes, not a move of the scores."""
    from promptloop.optimizer.report.plain import review_headline

    reason = ("regresses: 2 head trial(s) wrote outside their workspace (the write undone where "
              "possible; whatever the scores say), first: data-only: ...")
    said = review_headline("regresses", [], ["data", "mixed"], [], [], reasons=[reason])
    assert said == ("2 head trial(s) wrote outside their workspace, whatever the scores; do not "
                    "merge it as is"), said
    plain = review_headline("regresses", [], ["data"], [], [], reasons=["something else"])
    assert "wrote outside" not in plain
    refused = ("regresses: 3 head trial(s) tried to write outside their workspace (refused by "
               "the sandbox; whatever the scores say), first: data-only: ...")
    said = review_headline("regresses", [], ["data"], [], [], reasons=[refused])
    assert said.startswith("3 head trial(s) tried to write outside their workspace, whatever"), said


def test_timed_out_trials_are_named_beside_errored_ones() -> None:
    """A team's eval said only "1 timed out": which task hung was in the markdown report
    alone. The closing lines name timed-out trials as they name errored ones."""
    from promptloop.optimizer.report.plain import errored_trials

    lines = errored_trials([
        tr("hang", 0, "timedOut", failure_reason="exceeded 5s; process group killed"),
        tr("boom", 1, "errored", infra_error="the agent printed no JSON"),
        tr("fine", 0, "passed")])
    assert "1 trial timed out: hang#0: exceeded 5s; process group killed" in lines
    assert "1 trial errored: boom#1: the agent printed no JSON" in lines
    assert len(lines) == 2


def test_the_target_sentence_counts_only_trials_that_failed_on_the_base() -> None:
    """"fixed 1 of 2 target trials" read as half the failures left, where the other pair's
    task already passed on the base (a team's accepted patch that fixed both failures)."""
    from promptloop.optimizer.gate.compare import BucketComparison
    from promptloop.optimizer.report.plain import _fixed

    some = BucketComparison(bucket="urgency", n_pairs=2, fixed=1, base_pass_rate=0.5)
    assert _fixed(some) == "fixed 1 of the 1 target trials that failed on the base"
    every = BucketComparison(bucket="urgency", n_pairs=4, fixed=3, base_pass_rate=0.0)
    assert _fixed(every) == "fixed 3 of 4 target trials"
