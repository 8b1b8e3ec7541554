"""A repository laid out like the Memex Flutter app: the Card Agent's system prompt is the Dart
triple-quoted constant `cardAgentSystemPrompt` in lib/agent/card_agent/prompts.dart, its suites
live under test/agent/eval/card_agent/suites/, and a `command` adapter runs one trial (a small
Python script stands in for the Dart side, which cannot run here: it reads the request, sends
`prompt.text` to the model endpoint it is given, and answers the card as the outcome).

Must-hold (issue 24): the region is read, packaged, patched and guarded the same way as a
Markdown prompt: the proposer sees only the literal's text, the kept branch changes only lines
inside the literal, and a patch adding the closing `\"\"\"` is refused before any trial, naming
the region.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from unidiff import PatchSet

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.core.ledger import Ledger
from promptloop.optimizer.core.regions import RegionSpec, locate, value_of
from promptloop.optimizer.workflows.context import open_project
from promptloop.optimizer.workflows.optimize import OptimizeConfig, OptimizeResult, optimize
from tests.e2e.support import assert_only_region_changed, cli_json, commit_all, enter, git

PROMPTS_DART = "lib/agent/card_agent/prompts.dart"
SPEC = RegionSpec(path=PROMPTS_DART, variable="cardAgentSystemPrompt")
SUITES = "test/agent/eval/card_agent/suites"

PERSON_LINE = "- person: the input is mainly about meeting or talking to someone."
PERSON_RULE = "even a short call or lunch"
"""With this phrase in the system prompt the scripted model picks the person template."""
RULE_LINE = f"  Use person {PERSON_RULE} with a named person counts."

PROMPTS_SOURCE = f'''// Prompts of the Card Agent (lib/agent/card_agent). The system prompt is
// evaluated by test/agent/eval/card_agent/suites; change it through a reviewed PR.
import 'package:memex/agent/prompt_utils.dart';

/// The Card Agent's system prompt: one raw daily input -> one timeline card.
const cardAgentSystemPrompt = """
You are the Card Agent of Memex, a personal timeline app.
Each message is one raw input the user jotted down during the day.
Turn it into exactly one timeline card.

Choose one template for the card:
- article: notes, thoughts and anything without a better fit.
- link: the input is mainly a URL to read or watch later.
{PERSON_LINE}
- spending: the input records money spent or received.

Write a title of at most eight words, in the user's language.
Keep names, places and amounts exactly as the user wrote them.
Add up to three lowercase tags.

Never invent facts that are not in the input.
Never ask the user a question; always produce a card.

