"""`promptloop review` guards the head (issue 29): every prompt target the head changes passes
the region guard optimize uses. A head whose Dart literal gains an early `\"\"\"`, a `${x}`,
a bare `$`, a `$name`, or an edit outside the literal, and a head whose JavaScript template
literal gains `${x}` or a closing backtick, gets the verdict "broken": the comment names the
file, the region and the line, the exit code is 3 with --fail-on-regression, and no trial is
run (the scripted model is never called, the command adapter never starts, no run is saved).

Real git repositories in a temporary folder, a `command` adapter (a Python script standing in
for the team's agent) behind the model gateway, a scripted model.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.optimizer.workflows.review import ReviewConfig, ReviewResult, review
from promptloop.optimizer.workflows.review_models import HeadBreak
from tests.e2e.support import cli, commit_all, commit_branch, enter, git
from tests.e2e.test_dart_region import (
    PERSON_LINE,
    PROJECT_TOML,
    PROMPTS_DART,
    PROMPTS_SOURCE,
    TRIAL_SCRIPT,
    card_model,
    write_suite,
)

MARK = "tool/ran.txt"
"""The trial script appends a line here each time it runs (it never should for a broken head);
in a trial sandbox the repository is read-only and the model's calls are the evidence."""


def marked_script(root: Path) -> str:
    """The trial script, appending a line to `root`/MARK at each run."""
    script = TRIAL_SCRIPT.replace(
        "request = json.load(sys.stdin)\n",
        f"request = json.load(sys.stdin)\ntry:\n"
        f"    with open({str(root / MARK)!r}, 'a') as f:\n"
        "        f.write('ran\\n')\n"
        "except OSError:\n    pass  # in a trial sandbox the repository is read-only\n", 1)
    assert script != TRIAL_SCRIPT
    return script

DART_REGION = "cardAgentSystemPrompt"


def _line_of(text: str, needle: str) -> int:
    """The first 1-based line of `text` holding `needle`."""
    return next(n for n, line in enumerate(text.split("\n"), start=1) if needle in line)


