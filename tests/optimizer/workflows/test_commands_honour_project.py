"""Every command honours promptloop.toml (issue 29): `profile`, `graduate`, `health`,
`runs --agent`, `agent` and `optimize --suite <folder>` on `promptloop init`'s example agent (a
`command` adapter, prompt example_agent/prompt.md, suite evals/example) and on the Node example
(a `worker`, prompt a literal in agent/prompt.js, suite evals), with scripted models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.core.project import load_project
from promptloop.optimizer.core.suites import load_suite
from promptloop.optimizer.workflows.init import init_project
from tests.e2e.support import cli, cli_json, commit_all, enter, git
from tests.examples.action_items_policy import action_items_model, rubric_judge_model

NODE = Path(__file__).resolve().parents[3] / "examples" / "action-items"
PROMPT = "example_agent/prompt.md"
RULE = "A blocked team or lost sales is high urgency; an idea for later is low."
MODELS = ("--agent-model", "scripted:triage", "--judge-model", "scripted:triage")


def triage(req: Request) -> ModelResponse:
    """Follows the prompt: outages are high only when it says so."""
    system, user = req.messages[0].content, req.messages[-1].content.lower()
    category = ("billing" if any(w in user for w in ("refund", "charge", "payment", "invoice"))
                else "account" if "password" in user or "log in" in user else
                "technical" if any(w in user for w in ("crash", "down", "error")) else "other")
    urgency = "normal"
    if RULE in system and any(w in user for w in ("blocked", "losing")):
        urgency = "high"
    elif RULE in system and "idea" in user:
        urgency = "low"
    return reply(json.dumps({"category": category, "urgency": urgency}))


def proposer(req: Request) -> ModelResponse:
    line = '  "low" for questions and suggestions.'
    return reply(f"HYPOTHESIS: outages are rated normal.\n\n```diff\n--- a/{PROMPT}\n"
                 f"+++ b/{PROMPT}\n@@ -8,2 +8,3 @@\n {line}\n+{RULE}\n \n```\n")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    init_project(root)
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "triage", lambda: ScriptedModel(triage))
    monkeypatch.setitem(SCRIPTED_MODELS, "tproposer", lambda: ScriptedModel(proposer))
    return root


def state(tmp_path: Path) -> tuple[str, str]:
    return ("--state-dir", str(tmp_path / "state"))


def test_agent_runs_a_task_of_an_adapter_agent_and_shows_the_conversation(
        repo: Path, tmp_path: Path) -> None:
    data = cli_json("agent", "example", "--task", "ex-category-refund", *MODELS, *state(tmp_path))
    assert data["task_id"] == "ex-category-refund" and data["suite"] == "example"
    assert data["status"] == "passed", data
    assert data["outcome"]["category"] == "billing"
    assert "refund" in data["input"]["content"].lower()  # the task's input, as declared
    replies = [m["content"] for m in data["messages"] if m["role"] == "assistant"]
    assert json.loads(replies[-1]) == data["outcome"]  # the model's reply, as the agent got it
    assert {s["grader"] for s in data["scores"]} == {"json_schema", "json_path"}
    first = cli_json("agent", "example", *MODELS, *state(tmp_path))  # the first task
    assert first["task_id"] == load_suite(repo / "evals" / "example").tasks[0].id
    text = cli("agent", "example", "--content", "My payment keeps failing", *MODELS,
               *state(tmp_path))
    assert text.exit_code == 0, text.output
    assert "My payment keeps failing" in text.output and "conversation" in text.output
    assert "status: passed" in text.output
    bad = cli("agent", "example", "--task", "ex-nosuch", *MODELS, *state(tmp_path))
    assert bad.exit_code == 1 and "ex-nosuch" in bad.output
    # --suite as every command takes it: a suite name, AGENT/SUITE or its folder
    for spelled in ("example", "example/example", "evals/example"):
        got = cli_json("agent", "example", "--suite", spelled, "--task", "ex-category-refund",
                       *MODELS, *state(tmp_path))
        assert got["task_id"] == "ex-category-refund" and got["suite"] == "example", spelled


def test_runs_health_and_profile_follow_the_agent_table(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_json("eval", "--agent", "example", *MODELS, *state(tmp_path))
    listed = cli_json("runs", "--agent", "example", *state(tmp_path))
    assert [r["suite_name"] for r in listed] == ["example"]
    assert cli_json("runs", "--suite", "evals/example", *state(tmp_path)) == listed
    with monkeypatch.context() as env:  # docs/commands.md: PROMPTLOOP_SUITE applies to runs
        env.setenv("PROMPTLOOP_SUITE", "nosuch")
        assert cli("runs", *state(tmp_path)).exit_code == 1
    unknown = cli("runs", "--agent", "exampel", *state(tmp_path))
    assert unknown.exit_code == 1 and "Did you mean 'example'" in unknown.output
    health = cli_json("health", "--agent", "example", *state(tmp_path))
    assert health["suite_name"] == "example"
    plan = cli_json("profile", "--agent", "example", "--dry-run", *MODELS, *state(tmp_path))
    assert plan["agent"] == "example" and plan["rows"], plan  # read prompt.md, not prompts/


def test_graduate_moves_a_bucket_into_a_new_declared_regression_suite(
        repo: Path, tmp_path: Path) -> None:
    data = cli_json("graduate", "--agent", "example", "--bucket", "category", "--force",
                    *state(tmp_path))
    branch = data["branch"]
    assert data["source_suite"] == "example" and data["target_suite"] == "example_regression"
    toml = git(repo, "show", f"{branch}:promptloop.toml")
    assert 'suites = ["evals/example", "evals/example-regression"]' in toml
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), branch)
    wt = tmp_path / "wt"
    reg = load_suite(wt / "evals" / "example-regression")
    cap = load_suite(wt / "evals" / "example")
    assert reg.config.kind == "regression" and reg.config.clock == cap.config.clock
    assert {t.bucket for t in reg.tasks} == {"category"}
    assert {t.bucket for t in cap.tasks} == {"urgency"}
    assert load_project(wt / "promptloop.toml").agent("example").config.suites[1] == \
        "evals/example-regression"
    assert git(repo, "status", "--porcelain") == ""


def test_optimize_takes_a_suite_folder(repo: Path, tmp_path: Path) -> None:
    data = cli_json("optimize", "--suite", "evals/example", "--bucket", "urgency", *MODELS,
                    "--proposer-model", "scripted:tproposer", "--iterations", "1",
                    *state(tmp_path))
    assert data["status"] == "done" and "not" not in data["message"], data["message"]
    branches = git(repo, "branch", "--list", "promptloop/*").split()
    [kept] = [b for b in branches if b.startswith("promptloop/example/urgency")]
    assert RULE in git(repo, "show", f"{kept}:{PROMPT}")


@pytest.fixture
def node_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    root = tmp_path / "team-repo"
    root.mkdir()
    for folder in ("agent", "evals"):
        shutil.copytree(NODE / folder, root / folder)
    shutil.copy(NODE / "promptloop.toml", root / "promptloop.toml")
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "action_items", action_items_model)
    monkeypatch.setitem(SCRIPTED_MODELS, "rubric", rubric_judge_model)
    return root


NODE_MODELS = ("--agent-model", "scripted:action_items", "--judge-model", "scripted:rubric")


def test_the_node_example_through_agent_runs_health_profile(
        node_repo: Path, tmp_path: Path) -> None:
    data: dict[str, Any] = cli_json("agent", "action_items", "--task", "ai-due-tomorrow",
                                    *NODE_MODELS, *state(tmp_path))
    assert data["status"] in ("passed", "failed") and "items" in data["outcome"]
    assert data["input"]["fact_id"] == "2026/03/10.md#ts_7"
    assert any(m["role"] == "assistant" for m in data["messages"])
    cli_json("eval", "--suite", "evals", *NODE_MODELS, "--trials", "1", *state(tmp_path))
    runs = cli_json("runs", "--agent", "action_items", *state(tmp_path))
    assert [r["suite_name"] for r in runs] == ["action_items"]
    assert cli_json("health", "--suite", "evals", *state(tmp_path))["suite_name"] == \
        "action_items"
    plan = cli_json("profile", "--agent", "action_items", "--dry-run", *NODE_MODELS,
                    *state(tmp_path))
    assert plan["agent"] == "action_items"
    dry = cli_json("graduate", "--agent", "action_items", "--bucket", "due_dates", "--force",
                   "--dry-run", *state(tmp_path))
    assert dry["target_suite"] == "action_items_regression"
    assert all(f["destination"].startswith("evals-regression/") for f in dry["files"])
