"""One record of what an adapter agent saw (issue 29): a ticket triager behind the `worker`
adapter, written against the trial contract, that calls a tool it applies itself. The model
gateway records the whole conversation; the failure package, the run report and the proposer
are built from that record, whether or not the agent returns its own transcript.

Must-hold: an agent that returns no transcript still shows its conversation in the package and
the report; an overfit proposer keyed on the failing inputs' words writes rules on those words,
and the held-out target test rejects the patch.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.propose.package import export_failing, render_failing_markdown
from promptloop.optimizer.report.store import default_store_dir, list_runs, load_run, report_path
from promptloop.optimizer.workflows.context import open_project
from promptloop.optimizer.workflows.optimize import OptimizeConfig, optimize
from tests.e2e.support import cli_json, commit_all, enter

PROMPT = "You triage support tickets.\nAnswer with JSON: {\"category\": \"billing\"}.\n"

AGENT = r'''"""A ticket triager speaking promptloop.trial/1 as a worker: it asks the model,
applies the lookup_customer tool itself and sends the result back. Standard library only."""
import json
import os
import sys
import urllib.request

TOOLS = [{"type": "function", "function": {
    "name": "lookup_customer", "description": "The customer's plan",
    "parameters": {"type": "object", "properties": {"email": {"type": "string"}}}}}]


def chat(request, messages):
    model = request["model"]
    body = {"model": model["model"], "messages": messages, "tools": TOOLS,
            "seed": request["trial"]["seed"]}
    call = urllib.request.Request(
        model["base_url"] + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + model["api_key"]})
    with urllib.request.urlopen(call, timeout=30) as response:
        return json.load(response)["choices"][0]["message"]


def trial(request):
    task_input = request["task"]["input"]
    messages = [{"role": "system", "content": request["prompt"]["text"]},
                {"role": "user", "content": "Ticket: " + task_input["content"]}]
    for _ in range(4):
        message = chat(request, messages)
        messages.append({k: v for k, v in message.items() if v is not None})
        if not message.get("tool_calls"):
            break
        for c in message["tool_calls"]:
            email = json.loads(c["function"]["arguments"]).get("email", "")
            messages.append({"role": "tool", "tool_call_id": c["id"],
                             "content": "plan: pro (" + email + ")"})
    outcome = json.loads(message["content"])
    keep = os.environ.get("TRIAGE_TRANSCRIPT") == "1"
    return {"contract": "promptloop.trial/1", "outcome": outcome,
            "transcript": messages if keep else []}


for line in sys.stdin:
    if line.strip():
        print(json.dumps(trial(json.loads(line))), flush=True)
'''

TOML = '''[agents.triage]
description = "Ticket triager"
prompt = "triage/prompt.md"
suites = ["evals/triage"]
adapter = "worker"
command = ["python3", "triage/agent.py"]
env = ["TRIAGE_TRANSCRIPT"]
timeout = 60
'''

BILLING = [  # task id -> ticket text; each names one word nothing else in the suite does
    ("refund", "Where is my refund for the order"),
    ("charged", "I was charged twice this month"),
    ("receipt", "Please resend the receipt for March"),
    ("invoice", "The invoice shows the wrong address"),
    ("overcharge", "An overcharge on my card yesterday"),
    ("discount", "My discount code was not applied"),
]
OTHER = [("password", "Cannot log in after the password reset")]


def write_suite(root: Path) -> None:
    folder = root / "evals" / "triage"
    folder.mkdir(parents=True)
    (folder / "suite.json").write_text(json.dumps(
        {"name": "triage", "agent_name": "triage", "kind": "capability"}))
    tasks = [("billing", t, text, "billing") for t, text in BILLING]
    tasks += [("account", t, text, "other") for t, text in OTHER]
    for n, (bucket, task_id, text, category) in enumerate(tasks):
        path = folder / "tasks" / bucket / task_id
        path.mkdir(parents=True)
        (path / "task.json").write_text(json.dumps({
            "id": task_id, "description": f"{bucket}: {task_id}", "trials_per_run": 2,
            "metadata": {"failure_bucket": bucket},
            "input": {"fact_id": f"2026/03/14.md#ts_{n}", "content": text},
            "graders": [{"name": "json_path",
                         "config": {"path": "$.category", "equals": category}}],
        }))


def triage_policy(req: Request) -> ModelResponse:
    """Looks the customer up first; then 'billing' only when the prompt has a rule naming a
    word of the ticket (the overfit kind of rule), else 'other'."""
    system = next(m.content for m in req.messages if m.role == "system")
    ticket = next(m.content for m in req.messages if m.role == "user")
    if not any(m.role == "tool" for m in req.messages):
        return reply("", call("lookup_customer", email="ana@example.com"), tokens=(40, 8))
    words = set(re.findall(r"When the input mentions (\w+)", system))
    hit = words & set(re.findall(r"\w+", ticket.lower()))
    return reply(json.dumps({"category": "billing" if hit else "other"}), tokens=(60, 6))


def overfit_proposer(req: Request) -> ModelResponse:
    """Reads the package and keys one rule on a word of each failing input it shows."""
    package = "\n".join(m.content for m in req.messages if m.role == "user")
    words = []
    for block in re.findall(r"\*\*Input\*\* \(the task's input\)\s*```json\n(.*?)\n```", package,
                            re.S):
        text = json.loads(block)["content"]
        words.append(max(re.findall(r"\w+", text.lower()), key=len))
    rules = sorted(set(words))
    added = "".join(f"+When the input mentions {w}, choose billing.\n" for w in rules)
    first, second = PROMPT.splitlines()
    diff = (f"--- a/triage/prompt.md\n+++ b/triage/prompt.md\n"
            f"@@ -1,2 +1,{2 + len(rules)} @@\n {first}\n {second}\n{added}")
    return reply(f"HYPOTHESIS: billing words are not named.\n\n```diff\n{diff}```\n")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "helpdesk"
    (root / "triage").mkdir(parents=True)
    (root / "triage" / "prompt.md").write_text(PROMPT)
    (root / "triage" / "agent.py").write_text(AGENT)
    (root / "promptloop.toml").write_text(TOML)
    write_suite(root)
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "triage", lambda: ScriptedModel(triage_policy))
    return root


@pytest.mark.parametrize("returns_transcript", [False, True], ids=["no-transcript", "own"])
def test_the_package_and_report_show_the_conversation_the_gateway_saw(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        returns_transcript: bool) -> None:
    monkeypatch.setenv("TRIAGE_TRANSCRIPT", "1" if returns_transcript else "0")
    state = tmp_path / "state"
    data = cli_json("eval", "--agent", "triage", "--agent-model", "scripted:triage",
                    "--trials", "1", "--out", str(state))
    assert data["summary"]["errored_trials"] == 0
    [entry] = list_runs(default_store_dir(state))
    name = entry.run_name
    run = load_run(default_store_dir(state), name)
    trial = next(t for t in run.trials if t.task_id == "refund")
    roles = [m.role for m in trial.transcript.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    [tool] = trial.transcript.tool_calls
    assert (tool.tool_name, tool.arguments, tool.result) == (
        "lookup_customer", {"email": "ana@example.com"}, "plan: pro (ana@example.com)")
    assert trial.transcript.metrics.n_turns == 2 and trial.transcript.metrics.n_tool_calls == 1

    export = export_failing(run, "billing")
    first = next(t for t in export.trials if t.task_id == "refund")
    assert json.loads(first.input_content) == {"fact_id": "2026/03/14.md#ts_0",
                                               "content": "Where is my refund for the order"}
    assert first.first_message == "Ticket: Where is my refund for the order"
    assert first.trace == ['1. lookup_customer(email="ana@example.com") -> ok: '
                           'plan: pro (ana@example.com)']
    assert first.scores[0].passed is False
    md = render_failing_markdown(export)
    assert "(input not recorded)" not in md and "(no tool calls)" not in md
    assert "Ticket: Where is my refund for the order" in md
    # the report a user reads keeps the whole conversation too
    report = json.loads(report_path(default_store_dir(state), name).read_text())
    doc = next(t for t in report["trials"] if t["trial"]["taskId"] == "refund")["transcript"]
    assert [m["role"] for m in doc["messages"]] == ["system", "user", "assistant", "tool",
                                                    "assistant"]
    assert [c["toolName"] for c in doc["toolCalls"]] == ["lookup_customer"]
    assert doc["metrics"]["nTurns"] == 2


def test_an_overfit_proposer_keys_rules_on_the_inputs_words_and_held_out_rejects(
        repo: Path, tmp_path: Path) -> None:
    open_project()
    proposer = ScriptedModel(overfit_proposer)
    config = OptimizeConfig.model_validate({
        "suite": "triage", "bucket": "billing", "iterations": 1,
        "agent_model": "scripted:triage", "proposer_model": "scripted:proposer",
        "proposer_format": "diff", "repo": repo, "state_dir": tmp_path / "state"})
    result = asyncio.run(optimize(config, agent=ScriptedModel(triage_policy),
                                  proposer=proposer))
    [it] = result.iterations
    package = Path(it.package_path or "").read_text()
    shown = {t for t, _ in BILLING if f"`{t}` trial" in package}
    hidden = {t for t, _ in BILLING} - shown
    assert shown and hidden  # the held-out tasks are not in the package
    # the rules are written on the failing inputs' own words, never on "input"
    rules = re.findall(r"When the input mentions (\w+)", it.diff)
    texts = dict(BILLING)
    assert rules and all(any(w in texts[t].lower() for t in shown) for w in rules), rules
    assert "input" not in rules
    assert it.outcome == "rejected", it.reasons
    assert any("held-out" in r for r in it.reasons), it.reasons