Answer with JSON only:
{{"template_id": "...", "title": "...", "tags": ["..."]}}
""";

/// A short hint appended when the tools are offered.
const cardAgentToolHint = 'Call save_timeline_card exactly once.';
'''

TRIAL_SCRIPT = '''"""Stands in for the Dart side of the Card Agent's promptloop adapter: one
trial per run, the request (promptloop.trial/1) on stdin, the result on stdout. Standard library
only."""
import json
import sys
import urllib.request

CONTRACT = "promptloop.trial/1"


def result(outcome, error=None, transcript=(), usage=None):
    print(json.dumps({"contract": CONTRACT, "outcome": outcome, "error": error,
                      "transcript": list(transcript), "usage": usage or {}}))


request = json.load(sys.stdin)
model = request["model"]
body = {"model": model["model"], "seed": request["trial"]["seed"], "temperature": 0,
        "messages": [{"role": "system", "content": request["prompt"]["text"]},
                     {"role": "user", "content": request["task"]["input"]["content"]}]}
call = urllib.request.Request(
    model["base_url"].rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
    headers={"Content-Type": "application/json", "Authorization": "Bearer " + model["api_key"]})
try:
    with urllib.request.urlopen(call, timeout=request["timeout_s"]) as response:
        answer = json.load(response)
except Exception as err:  # the model endpoint failed: not the agent's fault
    result({}, {"cause": "infrastructure", "message": f"model call failed: {type(err).__name__}"})
    sys.exit(0)
text = answer["choices"][0]["message"]["content"]
try:
    card = json.loads(text)
except ValueError:
    result({}, {"cause": "agent", "message": "the model's card is not JSON"})
    sys.exit(0)
usage = answer.get("usage") or {}
result(card, transcript=[{"role": "assistant", "content": text}],
       usage={"input_tokens": usage.get("prompt_tokens", 0),
              "output_tokens": usage.get("completion_tokens", 0)})
'''

PROJECT_TOML = f'''# The Memex app's promptloop project: the Card Agent's prompt is a Dart constant.
[agents.card_agent]
description = "Card Agent: one raw daily input -> a timeline card"
prompts = [{{name = "system", path = "{PROMPTS_DART}", variable = "cardAgentSystemPrompt"}}]
suites = ["{SUITES}"]
adapter = "command"
command = ["python3", "tool/promptloop_trial.py"]
timeout = 60
'''

CARD_SCHEMA = {
    "type": "object",
    "required": ["template_id", "title", "tags"],
    "properties": {
        "template_id": {"enum": ["article", "link", "person", "spending"]},
        "title": {"type": "string", "minLength": 1},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string"}},
    },
}
TASKS = {  # bucket -> (task id, raw input, expected template)
    "people": [
        ("lunch-priya", "Lunch with Priya from the design team, she moves to Lisbon", "person"),
        ("call-mom", "Called Mom about the weekend plans", "person"),
        ("coffee-jonas", "Coffee with Jonas, he starts at the bakery next week", "person"),
    ],
    "links": [
        ("essay-link", "Read later https://example.org/essays/attention", "link"),
        ("talk-link", "Watch https://video.example.com/talks/42 on the train", "link"),
    ],
    "spending": [
        ("coffee-station", "Coffee at the station $4.50", "spending"),
        ("rent-paid", "Paid rent 950 EUR", "spending"),
    ],
}


def write_suite(root: Path) -> None:
    folder = root / SUITES / "capability"
    folder.mkdir(parents=True)
    (folder / "suite.json").write_text(json.dumps({
        "name": "card_agent_capability", "agent_name": "card_agent", "kind": "capability",
        "task_pass_threshold": 1.0, "clock": "2026-03-14T09:30:00"}))
    for bucket, tasks in TASKS.items():
        for n, (task_id, content, template) in enumerate(tasks):
            task = folder / "tasks" / bucket / task_id
            task.mkdir(parents=True)
            (task / "task.json").write_text(json.dumps({
                "id": task_id, "description": f"{bucket}: {task_id}", "trials_per_run": 1,
                "metadata": {"failure_bucket": bucket},
                "input": {"fact_id": f"2026/03/14.md#ts_{n}", "content": content},
                "graders": [
                    {"name": "json_schema", "config": {"schema": CARD_SCHEMA}},
                    {"name": "json_path",
                     "config": {"path": "$.template_id", "equals": template}},
                    {"name": "json_path",
                     "config": {"path": "$.title", "matches": r"^\S+(\s+\S+){0,7}$"}},
                ],
            }))


def card_policy(req: Request) -> ModelResponse:
    """A prompt-sensitive stand-in for the model: people need PERSON_RULE in the prompt."""
    system = next(m.content for m in req.messages if m.role == "system")
    text = next(m.content for m in req.messages if m.role == "user")
    if re.search(r"https?://", text):
        template = "link"
    elif re.search(r"\$|\bEUR\b|\bpaid\b", text, re.I):
        template = "spending"
    elif PERSON_RULE in system and re.search(r"\b(with|called) [A-Z][a-z]+", text):
        template = "person"
    else:
        template = "article"
    title = " ".join(re.sub(r"https?://\S+", "", text).split()[:6])
    return reply(json.dumps({"template_id": template, "title": title, "tags": [template]}),
                 tokens=(150, 30))


def card_model() -> ScriptedModel:
    return ScriptedModel(card_policy, model_id="scripted:dart-card")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The app's repository (only what promptloop reads), committed on main."""
    root = tmp_path / "memex"
    (root / "lib" / "agent" / "card_agent").mkdir(parents=True)
    (root / PROMPTS_DART).write_text(PROMPTS_SOURCE)
    (root / "tool").mkdir()
    (root / "tool" / "promptloop_trial.py").write_text(TRIAL_SCRIPT)
    (root / "pubspec.yaml").write_text("name: memex\n")
    (root / "promptloop.toml").write_text(PROJECT_TOML)
    write_suite(root)
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "dart-card", card_model)
    return root


def base_region(repo: Path) -> Any:
    return locate(SPEC, git(repo, "show", f"main:{PROMPTS_DART}"))


def region_line(repo: Path, line: str) -> int:
    """The 1-based line of the region's text (as the proposer sees it) that is `line`."""
    return base_region(repo).text.split("\n").index(line) + 1


def proposal(repo: Path, added: str) -> str:
    """A reply whose diff adds `added` after the person line, numbered from the region."""
    n = region_line(repo, PERSON_LINE)
    following = base_region(repo).text.split("\n")[n]
    return (f"HYPOTHESIS: short meetings with a named person get the article template.\n\n"
            f"```diff\n--- a/{PROMPTS_DART}\n+++ b/{PROMPTS_DART}\n@@ -{n},2 +{n},3 @@\n"
            f" {PERSON_LINE}\n+{added}\n {following}\n```\n")


