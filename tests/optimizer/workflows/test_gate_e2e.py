"""Issue 18 end to end: `promptloop optimize` and `promptloop review` against a deterministic
scripted world whose agent follows the rules its prompt holds.

The target bucket `skip_trivial` has three tasks, all failing on the base prompt, so one of
them is held out from the proposer. Each rule below makes the agent skip exactly the inputs it
names; a skip is right for the trivial inputs and wrong for every other one. Trials are
deterministic on both sides (no noise), so each case has one right verdict.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.core.ledger import Ledger
from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.policy import sensitivity_statement
from promptloop.optimizer.gate.sequential import heldout_tasks
from promptloop.optimizer.workflows.optimize import OptimizeConfig, OptimizeResult, optimize
from promptloop.optimizer.workflows.review import ReviewConfig, review
from tests import policies
from tests.cli_json import cli_result
from tests.optimizer.workflows.test_optimize import PROMPT, _git, _write_suite, commit_base

TASKS = {
    "skip_trivial": [("greet-hi", "hi", "skip"), ("emoji-thumb", "👍", "skip"),
                     ("say-thanks", "thanks", "skip")],
    "short_fact": [
        ("dentist", "Dentist moved to Friday 3pm at Harbor Clinic", "persist"),
        ("oat-milk", "Bought oat milk and rye bread for the week", "persist"),
    ],
    "long_fact": [
        ("trip", "Planning the autumn hiking trip: three days in the Dolomites, huts booked "
                 "for the second night, need new boots before October.", "persist"),
    ],
}
REGRESSION = {"plain": [("plain-a", "Booked the car service for Tuesday morning", "persist"),
                        ("plain-b", "Ran 5 km along the river in 27 minutes", "persist")]}

RULES: dict[str, Callable[[str], bool]] = {
    "skip salutations": lambda c: c == "hi",
    "skip a lone emoji reaction": lambda c: c == "👍",
    "skip expressions of gratitude": lambda c: c == "thanks",
    "skip grocery purchases": lambda c: "oat milk" in c.lower(),
}
RULE_OF_TASK = {"greet-hi": "skip salutations", "emoji-thumb": "skip a lone emoji reaction",
                "say-thanks": "skip expressions of gratitude"}
BREAKING = "skip grocery purchases"


def world(req: Request) -> ModelResponse:
    """Skip an input when a rule in the system prompt names it; else the PKM policy."""
    system = req.messages[0].content.lower()
    _, content = policies.raw_input(req)
    done = [m.tool_name for m in req.messages if m.role == "tool" and not m.is_error]
    if not done and any(rule in system and hit(content) for rule, hit in RULES.items()):
        return reply("", call("skip_pkm_organization", evidence=f"rule: {content!r}"))
    return policies.pkm_policy(req)


def agent() -> ScriptedModel:
    return ScriptedModel(world, model_id="scripted:world")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "prompts").mkdir(parents=True)
    (repo / "prompts" / "pkm_agent.md").write_text(PROMPT)
    _write_suite(repo / "tasks" / "pkm_agent" / "capability", "capability", TASKS)
    _write_suite(repo / "tasks" / "pkm_agent" / "regression", "regression", REGRESSION)
    return commit_base(repo)


def heldout() -> str:
    """The target's held-out task: drawn among its failing tasks (all three fail)."""
    ids = [t for t, _, _ in TASKS["skip_trivial"]]
    [task] = heldout_tasks(ids, GatePolicy(), salt="skip_trivial", rates=dict.fromkeys(ids, 0.0))
    return task


def proposal(*rules: str) -> str:
    added = "".join(f"+{r[0].upper()}{r[1:]}.\n" for r in rules)
    n = len(rules)
    return ("HYPOTHESIS: trivial input needs explicit skip rules.\n\n```diff\n"
            "--- a/prompts/pkm_agent.md\n+++ b/prompts/pkm_agent.md\n"
            f"@@ -7,2 +7,{2 + n} @@\n ## Skipping\n{added}"
            " Call skip_pkm_organization when the user asks not to save the input.\n```\n")


def run(repo: Path, state: Path, text: str) -> tuple[OptimizeResult, ScriptedModel]:
    proposer = ScriptedModel([reply(text)])
    config = OptimizeConfig(suite="pkm_agent", bucket="skip_trivial", iterations=1,
                            agent_model="scripted:world", proposer_model="scripted:proposer",
                            proposer_format="diff", repo=repo, state_dir=state)
    return asyncio.run(optimize(config, agent=agent(), proposer=proposer)), proposer


ALL_TARGET = tuple(RULE_OF_TASK.values())


