"""`optimize --candidates K` end to end, in temporary git repos with scripted models only.

The agent below skips greetings when the prompt says "greetings alone", emoji when it says
"emoji alone" (and both under the good rule), so patches fix different target tasks and the
screening, the merge and the winner's gate can be followed trial by trial.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.core.events import CandidateStopped, Event, ScreeningRound
from promptloop.optimizer.core.ledger import Ledger, LedgerEntry
from promptloop.optimizer.gate.screen import SCREEN_INDEX_OFFSET
from promptloop.optimizer.gate.verdict import Verdict
from promptloop.optimizer.workflows import iteration as iteration_module
from promptloop.optimizer.workflows.gating import GateRun
from promptloop.optimizer.workflows.optimize import OptimizeConfig, OptimizeResult, optimize
from tests import policies
from tests.optimizer.workflows.test_optimize import _git, fingerprint

GOOD_LINE = ("If the input is only a greeting, filler or emoji, call skip_pkm_organization "
             "and write nothing.")
GREET_LINE = "Greetings alone are not worth saving: call skip_pkm_organization for them."
GREET_LINE_2 = "Skip greetings alone with skip_pkm_organization; they hold no fact."
EMOJI_LINE = "Emoji alone are not worth saving: call skip_pkm_organization for them."
NULL_LINE = "Keep the insight to one sentence."
BREAK_LINE = "Oat milk purchases are not worth saving: call skip_pkm_organization for them."


def patch(hypothesis: str, *lines: str) -> str:
    added = "".join(f"+{line}\n" for line in lines)
    return (f"HYPOTHESIS: {hypothesis}\n\n```diff\n--- a/prompts/pkm_agent.md\n"
            f"+++ b/prompts/pkm_agent.md\n@@ -7,2 +7,{2 + len(lines)} @@\n ## Skipping\n"
            f"{added} Call skip_pkm_organization when the user asks not to save the input.\n"
            "```\n")


def several(*patches: str) -> str:
    return "\n".join(f"## Patch {i}\n{p}" for i, p in enumerate(patches, start=1))


def agent_policy(req: Request) -> ModelResponse:
    system = req.messages[0].content.lower()
    _, content = policies.raw_input(req)
    done = [m.tool_name for m in req.messages if m.role == "tool" and not m.is_error]
    trivial = policies.is_trivial(content)
    emoji = trivial and not any(ch.isalnum() for ch in content)
    if not done and trivial and (("greetings alone" in system and not emoji)
                                 or ("emoji alone" in system and emoji)):
        return reply("", call("skip_pkm_organization", evidence="trivial"))
    if not done and "oat milk purchases" in system and "oat milk" in content.lower():
        return reply("", call("skip_pkm_organization", evidence="a purchase"))
    return policies.pkm_policy(req)


def proposer_of(answers: dict[str, str]) -> ScriptedModel:
    """Answers by the first marker (key) found in the last user message."""
    def answer(req: Request) -> ModelResponse:
        asked = req.messages[-1].content
        for marker, text in answers.items():
            if marker in asked:
                return reply(text)
        raise AssertionError(f"unexpected request: {asked[-300:]}")

    return ScriptedModel(answer, model_id="scripted:proposer")


def run(repo: Path, state: Path, proposer: ScriptedModel, *, events: list[Event] | None = None,
        **kw: Any) -> tuple[OptimizeResult, ScriptedModel]:
    agent = ScriptedModel(agent_policy, model_id="scripted:pkm")
    config = OptimizeConfig(suite="pkm_agent", bucket="skip_trivial", iterations=1,
                            agent_model="scripted:pkm", proposer_model="scripted:proposer",
                            proposer_format="diff", repo=repo, state_dir=state, **kw)
    on_event = events.append if events is not None else None
    result = asyncio.run(optimize(config, agent=agent, proposer=proposer, on_event=on_event))
    return result, agent


@pytest.fixture
def gates(monkeypatch: pytest.MonkeyPatch) -> list[GateRun]:
    """Every GateRun the iterations got (the real gate, watched)."""
    seen: list[GateRun] = []
    real = iteration_module.run_gate

    async def spy(*args: Any, **kw: Any) -> GateRun:
        got = await real(*args, **kw)
        seen.append(got)
        return got

    monkeypatch.setattr(iteration_module, "run_gate", spy)
    return seen


def entry(state: Path) -> LedgerEntry:
    return Ledger(state / "ledger.jsonl").entries()[-1]


def test_k_patches_screened_by_successive_halving(repo: Path, state: Path, gates: list[GateRun],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    verdicts: list[Verdict] = []
    real_message = iteration_module.commit_message

    def message(*args: Any, **kw: Any) -> str:
        verdicts.append(args[3])
        return real_message(*args, **kw)

    monkeypatch.setattr(iteration_module, "commit_message", message)
    proposer = proposer_of({"5 different patches": several(
        patch("trivial input needs a skip rule", GOOD_LINE),
        patch("greetings are saved", GREET_LINE),
        patch("greetings need their own rule", GREET_LINE_2),
        patch("insights run long", NULL_LINE),
        patch("the same rule again", GOOD_LINE))})
    result, _ = run(repo, state, proposer, candidates=5)
    it = result.iterations[0]
    assert it.outcome == "accepted", it.reasons
    assert len(proposer.calls) == 1  # K patches in one request
    asked = proposer.calls[0].messages[-1].content
    assert "Propose 5 patches" in asked and "## Patch 5" in asked
    assert asked in Path(it.package_path or "").read_text()  # what the proposer saw, on disk
    e = entry(state)
    status = {c.name: (c.status, c.rounds) for c in e.candidates}
    # c2 and c3 fix the same task: their tie is broken by the seeded draw, not by position
    second, third = ("c2", "c3") if status["c2"][1] == 2 else ("c3", "c2")
    assert status == {"c1": ("winner", 2), second: ("screened_out", 2),
                      third: ("screened_out", 1), "c4": ("screened_out", 1),
                      "c5": ("duplicate", 0)}
    why = {c.name: c.stopped for c in e.candidates}
    assert why["c4"].startswith("fixed no target trial in round 1")
    assert why[third].startswith("ranked in the lower half after round 1")
    assert why[second].startswith("ranked in the lower half after round 2")
    assert e.candidates[4].guard_violations[0]["message"] == "the same change as candidate c1"
    assert all(t.trial_index >= SCREEN_INDEX_OFFSET for c in e.candidates for t in c.screening)
    assert sorted(len(c.screening) for c in e.candidates) == [0, 2, 2, 2 + 4, 2 + 4]
    assert e.hypothesis == "trivial input needs a skip rule" and GOOD_LINE in e.diff
    # the winner's verdict rests on fresh trials: none of its pairs is a screening trial
    [gate] = gates
    cand_trials = [t for r in gate.cand_runs for t in r.trials]
    assert cand_trials and all(t.trial_index < SCREEN_INDEX_OFFSET for t in cand_trials)
    assert not any(t.cached for t in cand_trials)
    assert any("won the screening of 4 candidates" in r and "none of the 16 screening trials"
               in r for r in it.reasons)
    [verdict] = verdicts  # the gate's own verdict, with the selection added to it only
    assert verdict.test.endswith("; selection among 4 candidates paid by fresh trials")
    assert verdict.model_trials == gate.verdict.model_trials == gate.trials_run
    assert verdict.reasons[:-1] == gate.verdict.reasons
    assert _git(repo, "branch", "--list", "promptloop/*").split() == [it.branch]
    assert _git(repo, "worktree", "list").count("\n") == 1
    body = Path(it.pr_body_path or "").read_text()
    assert "### Runners-up" in body and "- c2: greetings are saved" in body
    assert "- c4: insights run long" in body


def test_dropouts_lose_their_worktree_at_once(repo: Path, state: Path) -> None:
    proposer = proposer_of({"3 different patches": several(
        patch("trivial input needs a skip rule", GOOD_LINE),
        patch("insights run long", NULL_LINE),
        patch("greetings are saved", GREET_LINE))})
    events: list[Event] = []
    gone: list[tuple[str, bool, bool]] = []

    def watch(event: Event) -> None:
        events.append(event)
        if isinstance(event, CandidateStopped):
            [opened] = Ledger(state / "ledger.jsonl").unclosed()
            [slot] = [s for s in [opened, *opened.more] if s.branch.endswith(f"-{event.name}")]
            gone.append((event.name, Path(slot.worktree).exists(),
                         slot.branch in _git(repo, "branch", "--list", "promptloop/*")))

    agent = ScriptedModel(agent_policy, model_id="scripted:pkm")
    config = OptimizeConfig(suite="pkm_agent", bucket="skip_trivial", iterations=1,
                            agent_model="scripted:pkm", proposer_model="scripted:proposer",
                            proposer_format="diff", repo=repo, state_dir=state, candidates=3)
    asyncio.run(optimize(config, agent=agent, proposer=proposer, on_event=watch))
    assert gone == [("c2", False, False), ("c3", False, False)]
    rounds = [(e.round, e.candidates) for e in events if isinstance(e, ScreeningRound)]
    assert rounds == [(1, ["c1", "c2", "c3"])]


def test_merge_is_asked_and_screened(repo: Path, state: Path) -> None:
    proposer = proposer_of({
        "## Merge two patches": patch("greetings and emoji both need the rule", GREET_LINE,
                                      EMOJI_LINE),
        "2 different patches": several(patch("greetings are saved", GREET_LINE),
                                       patch("emoji are saved", EMOJI_LINE))})
    events: list[Event] = []
    result, _ = run(repo, state, proposer, events=events, candidates=2)
    it = result.iterations[0]
    assert it.outcome == "accepted", it.reasons
    merge_ask = proposer.calls[1].messages[-1].content
    assert "greetings are saved" in merge_ask and "emoji are saved" in merge_ask
    assert "Fixed: greet-hi" in merge_ask and "Fixed: emoji-thumb" in merge_ask
    e = entry(state)
    merged = e.candidates[-1]
    assert (merged.name, merged.status) == ("merge", "winner")
    assert sorted(merged.merged_from) == ["c1", "c2"]  # ranked by the seeded draw on a tie
    assert merged.screening[0].trial_index == SCREEN_INDEX_OFFSET  # round 1's slots first
    a, b = merged.merged_from
    assert any(line.startswith(f"merge: merge states the rules of {a} and {b}")
               for line in e.screening)
    assert it.branch and it.branch.endswith("-merge")
    rounds = [(ev.round, ev.candidates) for ev in events if isinstance(ev, ScreeningRound)]
    assert rounds == [(1, ["c1", "c2"]), (1, ["merge"]), (2, [a, "merge"])]
    body = Path(it.pr_body_path or "").read_text()
    assert "- c1: greetings are saved" in body and "- c2: emoji are saved" in body


def test_no_candidate_fixing_a_trial_ends_the_iteration_before_the_gate(
        repo: Path, state: Path, gates: list[GateRun]) -> None:
    proposer = proposer_of({"2 different patches": several(
        patch("insights run long", NULL_LINE),
        patch("insights need a tone", "Write the insight in a warm tone."))})
    result, _ = run(repo, state, proposer, candidates=2)
    it = result.iterations[0]
    assert it.outcome == "rejected" and gates == []
    assert it.reasons[0] == "no candidate fixed a visible target trial in screening"
    assert [c.status for c in entry(state).candidates] == ["screened_out"] * 2
    assert _git(repo, "branch", "--list", "promptloop/*").strip() == ""
    assert _git(repo, "worktree", "list").count("\n") == 1
    # the losers are ledger ideas now: shown to the next proposer, never screened again
    again = proposer_of({"2 different patches": several(
        patch("insights run long", NULL_LINE),
        patch("trivial input needs a skip rule", GOOD_LINE))})
    second, _ = run(repo, state, again, candidates=2)
    assert "Keep the insight to one sentence." in again.calls[0].messages[-1].content
    e = entry(state)
    assert [c.status for c in e.candidates] == ["duplicate", "winner"]
    said = e.candidates[0].guard_violations[0]["message"]
    # named as the candidate it was (the iteration itself may have been accepted)
    assert "already evaluated as " in said and " candidate c1 (rejected)" in said, said
    assert "only one of 2 to pass the guards" in " ".join(second.iterations[0].reasons)


SINGLE_PATCH_RECORD = {
    "agent", "at", "base_commit", "branch", "bucket", "commit", "cost_usd", "diff", "diff_hash",
    "guard_violations", "hypothesis", "id", "iteration", "kind", "outcome", "package_path",
    "pr_body_path", "prompt_path", "proposer", "reasons", "suite", "tokens", "verdict_table",
    "version"}
"""The closing record of an iteration before --candidates existed."""


def _comparable(e: LedgerEntry) -> dict[str, Any]:
    volatile = {"id", "at", "branch", "commit", "package_path", "pr_body_path", "base_commit"}
    data = e.model_dump(mode="json", exclude=volatile)
    data["reasons"] = [r for r in data["reasons"] if "p=" not in r] or data["reasons"]
    return data


def test_one_candidate_is_the_single_patch_loop(tmp_path: Path, gates: list[GateRun]) -> None:
    from tests.optimizer.conftest import pkm_repo

    out = []
    for name, extra in (("default", {}), ("one", {"candidates": 1})):
        repo = pkm_repo(tmp_path / name / "repo")
        proposer = proposer_of({"": patch("trivial input needs a skip rule", GOOD_LINE)})
        result, agent = run(repo, tmp_path / name / "state", proposer, **extra)
        e = entry(tmp_path / name / "state")
        out.append((result.iterations[0].outcome, result.iterations[0].reasons,
                    len(agent.calls), len(proposer.calls), _comparable(e),
                    re.sub(r"-\d{8}T\d+", "-<time>", proposer.calls[0].messages[-1].content)))
        raw = json.loads((tmp_path / name / "state" / "ledger.jsonl").read_text()
                         .splitlines()[-1])
        # later fields: the candidates, their screening, a region prompt's whole-file diff
        assert set(raw) == SINGLE_PATCH_RECORD | {"candidates", "screening", "file_diff"}
        assert raw["file_diff"] == ""  # a whole-file prompt
        assert raw["candidates"] == [] and raw["screening"] == []
        assert "different patches" not in out[-1][5]
    assert out[0] == out[1]
    assert out[0][0] == "accepted"
    assert [g.trials_run for g in gates[:1]] == [g.trials_run for g in gates[1:]]
    assert gates[0].verdict == gates[1].verdict


K_TIMES = """\
import os, pathlib, subprocess, sys
state = pathlib.Path(sys.argv[1])
# the sandbox is read-only outside itself: which run this is, from the replies stored so far
n = 2 if any(state.rglob("reply-c1.md")) else 1
line = {good!r} if n == 1 else {null!r}
p = pathlib.Path(os.environ["PROMPTLOOP_PROMPT_FILE"])
p.write_text(p.read_text().replace("## Skipping\\n", "## Skipping\\n" + line + "\\n"))
top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                     check=True).stdout.strip()
print(f"CWD={{os.getcwd()}}")
print(f"TOP={{top}}")
print(f"HOME={{os.environ['HOME']}}")
print(f"KEY={{os.environ.get('ANTHROPIC_API_KEY', 'absent')}}")
print(f"HYPOTHESIS: idea {{n}}")
"""


def test_external_proposer_is_run_k_times_each_in_its_own_sandbox(
        repo: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--proposer-cmd with --candidates 2: the command runs twice, each time in a throwaway
    sandbox copy of its own (propose/sandbox.py), never in the user's repository or a
    candidate worktree; its replies are redacted; the user's checkout is untouched and no
    sandbox, worktree or losing branch is left."""
    key = "sk-ant-api03-FAKEFAKEFAKE0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    script = tmp_path / "agent.py"
    script.write_text(K_TIMES.format(good=GOOD_LINE, null=NULL_LINE))
    before = fingerprint(repo)
    config = OptimizeConfig(suite="pkm_agent", bucket="skip_trivial", iterations=1,
                            agent_model="scripted:pkm",
                            proposer_cmd=f"{sys.executable} {script} {state}",
                            proposer_env=("ANTHROPIC_API_KEY",),
                            repo=repo, state_dir=state, candidates=2)
    result = asyncio.run(optimize(config, agent=ScriptedModel(agent_policy,
                                                               model_id="scripted:pkm")))
    it = result.iterations[0]
    assert it.outcome == "accepted" and it.hypothesis == "idea 1", it.reasons
    assert GOOD_LINE in _git(repo, "show", f"{it.branch}:prompts/pkm_agent.md")
    assert [(c.name, c.status) for c in entry(state).candidates] == [
        ("c1", "winner"), ("c2", "screened_out")]
    assert NULL_LINE in entry(state).candidates[1].diff
    seen: dict[str, dict[str, str]] = {}
    for name in ("c1", "c2"):
        [path] = state.rglob(f"reply-{name}.md")
        text = path.read_text()
        assert key not in text and "KEY=***" in text
        seen[name] = dict(line.split("=", 1) for line in text.splitlines()
                          if line.split("=", 1)[0] in ("CWD", "TOP", "HOME"))
    cwds = [Path(seen[n]["CWD"]) for n in ("c1", "c2")]
    assert cwds[0] != cwds[1]
    for name, cwd in zip(("c1", "c2"), cwds, strict=True):
        assert cwd.parts[-2:] == ("sandbox", "repo"), cwd
        assert not cwd.resolve().is_relative_to(repo.resolve())
        assert Path(seen[name]["TOP"]).resolve() == cwd.resolve()  # its own repository
        assert Path(seen[name]["HOME"]).resolve() == (cwd.parent / "home").resolve()
        assert not cwd.parent.exists()  # the sandbox is gone
    assert fingerprint(repo) == before
    assert _git(repo, "worktree", "list").count("\n") == 1
    assert _git(repo, "branch", "--list", "promptloop/*").split() == [str(it.branch)]


