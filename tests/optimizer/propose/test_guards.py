"""Guards on proposed prompt patches and the eval-literal index they use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from promptloop.optimizer.core.suites import (
    REPO_ROOT,
    LoadedTask,
    Suite,
    SuiteConfig,
    TaskSpec,
    load_suite,
)
from promptloop.optimizer.propose.apply import render_unified
from promptloop.optimizer.propose.guards import GuardViolation, check_guards, prepare_patch
from promptloop.optimizer.propose.literals import LiteralIndex, build_literal_index
from promptloop.optimizer.propose.patch import PatchError, parse_diff

TARGET = "prompts/pkm_agent.md"
BASE = """# PKM Agent

You keep the user's notes in order. Record the fact id as `<!-- fact_id: ... -->`.
Example: `/Areas/Health/sleep.md`.

## When to skip
- the input has no content worth keeping;
- the user asks not to save it.

## Writing
- Same format as the file.
- Same section structure.
- Same voice and length.
- Keep the facts of the input.
"""
MANUAL = "Prefer explicit instructions. Give the motivation behind a rule.\n"
GENERAL_RULE = ("If the input is only a greeting, filler or emoji, call skip_pkm_organization "
                "and write nothing.")


def task(task_id: str, content: str, graders: list[dict[str, Any]]) -> LoadedTask:
    spec = TaskSpec.model_validate({
        "id": task_id, "description": "d", "metadata": {"failure_bucket": "b"},
        "input": {"fact_id": "2026/03/14.md#ts_7", "content": content}, "graders": graders})
    return LoadedTask(spec, Path(f"/suite/tasks/{task_id}/task.json"), None, None, "h")


def suite(*tasks: LoadedTask) -> Suite:
    config = SuiteConfig.model_validate({"name": "s", "agent_name": "pkm_agent"})
    return Suite(Path("/suite"), config, tasks, "h")


SUITE = suite(
    task("pkm-greeting", "hey there :)", [{"name": "pkm_completion", "config": {}}]),
    task("pkm-bees", "Saw Osmia bicornis nesting in the balcony hotel again, third time since "
         "March. Counted 14 tubes sealed. 在阳台上看到蜜蜂",
         [{"name": "pkm_routed_correctly",
           "config": {"expected_buckets": ["Projects/Balcony"],
                      "expected_files": ["Projects/Balcony/pollinator log.md"]}}]),
    task("pkm-tax", "Tax adviser Ruth Okafor says the deadline is 2026-05-31, fee 240 EUR",
         [{"name": "pkm_no_overwrite", "config": {"seed_marker": "SEED-TAX-0427"}},
          {"name": "pkm_read_before_write",
           "config": {"required_read_path": "/Areas/Finance/taxes.md"}}]),
)


@pytest.fixture(scope="module")
def index() -> LiteralIndex:
    return build_literal_index([SUITE], BASE, MANUAL)


def guard(new: str, index: LiteralIndex, **kw: Any) -> list[GuardViolation]:
    diff = render_unified(BASE, new, TARGET)
    return check_guards(parse_diff(diff), target_path=TARGET, original=BASE, new=new,
                        protected_literals=index, **kw)


def add_rule(rule: str) -> str:
    return BASE.replace("## When to skip\n", f"## When to skip\n- {rule}\n")


def test_general_rule_passes(index: LiteralIndex) -> None:
    assert guard(add_rule(GENERAL_RULE), index) == []


@pytest.mark.parametrize("rule, literal, source", [
    ("Insects such as Osmia go under the project folder.", "Osmia", "pkm-bees (input)"),
    ("Notes about an adviser like Ruth Okafor go under Areas.", "Ruth", "pkm-tax (input)"),
    ("Wildlife seen in the balcony hotel goes to the garden file.", "the balcony hotel", None),
    ("Deadlines like 2026-05-31 are written as dates.", "2026-05-31", "pkm-tax (input)"),
    ("Keep the marker SEED-TAX-0427 intact.", "SEED-TAX-0427",
     "pkm-tax (grader pkm_no_overwrite.seed_marker)"),
    ("Always read /Areas/Finance/taxes.md first.", "Areas/Finance/taxes.md",
     "pkm-tax (grader pkm_read_before_write.required_read_path)"),
    ("Append sightings to `pollinator log.md`.", "pollinator log.md",
     "pkm-bees (grader pkm_routed_correctly.expected_files)"),
    ("Balcony notes go to Projects/Balcony.", "Projects/Balcony",
     "pkm-bees (grader pkm_routed_correctly.expected_buckets)"),
    ("Chinese notes like 看到蜜蜂 stay in Chinese.", "看到蜜蜂", "pkm-bees (input)"),
])
def test_eval_literals_are_refused_with_their_task(index: LiteralIndex, rule: str, literal: str,
                                                   source: str | None) -> None:
    violations = guard(add_rule(rule), index)
    assert violations, rule
    assert {v.code for v in violations} == {"eval_literal"}
    messages = " | ".join(v.message for v in violations)
    if source is None:  # a phrase made of plain words: reported as a phrase of its task
        assert "phrase" in messages and "balcony hotel" in messages
        assert "pkm-bees (input)" in messages
    else:
        assert repr(literal) in messages or literal in messages
        assert f"from {source}" in messages


def test_literal_matching_is_case_insensitive_and_word_bounded(index: LiteralIndex) -> None:
    assert guard(add_rule("Latin names like OSMIA are kept."), index)[0].code == "eval_literal"
    # "Ruth" is a literal, "truthful" is not; "Osmia" must not fire inside another word.
    assert guard(add_rule("Be truthful about cosmiatric terms."), index) == []


def test_literals_already_in_the_prompt_or_manual_are_not_protected() -> None:
    idx = build_literal_index([SUITE], BASE + "\nOsmia bees are an example.\n", MANUAL)
    assert not [lit for lit in idx.literals if lit.text == "Osmia"]
    assert idx.find("Osmia") == []
    assert idx.find("Okafor")  # still protected


def test_only_added_lines_are_checked(index: LiteralIndex) -> None:
    # The fact-id comment syntax is in the base prompt; removing a line is never a leak.
    new = BASE.replace("- the user asks not to save it.\n", "")
    assert guard(new, index) == []


def test_diff_touching_tasks_or_code_is_refused() -> None:
    diff = ("--- a/tasks/pkm_agent/capability/tasks/x/task.json\n"
            "+++ b/tasks/pkm_agent/capability/tasks/x/task.json\n@@ -1 +1 @@\n-{}\n+{\"a\": 1}\n"
            "--- a/optimizer/loop.py\n+++ b/optimizer/loop.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    idx = build_literal_index([SUITE], BASE, MANUAL)
    prepared = prepare_patch(diff, target_path=TARGET, original=BASE, protected_literals=idx)
    codes = [v.code for v in prepared.violations]
    assert codes.count("other_file") == 2
    messages = " ".join(v.message for v in prepared.violations)
    assert "tasks/pkm_agent/capability/tasks/x/task.json (an eval task)" in messages
    assert "optimizer/loop.py (harness code)" in messages
    assert not prepared.accepted


def test_mixed_diff_still_refused_for_the_other_file(index: LiteralIndex) -> None:
    diff = (render_unified(BASE, add_rule(GENERAL_RULE), TARGET)
            + "--- a/graders/pkm.py\n+++ b/graders/pkm.py\n@@ -1 +1 @@\n-a\n+b\n")
    prepared = prepare_patch(diff, target_path=TARGET, original=BASE, protected_literals=index)
    assert [v.code for v in prepared.violations] == ["other_file"]
    assert prepared.new_text == add_rule(GENERAL_RULE)


def test_no_op_diff_is_refused(index: LiteralIndex) -> None:
    diff = (f"--- a/{TARGET}\n+++ b/{TARGET}\n@@ -7,1 +7,1 @@\n"
            "-- the input has no content worth keeping;\n"
            "+- the input has no content worth keeping;\n")
    prepared = prepare_patch(diff, target_path=TARGET, original=BASE, protected_literals=index)
    assert [v.code for v in prepared.violations] == ["no_change"]
    assert prepared.diff == ""


def test_removing_too_much_is_refused(index: LiteralIndex) -> None:
    new = BASE.split("## Writing")[0]
    violations = guard(new, index)
    assert [v.code for v in violations] == ["too_much_removed"]
    assert "5 of the prompt's 11 non-blank lines (45%)" in violations[0].message
    assert guard(new, index, max_removed_share=0.5) == []


def test_too_many_changed_lines_is_refused(index: LiteralIndex) -> None:
    rules = "\n".join(f"- Rule number {i} about tidy notes." for i in range(6))
    new = BASE.replace("## Writing\n", f"## Writing\n{rules}\n")
    assert [v.code for v in guard(new, index, max_changed_lines=5)] == ["too_many_lines"]
    assert guard(new, index, max_changed_lines=6) == []


def test_prepare_patch_applies_and_renders_canonical_diff(index: LiteralIndex) -> None:
    sloppy = (f"```diff\n--- a/{TARGET}\n+++ b/{TARGET}\n@@ -6,1 +6,99 @@\n ## When to skip\n"
              f"+- {GENERAL_RULE}\n```")
    from promptloop.optimizer.propose.patch import extract_diff

    prepared = prepare_patch(extract_diff(sloppy), target_path=TARGET, original=BASE,
                             protected_literals=index)
    assert prepared.accepted and prepared.parsed.lenient
    assert prepared.new_text == add_rule(GENERAL_RULE)
    assert prepared.diff == render_unified(BASE, add_rule(GENERAL_RULE), TARGET)


def test_prepare_patch_raises_when_the_target_hunk_does_not_apply(index: LiteralIndex) -> None:
    diff = f"--- a/{TARGET}\n+++ b/{TARGET}\n@@ -1 +1 @@\n-# Card Agent\n+# Agent\n"
    with pytest.raises(PatchError, match="hunk 1"):
        prepare_patch(diff, target_path=TARGET, original=BASE, protected_literals=index)


def test_config_numbers_too_short_to_be_distinctive_are_ignored() -> None:
    s = suite(task("t", "ok", [{"name": "card_must_contain",
                                "config": {"substrings": ["9", "120", "Kichi"]}}]))
    idx = build_literal_index([s], BASE, MANUAL)
    assert idx.find("Use at most 9 words, or 120 characters.") == []
    assert [lit.text for lit in idx.find("A cat named Kichi.")] == ["Kichi"]


def test_the_fields_a_grader_reads_are_no_eval_set_literals() -> None:
    """A team's proposal "Always list the allergens in an `allergens` array." was refused for
    the eval-set word 'allergens' from a json_path grader's path: the prompt must be free to
    name the output's fields. The values a grader expects stay protected."""
    s = suite(task("al-peanut", "Peanut noodles for two", [
        {"name": "json_path", "config": {"path": "$.allergens[*]", "contains": "groundnut"}},
        {"name": "json_schema", "config": {"schema": {"type": "object",
                                                      "required": ["substitutions"]}}},
        {"name": "rubric_judge", "config": {"rubric": "Lists every allergen.",
                                            "dimensions": ["thoroughness"],
                                            "show": ["$.warnings"]}}]))
    idx = build_literal_index([s], BASE, MANUAL)
    assert idx.find("List the allergens in an `allergens` array, with substitutions, "
                    "warnings and thoroughness.") == []
    assert [lit.text for lit in idx.find("Peanut is a groundnut.")] == ["groundnut"]


