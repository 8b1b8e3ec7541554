"""Reading the proposer's reply: the hypothesis line in any case and markup."""

from __future__ import annotations

import pytest

from optimizer.propose.proposer import hypothesis_from_output, parse_diff_reply

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