@pytest.fixture
def dart_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Flutter-like app: the card prompt a Dart `const ... = \"\"\"...\"\"\"`."""
    root = tmp_path / "memex"
    (root / "lib" / "agent" / "card_agent").mkdir(parents=True)
    (root / PROMPTS_DART).write_text(PROMPTS_SOURCE)
    (root / "tool").mkdir()
    (root / "tool" / "promptloop_trial.py").write_text(marked_script(root))
    (root / ".gitignore").write_text("tool/ran.txt\n")
    (root / "promptloop.toml").write_text(PROJECT_TOML)
    write_suite(root)
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "dart-card", card_model)
    return root


def api_review(repo: Path, state: Path, head: str, model: ScriptedModel,
               model_id: str) -> ReviewResult:
    config = ReviewConfig(base="main", head=head, agent_model=model_id, repo=repo,
                          state_dir=state, trials=1)
    return asyncio.run(review(config, agent=model))


def assert_broken(result: ReviewResult, model: ScriptedModel, repo: Path, state: Path, *,
                  agent: str, path: str, region: str, line: int, says: str) -> str:
    """The verdict is broken, naming file, region and line; nothing ran. Returns the comment."""
    assert result.status == "reviewed" and result.decision == "broken", result.message
    [a] = result.agents
    assert a.agent == agent and a.decision == "broken"
    [b] = a.head_breaks
    assert b.path == path and region in b.region and b.line == line, b
    assert says in b.reason, b.reason
    assert a.base_runs == a.head_runs == [] and a.head_trials == a.base_trials == 0
    # no trial: the model was never called, the adapter never started, no run was saved
    assert model.calls == []
    assert not (repo / MARK).exists()
    runs = state / "runs"
    assert not runs.exists() or not any(runs.iterdir())
    assert result.message.startswith("broken: ") and f"{path} line {line}" in result.message
    comment = Path(result.comment_path or "").read_text()
    assert "## promptloop review: ⛔ broken" in comment and "**Verdict: broken.**" in comment
    assert f"`{path}` line {line}" in comment and f"`{path}:{line}`" not in comment  # once
    assert region in comment
    assert "No trial was run for this agent" in comment
    assert "### Newly failing trials" not in comment and "```diff" in comment
    assert region in result.message
    assert "not evaluated: the head's prompt source fails the region guard" in comment
    return comment


def dart_head(repo: Path, branch: str, text: str) -> None:
    assert text != PROMPTS_SOURCE
    commit_branch(repo, branch, {PROMPTS_DART: text})


# --- Dart -----------------------------------------------------------------------------------

DART_CASES = {
    # an early """ closes the literal and declares a new constant with the rest of the prompt
    "closing-quotes": (PROMPTS_SOURCE.replace(
        PERSON_LINE, f'{PERSON_LINE}\n""";\n\nconst cardAgentExtra = """'),
        '""";', "closing delimiter"),
    "interpolation": (PROMPTS_SOURCE.replace(
        PERSON_LINE, f"{PERSON_LINE} Greet ${{x}} by name."), "${x}", "interpolation '${x}'"),
    "bare-dollar": (PROMPTS_SOURCE.replace(
        PERSON_LINE, f"{PERSON_LINE} Even a $5 coffee counts."), "$5", "'$' not followed"),
    "dollar-name": (PROMPTS_SOURCE.replace(
        PERSON_LINE, f"{PERSON_LINE} Address $userName directly."), "$userName",
        "interpolation '$userName'"),
    # the new rule landed after the closing quotes: outside the literal, not Dart
    "outside-the-literal": (PROMPTS_SOURCE.replace(
        '""";\n', '""";\n  Use person even for a short call.\n', 1),
        "Use person even for a short call.", "outside"),
    # the prompt changes, and so does a line of code above it
    "prompt-and-code": (PROMPTS_SOURCE.replace(
        PERSON_LINE, f"{PERSON_LINE}\n  Use person even for a short call.").replace(
        "import 'package:memex/agent/prompt_utils.dart';",
        "import 'package:memex/agent/prompt_tools.dart';"),
        "import 'package:memex/agent/prompt_tools.dart';", "changes code, not only the prompt"),
}


@pytest.mark.parametrize("case", list(DART_CASES))
def test_a_dart_head_breaking_the_literal_is_broken_and_not_run(
    dart_repo: Path, tmp_path: Path, case: str
) -> None:
    text, marker, says = DART_CASES[case]
    dart_head(dart_repo, f"pr/{case}", text)
    state, model = tmp_path / "state", card_model()
    result = api_review(dart_repo, state, f"pr/{case}", model, "scripted:dart-card")
    assert_broken(result, model, dart_repo, state, agent="card_agent", path=PROMPTS_DART,
                  region=DART_REGION, line=_line_of(text, marker), says=says)


def test_broken_exits_3_with_fail_on_regression_and_says_where(
    dart_repo: Path, tmp_path: Path
) -> None:
    text = DART_CASES["bare-dollar"][0]
    dart_head(dart_repo, "pr/dollar", text)
    line = _line_of(text, "$5")
    args = ("review", "--base", "main", "--head", "pr/dollar", "--agent-model",
            "scripted:dart-card", "--trials", "1", "--out", str(tmp_path / "state"))
    plain = cli(*args)
    assert plain.exit_code == 0, plain.output  # without the flag a review exits 0
    said = " ".join(plain.output.split())
    assert f"card_agent broken: the head breaks {PROMPTS_DART} line {line}" in said
    assert DART_REGION in said and "no trial was run" in said
    failing = cli(*args, "--fail-on-regression", "--json")
    assert failing.exit_code == 3, failing.output
    envelope: dict[str, Any] = json.loads(failing.stdout)
    data = envelope["result"]
    assert data["decision"] == "broken" and envelope["exit_code"] == 3
    assert envelope["error"]["message"] == ("the review's verdict is 'broken' "
                                            "(--fail-on-regression exits 3)")
    # stderr says it too, as every failing command does (docs/commands.md), with or without
    # --json
    assert ("Error: the review's verdict is 'broken' (--fail-on-regression exits 3)"
            in " ".join(failing.stderr.split()))
    human = cli(*args, "--fail-on-regression")
    assert human.exit_code == 3
    assert ("Error: the review's verdict is 'broken' (--fail-on-regression exits 3)"
            in " ".join(human.stderr.split()))
    assert data["agents"][0]["head_breaks"][0]["line"] == line
    assert not (dart_repo / MARK).exists()


