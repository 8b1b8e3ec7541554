"""The report store in the original harness's shapes (docs/compat.md).

A golden store (tests/compat/golden/) written from a scripted run is validated against the
checked-in JSON Schemas of the original's report, trace line and index line, and a fresh run
must write it again byte for byte after the volatile values (times, call ids, durations) are
normalised. Regenerate it after an intended change of the shapes with
`PROMPTLOOP_REGEN_GOLDEN=1 python -m pytest tests/compat/test_report_compat.py`.
A store written before this layout (tests/compat/legacy/) must still read.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from promptloop.agents.llm.types import Message, ToolCall
from promptloop.agents.transcript import ToolCallRecord, Transcript
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.core.suites import load_suite
from promptloop.optimizer.report.markdown import render_markdown
from promptloop.optimizer.report.schemas import SCHEMA_NAMES, load_schema, load_schemas
from promptloop.optimizer.report.store import list_runs, load_run, save_run
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.run.runner import RunOptions, run_suite
from tests import policies
from tests.optimizer import suite_builder as sb

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
LEGACY = HERE / "legacy" / "runs"
RUN = "golden-pkm"
FIXED_AT = "2026-03-14T09:30:00+00:00"
TIME_KEYS = {"startedAt", "endedAt", "at", "timestamp"}
SECOND_KEYS = {"modelSeconds", "toolSeconds"}
CALL_ID = re.compile(r"^call_\d+$")
T0 = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)


def validator(name: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry().with_resources(
        (uri, Resource.from_contents(schema)) for uri, schema in load_schemas().items()
    )
    return Draft202012Validator(load_schema(name), registry=registry)


def assert_valid(name: str, doc: Any) -> None:
    errors = sorted(validator(name).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def golden_run(tmp: Path) -> RunResult:
    """A scripted PKM run of two tasks (one filed with a judged insight, one skipped)."""
    tasks = [
        sb.task("sleep", "Slept 5 hours, coffee after 4pm again.", 1, bucket="route", trials=1,
                input={"base_fixture": "fresh"},
                graders=[{"name": "pkm_completion"},
                         {"name": "pkm_routed_correctly",
                          "config": {"expected_buckets": ["Areas/Health"]}},
                         {"name": "pkm_insight_quality"}]),
        sb.task("hello", "hi", 2, bucket="skip_trivial", trials=1,
                input={"base_fixture": "fresh"},
                graders=[{"name": "pkm_completion"},
                         {"name": "terminal_path", "config": {"expected": "skip"}}]),
    ]
    root = sb.suite(tmp / "golden_pkm", tasks, agent="pkm_agent", kind="mixed",
                    clock="2026-03-14T09:30:00+00:00")
    options = RunOptions(
        agent_model="scripted:pkm", judge_model="scripted:judge", state_dir=tmp / "state",
        reuse=False, run_name=RUN, concurrency=1,  # one at a time: a fixed trace order
        prompt_text=f"You organise notes. Skip input that is {policies.GOOD_SKIP_RULE}.",
    )
    run = asyncio.run(run_suite(load_suite(root), options, policies.pkm_model(),
                                policies.judge_model()))
    return run.model_copy(update={"suite_root": "/suites/golden_pkm"})


def normalise(value: Any, ids: dict[str, str]) -> Any:
    """Fixed times, durations and call ids, so two runs of the same script compare equal."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in TIME_KEYS and isinstance(v, str):
                out[k] = FIXED_AT
            elif k in SECOND_KEYS:
                out[k] = 0.0
            else:
                out[k] = normalise(v, ids)
        if out.get("kind") == "timing" and "message" in out:
            out["message"] = "0.000s"
        return out
    if isinstance(value, list):
        return [normalise(v, ids) for v in value]
    if isinstance(value, str) and CALL_ID.match(value):
        return ids.setdefault(value, f"call_{len(ids) + 1}")
    return value


def store_files(store: Path) -> dict[str, Any]:
    """Every file of a store as parsed JSON (JSONL files as lists), keyed by relative path."""
    out: dict[str, Any] = {}
    for path in sorted(p for p in store.rglob("*") if p.is_file() and p.suffix != ".lock"):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(store).as_posix()
        out[rel] = ([json.loads(x) for x in text.splitlines()] if path.suffix == ".jsonl"
                    else json.loads(text))
    return out


def write_normalised(store: Path, dest: Path) -> None:
    ids: dict[str, str] = {}
    for rel, doc in store_files(store).items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = normalise(doc, ids)
        if rel.endswith(".jsonl"):
            text = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in data)
        else:
            text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
        path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def fresh_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path]:
    tmp = tmp_path_factory.mktemp("golden")
    run = golden_run(tmp)
    save_run(run, tmp / "store")
    write_normalised(tmp / "store", tmp / "normalised")
    if os.environ.get("PROMPTLOOP_REGEN_GOLDEN") == "1":
        shutil.rmtree(GOLDEN, ignore_errors=True)
        shutil.copytree(tmp / "normalised", GOLDEN)
    return run, tmp / "normalised"


def test_schemas_are_valid_draft_2020_12() -> None:
    for name in SCHEMA_NAMES:
        Draft202012Validator.check_schema(load_schema(name))


