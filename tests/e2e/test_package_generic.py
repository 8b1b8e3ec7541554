"""The failure package of a generic agent (issue 29, must-hold): `promptloop init`'s example
agent, run through its `command` adapter with a scripted model behind the gateway. Its package
shows each failing task's input as the task declares it, the first user message as the agent
sent it, the reply it got, and the grader reasons, as for the bundled agents; the run report
keeps the conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.propose.package import export_failing, render_failing_markdown
from promptloop.optimizer.report.store import default_store_dir, list_runs, load_run, report_path
from promptloop.optimizer.workflows.init import init_project
from tests.e2e.support import cli_json, commit_all, enter, git

SEEN: list[list[tuple[str, str]]] = []


def everything_is_other(req: Request) -> ModelResponse:
    """Answers `other`/`normal` to every message (so every category task but none fails)."""
    SEEN.append([(m.role, m.content) for m in req.messages])
    return reply(json.dumps({"category": "other", "urgency": "normal"}), tokens=(120, 9))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "team"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    init_project(root)
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "other", lambda: ScriptedModel(everything_is_other))
    SEEN.clear()
    return root


def test_the_example_agents_package_shows_its_input_and_its_conversation(
        repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    data = cli_json("eval", "--agent", "example", "--agent-model", "scripted:other",
                    "--out", str(state))
    assert data["summary"]["errored_trials"] == 0, data
    [entry] = list_runs(default_store_dir(state))
    run = load_run(default_store_dir(state), entry.run_name)

    export = export_failing(run, "category")
    by_task = {t.task_id: t for t in export.trials}
    assert set(by_task) == {"ex-category-crash", "ex-category-password", "ex-category-refund"}
    for task_id, trial in by_task.items():
        declared = json.loads((repo / "evals/example/tasks/category" / task_id / "task.json")
                              .read_text())["input"]
        assert json.loads(trial.input_content) == declared
        assert trial.input_lang == "json"
        # the first user message as the agent sent it (the model saw exactly this)
        assert trial.first_message == f"Support message:\n{declared['content']}"
        assert any(("user", trial.first_message) in sent for sent in SEEN)
        assert trial.final_message == '{"category": "other", "urgency": "normal"}'
        assert trial.trace == []  # the example agent calls no tool
        json_path = next(s for s in trial.scores if s.grader == "json_path")
        assert json_path.passed is False and "other" in json_path.rationale
        assert trial.outcome["category"] == "other"

    md = render_failing_markdown(export)
    assert "(input not recorded)" not in md
    refund = by_task["ex-category-refund"]
    assert "Support message:\nHi, I was charged twice" in md
    assert f"**Final assistant text**: {refund.final_message}" in md
    # the run report keeps the whole conversation the agent had
    report = json.loads(report_path(default_store_dir(state), entry.run_name).read_text())
    doc = next(t for t in report["trials"]
               if t["trial"]["taskId"] == "ex-category-refund")["transcript"]
    assert [m["role"] for m in doc["messages"]] == ["system", "user", "assistant"]
    assert doc["messages"][1]["contents"] == [{"type": "text", "text": refund.first_message}]
