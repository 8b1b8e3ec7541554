"""One road for the proposer (issue 29, must-hold): for one task and the same scripted model
replies, the failure package of the bundled card agent (python adapter, in-process) and of a
`worker` stand-in equal each other apart from ids, times and names: same input, same first
user message, same tool calls with their arguments, results and verdicts, same outcome, same
grader reasons.

The stand-in is what a team would write against docs/agents.md: a worker that reads contract
requests as JSON lines, calls the gateway's OpenAI chat endpoint over HTTP with the messages
the card agent sends (its system prompt and first user message), executes each tool call it
gets back against the trial's workspace with the card agent's own tools, sends the results
back on its next call, reminds the model as the card harness does when the card is
incomplete, and returns the card agent's outcome (and, when asked, its conversation in the
OpenAI shape). The package of both is built from the one record: the in-process agent's
transcript, or the conversation the gateway saw merged with the stand-in's own.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.propose.package import (
    FailingExport,
    export_failing,
    render_failing_markdown,
)
from promptloop.optimizer.report.store import default_store_dir, list_runs, load_run
from tests.e2e.support import cli_json, commit_all, enter

ROOT = Path(__file__).resolve().parents[2]

STANDIN = r'''"""A card agent outside promptloop: promptloop.trial/1 as a worker, the model
through the gateway's OpenAI chat endpoint, the card tools executed here in the trial's
workspace."""
import asyncio
import json
import os
import sys
import urllib.request
from datetime import datetime
from pathlib import Path

sys.path.insert(0, @ROOT@)

from promptloop.agents.base import AgentInput, prepare_workspace  # noqa: E402
from promptloop.agents.card.agent import CardAgentSession  # noqa: E402
from promptloop.agents.llm.types import ToolCall  # noqa: E402
from promptloop.agents.transcript import ToolCallRecord, Transcript, utcnow  # noqa: E402
from promptloop.agents.workspace import Workspace  # noqa: E402

MAX_TURNS, MAX_RUNS = 20, 4


def chat(request, messages, tools):
    model = request["model"]
    body = {"model": model["model"], "messages": messages, "tools": tools,
            "seed": request["trial"]["seed"]}
    http = urllib.request.Request(
        model["base_url"].rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + model["api_key"]})
    with urllib.request.urlopen(http, timeout=30) as response:
        return json.load(response)["choices"][0]["message"]


def trial(request):
    task = request["task"]
    agent_input = AgentInput(
        fact_id=task["input"]["fact_id"], content=task["input"]["content"],
        published_at=datetime.fromisoformat(request["published_at"]),
        user_language=task.get("metadata", {}).get("user_language", "English"))
    workspace = Workspace(Path(request["workspace"]), durable=False)
    (workspace.root / "PKM").mkdir(exist_ok=True)
    prepare_workspace(workspace, agent_input)
    session = CardAgentSession(workspace, agent_input, request["prompt"]["text"])
    tools = {t.name: t for t in session.tools}
    specs = [{"type": "function", "function": {"name": s.name, "description": s.description,
                                               "parameters": s.parameters}}
             for s in (t.spec() for t in session.tools)]
    record = Transcript()
    messages = [{"role": "system", "content": request["prompt"]["text"]},
                {"role": "user", "content": session.first_message()}]
    for _ in range(MAX_RUNS):
        for _ in range(MAX_TURNS):
            message = chat(request, messages, specs)
            calls = message.get("tool_calls") or []
            messages.append({"role": "assistant", "content": message.get("content"),
                             **({"tool_calls": calls} if calls else {})})
            if not calls:
                break
            stop = False
            for c in calls:
                parsed = ToolCall(id=c["id"], name=c["function"]["name"],
                                  arguments=json.loads(c["function"]["arguments"]))
                started = utcnow()
                result = asyncio.run(tools[parsed.name].invoke(parsed))
                record.tool_calls.append(ToolCallRecord(
                    call_id=parsed.id, tool_name=parsed.name, arguments=parsed.arguments,
                    result=result.content, is_error=result.is_error, started_at=started,
                    ended_at=utcnow()))
                messages.append({"role": "tool", "tool_call_id": c["id"],
                                 "content": result.content, "is_error": result.is_error})
                stop = stop or result.stop
            if stop:
                break
        missing = session.missing_requirements()
        if not missing:
            break
        messages.append({"role": "user", "content": session.reminder(missing)})
    outcome = session.outcome(record)
    keep = os.environ.get("STANDIN_TRANSCRIPT") == "1"
    return {"contract": "promptloop.trial/1", "outcome": outcome,
            "transcript": messages if keep else []}


for line in sys.stdin:
    if line.strip():
        print(json.dumps(trial(json.loads(line)), default=str), flush=True)
'''

TOML = '''[agents.card]
description = "The bundled card agent, in-process"
prompt = "prompts/card.md"
suites = ["evals/card"]
adapter = "session"
entry = "promptloop.agents.adapters:card_agent"

[agents.standin]
description = "The card agent as a worker outside promptloop"
prompt = "prompts/card.md"
suites = ["evals/standin"]
adapter = "worker"
command = [@PYTHON@, "standin/agent.py"]
env = ["STANDIN_TRANSCRIPT"]
timeout = 60
views = "promptloop.agents.adapters:card_agent_views"
'''

TASK = {
    "id": "landlord-call",
    "description": "A call with a relative date is an event card.",
    "trials_per_run": 1,
    "timeout_seconds": 60,
    "metadata": {"failure_bucket": "template_event"},
    "input": {"fact_id": "2026/03/14.md#ts_2",
              "content": "Call with the landlord tomorrow 6pm about the boiler"},
    "graders": [
        {"name": "card_completion", "config": {}},
        {"name": "card_template_choice", "config": {"expected_template_ids": ["event"]}},
        {"name": "card_visible_must_contain", "config": {"substrings": ["18:00"]}},
    ],
}


def card_replies(req: Request) -> ModelResponse:
    """First a save whose snippet lacks its text (the tool refuses it), then a complete
    snippet card (the wrong template for a call: the template grader fails), then done. Reads
    only what any model sees: the messages' text."""
    first = next(m.content for m in req.messages if m.role == "user")
    fact_id = re.search(r"\(fact_id\): (\S+)", first)
    content = first.split("Raw Input Content:", 1)[-1].strip()
    results = [m.content for m in req.messages if m.role == "tool"]
    args = {"fact_id": fact_id.group(1) if fact_id else "", "title": "Landlord call"}
    if not results:
        return reply("Saving the card.", call("save_timeline_card", **args,
                                              ui_configs=[{"template_id": "snippet",
                                                           "data": {}}]), tokens=(900, 40))
    if len(results) == 1:
        return reply("", call("save_timeline_card", **args,
                              ui_configs=[{"template_id": "snippet",
                                           "data": {"text": content}}]), tokens=(950, 45))
    return reply("Saved.", tokens=(990, 3))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cards"
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "card.md").write_text((ROOT / "prompts" / "card_agent.md").read_text())
    (root / "standin").mkdir()
    (root / "standin" / "agent.py").write_text(STANDIN.replace("@ROOT@", json.dumps(str(ROOT))))
    (root / "promptloop.toml").write_text(TOML.replace("@PYTHON@", json.dumps(sys.executable)))
    for agent in ("card", "standin"):
        folder = root / "evals" / agent
        (folder / "tasks" / "events" / TASK["id"]).mkdir(parents=True)
        # the suite pins its clock: both roads then give the agent the same publish time
        (folder / "suite.json").write_text(json.dumps(
            {"name": agent, "agent_name": agent, "kind": "capability",
             "clock": "2026-03-14T09:30:00"}))
        (folder / "tasks" / "events" / TASK["id"] / "task.json").write_text(json.dumps(TASK))
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "cardparity", lambda: ScriptedModel(card_replies))
    return root