def test_golden_store_has_the_original_shapes(fresh_store: tuple[RunResult, Path]) -> None:
    del fresh_store  # (regenerates the golden store first when asked to)
    files = store_files(GOLDEN)
    assert set(files) == {"index.jsonl", "index.promptloop.jsonl", f"reports/{RUN}.json",
                          f"reports/{RUN}.promptloop.json", f"traces/{RUN}.jsonl"}
    assert_valid("report", files[f"reports/{RUN}.json"])
    for line in files["index.jsonl"]:
        assert_valid("index_entry", line)
    kinds = []
    for line in files[f"traces/{RUN}.jsonl"]:
        assert_valid("trace_line", line)
        kinds.append(line["kind"])
    assert kinds == ["trial_start", "trial_end", "trial_start", "trial_end", "run_end"]


def test_a_scripted_run_writes_the_golden_store(fresh_store: tuple[RunResult, Path]) -> None:
    _, normalised = fresh_store
    assert store_files(normalised) == store_files(GOLDEN)


def test_the_golden_store_reads_back(fresh_store: tuple[RunResult, Path], tmp_path: Path) -> None:
    run, _ = fresh_store
    shutil.copytree(GOLDEN, tmp_path / "store")
    back = load_run(tmp_path / "store", RUN)
    assert [(t.task_id, t.bucket, t.status) for t in back.trials] == [
        ("hello", "skip_trivial", "passed"), ("sleep", "route", "failed")]
    assert back.trials[1].failure_reason == "failed graders: pkm_routed_correctly"
    assert back.task_info["hello"].metadata == {"failure_bucket": "skip_trivial"}
    assert summarize(back).original.grader_means == summarize(run).original.grader_means
    [entry] = list_runs(tmp_path / "store")
    assert (entry.run_name, entry.task_pass_rate, entry.original_task_pass_rate) == (RUN, 0.5, 0.5)


def test_a_report_the_original_wrote_reads_without_our_extras(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(GOLDEN, store)
    (store / "reports" / f"{RUN}.promptloop.json").unlink()
    (store / "index.promptloop.jsonl").unlink()
    run = load_run(store, RUN)
    # buckets and descriptions come from the trace's trial_start lines
    assert [(t.task_id, t.bucket) for t in run.trials] == [("hello", "skip_trivial"),
                                                           ("sleep", "route")]
    sleep = run.trials[1]
    assert sleep.transcript.completed and sleep.outcome["workspace_diff"]["created"]
    assert (sleep.scores[1].grader, sleep.scores[1].value) == ("pkm_routed_correctly", 0.0)
    assert summarize(run).task_pass_rate == 0.5
    [entry] = list_runs(store)
    assert (entry.original_task_pass_rate, entry.task_pass_rate) == (0.5, None)


def test_the_legacy_store_still_reads(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    shutil.copytree(LEGACY, store)
    [entry] = list_runs(store)
    # its index line held our rates (errored trials excluded); with an errored trial the
    # original's rate was not recorded
    assert (entry.task_pass_rate, entry.errored_trials, entry.original_task_pass_rate) == (
        0.5, 1, None)
    run = load_run(store, "legacy-card")
    assert [(t.task_id, t.status) for t in run.trials] == [
        ("coffee", "passed"), ("dog", "failed"), ("dog", "failed"), ("down", "errored")]
    assert run.trials[0].transcript.tool_calls[0].tool_name == "save_timeline_card"
    assert "legacy-card" in render_markdown(run, summarize(run))
    # a new run saved into the old store sits beside the old one
    save_run(run.model_copy(update={"run_name": "resaved"}), store)
    assert [r.run_name for r in list_runs(store)] == ["legacy-card", "resaved"]
    resaved = load_run(store, "resaved")
    assert resaved == run.model_copy(update={"run_name": "resaved"})
    # the original's rate counts the errored task as failed: coffee of coffee, dog, down
    assert list_runs(store)[1].original_task_pass_rate == pytest.approx(1 / 3)


def test_unparsed_tool_arguments_round_trip(tmp_path: Path) -> None:
    bad = ToolCall(id="c1", name="Write", raw_arguments="{not json", parse_error="bad JSON")
    transcript = Transcript(
        messages=[Message.system("s"), Message.user("u"), Message.assistant("", (bad,)),
                  Message.tool(bad, "Invalid arguments for Write", is_error=True)],
        tool_calls=[ToolCallRecord(call_id="c1", tool_name="Write", arguments={},
                                   raw_arguments="{not json", result="Invalid arguments",
                                   is_error=True, started_at=T0, ended_at=T0)],
    )
    base = load_run(LEGACY, "legacy-card")
    trial = base.trials[0].model_copy(update={"transcript": transcript})
    run = base.model_copy(update={"trials": [trial]})
    save_run(run, tmp_path)
    assert load_run(tmp_path, run.run_name) == run
    report = json.loads((tmp_path / "reports" / f"{run.run_name}.json").read_text())
    [result] = report["trials"][0]["transcript"]["messages"][3]["results"]
    assert result["arguments"] == "{not json"  # the text the model sent
