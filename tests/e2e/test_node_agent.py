"""The Node.js example agent (examples/action-items) end to end in a team's repository that is
not promptloop's: eval, optimize, review and nightly through the worker adapter and the model
gateway, against the prompt-sensitive scripted model of tests/examples/action_items_policy.py.

Must-holds (issue 24): the kept branch's diff touches only the lines inside the template
literal SYSTEM_PROMPT; a patch that closes the literal early or edits outside it is refused
before any trial and the refusal names the region; review of a head whose promptloop.toml
changes the adapter command runs the base's command (a marker the head's would write never
appears) and says the head's was ignored.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.core.ledger import Ledger
from promptloop.optimizer.core.regions import RegionSpec, locate, value_of
from promptloop.optimizer.workflows.context import open_project
from promptloop.optimizer.workflows.nightly.engine import NightlyConfig, run_nightly
from promptloop.optimizer.workflows.optimize import OptimizeConfig, OptimizeResult, optimize
from tests.cli_json import cli_result
from tests.e2e.support import (
    assert_only_region_changed,
    cli,
    cli_json,
    commit_all,
    commit_branch,
    enter,
    git,
)
from tests.examples.action_items_policy import (
    DATE_RULE,
    NONE_RULE,
    action_items_model,
    rubric_judge_model,
)

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "action-items"
PROMPT_JS = "agent/prompt.js"
SPEC = RegionSpec(path=PROMPT_JS, variable="SYSTEM_PROMPT")
BUCKETS = {"due_dates", "multiple_items", "no_action_items", "owner_extraction"}
MODELS = ("--agent-model", "scripted:action_items", "--judge-model", "scripted:rubric")

DUE_LINE = ("- due: the deadline as a date in the form YYYY-MM-DD, or null when no deadline "
            "was given.")
DATE_SENTENCE = "  Resolve relative dates (\"by Friday\", \"tomorrow\") against the meeting date."
NONE_SENTENCE = "When nobody agreed to do anything, return an empty list of items."
assert DATE_RULE in DATE_SENTENCE.lower() and NONE_RULE in NONE_SENTENCE.lower()


def proposal(hunk: str, hypothesis: str = "relative due dates are left null") -> str:
    """A proposer reply whose diff (against the region's text, numbered from the region's
    line 1, as the package shows it) is `hunk`."""
    return (f"HYPOTHESIS: {hypothesis}.\n\n```diff\n--- a/{PROMPT_JS}\n+++ b/{PROMPT_JS}\n"
            f"{hunk}```\n")


# region line 8 is the `- due:` line, line 9 the blank line after it
GOOD = proposal(f"@@ -8,2 +8,3 @@\n {DUE_LINE}\n+{DATE_SENTENCE}\n \n")
BOTH = proposal(f"@@ -8,2 +8,4 @@\n {DUE_LINE}\n+{DATE_SENTENCE}\n+{NONE_SENTENCE}\n \n",
                "relative dates stay null and empty notes get an invented item")
CLOSES_EARLY = proposal(f"@@ -8,2 +8,3 @@\n {DUE_LINE}\n+Resolve relative dates.`;\n \n")
OUTSIDE = proposal(
    "@@ -23,3 +23,3 @@\n Do not write anything before or after the JSON.`;\n \n"
    "-module.exports = { SYSTEM_PROMPT };\n"
    "+module.exports = { SYSTEM_PROMPT, RULE: 'resolve relative dates' };\n")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A team's repository holding the example agent, its suite and its promptloop.toml (at
    the root), committed on main; the current folder, with the scripted models registered."""
    root = tmp_path / "team-repo"
    root.mkdir()
    for folder in ("agent", "evals"):
        shutil.copytree(EXAMPLE / folder, root / folder)
    shutil.copy(EXAMPLE / "promptloop.toml", root / "promptloop.toml")
    commit_all(root)
    enter(root, monkeypatch)
    monkeypatch.setitem(SCRIPTED_MODELS, "action_items", action_items_model)
    monkeypatch.setitem(SCRIPTED_MODELS, "rubric", rubric_judge_model)
    return root


def base_value(repo: Path) -> str:
    """SYSTEM_PROMPT's runtime value on main: what the agent sends as its system message."""
    return value_of(locate(SPEC, git(repo, "show", f"main:{PROMPT_JS}")))


def systems(model: ScriptedModel) -> set[str]:
    """The system prompts the agent sent, one per distinct prompt."""
    return {m.content for call in model.calls for m in call.messages if m.role == "system"}