def test_a_good_patch_is_accepted_and_no_bucket_regressed(repo: Path, state: Path) -> None:
    result, _ = run(repo, state, proposal(*ALL_TARGET))
    [it] = result.iterations
    assert it.outcome == "accepted", it.reasons
    assert any(r.startswith("no bucket regressed") for r in it.reasons), it.reasons
    assert it.harm[-1].startswith("no bucket regressed: all ")
    assert all(h.startswith("[no harm]") for h in it.harm[:-1])
    assert {"short_fact", "long_fact", "regression/plain"} <= {
        h.split("'")[1] for h in it.harm[:-1]}
    assert any(m.startswith("visible target tasks (2)") for m in it.movement)
    assert any(m.startswith("held-out target tasks (1)") for m in it.movement)
    body = Path(it.pr_body_path or "").read_text()
    assert "**Harm per bucket**" in body and "**Target movement**" in body
    assert "no bucket regressed: all " in body


def test_a_patch_that_also_breaks_one_task_elsewhere_is_rejected(repo: Path,
                                                                  state: Path) -> None:
    result, _ = run(repo, state, proposal(*ALL_TARGET, BREAKING))
    [it] = result.iterations
    assert it.outcome == "rejected", it.reasons
    named = [r for r in it.reasons if "'oat-milk'" in r]
    assert named and "regressed" in named[0], it.reasons
    assert "failed trial(s) #0, #1" in named[0] and "Bayes factor" in named[0]
    assert not any(r.startswith("no bucket regressed") for r in it.reasons)
    assert any(h.startswith("[regressed] bucket 'short_fact'") for h in it.harm)
    assert "no bucket regressed" not in " ".join(it.harm)
    assert Ledger(state / "ledger.jsonl").entries()[-1].outcome == "rejected"


def test_a_patch_fitted_to_the_visible_tasks_is_not_kept(repo: Path, state: Path) -> None:
    hidden = heldout()
    visible = [RULE_OF_TASK[t] for t in RULE_OF_TASK if t != hidden]
    result, proposer = run(repo, state, proposal(*visible))
    [it] = result.iterations
    assert it.outcome in ("rejected", "inconclusive"), it.reasons
    assert it.outcome != "accepted" and it.branch is None
    assert any("held-out task(s) of 'skip_trivial' did not improve" in r for r in it.reasons)
    assert any(m.startswith("held-out target tasks (1)") for m in it.movement)
    # nothing the proposer saw names the held-out task: its package, its messages, and the
    # ledger reasons a later proposer reads
    package = Path(it.package_path or "").read_text()
    assert hidden not in package
    assert all(hidden not in m.content for c in proposer.calls for m in c.messages)
    assert all(hidden not in r for e in Ledger(state / "ledger.jsonl").entries()
               for r in e.reasons)
    assert all(hidden not in r for r in it.reasons)


def human_branch(repo: Path, branch: str, *rules: str) -> None:
    _git(repo, "checkout", "-q", "-b", branch)
    lines = "".join(f"{r[0].upper()}{r[1:]}.\n" for r in rules)
    (repo / "prompts" / "pkm_agent.md").write_text(
        PROMPT.replace("## Skipping\n", f"## Skipping\n{lines}"))
    _git(repo, "commit", "-qam", f"human change on {branch}")
    _git(repo, "checkout", "-q", "main")