def systems(model: ScriptedModel) -> set[str]:
    return {m.content for call in model.calls for m in call.messages if m.role == "system"}


def run_optimize(repo: Path, state: Path, proposer: ScriptedModel,
                 agent: ScriptedModel) -> OptimizeResult:
    open_project()
    config = OptimizeConfig.model_validate({
        "suite": "card_agent", "bucket": "people", "iterations": 1,
        "agent_model": "scripted:dart-card", "proposer_model": "scripted:proposer",
        "proposer_format": "diff", "repo": repo, "state_dir": state})
    return asyncio.run(optimize(config, agent=agent, proposer=proposer))


def test_eval_runs_the_command_adapter_on_the_dart_prompt(repo: Path, tmp_path: Path) -> None:
    data = cli_json("eval", "--agent", "card_agent", "--agent-model", "scripted:dart-card",
                    "--trials", "1", "--out", str(tmp_path / "state"))
    summary = data["summary"]
    assert summary["num_trials"] == 7 and summary["errored_trials"] == 0
    buckets = {b["bucket"]: b for b in summary["buckets"]}
    assert set(buckets) == set(TASKS)
    # the model saw the Dart constant's value: links and spending pass, people need the rule
    assert buckets["links"]["trial_pass_rate"] == 1.0
    assert buckets["spending"]["trial_pass_rate"] == 1.0
    assert buckets["people"]["trial_pass_rate"] == 0.0
    assert any(PROMPTS_DART in s for s in data["sources"]), data["sources"]


def test_optimize_packages_and_patches_only_the_dart_literal(repo: Path, tmp_path: Path) -> None:
    agent, proposer = card_model(), ScriptedModel([reply(proposal(repo, RULE_LINE))])
    result = run_optimize(repo, tmp_path / "state", proposer, agent)
    [it] = result.iterations
    # the proposer's package holds the literal's text with the region's line numbers, and
    # nothing of the Dart file around it
    package = Path(it.package_path or "").read_text()
    n = region_line(repo, PERSON_LINE)
    assert f"{n:>4}  {PERSON_LINE}" in package
    assert "You are the Card Agent of Memex" in package
    shown = package.split("<prompt_file>")[1].split("</prompt_file>")[0]
    for outside in ("cardAgentSystemPrompt", '"""', "import 'package:", "cardAgentToolHint",
                    "change it through a reviewed PR"):
        assert outside not in shown, outside
        assert outside in ("cardAgentSystemPrompt", '"""') or outside not in package
    # beside it, what the text must respect to stay a valid Dart literal
    said = " ".join(package.split())
    assert (f"This text is the content of the triple-quoted string cardAgentSystemPrompt in "
            f"{PROMPTS_DART}") in said
    assert "must not contain '\"\"\"' unescaped" in said and "'\\$'" in said, said[:600]
    # the agent ran with the constant's value (no Dart syntax), then with the patched one
    base_value = value_of(base_region(repo))
    assert base_value in systems(agent) and not base_value.startswith("\n")
    assert it.outcome == "accepted", it.reasons
    assert it.branch and result.accepted_branches == [it.branch]
    text = assert_only_region_changed(repo, "main", it.branch, SPEC)
    assert f"{PERSON_LINE}\n{RULE_LINE}\n" in text
    assert value_of(locate(SPEC, git(repo, "show", f"{it.branch}:{PROMPTS_DART}"))) in \
        systems(agent)
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("added", "named"),
    [(f'  Use person {PERSON_RULE}.""";', '"""'),  # closes the literal early
     (f"  Use person {PERSON_RULE}, even for $5 coffees.", "$")],  # a bare $: invalid Dart
    ids=["closing-quotes", "bare-dollar"],
)
def test_a_patch_breaking_the_dart_literal_is_refused_naming_the_region(
    repo: Path, tmp_path: Path, added: str, named: str
) -> None:
    state = tmp_path / "state"
    agent = card_model()
    patch = proposal(repo, added)
    result = run_optimize(repo, state, ScriptedModel(lambda req: reply(patch)), agent)
    [it] = result.iterations
    assert it.outcome == "refused", it.reasons
    reason = " ".join(it.reasons)
    assert "cardAgentSystemPrompt" in reason and PROMPTS_DART in reason, reason
    assert named in reason
    # before any trial: the agent only ever ran the base constant (the baseline)
    assert systems(agent) == {value_of(base_region(repo))}
    assert len(agent.calls) == 7
    assert [e.outcome for e in Ledger(state / "ledger.jsonl").entries()] == ["refused"]
    assert git(repo, "branch", "--list", "promptloop/*").strip() == ""