def test_session_page_shows_the_tournament(repo: Path, state: Path) -> None:
    from promptloop.optimizer.view.app import ViewApp

    proposer = proposer_of({
        "## Merge two patches": patch("greetings and emoji both need the rule", GREET_LINE,
                                      EMOJI_LINE),
        "3 different patches": several(patch("greetings are saved", GREET_LINE),
                                       patch("emoji are saved", EMOJI_LINE),
                                       patch("insights run long", NULL_LINE))})
    result, _ = run(repo, state, proposer, candidates=3)
    session = Path(result.session_dir).name
    got = ViewApp(state).handle(f"/session/{session}")
    assert got.status == 200
    text = got.body.decode()
    section = text.split("<h3>Tournament</h3>", 1)[1].split("<h3>Proposal</h3>", 1)[0]
    assert "4 candidates, 4 screened on the visible target tasks" in section
    assert 'winner: <b class="mono">merge</b>' in section
    assert any(f"merge <span class=\"mono\">merge</span> of <span class=\"mono\">{pair}</span>"
               in section for pair in ("c1 + c2", "c2 + c1"))
    assert "fixed no target trial in round 1" in section  # c3, the null patch
    assert ("merge: merge states the rules of c1 and c2" in section
            or "merge: merge states the rules of c2 and c1" in section)
    assert "Candidate c3&#39;s diff" in section or "Candidate c3's diff" in section