@pytest.mark.parametrize("agent", ["pkm_agent", "card_agent"])
def test_general_rules_pass_against_the_real_suites(agent: str) -> None:
    roots = sorted((REPO_ROOT / "tasks" / agent).glob("*/suite.json"))
    prompt_path = REPO_ROOT / "prompts" / f"{agent}.md"
    manual_path = REPO_ROOT / "manuals" / "prompt_engineering.md"
    if not roots or not prompt_path.is_file():
        pytest.skip(f"no {agent} suites or prompt in this checkout")
    suites = [load_suite(r.parent) for r in roots]
    manual = manual_path.read_text(encoding="utf-8") if manual_path.is_file() else ""
    idx = build_literal_index(suites, prompt_path.read_text(encoding="utf-8"), manual)
    rules = [
        GENERAL_RULE,
        "Keep every number, time and name from the input exactly as written.",
        "Before editing a file, read it and append under the matching heading.",
        "If the user writes in Chinese, write the note and the insight in Chinese too.",
        "A to-do with a deadline but no clock time is a `task`, not an `event`.",
        "Health measurements (blood pressure, weight, sleep) belong in the matching file.",
    ]
    for rule in rules:
        assert idx.find(rule) == [], rule
    # ...while pasting a task's own input is caught.
    pasted = next(t.spec.input.content for s in suites for t in s.tasks
                  if len(t.spec.input.content.split()) >= 6)
    assert idx.find(pasted)