def evaluate(agent: str, state: Path) -> RunResult:
    data = cli_json("eval", "--agent", agent, "--agent-model", "scripted:cardparity",
                    "--trials", "1", "--out", str(state))
    assert data["summary"]["errored_trials"] == 0, data
    [entry] = list_runs(default_store_dir(state))
    return load_run(default_store_dir(state), entry.run_name)


def normalised(export: FailingExport) -> dict[str, Any]:
    """The export without what differs by name alone (run, suite, agent)."""
    return export.model_dump(exclude={"run_name", "suite_name", "agent_name"})


def normalised_markdown(export: FailingExport) -> str:
    head, _, rest = render_failing_markdown(export).partition("\n")
    head = head.replace(f"({export.suite_name}, run {export.run_name})", "(<suite>, <run>)")
    return head + "\n" + re.sub(r"call_\d+", "<call>", rest)


@pytest.mark.parametrize("own_transcript", [True, False], ids=["own-transcript", "gateway-only"])
def test_the_card_agent_and_a_worker_stand_in_give_the_same_package(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        own_transcript: bool) -> None:
    monkeypatch.setenv("STANDIN_TRANSCRIPT", "1" if own_transcript else "0")
    bundled = evaluate("card", tmp_path / "bundled")
    standin = evaluate("standin", tmp_path / "standin")
    [b], [s] = bundled.trials, standin.trials
    assert (b.status, s.status) == ("failed", "failed")

    mine, theirs = export_failing(bundled, "template_event"), export_failing(standin,
                                                                               "template_event")
    [trial] = mine.trials
    # what the package shows is the whole story of the trial
    assert json.loads(trial.input_content) == TASK["input"]
    assert trial.first_message.startswith("<system-reminder>")
    assert "Raw Input Content:\nCall with the landlord tomorrow 6pm" in trial.first_message
    assert len(trial.trace) == 2
    assert "-> ERROR:" in trial.trace[0] and "-> ok:" in trial.trace[1]
    assert '"template_id": "snippet"' in trial.trace[1]
    assert [(v.grader, v.passed) for v in trial.scores] == [
        ("card_completion", True), ("card_template_choice", False),
        ("card_visible_must_contain", False)]
    assert [v.title for v in trial.views] == ["Saved card"]

    if not own_transcript:
        # the gateway never sees the result of the last call (no model call came after it):
        # shown as not reported, every other line the same
        [other] = theirs.trials
        assert other.trace[0] == trial.trace[0].replace("ERROR", "ok")
        assert other.trace[1].endswith("-> ok: (no result reported)")
        return
    assert normalised(theirs) == normalised(mine)
    assert normalised_markdown(theirs) == normalised_markdown(mine)