def test_candidates_screen_side_by_side_under_one_bound(repo: Path, state: Path) -> None:
    """--concurrency 3: the screening runs of two candidates (two trials each) overlap, and
    never more than three trials are in flight across them."""
    flight: dict[int, str] = {}
    peak: list[int] = [0]
    mixed: list[bool] = []

    async def slow(req: Request) -> ModelResponse:
        key = id(req)
        flight[key] = req.messages[0].content
        peak[0] = max(peak[0], len(flight))
        mixed.append(len(set(flight.values())) > 1)
        await asyncio.sleep(0.01)
        del flight[key]
        return agent_policy(req)

    proposer = proposer_of({"2 different patches": several(
        patch("trivial input needs a skip rule", GOOD_LINE),
        patch("greetings are saved", GREET_LINE))})
    config = OptimizeConfig(suite="pkm_agent", bucket="skip_trivial", iterations=1,
                            agent_model="scripted:pkm", proposer_model="scripted:proposer",
                            proposer_format="diff", repo=repo, state_dir=state, candidates=2,
                            concurrency=3)
    result = asyncio.run(optimize(config, agent=ScriptedModel(slow, model_id="scripted:pkm"),
                                  proposer=proposer))
    assert result.iterations[0].outcome == "accepted"
    assert peak[0] == 3
    assert any(mixed)  # two different prompts (candidates) in flight at once


