"""Reading the proposer's reply: the hypothesis line in any case and markup."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptloop.optimizer.propose import proposer as proposer_mod
from promptloop.optimizer.propose.proposer import hypothesis_from_output, parse_diff_reply

DIFF = ("```diff\n--- a/prompts/p.md\n+++ b/prompts/p.md\n@@ -1 +1 @@\n-a\n+b\n"
        "+Hypothesis: not this one, it is inside the diff\n```\n")


@pytest.mark.parametrize("line", [
    "HYPOTHESIS: greetings are saved",
    "Hypothesis: greetings are saved",
    "hypothesis:greetings are saved",
    "**Hypothesis:** greetings are saved",
    "**Hypothesis**: greetings are saved",
    "_Hypothesis_ — greetings are saved",
    "- hypothesis - greetings are saved",
    "1. Hypothesis: greetings are saved",
    "> **HYPOTHESIS**: greetings are saved",
    "## Hypothesis\ngreetings are saved\n",
    "**Hypothesis**\n\ngreetings are saved\n",
    "### hypothesis:\ngreetings\nare saved\n",
])
def test_hypothesis_is_read_whatever_its_case_and_markup(line: str) -> None:
    reply = f"Some analysis first.\n\n{line}\n\n{DIFF}"
    assert parse_diff_reply(reply)[0] == "greetings are saved"
    assert hypothesis_from_output(f"working...\n{line}\ndone") in (
        "greetings are saved", "greetings are saved done")


def test_prose_mentioning_a_hypothesis_is_not_one() -> None:
    reply = f"Hypothesis testing aside, here is the change.\n{DIFF}"
    assert parse_diff_reply(reply)[0] == "(no hypothesis given)"
    assert hypothesis_from_output("no idea") == "(external proposer gave no hypothesis)"


def _package_input(prompt_path: str, fmt: str = "diff") -> proposer_mod.PackageInput:
    return proposer_mod.PackageInput(
        prompt_path=prompt_path, prompt_text="# Prompt\n", bucket="b", failing_md="",
        counter_md="", manual="", rejected=[], max_changed_lines=7, fmt=fmt,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("fmt", ["diff", "edits"])
def test_the_proposer_instructions_are_filled_in_one_pass(fmt: str) -> None:
    # a value holding a marker stays as it is: it is not filled in a second time
    system = proposer_mod.build_package(_package_input("prompts/{{max_changed_lines}}.md",
                                                       fmt)).system
    assert "prompts/{{max_changed_lines}}.md" in system and "at most 7 changed lines" in system
    assert "{{prompt_path}}" not in system


def test_an_unknown_marker_in_the_proposer_instructions_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "proposer.md").write_text("Edit {{prompt_path}} in {{max_changed_lines}} lines"
                                          " for {{audience}}.\n")
    monkeypatch.setattr(proposer_mod, "PROMPTS_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"unknown \['audience'\]"):
        proposer_mod.build_package(_package_input("prompts/pkm_agent.md"))
