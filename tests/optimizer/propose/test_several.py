"""Several proposals for one package (optimizer/propose/several.py), on scripted proposers."""

from __future__ import annotations

import asyncio
import json

from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.optimizer.propose.apply import apply_diff
from promptloop.optimizer.propose.patch import PatchError, parse_diff
from promptloop.optimizer.propose.proposer import Package, Proposal, ProposerError
from promptloop.optimizer.propose.several import SEED_BASE, ask_several, split_patches

ORIGINAL = "# Agent\n\n## Rules\nBe brief.\nAnswer in English.\n"
PATH = "prompts/agent.md"


def diff(hypothesis: str, line: str, anchor: str = "Be brief.") -> str:
    return (f"HYPOTHESIS: {hypothesis}\n\n```diff\n--- a/{PATH}\n+++ b/{PATH}\n@@ -4,1 +4,2 @@\n"
            f" {anchor}\n+{line}\n```\n")


def check(d: str) -> None:
    apply_diff(ORIGINAL, parse_diff(d), PATH)


def ask(model: ScriptedModel, k: int, fmt: str = "diff") -> list[Proposal | ProposerError]:
    got = asyncio.run(ask_several(model, Package("system", "user"), k,
                                  fmt=fmt,  # type: ignore[arg-type]
                                  prompt_path=PATH, original=ORIGINAL, check=check))
    assert len(got.replies) == len(model.calls)
    return got.proposals


def test_k_patches_in_one_request() -> None:
    model = ScriptedModel([reply("## Patch 1\n" + diff("a", "Use lists.") + "\n## Patch 2\n"
                                 + diff("b", "Cite sources."))])
    out = ask(model, 2)
    assert [p.hypothesis for p in out if isinstance(p, Proposal)] == ["a", "b"]
    assert len(model.calls) == 1
    assert "Propose 2 patches" in model.calls[0].messages[1].content


def test_patches_that_do_not_apply_go_back_together() -> None:
    broken = diff("b", "Cite sources.", anchor="No such line.")
    model = ScriptedModel([
        reply("## Patch 1\n" + diff("a", "Use lists.") + "\n## Patch 2\n" + broken),
        reply("## Patch 2\n" + diff("b2", "Cite sources.")),
        reply("I have no third idea."),
    ])
    out = ask(model, 3)
    assert isinstance(out[0], Proposal) and isinstance(out[1], Proposal)
    assert out[1].hypothesis == "b2" and out[1].attempts == 2
    follow_up = model.calls[1].messages[-1].content
    assert "Patch 2:" in follow_up and "Patch 3: the reply has no section" in follow_up
    assert "Patch 1:" not in follow_up
    assert isinstance(out[2], ProposerError) and "no section `## Patch 3`" in str(out[2])
    assert len(model.calls) == 3  # one request and at most two follow-ups


def test_edits_format_asks_k_times_with_seeds_and_earlier_hypotheses() -> None:
    def edit(h: str, text: str) -> str:
        return json.dumps({"hypothesis": h, "edits": [
            {"action": "insert_after", "anchor": "Be brief.", "text": text}]})

    model = ScriptedModel([reply(edit("lists help", "Use lists.")),
                           reply(edit("sources help", "Cite sources."))])
    out = ask(model, 2, fmt="edits")
    assert [p.hypothesis for p in out if isinstance(p, Proposal)] == ["lists help",
                                                                      "sources help"]
    seeds = [c.settings.seed for c in model.calls if c.settings is not None]
    assert seeds == [SEED_BASE + 1, SEED_BASE + 2]
    assert "lists help" in model.calls[1].messages[1].content  # differ from the earlier one
    assert "lists help" not in model.calls[0].messages[1].content


def test_split_patches_reads_headers_in_any_markup() -> None:
    text = "intro\n### Patch 1: first\nA\n## patch 2\nB\n"
    assert split_patches(text) == {1: "\nA\n", 2: "\nB\n"}
    assert split_patches("no headers") == {}
    try:
        check(diff("x", "y", anchor="missing"))
    except PatchError:
        pass
    else:
        raise AssertionError("a diff with a missing anchor applied")