def test_a_proposer_failure_is_an_error_of_every_candidate(repo: Path, state: Path) -> None:
    from promptloop.agents.llm.errors import ModelError

    def down(_req: Request) -> ModelResponse:
        raise ModelError("provider unavailable")

    result, _ = run(repo, state, ScriptedModel(down, model_id="scripted:proposer"),
                        candidates=3)
    it = result.iterations[0]
    assert it.outcome == "error" and "provider unavailable" in it.reasons[0]
    e = entry(state)
    assert [(c.name, c.status) for c in e.candidates] == [("c1", "error"), ("c2", "error"),
                                                          ("c3", "error")]
    assert _git(repo, "branch", "--list", "promptloop/*").strip() == ""
    assert Ledger(state / "ledger.jsonl").unclosed() == []


def test_replies_that_cannot_be_used_are_a_refusal_not_an_error(
        repo: Path, state: Path) -> None:
    """A proposer that ignores the `## Patch N` format (after its retries) gave no usable
    patch: as in the single-patch loop, the iteration is refused (exit 0), not an error of
    the infrastructure (exit 2)."""
    garbage = ScriptedModel(lambda _req: reply("I would add a rule about greetings."),
                            model_id="scripted:proposer")
    result, _ = run(repo, state, garbage, candidates=2)
    it = result.iterations[0]
    assert it.outcome == "refused", it.reasons
    assert [(c.name, c.status) for c in entry(state).candidates] == [("c1", "refused"),
                                                                      ("c2", "refused")]
    assert "no applicable proposal" in " ".join(it.reasons)
    assert Ledger(state / "ledger.jsonl").unclosed() == []