def test_a_valid_dart_edit_is_reviewed_with_trials(dart_repo: Path, tmp_path: Path) -> None:
    """The guard lets a valid edit through (escaped `\\$`, an existing-style rule): trials run."""
    text = PROMPTS_SOURCE.replace(
        PERSON_LINE, f"{PERSON_LINE}\n  Use person even a short call or lunch; \\$5 is spending.")
    dart_head(dart_repo, "pr/valid", text)
    model = card_model()
    result = api_review(dart_repo, tmp_path / "state", "pr/valid", model, "scripted:dart-card")
    assert result.decision in ("improves", "neutral", "inconclusive"), result.message
    [a] = result.agents
    assert a.head_breaks == [] and a.head_trials == 7 and model.calls


def test_code_changed_outside_an_unchanged_literal_is_broken_as_code(
    dart_repo: Path, tmp_path: Path
) -> None:
    """Only code around the prompt changed (another constant): the prompt file changed outside
    its region, which the region guard refuses as optimize does: broken, said to change code,
    nothing evaluated."""
    text = PROMPTS_SOURCE.replace("Call save_timeline_card exactly once.",
                                  "Call save_timeline_card once.")
    dart_head(dart_repo, "pr/hint", text)
    model = card_model()
    result = api_review(dart_repo, tmp_path / "state", "pr/hint", model, "scripted:dart-card")
    line = _line_of(text, "Call save_timeline_card once.")
    assert_broken(result, model, dart_repo, tmp_path / "state", agent="card_agent",
                  path=PROMPTS_DART, region="cardAgentSystemPrompt", line=line,
                  says="changes code, not only the prompt")


# --- JavaScript -------------------------------------------------------------------------------

PROMPT_JS = "agent/prompt.js"
JS_REGION = "SYSTEM_PROMPT"
JS_SOURCE = """// The action-item agent's system prompt (agent/agent.js sends it).
const SYSTEM_PROMPT = `You extract action items from meeting notes.
For each item give:
- owner: the person who agreed to do it.
- due: the deadline as YYYY-MM-DD, or null.
Answer with JSON only: {"items": [...]}.`;

module.exports = { SYSTEM_PROMPT };
"""
JS_TOML = f"""[agents.action_items]
prompts = [{{name = "system", path = "{PROMPT_JS}", variable = "SYSTEM_PROMPT"}}]
suites = ["evals"]
adapter = "command"
command = ["python3", "tool/promptloop_trial.py"]
timeout = 60
"""
JS_SCHEMA = {"type": "object", "required": ["items"]}


def _js_model() -> ScriptedModel:
    return ScriptedModel(lambda req: reply(json.dumps({"items": []}), tokens=(50, 5)),
                         model_id="scripted:js-items")