# --- quoted task inputs, word frequencies, distinctive config strings -----------------------

SHORT = suite(
    task("hi", "hi there", [{"name": "pkm_completion", "config": {}}]),
    task("thx", "Thanks!", [{"name": "pkm_completion", "config": {}}]),
    task("ask", "is it ok if I do it", [{"name": "pkm_completion", "config": {}}]),
    task("todo", "Finish the report", [
        {"name": "card_must_not_contain", "config": {"substrings": ["deadline", "Milestone"]}},
        {"name": "card_visible_must_contain", "config": {"substrings": ["ticket 4471"]}},
        {"name": "card_visible_must_contain", "config": {"substrings": ["Nguyen"]}}]),
)


@pytest.fixture(scope="module")
def short_index() -> LiteralIndex:
    return build_literal_index([SHORT], BASE, MANUAL)


@pytest.mark.parametrize("rule", [
    'If the user only writes "hi there", skip.',
    "Skip replies such as 'thanks' and similar.",
    "Skip «Hi, there!» and “THANKS”.",
    "Skip `thanks!` messages.",
    'When asked "is it ok if I ..." answer yes.',
])
def test_quoted_task_inputs_are_refused_whatever_their_frequency(
        short_index: LiteralIndex, rule: str) -> None:
    violations = guard(add_rule(rule), short_index)
    assert violations and {v.code for v in violations} == {"eval_literal"}, rule
    assert "quoted" in violations[0].message