def test_a_winner_rejected_for_harm_falls_back_to_the_next_candidate(
        repo: Path, state: Path, gates: list[GateRun]) -> None:
    """c1 fixes both target tasks but also skips a fact elsewhere; c2 fixes one target task
    and breaks nothing. c1 wins the screening and the gate rejects it for harm; c2, the next
    candidate that fixed the target, is gated on the same baseline and kept."""
    proposer = proposer_of({"2 different patches": several(
        patch("trivial input and purchases need skip rules", GOOD_LINE, BREAK_LINE),
        patch("greetings are saved", GREET_LINE))})
    result, _ = run(repo, state, proposer, candidates=2)
    it = result.iterations[0]
    assert it.outcome == "accepted", it.reasons
    assert len(gates) == 2  # the winner's gate, then the fallback's
    first, second = gates
    assert first.verdict.decision == "reject" and first.verdict.stopped == "regression"
    assert any("'oat-milk'" in r for r in first.verdict.reasons)
    assert second.verdict.decision == "accept"
    note = next(r for r in it.reasons if r.startswith("fallback: "))
    assert "c1 was rejected for harm" in note and "c2, the next candidate" in note
    e = entry(state)
    status = {c.name: c.status for c in e.candidates}
    assert status == {"c1": "screened_out", "c2": "winner"}
    why = {c.name: c.stopped for c in e.candidates}
    assert why["c1"].startswith("rejected for harm by the gate")
    assert e.hypothesis == "greetings are saved" and GREET_LINE in e.diff
    assert _git(repo, "branch", "--list", "promptloop/*").split() == [it.branch]