@pytest.fixture
def js_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "team"
    (root / "agent").mkdir(parents=True)
    (root / PROMPT_JS).write_text(JS_SOURCE)
    (root / "tool").mkdir()
    (root / "tool" / "promptloop_trial.py").write_text(marked_script(root))
    (root / ".gitignore").write_text("tool/ran.txt\n")
    (root / "promptloop.toml").write_text(JS_TOML)
    suite = root / "evals"
    suite.mkdir()
    (suite / "suite.json").write_text(json.dumps({
        "name": "action_items", "agent_name": "action_items", "kind": "capability"}))
    for n, content in enumerate(["Ana sends the deck by Friday.", "No decisions today."]):
        task = suite / "tasks" / "notes" / f"t{n}"
        task.mkdir(parents=True)
        (task / "task.json").write_text(json.dumps({
            "id": f"t{n}", "description": content, "trials_per_run": 1,
            "metadata": {"failure_bucket": "notes"},
            "input": {"fact_id": f"2026/03/14.md#ts_{n}", "content": content},
            "graders": [{"name": "json_schema", "config": {"schema": JS_SCHEMA}}]}))
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "js-items", _js_model)
    return root


DUE = "- due: the deadline as YYYY-MM-DD, or null."
JS_CASES = {
    "interpolation": (JS_SOURCE.replace(DUE, f"{DUE} Today is ${{today}}."), "${today}",
                      "interpolation '${today}'"),
    "closing-backtick": (JS_SOURCE.replace(DUE, f"{DUE}`;\nconst EXTRA = `Be brief."),
                         "`;", "closing delimiter"),
    "prompt-and-code": (JS_SOURCE.replace(DUE, f"{DUE}\nResolve relative dates.").replace(
        "module.exports = { SYSTEM_PROMPT };", "module.exports = { SYSTEM_PROMPT, x: 1 };"),
        "module.exports", "changes code, not only the prompt"),
}


@pytest.mark.parametrize("case", list(JS_CASES))
def test_a_js_head_breaking_the_template_literal_is_broken_and_not_run(
    js_repo: Path, tmp_path: Path, case: str
) -> None:
    text, marker, says = JS_CASES[case]
    commit_branch(js_repo, f"pr/{case}", {PROMPT_JS: text})
    state, model = tmp_path / "state", _js_model()
    result = api_review(js_repo, state, f"pr/{case}", model, "scripted:js-items")
    comment = assert_broken(result, model, js_repo, state, agent="action_items",
                            path=PROMPT_JS, region=JS_REGION, line=_line_of(text, marker),
                            says=says)
    if case == "closing-backtick":  # the quoted backtick is escaped: no stray code span
        [line] = [ln for ln in comment.splitlines() if "closing delimiter" in ln]
        assert "'\\`'" in line and "write \\\\\\` for a backtick" in line, line
        assert line.replace("\\`", "").count("`") % 2 == 0, line


def test_a_valid_js_edit_is_reviewed_with_trials(js_repo: Path, tmp_path: Path) -> None:
    text = JS_SOURCE.replace(DUE, f"{DUE}\nWrite \\${{amount}} for money as written.")
    commit_branch(js_repo, "pr/valid", {PROMPT_JS: text})
    model = _js_model()
    result = api_review(js_repo, tmp_path / "state", "pr/valid", model, "scripted:js-items")
    assert result.decision == "neutral", result.message
    assert result.agents[0].head_breaks == [] and model.calls
    assert git(js_repo, "status", "--porcelain") == ""


# --- a prompt inside a YAML config ------------------------------------------------------------

PROMPT_YAML = "config/agent.yaml"
YAML_SOURCE = """queues: [billing, bugs, general]
system_prompt: |
  # promptloop:begin
  You extract action items from meeting notes.
  Answer with JSON only: {"items": [...]}.
  # promptloop:end
escalation_email: ops@example.com
"""
YAML_REGION = "'# promptloop:begin'"