def test_review_of_a_breaking_rule_regresses_and_fails_the_check(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptloop.agents.llm.registry import SCRIPTED_MODELS

    human_branch(repo, "human/rules", *ALL_TARGET, BREAKING)
    monkeypatch.setitem(SCRIPTED_MODELS, "world", agent)
    monkeypatch.chdir(repo)
    out = CliRunner().invoke(app, ["review", "--agent-model", "scripted:world", "--out",
                                   str(state), "--base", "main", "--head", "human/rules",
                                   "--json", "--fail-on-regression"])
    assert out.exit_code == 3, out.output
    data = cli_result(out.stdout)
    [a] = data["agents"]
    assert data["decision"] == a["decision"] == "regresses"
    assert "short_fact" in a["regressed"]
    states = {b["bucket"]: b["state"] for b in a["buckets"]}
    assert states["short_fact"] == "regressed"
    assert set(states) == {"skip_trivial", "short_fact", "long_fact", "regression/plain"}
    statement = next(b["statement"] for b in a["buckets"] if b["bucket"] == "short_fact")
    assert "'oat-milk'" in statement
    comment = Path(data["comment_path"]).read_text()
    assert "**Harm detection per bucket**" in comment and "`short_fact`: 🔴 regressed" in comment
    # what was ruled out is said only of the buckets that showed no harm, never of a verdict
    # that found a break ("Ruled out: no task lost half ..." beside a regressed bucket)
    flat = " ".join(comment.split())
    assert "Ruled out: no pass/fail" not in flat, flat
    assert "bucket(s) that showed no harm (not the 1 other(s)), ruled out: no pass/fail task " \
           "lost half or more" in flat
    assert "neutral" not in data["message"]


def test_review_with_harm_not_ruled_out_is_inconclusive_never_neutral(
    repo: Path, state: Path
) -> None:
    """The same breaking rule, with harm detection capped at the trials both refs already ran
    and no confirmation: one task failing twice against a record of two passes is no break
    (its Bayes factor is far from the break level) and rules nothing out: "harm not ruled
    out", so inconclusive, and
    `--fail-on-regression` maps that to exit 4 (`cli.review.EXIT_INCONCLUSIVE`)."""
    human_branch(repo, "human/rules", BREAKING)
    # the terminal rule at the cap at even odds: two failures against two recorded passes
    # favour the drop, so the task stays "harm not ruled out"
    policy = GatePolicy(harm_max_trials=2, regression_tolerance=1.0, harm_terminal_bf=1.0)
    config = ReviewConfig(base="main", head="human/rules", agent_model="scripted:world",
                          repo=repo, state_dir=state, confirm_trials=0, policy=policy)
    result = asyncio.run(review(config, agent=agent()))
    [a] = result.agents
    assert result.decision == a.decision == "inconclusive", a.reasons
    # two trials per task rule no drop out anywhere (the Bayes factor needs more clean ones)
    assert "short_fact" in a.open and a.regressed == []
    states = {b.bucket: b.state for b in a.buckets}
    assert states["short_fact"] == "harm not ruled out"
    assert any("harm not ruled out" in r for r in a.reasons)
    assert result.message.startswith("inconclusive: harm not ruled out in bucket(s): ")


def test_harm_sensitivity_changes_what_the_verdict_says(repo: Path, state: Path) -> None:
    """`--harm-sensitivity narrow` rules out near-total breaks only, and says so: the verdict,
    its reasons and the PR body carry the one sentence of the sensitivity that ran."""
    half, _ = run(repo, state, proposal(*ALL_TARGET))
    [it] = half.iterations
    assert it.outcome == "accepted", it.reasons
    said = [r for r in it.reasons if r.startswith("Ruled out: ")]
    assert said == [sensitivity_statement(GatePolicy())]
    assert "half or more of its pass rate" in said[0] and "not ruled out" in said[0]
    assert said[0] in Path(it.pr_body_path or "").read_text()
    narrow_state = state.parent / "narrow-state"
    config = OptimizeConfig(suite="pkm_agent", bucket="skip_trivial", iterations=1,
                            agent_model="scripted:world", proposer_model="scripted:proposer",
                            proposer_format="diff", repo=repo, state_dir=narrow_state,
                            policy=GatePolicy(harm_sensitivity="narrow"))
    narrow = asyncio.run(optimize(config, agent=agent(),
                                  proposer=ScriptedModel([reply(proposal(*ALL_TARGET))])))
    [nit] = narrow.iterations
    told = [r for r in nit.reasons if r.startswith("Ruled out: ")]
    assert told == [sensitivity_statement(GatePolicy(harm_sensitivity="narrow"))]
    assert told != said and "near-total" in told[0]


def test_the_cli_gate_defaults_are_gate_policys() -> None:
    """One home for every gate default: optimize's and review's options, nightly's config
    and the calibration benchmark read `GatePolicy`; this fails when one of them differs."""
    from promptloop.optimizer.cli.optimize import optimize as optimize_cmd
    from promptloop.optimizer.cli.review import review as review_cmd
    from promptloop.optimizer.workflows.nightly.config import NightlyConfig

    policy = GatePolicy()
    for command, names in (
        (optimize_cmd, ("min_improvement", "regression_tolerance", "harm_sensitivity",
                        "round_trials", "max_trials")),
        (review_cmd, ("min_improvement", "regression_tolerance", "harm_sensitivity")),
    ):
        params = inspect.signature(command).parameters
        for name in names:
            default = params[name].default
            assert getattr(default, "value", default) == getattr(policy, name), (command, name)
    field = NightlyConfig.model_fields["policy"]
    assert field.default_factory is not None and field.default_factory() == policy  # type: ignore[call-arg]
    spec = importlib.util.spec_from_file_location(
        "gate_calibration", Path(__file__).resolve().parents[3] / "bench" / "gate_calibration.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.bench_policy("half") == policy
    help_text = CliRunner().invoke(app, ["optimize", "--help"], terminal_width=120).output
    assert "--harm-sensitivity" in help_text