REGION_CMD = """\
import os, pathlib, sys
state = pathlib.Path(sys.argv[1])
# which candidate this is, from the replies stored so far (the sandbox is read-only outside)
n = 2 if any(state.rglob("reply-c1.md")) else 1
line = {rule!r} if n == 1 else "  Keep every title under eight words."
p = pathlib.Path(os.environ["PROMPTLOOP_PROMPT_FILE"])  # the whole Dart file, in the sandbox
p.write_text(p.read_text().replace({person!r} + "\\n", {person!r} + "\\n" + line + "\\n", 1))
print(f"HYPOTHESIS: idea {{n}}")
"""


def test_an_external_proposer_with_two_candidates_edits_only_the_dart_literal(
    repo: Path, tmp_path: Path
) -> None:
    """--proposer-cmd with --candidates 2 on a prompt that is a region of a source file: each
    command edits the whole file in its sandbox, and each candidate is the region's new text
    (the tournament took the whole file as the region's text and refused both)."""
    import sys

    state = tmp_path / "state"
    script = tmp_path / "propose.py"
    script.write_text(REGION_CMD.format(rule=RULE_LINE, person=PERSON_LINE))
    open_project()
    config = OptimizeConfig.model_validate({
        "suite": "card_agent", "bucket": "people", "iterations": 1,
        "agent_model": "scripted:dart-card", "proposer_cmd": f"{sys.executable} {script} {state}",
        "candidates": 2, "repo": repo, "state_dir": state})
    result = asyncio.run(optimize(config, agent=card_model()))
    [it] = result.iterations
    assert it.outcome == "accepted", it.reasons
    [entry] = Ledger(state / "ledger.jsonl").entries()
    assert [(c.name, c.status) for c in entry.candidates] == [("c1", "winner"),
                                                               ("c2", "screened_out")]
    assert it.branch
    text = assert_only_region_changed(repo, "main", it.branch, SPEC)
    assert f"{PERSON_LINE}\n{RULE_LINE}\n" in text
    assert git(repo, "status", "--porcelain") == ""
    # the ledger keeps the proposer's diff (the region's lines) and the file's (its own lines,
    # what the viewer shows)
    [[hunk]] = PatchSet(entry.file_diff)
    base_lines = git(repo, "show", f"main:{PROMPTS_DART}").splitlines()
    start = hunk.source_start - 1
    assert [line.value.rstrip("\n") for line in hunk.source_lines()] == (
        base_lines[start:start + hunk.source_length])
    [[region_hunk]] = PatchSet(entry.diff)
    assert region_hunk.source_start < hunk.source_start
    assert it.file_diff == entry.file_diff  # what the terminal shows under the file's name


def test_a_missing_prompt_file_names_the_prompts_array_key(repo: Path, tmp_path: Path) -> None:
    """The agent declares [[agents.card_agent.prompts]]: a missing file named "key 'prompt'",
    a key its table does not have."""
    from tests.e2e.support import cli

    (repo / PROMPTS_DART).unlink()
    result = cli("eval", "--agent", "card_agent", "--agent-model", "scripted:dart-card",
                 "--trials", "1", "--out", str(tmp_path / "state"))
    said = " ".join(result.output.split())
    assert result.exit_code == 1, said
    assert "[[agents.card_agent.prompts]] 'system' key 'path'" in said, said
    assert "key 'prompt'" not in said


def test_a_refused_region_patch_keeps_the_files_diff_too(repo: Path, tmp_path: Path) -> None:
    """A patch refused by another guard than the literal's (here an eval-set URL) still
    splices: the ledger keeps its diff with the file's own line numbers, as for an evaluated
    one (a team's refused iteration showed region-relative hunks under the file's name)."""
    state = tmp_path / "state"
    patch = proposal(repo, "  For example https://example.org/essays/attention is a link.")
    result = run_optimize(repo, state, ScriptedModel(lambda req: reply(patch)), card_model())
    [it] = result.iterations
    assert it.outcome == "refused" and "example.org" in " ".join(it.reasons), it.reasons
    [entry] = Ledger(state / "ledger.jsonl").entries()
    [[hunk]] = PatchSet(entry.file_diff)
    base_lines = git(repo, "show", f"main:{PROMPTS_DART}").splitlines()
    start = hunk.source_start - 1
    assert [line.value.rstrip("\n") for line in hunk.source_lines()] == (
        base_lines[start:start + hunk.source_length])
    assert it.file_diff == entry.file_diff
