"""A broken promptloop.toml is a user error (exit 1) that names the file, the table and the key,
never a traceback (issue 24's must-hold): an unknown agent, a missing prompt file, a region that
is not found or is found twice, an unknown key (with a did-you-mean), a wrong type. Each is
`promptloop eval --agent NAME` in a temporary git repository holding only that file, a prompt
and a one-task suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.support import cli, commit_all, enter, git

PROMPT_JS = """// the agent's prompts
const SYSTEM_PROMPT = `You sort support messages.`;
const GREETING = `Hello!`;
module.exports = { SYSTEM_PROMPT, GREETING };
"""
TWICE_JS = """let SYSTEM_PROMPT = `first`;
SYSTEM_PROMPT = `second`;
"""
AGENT = """suites = ["evals"]
adapter = "command"
command = ["python3", "agent/run.py"]
"""
WHOLE_FILE = f'[agents.triage]\nprompt = "agent/prompt.js"\n{AGENT}'


def region(path: str, variable: str, extra: str = "") -> str:
    return (f'[agents.triage]\nprompts = [{{name = "system", path = "{path}", '
            f'variable = "{variable}"{extra}}}]\n{AGENT}')


CASES = {
    # id: (promptloop.toml, --agent, what the message must name besides the file)
    "unknown-agent": (WHOLE_FILE, "triage_agent",
                      ["[agents.triage_agent]", "unknown agent 'triage_agent'",
                       "Did you mean 'triage'?"]),
    "missing-prompt-file": (WHOLE_FILE.replace("agent/prompt.js", "agent/prompt.md"), "triage",
                            ["[agents.triage]", "'prompt'", "agent/prompt.md", "does not exist"]),
    "region-not-found": (region("agent/prompt.js", "SYSTEM_PROMT"), "triage",
                         ["[agents.triage]", "'variable'", "SYSTEM_PROMT", "not found"]),
    "region-found-twice": (region("agent/twice.js", "SYSTEM_PROMPT"), "triage",
                           ["[agents.triage]", "'variable'", "SYSTEM_PROMPT", "twice",
                            "agent/twice.js"]),
    "unknown-key": (WHOLE_FILE + "timout = 30\n", "triage",
                    ["[agents.triage]", "'timout'", "unknown key", "Did you mean 'timeout'?"]),
    "unknown-key-in-prompt": (region("agent/prompt.js", "SYSTEM_PROMPT", ', begn = "x"'),
                              "triage",
                              ["[agents.triage]", "prompts[0].begn'", "Did you mean 'begin'?"]),
    "wrong-type": (WHOLE_FILE + 'timeout = "soon"\n', "triage",
                   ["[agents.triage]", "'timeout'", "soon"]),
    "string-for-number": (WHOLE_FILE + 'timeout = "300"\n', "triage",
                          ["[agents.triage]", "'timeout'", "'300'"]),
    "wrong-type-list": (WHOLE_FILE.replace('suites = ["evals"]', 'suites = "evals"'), "triage",
                        ["[agents.triage]", "'suites'"]),
}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = (tmp_path / "support-bot").resolve()
    (root / "agent").mkdir(parents=True)
    (root / "agent" / "prompt.js").write_text(PROMPT_JS)
    (root / "agent" / "twice.js").write_text(TWICE_JS)
    (root / "agent" / "run.py").write_text("raise SystemExit('never run')\n")
    task = root / "evals" / "tasks" / "billing" / "refund"
    task.mkdir(parents=True)
    (root / "evals" / "suite.json").write_text(json.dumps(
        {"name": "triage", "agent_name": "triage", "kind": "capability"}))
    (task / "task.json").write_text(json.dumps({
        "id": "refund", "description": "a refund request is billing",
        "metadata": {"failure_bucket": "billing"},
        "input": {"fact_id": "2026/03/14.md#ts_1", "content": "Please refund my order."},
        "graders": [{"name": "json_path",
                     "config": {"path": "$.category", "equals": "billing"}}]}))
    (root / "promptloop.toml").write_text(WHOLE_FILE)
    commit_all(root)
    enter(root, monkeypatch)
    return root


def test_the_valid_file_is_accepted(repo: Path, tmp_path: Path) -> None:
    """The baseline of the cases below: the same repository with a valid file gets past the
    project file (it then fails for its own reasons: the agent script exits 1, every trial
    errors, exit 2), so each case's exit 1 is the file's doing."""
    result = cli("eval", "--agent", "triage", "--agent-model", "scripted:card", "--trials", "1",
                 "--out", str(tmp_path / "state"))
    assert result.exit_code == 2, result.output
    assert "errored" in result.output and "promptloop.toml" not in result.output


@pytest.mark.parametrize("case", list(CASES))
def test_a_broken_project_file_exits_1_naming_file_table_and_key(
    repo: Path, tmp_path: Path, case: str
) -> None:
    toml, agent, expected = CASES[case]
    (repo / "promptloop.toml").write_text(toml)
    git(repo, "commit", "-qam", f"promptloop.toml: {case}", "--allow-empty")
    result = cli("eval", "--agent", agent, "--agent-model", "scripted:card", "--trials", "1",
                 "--out", str(tmp_path / "state"))
    assert result.exit_code == 1, (case, result.exit_code, result.output)
    message = " ".join(result.output.split())  # unwrapped
    assert "Traceback" not in message
    assert str(repo / "promptloop.toml") in message, message
    missing = [e for e in expected if e not in message]
    assert not missing, (missing, message)
    assert not (tmp_path / "state" / "runs").exists() or not any(
        (tmp_path / "state" / "runs").rglob("*.json")), "nothing ran"
