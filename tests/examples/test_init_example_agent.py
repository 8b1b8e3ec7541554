"""The example agent `promptloop init` writes (optimizer/init_template/example_agent/agent.py)
against a loopback fake model: both modes of the trial contract, its error causes, its
workspace file, and that the per-run key never leaves it. One test (marked embedded) runs it
against the real embedded model: every task of its suite gives a parseable result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from promptloop.optimizer.workflows.init import TEMPLATE_DIR
from tests.examples.contract_check import check_request, check_result
from tests.examples.fake_chat import FakeChat

AGENT = TEMPLATE_DIR / "example_agent" / "agent.py"
SUITE = TEMPLATE_DIR / "evals" / "example"
KEY = "pl-run-token-51c0de"
CONTRACT = "promptloop.trial/1"
REPLIES = {"good": '{"category": "billing", "urgency": "high"}',
           "wrapped": 'Here you go: {"category": "account", "urgency": "low"} bye',
           "bad": "billing, high", "list": "[1, 2]"}


def request(base_url: str, workspace: Path, model: str, **extra: Any) -> dict[str, Any]:
    req: dict[str, Any] = {
        "contract": CONTRACT,
        "agent": "example",
        "task": {"id": "ex-test", "description": "a test",
                 "input": {"content": "I was charged twice, please refund."}},
        "prompt": {"name": "system", "text": "Triage the message.",
                   "path": "example_agent/prompt.md", "ref": "working tree"},
        "workspace": str(workspace),
        "model": {"base_url": base_url, "model": model, "api_key": KEY},
        "trial": {"index": 0, "seed": 99},
        "published_at": "2026-03-10T10:00:00",
        "timeout_s": 20,
    }
    req.update(extra)
    if "prompt" in req:
        check_request(req)
    return req


def run_agent(stdin: str, *args: str, cwd: Path | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # python3 as promptloop.toml names it; the interpreter running the tests stands in for it
    proc = subprocess.run(
        [sys.executable, "-I", str(AGENT), *args], input=stdin, capture_output=True, text=True,
        timeout=timeout, env={"PATH": "/usr/bin:/bin"}, cwd=cwd, check=False,
    )
    assert KEY not in proc.stdout and KEY not in proc.stderr, "the api key leaked"
    assert proc.returncode == 0, proc.stderr
    return proc


def single(req: dict[str, Any], cwd: Path | None = None) -> dict[str, Any]:
    lines = run_agent(json.dumps(req), cwd=cwd).stdout.splitlines()
    assert len(lines) == 1
    result: dict[str, Any] = json.loads(lines[0])
    assert result["contract"] == CONTRACT and isinstance(result["outcome"], dict)
    check_result(result)
    return result


def test_one_request_one_result(tmp_path: Path) -> None:
    with FakeChat(REPLIES) as fake:
        result = single(request(fake.base_url, tmp_path, "reply:good"))
    assert result["error"] is None
    assert result["outcome"] == {"category": "billing", "urgency": "high"}
    assert [m["role"] for m in result["transcript"]] == ["system", "user", "assistant"]
    assert result["usage"] == {"input_tokens": 120, "output_tokens": 30}
    assert json.loads((tmp_path / "triage.json").read_text()) == result["outcome"]
    (seen,) = fake.seen
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    body = seen.body
    assert body["response_format"]["type"] == "json_schema"
    assert body["seed"] == 99 and body["temperature"] == 0 and body["max_tokens"] <= 200
    assert body["messages"][0] == {"role": "system", "content": "Triage the message."}
    assert "charged twice" in body["messages"][1]["content"]


def test_worker_mode_and_error_causes(tmp_path: Path) -> None:
    models = ["reply:good", "reply:wrapped", "reply:bad", "reply:list", "status:503",
              "garbage", "status:401"]
    with FakeChat(REPLIES) as fake:
        lines = [json.dumps(request(fake.base_url, tmp_path, m)) for m in models]
        proc = run_agent("\n".join(lines) + "\n[]\n", "--worker")
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    for result in results:
        check_result(result)
    causes = [(r["error"] or {}).get("cause") for r in results]
    assert causes == [None, None, "agent", "agent", "infrastructure", "infrastructure",
                      "infrastructure", "infrastructure"]
    assert results[1]["outcome"] == {"category": "account", "urgency": "low"}
    assert "HTTP 503" in results[4]["error"]["message"]
    assert "***" in results[6]["error"]["message"]  # the echoed key is redacted
    assert "not a JSON object" in results[7]["error"]["message"]
    assert len(proc.stderr.splitlines()) == len(models)  # one log line per trial


def test_a_request_without_prompt_text_is_an_error_not_the_file(tmp_path: Path) -> None:
    """The agent never falls back to its prompt file: that would evaluate the committed prompt
    instead of the one promptloop sent (a candidate's)."""
    with FakeChat(REPLIES) as fake:
        req = request(fake.base_url, tmp_path, "reply:good")
        del req["prompt"]
        result = single(req, cwd=tmp_path)
    assert result["error"] == {"cause": "infrastructure",
                               "message": "the request has no prompt.text"}
    assert fake.seen == []  # no model call was made


def test_unreachable_and_slow_models_are_infrastructure(tmp_path: Path) -> None:
    result = single(request("http://127.0.0.1:9/v1", tmp_path, "reply:good"))
    assert result["error"]["cause"] == "infrastructure"
    with FakeChat(REPLIES) as fake:
        result = single(request(fake.base_url, tmp_path, "slow:5", timeout_s=1))
    assert result["error"]["cause"] == "infrastructure"
    assert "timed out" in result["error"]["message"]


def test_a_request_that_is_not_json_still_gets_a_result(tmp_path: Path) -> None:
    lines = run_agent("{oops").stdout.splitlines()
    (result,) = [json.loads(line) for line in lines]
    assert result["error"]["cause"] == "infrastructure"


@pytest.mark.embedded
def test_every_suite_task_gives_a_parseable_result_on_the_embedded_model(
    tmp_path: Path,
) -> None:
    from promptloop.agents.llm.providers.local import acquire_server, release_server

    server = acquire_server()
    try:
        assert server.url is not None
        tasks = [json.loads(p.read_text()) for p in sorted(SUITE.rglob("task.json"))]
        lines = [json.dumps(request(f"{server.url}/v1", tmp_path, "local:smollm2", task=t,
                                    timeout_s=120)) for t in tasks]
        proc = run_agent("\n".join(lines) + "\n", "--worker", timeout=120 * len(lines))
    finally:
        release_server()
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(tasks)
    for result in results:
        assert result["error"] is None, result["error"]
        assert result["outcome"]["category"] in ("billing", "technical", "account", "other")
        assert result["outcome"]["urgency"] in ("low", "normal", "high")