@pytest.mark.parametrize("rule", [
    "If the input is only a greeting like hi there or thanks, skip it.",  # not quoted
    'Skip a reply that only says "thank you".',  # quoted, but no task's input
    "A to-do with a deadline is a task; a Milestone card needs a date.",  # common config words
])
def test_general_rules_with_common_or_unquoted_words_pass(short_index: LiteralIndex,
                                                          rule: str) -> None:
    assert guard(add_rule(rule), short_index) == []


@pytest.mark.parametrize("rule, literal", [
    ("Cards about ticket 4471 are tasks.", "4471"),
    ("Always mention Nguyen.", "Nguyen"),
])
def test_distinctive_config_strings_are_refused(short_index: LiteralIndex, rule: str,
                                                literal: str) -> None:
    violations = guard(add_rule(rule), short_index)
    assert violations and {v.code for v in violations} == {"eval_literal"}
    assert literal in " ".join(v.message for v in violations)


def test_word_frequencies_come_from_wordfreq() -> None:
    from promptloop.optimizer.propose.common_words import COMMON_ZIPF, zipf

    assert zipf("deadline") >= COMMON_ZIPF > zipf("Nguyen") > 0
    assert zipf("Okafor") < 3 and zipf("xqzvbn") == 0.0


def test_a_patch_that_writes_a_known_secret_is_refused(
        index: LiteralIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proposer (a model that saw a key, or an external proposer given one by
    --proposer-env) writing a key into the prompt: the branch would commit it, the PR body
    show it. Refused like any guard, and the message does not repeat it."""
    key = "sk-test-Zq81XpL4mN7vR2tY9wK3bH6jD0fG5sA1cE8uI"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    for line in (f"Authenticate with API key {key}.", f"Use key {key.replace('-', ' ')}.",
                 f"Use token {' '.join(key)}."):  # a blank between every character
        got = guard(add_rule(line), index)
        assert [v.code for v in got] == ["secret"], got
        assert key not in got[0].message and "Zq81XpL4" not in got[0].message
    assert guard(add_rule(GENERAL_RULE), index) == []