@pytest.fixture
def yaml_repo(js_repo: Path) -> Path:
    """js_repo's agent, its prompt moved into a marker region of a YAML block."""
    (js_repo / "config").mkdir()
    (js_repo / PROMPT_YAML).write_text(YAML_SOURCE)
    (js_repo / "promptloop.toml").write_text(JS_TOML.replace(
        f'prompts = [{{name = "system", path = "{PROMPT_JS}", variable = "SYSTEM_PROMPT"}}]',
        f'prompts = [{{name = "system", path = "{PROMPT_YAML}", begin = "# promptloop:begin", '
        'end = "# promptloop:end"}]'))
    commit_all(js_repo)
    return js_repo


def test_a_yaml_head_that_unindents_a_line_is_broken_and_not_run(
    yaml_repo: Path, tmp_path: Path
) -> None:
    """A team's YAML prompt: a rule written at column 0 ends the block scalar and leaves the
    file unparseable; review called it "improves" and exited 0."""
    rule = "Tickets that mention an outage are urgent."
    text = YAML_SOURCE.replace("  # promptloop:end", f"{rule}\n  # promptloop:end")
    commit_branch(yaml_repo, "pr/unindented", {PROMPT_YAML: text})
    state, model = tmp_path / "state", _js_model()
    result = api_review(yaml_repo, state, "pr/unindented", model, "scripted:js-items")
    assert_broken(result, model, yaml_repo, state, agent="action_items", path=PROMPT_YAML,
                  region=YAML_REGION, line=_line_of(text, rule),
                  says="not indented by the block's 2 space(s)")


def test_a_yaml_head_indented_like_its_block_is_reviewed_with_trials(
    yaml_repo: Path, tmp_path: Path
) -> None:
    text = YAML_SOURCE.replace("  # promptloop:end",
                               "  Tickets that mention an outage are urgent.\n  # promptloop:end")
    commit_branch(yaml_repo, "pr/indented", {PROMPT_YAML: text})
    model = _js_model()
    result = api_review(yaml_repo, tmp_path / "state", "pr/indented", model, "scripted:js-items")
    assert result.agents[0].head_breaks == [] and model.calls
    # the agent got the prompt as yaml reads it: without the block's indentation
    systems = {m.content for call in model.calls for m in call.messages if m.role == "system"}
    assert len(systems) == 2 and any("outage are urgent." in s for s in systems)
    assert all(s.startswith("You extract") and "\n  " not in s for s in systems), systems


def test_a_yaml_head_that_changes_the_config_with_the_prompt_is_broken(
    yaml_repo: Path, tmp_path: Path
) -> None:
    """A team's PR dropped a queue and changed the escalation address in the YAML file whose
    block holds the prompt, and changed the prompt: the configuration's effect would be read
    as the prompt's. Broken, every changed line named. The same keys changed alone are a
    configuration change: nothing to review, a note naming them (not "broken" with advice
    to split what is already apart)."""
    config = (YAML_SOURCE.replace("[billing, bugs, general]", "[billing, bugs]")
              .replace("ops@example.com", "oncall@example.com"))
    both = config.replace("Answer with JSON only", "Answer briefly with JSON only")
    commit_branch(yaml_repo, "pr/both", {PROMPT_YAML: both})
    state, model = tmp_path / "state", _js_model()
    result = api_review(yaml_repo, state, "pr/both", model, "scripted:js-items")
    [b] = assert_broken_parts(result, model)
    assert b.path == PROMPT_YAML and b.line == 1
    assert "(lines 1, 7)" in b.reason and "configuration the agent reads" in b.reason
    commit_branch(yaml_repo, "pr/config", {PROMPT_YAML: config})
    alone = api_review(yaml_repo, tmp_path / "state2", "pr/config", model, "scripted:js-items")
    assert alone.status == "nothing_to_review", alone.message
    assert any("(lines 1, 7)" in n and "not the prompt" in n for n in alone.notes), alone.notes


def assert_broken_parts(result: ReviewResult, model: ScriptedModel) -> list[HeadBreak]:
    assert result.status == "reviewed" and result.decision == "broken", result.message
    assert model.calls == []
    [a] = result.agents
    return list(a.head_breaks)