def node_value(repo: Path, ref: str, tmp: Path) -> str:
    """SYSTEM_PROMPT as node loads it from `ref`'s prompt.js (the literal is still valid JS)."""
    path = tmp / f"prompt-{ref.replace('/', '_')}.js"
    path.write_text(git(repo, "show", f"{ref}:{PROMPT_JS}"))
    return subprocess.run(
        ["node", "-e", f"process.stdout.write(require({json.dumps(str(path))}).SYSTEM_PROMPT)"],
        check=True, capture_output=True, text=True).stdout


def run_optimize(repo: Path, state: Path, proposer: ScriptedModel, agent: ScriptedModel,
                 **kw: Any) -> OptimizeResult:
    open_project()
    config = OptimizeConfig(
        suite="action_items", bucket=str(kw.pop("bucket", "due_dates")),
        iterations=int(kw.pop("iterations", 1)), agent_model="scripted:action_items",
        judge_model="scripted:rubric", proposer_model="scripted:proposer",
        proposer_format="diff", repo=repo, state_dir=state, **kw)
    return asyncio.run(optimize(config, agent=agent, judge=rubric_judge_model(),
                                proposer=proposer))


def test_eval_runs_the_node_agent_with_no_errored_trial(repo: Path, tmp_path: Path) -> None:
    data = cli_json("eval", "--agent", "action_items", *MODELS, "--trials", "1",
                    "--out", str(tmp_path / "state"))
    summary = data["summary"]
    assert summary["num_trials"] == 19 and summary["errored_trials"] == 0
    buckets = {b["bucket"]: b for b in summary["buckets"]}
    assert set(buckets) == BUCKETS
    assert all(b["trials"] > 0 and b["errored_trials"] == 0 for b in buckets.values())
    # the scripted model follows the prompt: the agent's own prompt fails relative dates and
    # the notes without tasks, and passes the owners
    assert buckets["owner_extraction"]["trial_pass_rate"] == 1.0
    assert buckets["due_dates"]["trial_pass_rate"] < 1.0
    assert buckets["no_action_items"]["trial_pass_rate"] == 0.0
    assert summary["usage"]["model_calls"] == 19  # every trial called the model through node
    assert Path(data["report"]).is_file()


def test_optimize_keeps_a_branch_that_changes_only_the_template_literal(
    repo: Path, tmp_path: Path
) -> None:
    agent = action_items_model()
    proposer = ScriptedModel([reply(GOOD)])
    result = run_optimize(repo, tmp_path / "state", proposer, agent)
    [it] = result.iterations
    assert it.outcome == "accepted", it.reasons
    assert it.branch and it.branch.startswith("promptloop/action_items/due_dates/")
    assert result.accepted_branches == [it.branch]
    text = assert_only_region_changed(repo, "main", it.branch, SPEC)
    assert DATE_SENTENCE in text
    # node loads the new literal, whose value is the base's plus the added line
    loaded = node_value(repo, it.branch, tmp_path)
    assert loaded == base_value(repo).replace(DUE_LINE + "\n", f"{DUE_LINE}\n{DATE_SENTENCE}\n")
    # the candidate's trials ran on that prompt, through the worker and the gateway
    assert loaded in systems(agent) and base_value(repo) in systems(agent)
    # the proposer saw the region's text only, numbered from its first line
    package = Path(it.package_path or "").read_text()
    assert proposer.calls[0].messages[-1].content in package
    assert f"   8  {DUE_LINE}" in package
    assert "const SYSTEM_PROMPT" not in package and "module.exports" not in package
    assert "promptloop optimizes the text" not in package  # the file's comment, outside
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    # the PR body shows the change as the file's own diff (file line numbers, as git shows it)
    body = Path(it.pr_body_path or "").read_text()
    branch_diff = git(repo, "diff", "main", it.branch, "--", PROMPT_JS)
    [file_hunk] = [line for line in branch_diff.splitlines() if line.startswith("@@")]
    assert file_hunk.split(" @@")[0] in body


