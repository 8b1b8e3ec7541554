"""The Node.js example agent (examples/action-items) against a loopback fake model: both modes
of the trial contract, its workspace file, its error causes, and that the per-run key never
leaves it; and its suite and promptloop.toml load."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.examples.contract_check import check_request, check_result
from tests.examples.fake_chat import FakeChat

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "action-items"
AGENT = EXAMPLE / "agent" / "agent.js"
PROMPT = EXAMPLE / "agent" / "prompt.js"
SUITE = EXAMPLE / "evals"
NODE = shutil.which("node")
KEY = "pl-run-token-7f3a9c"
CONTRACT = "promptloop.trial/1"
GENERAL = {"json_path", "json_schema", "rubric_judge", "command"}

GOOD = json.dumps({
    "items": [
        {"task": "Send the revised budget to finance", "owner": "Priya", "due": "2026-03-13"},
        {"task": "Book the offsite venue", "owner": None, "due": None},
    ],
    "summary": "Budget and offsite were discussed.",
})
FENCED = "```json\n" + json.dumps({"items": [], "summary": "Nothing to do."}) + "\n```"
REPLIES = {"good": GOOD, "fenced": FENCED, "bad": "Sure! Here are the action items: Priya, budget",
           "noitems": json.dumps({"summary": "no list"})}
NOTES = "Budget review\n- Priya will send the revised budget to finance by Friday."

needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


def request(base_url: str, workspace: Path, model: str, **extra: Any) -> dict[str, Any]:
    req: dict[str, Any] = {
        "contract": CONTRACT,
        "agent": "action_items",
        "task": {"id": "ai-test", "description": "a test", "input": {"content": NOTES},
                 "metadata": {"failure_bucket": "due_dates"}, "graders": []},
        "prompt": {"name": "system", "text": "You list action items as JSON.",
                   "path": "agent/prompt.js", "ref": "working tree",
                   "region": "template literal SYSTEM_PROMPT"},
        "workspace": str(workspace),
        "model": {"base_url": base_url, "model": model, "api_key": KEY},
        "trial": {"index": 2, "seed": 4242},
        "published_at": "2026-03-10T10:00:00",
        "timeout_s": 20,
    }
    req.update(extra)
    if "prompt" in req:
        check_request(req)
    return req


def run_agent(stdin: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    proc = subprocess.run(
        [NODE, str(AGENT), *args], input=stdin, capture_output=True, text=True,
        timeout=timeout, env={"PATH": "/usr/bin:/bin:/usr/local/bin"}, check=False,
    )
    assert KEY not in proc.stdout and KEY not in proc.stderr, "the api key leaked"
    return proc


def single(req: dict[str, Any]) -> dict[str, Any]:
    proc = run_agent(json.dumps(req))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    result: dict[str, Any] = json.loads(lines[0])
    assert result["contract"] == CONTRACT
    assert isinstance(result["outcome"], dict)
    check_result(result)
    return result


@needs_node
def test_one_request_gives_one_result_with_outcome_transcript_usage(tmp_path: Path) -> None:
    with FakeChat(REPLIES) as fake:
        result = single(request(fake.base_url, tmp_path, "reply:good"))
    assert result["error"] is None
    items = json.loads(GOOD)["items"]
    assert result["outcome"] == {"items": items, "summary": "Budget and offsite were discussed.",
                                 "n_items": 2}
    assert [m["role"] for m in result["transcript"]] == ["system", "user", "assistant"]
    assert result["transcript"][0]["content"] == "You list action items as JSON."
    assert result["transcript"][2]["content"] == GOOD
    assert result["usage"] == {"input_tokens": 120, "output_tokens": 30}
    written = json.loads((tmp_path / "actions.json").read_text())
    assert written == {"items": items, "summary": "Budget and offsite were discussed."}

    (seen,) = fake.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    body = seen.body
    assert body["model"] == "reply:good"
    assert body["seed"] == 4242 and body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "action_items"
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["items", "summary"]
    system, user = body["messages"]
    assert system == {"role": "system", "content": "You list action items as JSON."}
    assert user["role"] == "user"
    assert NOTES in user["content"] and "2026-03-10 (Tuesday)" in user["content"]


@needs_node
def test_worker_answers_one_line_per_request_in_order(tmp_path: Path) -> None:
    models = ["reply:good", "reply:bad", "status:500", "reply:fenced", "garbage",
              "reply:noitems"]
    workspaces = [tmp_path / f"ws{i}" for i in range(len(models))]
    for ws in workspaces:
        ws.mkdir()
    with FakeChat(REPLIES) as fake:
        lines = [json.dumps(request(fake.base_url, ws, model, trial={"index": i, "seed": i}))
                 for i, (ws, model) in enumerate(zip(workspaces, models, strict=True))]
        proc = run_agent("\n".join(lines) + "\n\n{not json\n", "--worker")
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    for result in results:
        check_result(result)
    assert len(results) == len(models) + 1  # the blank line is skipped, the bad one answered
    causes = [(r["error"] or {}).get("cause") for r in results]
    assert causes == [None, "agent", "infrastructure", None, "infrastructure", "agent",
                      "infrastructure"]
    assert results[0]["outcome"]["n_items"] == 2
    assert results[3]["outcome"] == {"items": [], "summary": "Nothing to do.", "n_items": 0}
    assert "not valid JSON" in results[1]["error"]["message"]
    assert results[1]["transcript"][-1]["content"] == REPLIES["bad"]  # the failure is visible
    assert "HTTP 500" in results[2]["error"]["message"]
    assert "***" in results[2]["error"]["message"]  # the echoed key was redacted
    assert "not a JSON object" in results[6]["error"]["message"]
    assert (workspaces[0] / "actions.json").is_file()
    assert not (workspaces[1] / "actions.json").exists()
    assert len(proc.stderr.strip().splitlines()) >= len(models)  # logs go to stderr
    assert len(fake.seen) == len(models)


@needs_node
def test_without_prompt_text_the_source_prompt_is_used(tmp_path: Path) -> None:
    with FakeChat(REPLIES) as fake:
        req = request(fake.base_url, tmp_path, "reply:good")
        del req["prompt"]
        result = single(req)
    assert result["error"] is None
    assert result["transcript"][0]["content"] == source_prompt()
    assert fake.seen[0].body["messages"][0]["content"] == source_prompt()


@needs_node
def test_unreachable_endpoint_is_infrastructure(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = single(request(f"http://127.0.0.1:{port}/v1", tmp_path, "reply:good"))
    assert result["error"]["cause"] == "infrastructure"
    assert "model endpoint failed" in result["error"]["message"]
    assert not (tmp_path / "actions.json").exists()


@needs_node
def test_a_slow_model_is_cut_at_the_time_limit(tmp_path: Path) -> None:
    with FakeChat(REPLIES) as fake:
        started = time.monotonic()
        result = single(request(fake.base_url, tmp_path, "slow:6", timeout_s=1))
        elapsed = time.monotonic() - started
    assert result["error"]["cause"] == "infrastructure"
    assert "no answer within" in result["error"]["message"]
    assert elapsed < 5


def source_prompt() -> str:
    assert NODE is not None
    out = subprocess.run(
        [NODE, "-e", f"process.stdout.write(require({json.dumps(str(PROMPT))}).SYSTEM_PROMPT)"],
        capture_output=True, text=True, check=True, timeout=30,
    )
    return out.stdout


def test_prompt_is_one_plain_template_literal() -> None:
    text = PROMPT.read_text(encoding="utf-8")
    literals = re.findall(r"const SYSTEM_PROMPT = `([^`]*)`;", text)
    assert len(literals) == 1 and text.count("`") == 2
    assert "${" not in literals[0]
    assert 20 <= len(literals[0].splitlines()) <= 40
    assert "module.exports = { SYSTEM_PROMPT };" in text


def test_promptloop_toml_declares_the_agent() -> None:
    from promptloop.optimizer.core.project import load_project

    path = EXAMPLE / "promptloop.toml"
    assert len(path.read_text().splitlines()) <= 30
    agent = load_project(path).agent("action_items")
    assert agent.config.adapter == "worker"
    assert agent.config.spec.command == ["node", "agent/agent.js", "--worker"]
    (target,) = agent.targets()
    assert (target.path, target.variable) == ("agent/prompt.js", "SYSTEM_PROMPT")
    assert [(EXAMPLE / s / "suite.json").is_file() for s in agent.config.suites] == [True]


def task_files() -> list[Path]:
    return sorted((SUITE / "tasks").rglob("task.json"))


def test_suite_files_have_the_promised_shape() -> None:
    suite = json.loads((SUITE / "suite.json").read_text())
    assert suite["name"] == suite["agent_name"] == "action_items"
    assert suite["kind"] == "capability" and suite["clock"] == "2026-03-10T10:00:00"
    tasks = [json.loads(p.read_text()) for p in task_files()]
    assert len(tasks) >= 16
    buckets = {t["metadata"]["failure_bucket"] for t in tasks}
    assert len(buckets) >= 4
    for path, t in zip(task_files(), tasks, strict=True):
        assert path.parent.name == t["id"] and path.parent.parent.name == t["metadata"][
            "failure_bucket"]
        assert t["input"]["content"].strip()
        assert {g["name"] for g in t["graders"]} <= GENERAL
    judged = [t for t in tasks if any(g["name"] == "rubric_judge" for g in t["graders"])]
    assert len(judged) >= 2
    assert len({t["id"] for t in tasks}) == len(tasks)


def test_reference_solutions_satisfy_the_outcome_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    for path in task_files():
        task = json.loads(path.read_text())
        expected = task["reference_solution"]["expected_outcome"]
        for g in task["graders"]:
            if g["name"] == "json_schema":
                jsonschema.Draft202012Validator.check_schema(g["config"]["schema"])
                jsonschema.validate({"summary": "", **expected}, g["config"]["schema"])


def test_suite_loads_with_the_suite_loader() -> None:
    from promptloop.optimizer.core.suite_files import SuiteError
    from promptloop.optimizer.core.suites import load_suite

    try:
        suite = load_suite(SUITE)
    except SuiteError as err:
        missing = re.search(r"unknown grader '(json_path|json_schema|rubric_judge)'", str(err))
        if missing:
            pytest.skip(f"the general graders are not registered yet: {missing.group(0)}")
        raise
    assert suite.name == "action_items" and suite.agent_name == "action_items"
    assert len(suite.tasks) >= 16 and len(suite.buckets) >= 4


def test_the_prompt_region_is_the_literal_node_reads() -> None:
    from promptloop.optimizer.core.regions import RegionSpec, locate, value_of

    if NODE is None:
        pytest.skip("node is not installed")
    region = locate(RegionSpec("agent/prompt.js", variable="SYSTEM_PROMPT"),
                    PROMPT.read_text(encoding="utf-8"))
    assert value_of(region) == source_prompt()
    assert region.describe().startswith("template literal SYSTEM_PROMPT in agent/prompt.js")