def test_a_candidate_whose_screening_trial_wrote_outside_is_out_for_good(
        repo: Path, state: Path, gates: list[GateRun], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: screening trials are refused as the gate refuses a candidate's trials. c1
    (the better patch) has a screening trial that wrote outside its workspace (here marked
    so on its screening run, as the adapter layer marks it): it is disqualified before its
    pairs count, never gated, never a fallback; c2 wins and is gated alone."""
    from promptloop.optimizer.core.isolation import OUTSIDE
    from promptloop.optimizer.core.results import RunResult
    from promptloop.optimizer.workflows import tournament

    first: list[dict[str, str]] = []  # c1's prompt hash: the first screening run checked

    def marked(runs: list[RunResult]) -> list[Any]:
        hashes = [r.provenance.prompt_hashes for r in runs]
        first.extend(hashes[:1] if not first else [])
        return [t.model_copy(update={"status": "errored", "infra_error": f"{OUTSIDE}: /repo/x"})
                for r in runs if r.provenance.prompt_hashes == first[0] for t in r.trials[:1]]

    monkeypatch.setattr(tournament, "outside_writes", marked)
    proposer = proposer_of({"2 different patches": several(
        patch("trivial input needs a skip rule", GOOD_LINE),
        patch("greetings are saved", GREET_LINE))})
    result, _ = run(repo, state, proposer, candidates=2)
    it = result.iterations[0]
    e = entry(state)
    status = {c.name: c.status for c in e.candidates}
    why = {c.name: c.stopped for c in e.candidates}
    assert status == {"c1": "screened_out", "c2": "winner"}, why
    assert why["c1"].startswith(f"1 screening trial(s) {OUTSIDE}, first: {OUTSIDE}: /repo/x")
    assert len(gates) == 1  # c2 alone was gated: c1 never, not even as a fallback
    assert e.hypothesis == "greetings are saved" and it.outcome == "accepted", it.reasons
