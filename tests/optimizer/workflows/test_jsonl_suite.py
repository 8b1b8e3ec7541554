"""A suite may be one JSONL file of tasks (issue 32): a header line with the suite's settings and
shared graders, one task per line, validated like a folder (errors name the file and the line),
and usable wherever a suite folder is: an agent table's `suites`, `eval --suite FILE` and
`optimize --suite FILE`, here on `promptloop init`'s example agent with scripted models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.core.suite_files import SuiteError
from promptloop.optimizer.core.suites import load_suite
from promptloop.optimizer.workflows.init import init_project
from tests.e2e.support import cli, cli_json, commit_all, enter, git

SUITE = "evals/tickets.jsonl"
RULE = "A message saying the service is down is always high urgency."
PROMPT = "example_agent/prompt.md"
OUTAGES = ["The whole site is down since 9am.", "Our dashboard is down for every user.",
           "Checkout is down, we lose sales.", "The API is down again.",
           "Login page is down for the team.", "Everything is down after the update."]
CATEGORIES = [("I was charged twice for March.", "billing"),
              ("Please refund my last invoice.", "billing"),
              ("The app crashes when I export.", "technical"),
              ("I forgot my password.", "account"),
              ("Can I change my account email?", "account"),
              ("Do you have stickers?", "other")]


def header() -> dict[str, Any]:
    schema = {"type": "object", "required": ["category", "urgency"]}
    return {"suite": {"name": "tickets", "kind": "capability", "clock": "2026-03-10T10:00:00"},
            "graders": [{"name": "json_schema", "config": {"schema": schema}}]}


def tasks() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, text in enumerate(OUTAGES):
        out.append({"id": f"outage-{i}", "bucket": "urgency", "input": text, "graders": [
            {"name": "json_path", "config": {"path": "$.urgency", "equals": "high"}}]})
    for i, (text, category) in enumerate(CATEGORIES):
        out.append({"id": f"cat-{i}", "bucket": "category", "input": {"content": text},
                    "graders": [{"name": "json_path",
                                 "config": {"path": "$.category", "equals": category}}]})
    return out


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def triage(req: Request) -> ModelResponse:
    """A prompt-sensitive support triager: outages are high only when the prompt says so."""
    system, user = req.messages[0].content, req.messages[-1].content.lower()
    category = ("billing" if "charged" in user or "refund" in user else
                "account" if "password" in user or "email" in user else
                "technical" if "crash" in user or "down" in user else "other")
    urgency = "high" if "down" in user and RULE in system else "normal"
    return reply(json.dumps({"category": category, "urgency": urgency}))


def proposer(req: Request) -> ModelResponse:
    line = '  "low" for questions and suggestions.'
    return reply(f"HYPOTHESIS: outages are not rated high.\n\n```diff\n--- a/{PROMPT}\n"
            f"+++ b/{PROMPT}\n@@ -8,2 +8,3 @@\n {line}\n+{RULE}\n \n```\n")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`promptloop init`'s repository whose example agent's suite is one JSONL file."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    init_project(root)
    toml = root / "promptloop.toml"
    toml.write_text(toml.read_text().replace('suites = ["evals/example"]', f'suites = ["{SUITE}"]'))
    write_jsonl(root / SUITE, [header(), *tasks()])
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "triage", lambda: ScriptedModel(triage))
    monkeypatch.setitem(SCRIPTED_MODELS, "tproposer", lambda: ScriptedModel(proposer))
    return root


MODELS = ("--agent-model", "scripted:triage", "--judge-model", "scripted:triage")


def test_a_jsonl_suite_of_12_tasks_runs_through_eval(repo: Path, tmp_path: Path) -> None:
    for how in (["--agent", "example"], ["--suite", SUITE]):
        data = cli_json("eval", *how, *MODELS, "--fresh", "--out", str(tmp_path / "state"))
        summary = data["summary"]
        assert summary["num_trials"] == 12 and summary["errored_trials"] == 0, summary
        buckets = {b["bucket"]: b["trial_pass_rate"] for b in summary["buckets"]}
        assert buckets == {"urgency": 0.0, "category": 1.0}


def test_a_jsonl_suite_runs_through_optimize(repo: Path, tmp_path: Path) -> None:
    data = cli_json("optimize", "--suite", SUITE, "--bucket", "urgency", *MODELS,
                    "--proposer-model", "scripted:tproposer", "--iterations", "1",
                    "--out", str(tmp_path / "state"))
    text = json.dumps(data)
    assert "accepted" in text, text[:2000]
    branches = git(repo, "branch", "--list", "promptloop/*").split()
    [kept] = [b for b in branches if b.startswith("promptloop/example/urgency")]
    assert RULE in git(repo, "show", f"{kept}:{PROMPT}")
    assert git(repo, "status", "--porcelain") == ""


def test_the_shared_graders_and_buckets_come_from_the_file(repo: Path) -> None:
    suite = load_suite(repo / SUITE)
    assert suite.name == "tickets" and suite.agent_name == "example" and suite.is_jsonl
    assert len(suite.tasks) == 12 and set(suite.buckets) == {"urgency", "category"}
    no_own = write_jsonl(repo / "evals" / "bare.jsonl",
                         [header() | {"suite": {"agent_name": "example"}},
                          {"id": "a", "input": "hi"}])
    [task] = load_suite(no_own).tasks
    assert [g.name for g in task.spec.graders] == ["json_schema"]  # the header's
    assert task.line == 2 and task.bucket == "unbucketed"


@pytest.mark.parametrize(("line", "says"), [
    ('{"id": "a/b", "input": "x", "graders": [{"name": "json_schema"}]}', "field 'id'"),
    ('{"id": "a", "input": "x", "graders": [{"name": "json_shema"}]}', "Did you mean"),
    ('{"id": "a", "input": "x"', "invalid JSON"),
    ('["a"]', "must hold a JSON object"),
    ('{"id": "t0", "input": "dup", "graders": [{"name": "json_schema",'
     ' "config": {"schema": {}}}]}', "duplicate task id"),
])
def test_errors_name_the_file_and_the_line(repo: Path, line: str, says: str) -> None:
    path = repo / "evals" / "bad.jsonl"
    first = json.dumps({"id": "t0", "input": "x", "graders": [
        {"name": "json_schema", "config": {"schema": {}}}]})
    path.write_text(json.dumps({"suite": {"agent_name": "example"}}) + "\n" + first + "\n"
                    + line + "\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert message.startswith(f"{path.resolve()} line 3: "), message
    assert says in message


def test_a_jsonl_suite_nobody_declares_needs_an_agent_name(repo: Path) -> None:
    path = write_jsonl(repo / "evals" / "orphan.jsonl", tasks()[:1])
    with pytest.raises(SuiteError, match=r"line 1: field 'suite\.agent_name'"):
        load_suite(path)
    assert load_suite(path, "example").agent_name == "example"


def test_an_undeclared_command_grader_is_an_error_at_load(repo: Path, tmp_path: Path) -> None:
    lines = [header(), *tasks()]
    lines[3]["graders"] = [{"name": "command", "config": {"grader": "checker"}}]
    write_jsonl(repo / SUITE, lines)
    result = cli("eval", "--agent", "example", *MODELS, "--out", str(tmp_path / "state"))
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert f"{SUITE} line 4" in out and "'graders.0.config.grader'" in out
    assert "promptloop.toml" in out and "checker" in out


def test_a_headerless_jsonl_suite_is_the_agents_capability_suite(repo: Path,
                                                                 tmp_path: Path) -> None:
    """An agent whose one suite is a JSONL file without a header (kind "mixed") runs by
    `eval --agent` alone: no capability suite, so its suite of no kind stands in."""
    write_jsonl(repo / SUITE, tasks())
    commit_all(repo)
    data = cli_json("eval", "--agent", "example", *MODELS, "--fresh",
                    "--out", str(tmp_path / "state"))
    assert data["summary"]["num_trials"] == 12, data["summary"]


@pytest.mark.parametrize(("first", "says"), [
    ({"suite": "tickets"}, "line 1: field 'suite': must be an object"),
    ({"suite": {}, "kind": "capability"},
     "line 1: field 'kind': a suite.json key belongs inside the header's 'suite' object"),
])
def test_a_broken_header_is_named_not_read_as_a_missing_suite(
        repo: Path, tmp_path: Path, first: dict[str, Any], says: str) -> None:
    write_jsonl(repo / SUITE, [first, *tasks()])
    result = cli("eval", "--agent", "example", *MODELS, "--out", str(tmp_path / "state"))
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert f"{SUITE} {says}" in out, out
    assert "has no suite" not in out


def test_a_grader_in_another_harness_shape_says_the_shape(repo: Path) -> None:
    lines = [header(), *tasks()]
    lines[1]["graders"] = [{"type": "json_path", "path": "$.urgency", "equals": "high"}]
    path = write_jsonl(repo / SUITE, lines)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert "line 2: field 'graders.0'" in message, message
    assert "write 'name' instead of 'type'" in message
    assert "put 'equals', 'path' under 'config'" in message


def test_a_whole_source_file_as_the_prompt_gets_a_note(repo: Path, tmp_path: Path) -> None:
    """`prompt = "agent.py"` makes the whole file the prompt: eval says so and how to name a
    literal instead (a markdown prompt gets no note)."""
    (repo / "agent.py").write_text('SYSTEM = """Triage support messages."""\n')
    toml = repo / "promptloop.toml"
    toml.write_text(toml.read_text().replace(f'prompt = "{PROMPT}"', 'prompt = "agent.py"'))
    commit_all(repo)
    result = cli("eval", "--agent", "example", *MODELS, "--out", str(tmp_path / "state"))
    out = " ".join(result.output.split())
    assert "prompt: agent.py @" in out and "the whole file is the prompt" in out, out
    assert "[[agents.example.prompts]] with path and variable" in out
    toml.write_text(toml.read_text().replace('prompt = "agent.py"', f'prompt = "{PROMPT}"'))
    result = cli("eval", "--agent", "example", *MODELS, "--out", str(tmp_path / "state"))
    assert "the whole file is the prompt" not in " ".join(result.output.split())


def test_an_agent_name_no_agent_has_names_the_field(repo: Path, tmp_path: Path) -> None:
    """A new-team trial's suite said agent_name "note" for the agent "notes": eval advised
    `--agent note`, which does not exist. The error now names the field and the agent."""
    write_jsonl(repo / SUITE, [{"suite": {"agent_name": "exampel"}}, *tasks()])
    result = cli("eval", "--agent", "example", *MODELS, "--out", str(tmp_path / "state"))
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert f"{SUITE}: suite 'tickets'" in out or "field 'agent_name': 'exampel'" in out, out
    assert "field 'agent_name': 'exampel' is no agent of promptloop.toml" in out
    assert "Did you mean 'example'?" in out and "--agent exampel" not in out


def test_warnings_reach_stderr_under_json(repo: Path, tmp_path: Path) -> None:
    """A new-team trial: with --json and stderr not a terminal, the suite's warnings were
    printed nowhere (the display is off) and are not part of the envelope."""
    lines = [header(), *tasks()]
    lines[1]["graders"][0]["config"]["expcted"] = 1
    write_jsonl(repo / SUITE, lines)
    result = cli("eval", "--agent", "example", *MODELS, "--out", str(tmp_path / "state"),
                 "--json")
    assert result.exit_code == 0, result.output
    assert "unknown config key 'expcted' ignored" in result.stderr
    assert "Warning:" not in result.stdout


@pytest.mark.parametrize("header_line", [True, False], ids=["header", "headerless"])
def test_doctor_and_suites_read_a_jsonl_suite_however_it_is_named(
        repo: Path, header_line: bool) -> None:
    """doctor checked only suite folders (a JSONL suite was dropped from an agent's list, and
    `--suite AGENT/SUITE` or the file's path were errors); `suites` could not load a
    headerless one (its agent is the agent declaring it)."""
    if not header_line:  # the fixture's file has its header
        write_jsonl(repo / SUITE, tasks())
        commit_all(repo)
    for spelled in (None, "example", "example/tickets", SUITE):
        args = ("doctor", "--json", *MODELS, *(("--suite", spelled) if spelled else ()))
        found = cli_json(*args)["suites"]
        assert [(Path(s["path"]).name, s["loads"], s["tasks"]) for s in found] == [
            ("tickets.jsonl", True, 12)], (spelled, found)
    listed = cli_json("suites")
    assert [(s["path"].endswith(SUITE), s["tasks"]) for s in listed] == [(True, 12)]