def test_optimize_from_the_command_line(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`promptloop optimize --agent action_items --bucket due_dates` as a team types it."""
    monkeypatch.setitem(SCRIPTED_MODELS, "ai-proposer", lambda: ScriptedModel(
        lambda req: reply(GOOD), model_id="scripted:ai-proposer"))
    data = cli_json("optimize", "--agent", "action_items", "--bucket", "due_dates",
                    "--iterations", "1", *MODELS, "--proposer-model", "scripted:ai-proposer",
                    "--out", str(tmp_path / "state"))
    assert data["status"] == "done" and data["baseline_trials"] == 19, data["message"]
    [it] = data["iterations"]
    assert it["outcome"] == "accepted", it["reasons"]
    text = assert_only_region_changed(repo, "main", it["branch"], SPEC)
    assert DATE_SENTENCE in text
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


@pytest.mark.parametrize(
    ("reply_text", "why"),
    [(CLOSES_EARLY, "closes the literal early"), (OUTSIDE, "edits outside the region")],
    ids=["closes-literal", "outside-region"],
)
def test_a_patch_breaking_out_of_the_literal_is_refused_before_any_trial(
    repo: Path, tmp_path: Path, reply_text: str, why: str
) -> None:
    agent = action_items_model()
    proposer = ScriptedModel(lambda req: reply(reply_text))  # the same patch at every retry
    result = run_optimize(repo, tmp_path / "state", proposer, agent)
    [it] = result.iterations
    assert it.outcome == "refused", (why, it.outcome, it.reasons)
    reason = " ".join(it.reasons)
    assert "SYSTEM_PROMPT" in reason and PROMPT_JS in reason, (why, reason)
    # no candidate trial ran: the agent only ever sent the base prompt (the baseline)
    assert systems(agent) == {base_value(repo)}
    assert len(agent.calls) == 19
    assert [e.outcome for e in Ledger(tmp_path / "state" / "ledger.jsonl").entries()] == [
        "refused"]
    assert git(repo, "branch", "--list", "promptloop/*").strip() == ""
    assert git(repo, "status", "--porcelain") == ""


def _prompt_with(repo: Path, *lines: str) -> str:
    """prompt.js on main with `lines` added after the `- due:` line of the literal."""
    text = (repo / PROMPT_JS).read_text()
    assert text.count(DUE_LINE) == 1
    return text.replace(DUE_LINE, "\n".join([DUE_LINE, *lines]))


def test_review_of_a_branch_editing_the_literal(repo: Path, tmp_path: Path) -> None:
    commit_branch(repo, "pr/relative-dates", {PROMPT_JS: _prompt_with(repo, DATE_SENTENCE)})
    assert_only_region_changed(repo, "main", "pr/relative-dates", SPEC)
    data = cli_json("review", "--base", "main", "--head", "pr/relative-dates", *MODELS,
                    "--out", str(tmp_path / "state"))
    assert data["status"] == "reviewed"
    assert data["decision"] in {"improves", "neutral", "inconclusive"}, data["message"]
    [agent] = data["agents"]
    assert agent["agent"] == "action_items" and agent["prompt_path"] == PROMPT_JS
    assert agent["regressed"] == []
    rows = {c["bucket"]: c for c in agent["comparisons"]}
    assert set(rows) == BUCKETS
    assert rows["due_dates"]["cand_pass_rate"] > rows["due_dates"]["base_pass_rate"]
    assert not any("ignored" in n for n in data["notes"])  # the head's toml is the base's
    comment = Path(data["comment_path"]).read_text()
    assert f"Verdict: {data['decision']}" in comment
    assert f"+{DATE_SENTENCE}" in comment and "```diff" in comment


def test_review_ignores_the_heads_adapter_command(repo: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "head-command-ran"
    toml = (repo / "promptloop.toml").read_text()
    worker = 'command = ["node", "agent/agent.js", "--worker"]'
    assert toml.count(worker) == 1
    evil = json.dumps(["python3", "-c", f"open({str(marker)!r}, 'w').write('x')"])
    commit_branch(repo, "pr/evil", {
        PROMPT_JS: _prompt_with(repo, DATE_SENTENCE),  # a prompt change, so review runs trials
        "promptloop.toml": toml.replace(worker, f"command = {evil}"),
    })
    data = cli_json("review", "--base", "main", "--head", "pr/evil", *MODELS,
                    "--out", str(tmp_path / "state"))
    assert not marker.exists()
    assert data["status"] == "reviewed"
    [agent] = data["agents"]
    # the head's prompt was evaluated with the base's worker: trials ran and none errored
    rows = {c["bucket"]: c for c in agent["comparisons"]}
    assert set(rows) == BUCKETS and all(r["n_pairs"] > 0 for r in rows.values())
    assert rows["due_dates"]["cand_pass_rate"] > rows["due_dates"]["base_pass_rate"]
    ignored = [n for n in data["notes"] if "ignored" in n]
    assert ignored and "command" in ignored[0] and "[agents.action_items]" in ignored[0]
    comment = Path(data["comment_path"]).read_text()
    assert ignored[0] in comment

    # the control: trusting the head runs its command, which writes the marker (and, being no
    # worker, errors every trial: exit 2); unboxed, since a trial sandbox hides the test's tmp
    monkeypatch.setenv("PROMPTLOOP_SANDBOX", "off")
    trusted = cli("review", "--base", "main", "--head", "pr/evil", *MODELS, "--trust-head",
                  "--no-sandbox", "--out", str(tmp_path / "state-trusted"))
    assert marker.exists()
    assert trusted.exit_code == 2, trusted.output


def night_proposer(req: Request) -> ModelResponse:
    return reply(BOTH, tokens=(400, 60))


def test_nightly_on_the_node_agent_with_a_small_budget(repo: Path, tmp_path: Path) -> None:
    open_project()
    state = tmp_path / "state"
    config = NightlyConfig.model_validate({
        "suites": ["action_items"], "agent_model": "scripted:action_items",
        "judge_model": "scripted:rubric", "proposer_model": "scripted:proposer",
        "proposer_format": "diff", "iterations_per_bucket": 1, "max_buckets": 1,
        "trials": 1, "confirm_trials": 1, "assumed_tokens_per_trial": 300,
        "max_tokens": 200_000, "repo": repo, "state_dir": state,
    })
    agent = action_items_model()
    result = asyncio.run(run_nightly(
        config, agent=agent, judge=rubric_judge_model(),
        proposer=ScriptedModel(night_proposer, model_id="scripted:proposer")))
    cp = result.checkpoint
    assert cp.status == "finished" and result.exit_code == 0, (cp.stop_reason, cp.notes)
    steps = [(s.id, s.outcome) for s in cp.steps]
    assert steps[0][0] == "baseline:action_items" and "0 errored of 19" in steps[0][1]
    # the night's profile step (docs/nightly.md: a share of the budget grows short records)
    [(step, outcome)] = [s for s in steps[1:] if not s[0].startswith("profile")]
    bucket = step.split("/")[1]
    assert step == f"iterate:action_items/{bucket}/1" and bucket in BUCKETS
    assert outcome == "accepted", steps
    assert cp.spend.tokens <= 200_000
    [kept] = result.summary.accepted
    text = assert_only_region_changed(repo, "main", kept.branch, SPEC)
    assert DATE_SENTENCE in text and NONE_SENTENCE in text
    assert {p.name for p in result.paths.values()} == {"summary.json", "summary.md",
                                                      "summary.html"}
    assert kept.branch in result.paths["md"].read_text()
    assert git(repo, "status", "--porcelain") == ""


def _review_head_adding_a_command_grader(repo: Path, tmp_path: Path) -> tuple[Path, Any]:
    """Review a head that declares a command grader (writing a marker) in promptloop.toml and
    names it in a task; (the marker's path, the CLI result)."""
    marker = tmp_path / "head-grader-ran"
    grader = json.dumps(["python3", "-c", f"open({str(marker)!r}, 'w').write('x')"])
    toml = (repo / "promptloop.toml").read_text()
    task_file = next((repo / "evals" / "tasks" / "due_dates").rglob("task.json"))
    task = json.loads(task_file.read_text())
    task["graders"].append({"name": "command", "config": {"grader": "sneaky"}})
    commit_branch(repo, "pr/grader", {
        PROMPT_JS: _prompt_with(repo, DATE_SENTENCE),
        "promptloop.toml": f"{toml}\n[agents.action_items.graders.sneaky]\ncommand = {grader}\n",
        str(task_file.relative_to(repo)): json.dumps(task, indent=2),
    })
    result = cli("review", "--base", "main", "--head", "pr/grader", *MODELS, "--json",
                 "--out", str(tmp_path / "state"))
    return marker, result


def test_review_never_runs_a_command_grader_the_head_adds(repo: Path, tmp_path: Path) -> None:
    marker, result = _review_head_adding_a_command_grader(repo, tmp_path)
    assert result.exit_code in (0, 2, 3), result.output
    assert not marker.exists()


def test_review_says_it_ignored_a_command_grader_the_head_adds(
    repo: Path, tmp_path: Path
) -> None:
    marker, result = _review_head_adding_a_command_grader(repo, tmp_path)
    assert result.exit_code == 0, result.output
    data = cli_result(result.stdout)
    assert data["status"] == "reviewed"
    notes = " ".join(data["notes"])
    assert "sneaky" in notes and "ignored" in notes
    assert "sneaky" in Path(data["comment_path"]).read_text()
    assert not marker.exists()


def test_review_in_a_checkout_of_the_head_does_not_run_the_heads_agent_code(
    repo: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "head-agent-ran"
    agent_js = (repo / "agent" / "agent.js").read_text()
    assert agent_js.count('"use strict";') == 1
    payload = f'require("node:fs").writeFileSync({json.dumps(str(marker))}, "x");'
    commit_branch(repo, "pr/agent-code", {
        PROMPT_JS: _prompt_with(repo, DATE_SENTENCE),
        "agent/agent.js": agent_js.replace('"use strict";', f'"use strict";\n{payload}'),
    })
    git(repo, "checkout", "-q", "pr/agent-code")  # as CI checks out a pull request
    data = cli_json("review", "--base", "main", "--head", "pr/agent-code", *MODELS,
                    "--out", str(tmp_path / "state"))
    assert data["status"] == "reviewed"
    assert not marker.exists()
