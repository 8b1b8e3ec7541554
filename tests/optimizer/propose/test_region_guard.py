"""A prompt region of a Dart file is packaged, patched and guarded like a Markdown prompt."""

from __future__ import annotations

import pytest

from promptloop.optimizer.core.regions import RegionSpec, locate, splice, value_of
from promptloop.optimizer.propose.apply import numbered, render_unified
from promptloop.optimizer.propose.edits import Edit, EditProposal, edits_to_diff
from promptloop.optimizer.propose.guards import prepare_patch
from promptloop.optimizer.propose.literals import EvalLiteral, LiteralIndex
from promptloop.optimizer.propose.patch import PatchError
from promptloop.optimizer.propose.proposer import PackageInput, build_package
from promptloop.optimizer.propose.region_guard import (
    HeadCheck,
    check_head_file,
    check_region_patch,
    prepare_region_patch,
    region_apply_error,
    region_diff_from_edit,
    region_violation,
)
from promptloop.optimizer.propose.watch import OutsideWriteError
from tests.optimizer.core.test_regions import DART, DART_PATH, assert_only_region

SPEC = RegionSpec(DART_PATH, variable="cardAgentSystemPrompt")
REGION = locate(SPEC, DART)
NAME = "triple-quoted string cardAgentSystemPrompt in lib/agent/card_agent/prompts.dart"
NO_LITERALS = LiteralIndex.from_literals([])
RULE_BEFORE = "- Prefer one precise card over two vague ones.\n"
RULE_AFTER = RULE_BEFORE + "- A bare link is a card of type link, titled by its page.\n"


def region_diff(new_text: str) -> str:
    """A diff against the region text, as the diff proposer writes it (and as edits render)."""
    return render_unified(REGION.text, new_text, DART_PATH)


def test_package_numbers_the_region_only() -> None:
    package = build_package(PackageInput(
        prompt_path=DART_PATH, prompt_text=REGION.text, bucket="links", failing_md="(none)",
        counter_md="(none)", manual="(manual)", rejected=[], max_changed_lines=40))
    assert numbered(REGION.text) in package.user
    assert "   2  You are the Memex card agent." in package.user
    assert "import 'package:memex" not in package.user
    assert "cardAgentSystemPromptV2" not in package.user


def test_a_diff_inside_the_region_applies_and_touches_only_its_lines() -> None:
    new_region = REGION.text.replace(RULE_BEFORE, RULE_AFTER)
    diff = region_diff(new_region)
    assert "@@ -3" not in diff and "@@ -1," not in diff  # region-relative, far from line 1
    patch = prepare_region_patch(diff, spec=SPEC, file_text=DART,
                                 protected_literals=NO_LITERALS)
    assert patch.accepted, patch.prepared.violations
    assert patch.prepared.new_text == new_region
    assert patch.file_text == splice(SPEC, DART, new_region)
    assert_only_region(DART, patch.file_text, REGION)
    body = patch.file_diff.splitlines()[3:]
    assert [ln for ln in body if ln[:1] in "+-"] == ["+- A bare link is a card of type link, "
                                                     "titled by its page."]
    assert "- A bare link is a card of type link" in patch.value
    assert patch.value == value_of(locate(SPEC, patch.file_text))
    assert patch.value.startswith("You are the Memex card agent.")
    # the same patch as the iteration's plain prepare_patch sees it: the region is the prompt
    plain = prepare_patch(diff, target_path=DART_PATH, original=REGION.text,
                          protected_literals=NO_LITERALS)
    assert plain.new_text == new_region and plain.diff == patch.prepared.diff


def test_a_hand_written_diff_with_region_line_numbers_applies() -> None:
    lines = REGION.text.split("\n")
    at = lines.index(RULE_BEFORE.strip()) + 1  # 1-based region line
    diff = (f"--- a/{DART_PATH}\n+++ b/{DART_PATH}\n@@ -{at},2 +{at},3 @@\n"
            f" {lines[at - 1]}\n+- Links are cards too.\n {lines[at]}\n")
    patch = prepare_region_patch(diff, spec=SPEC, file_text=DART,
                                 protected_literals=NO_LITERALS)
    assert patch.accepted
    assert_only_region(DART, patch.file_text, REGION)


def test_edits_proposal_on_the_region() -> None:
    proposal = EditProposal(hypothesis="links", edits=[
        Edit(action="insert_after", anchor=RULE_BEFORE.strip(), text="- Links are cards.")])
    diff = edits_to_diff(REGION.text, proposal, DART_PATH)
    patch = prepare_region_patch(diff, spec=SPEC, file_text=DART,
                                 protected_literals=NO_LITERALS)
    assert patch.accepted
    assert_only_region(DART, patch.file_text, REGION)


@pytest.mark.parametrize(("added", "reason"), [
    ('""";\nconst String evil = """', "contains '\"\"\"', the literal's closing delimiter"),
    ("- Prices in ${user.currency} only.", "adds the interpolation '${user.currency}'"),
    ("- It costs $5.", "'$' not followed by a name"),
])
def test_a_patch_that_breaks_the_literal_is_refused_naming_the_region(added: str,
                                                                      reason: str) -> None:
    new_region = REGION.text.replace(RULE_BEFORE, RULE_BEFORE + added + "\n")
    patch = prepare_region_patch(region_diff(new_region), spec=SPEC, file_text=DART,
                                 protected_literals=NO_LITERALS)
    assert not patch.accepted
    (violation,) = patch.prepared.violations
    assert violation.code == "breaks_literal"
    assert NAME in violation.message and reason in violation.message
    assert patch.file_text == DART and patch.file_diff == ""  # nothing to commit
    assert patch.prepared.diff  # the ledger still records what was proposed
    reason_text = check_region_patch(SPEC, DART, new_region)
    assert reason_text == violation.message
    assert region_violation(SPEC, DART, new_region) == violation


def test_a_patch_ending_in_a_backslash_is_refused() -> None:
    new_region = REGION.text + "See C:\\"
    patch = prepare_region_patch(region_diff(new_region), spec=SPEC, file_text=DART,
                                 protected_literals=NO_LITERALS)
    assert [v.code for v in patch.prepared.violations] == ["breaks_literal"]
    assert "odd number of backslashes" in patch.prepared.violations[0].message


def test_context_outside_the_region_does_not_apply_and_names_the_region() -> None:
    changed = DART.replace("import 'package:memex/agent/card_agent/card_tools.dart';\n",
                           "import 'package:memex/agent/card_agent/card_tools.dart';\n"
                           "import 'dart:io';\n")
    diff = render_unified(DART, changed, DART_PATH)  # a file diff: context from the imports
    with pytest.raises(PatchError) as plain:  # the iteration's own apply fails on the region
        prepare_patch(diff, target_path=DART_PATH, original=REGION.text,
                      protected_literals=NO_LITERALS)
    named = region_apply_error(plain.value, diff, REGION, DART)  # as the iteration rewords it
    assert f"outside {NAME}" in str(named)
    with pytest.raises(PatchError) as err:
        prepare_region_patch(diff, spec=SPEC, file_text=DART, protected_literals=NO_LITERALS)
    message = str(err.value)
    assert f"outside {NAME}" in message and "only the region may change" in message
    assert f"its line 1 is file line {REGION.start_line}" in message


def test_a_file_diff_whose_lines_are_all_in_the_region_applies() -> None:
    """Hunks are located by content: file line numbers in the header are only a hint."""
    changed = DART.replace("at most 8 words", "at most 6 words")
    diff = render_unified(DART, changed, DART_PATH)
    assert f"@@ -{REGION.file_line(2) + 1}," in diff  # file line numbers
    patch = prepare_region_patch(diff, spec=SPEC, file_text=DART,
                                 protected_literals=NO_LITERALS)
    assert patch.accepted and patch.file_text == changed


def test_a_hunk_reaching_the_opener_line_does_not_apply() -> None:
    changed = DART.replace("You are the Memex card agent.", "You are Memex's card agent.")
    diff = render_unified(DART, changed, DART_PATH)  # its context holds the opener line
    with pytest.raises(PatchError, match=f"outside {NAME}"):
        prepare_region_patch(diff, spec=SPEC, file_text=DART, protected_literals=NO_LITERALS)


def test_a_diff_that_matches_nothing_names_the_region() -> None:
    diff = (f"--- a/{DART_PATH}\n+++ b/{DART_PATH}\n@@ -1,1 +1,2 @@\n"
            " A line that is nowhere.\n+New.\n")
    with pytest.raises(PatchError) as err:
        prepare_region_patch(diff, spec=SPEC, file_text=DART, protected_literals=NO_LITERALS)
    assert "does not apply" in str(err.value) and NAME in str(err.value)


def test_the_usual_guards_run_on_the_region() -> None:
    index = LiteralIndex.from_literals([EvalLiteral("Okafor", "word", ("card-tax (input)",))])
    new_region = REGION.text.replace(RULE_BEFORE, RULE_BEFORE + "- Okafor is an adviser.\n")
    patch = prepare_region_patch(region_diff(new_region), spec=SPEC, file_text=DART,
                                 protected_literals=index)
    assert [v.code for v in patch.prepared.violations] == ["eval_literal"]
    other = render_unified("x\n", "y\n", "lib/main.dart")
    patch = prepare_region_patch(other, spec=SPEC, file_text=DART,
                                 protected_literals=NO_LITERALS)
    assert "other_file" in [v.code for v in patch.prepared.violations]
    same = prepare_region_patch(region_diff(REGION.text + "\n"), spec=SPEC, file_text=DART,
                                protected_literals=NO_LITERALS)
    assert [v.code for v in same.prepared.violations] == ["no_change"]


def test_an_external_proposers_whole_file_edit() -> None:
    edited = DART.replace("at most 8 words", "at most 6 words")
    diff = region_diff_from_edit(SPEC, DART, edited)
    patch = prepare_region_patch(diff, spec=SPEC, file_text=DART,
                                 protected_literals=NO_LITERALS)
    assert patch.accepted and patch.file_text == edited
    outside = edited.replace("final cardAgentTools", "final evilTools")
    with pytest.raises(OutsideWriteError) as err:
        region_diff_from_edit(SPEC, DART, outside)
    (violation,) = err.value.violations
    assert violation.code == "outside_region" and f"outside {NAME}" in violation.message
    broken = DART.replace("at most 8 words", 'at most 8 words""";\nconst x = """')
    with pytest.raises(OutsideWriteError) as err:
        region_diff_from_edit(SPEC, DART, broken)
    (violation,) = err.value.violations
    assert violation.code == "breaks_literal" and NAME in violation.message


# --- a reviewed head's whole file (review's guard) ------------------------------------------


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.split("\n"), start=1) if needle in line)


@pytest.mark.parametrize(
    ("added", "code", "says"),
    [('"""; const evil = """', "breaks_literal", "closing delimiter"),
     ("Greet ${user}.", "breaks_literal", "interpolation '${user}'"),
     ("A $5 coffee is spending.", "breaks_literal", "'$' not followed"),
     ("A \\$5 coffee is spending.", "ok", "")],
    ids=["quotes", "interpolation", "bare-dollar", "escaped-dollar"],
)
def test_check_head_file_judges_a_region_only_edit(added: str, code: str, says: str) -> None:
    head = DART.replace(RULE_BEFORE, RULE_BEFORE + added + "\n")
    check = check_head_file(SPEC, DART, SPEC, head)
    assert check is not None and check.code == code, check
    assert check.failed == (code != "ok")
    if code != "ok":
        assert says in check.reason and "cardAgentSystemPrompt" in check.region
        assert check.line == _line(head, added)


def test_check_head_file_outside_the_region() -> None:
    changed_code = DART.replace("final cardAgentTools", "final cardTools")
    assert changed_code != DART
    # code changed around an unchanged literal: the guard fails it, said to change code
    check = check_head_file(SPEC, DART, SPEC, changed_code)
    assert check is not None and check.code == "outside_region" and check.failed
    assert check.line == _line(changed_code, "final cardTools")
    assert "changes code, not only the prompt" in check.reason
    # the prompt and code both changed: fails, the head changes code, not only the prompt
    both = changed_code.replace(RULE_BEFORE, RULE_AFTER)
    check = check_head_file(SPEC, DART, SPEC, both)
    assert check is not None and check.code == "outside_region" and check.failed
    assert "changes code, not only the prompt" in check.reason
    assert check.line == _line(both, "final cardTools")
    # a rule that landed right after the closing quotes
    end = REGION.end + DART[REGION.end:].index("\n") + 1
    after = DART[:end] + "- A bare link is a card of type link.\n" + DART[end:]
    check = check_head_file(SPEC, DART, SPEC, after)
    assert check is not None and check.code == "outside_region"
    assert check.line == _line(after, "A bare link is a card of type link.")
    # the closing quotes removed: the literal runs on to the next constant's quotes
    unclosed = DART[:REGION.end] + DART[REGION.end + 3:]
    check = check_head_file(SPEC, DART, SPEC, unclosed)
    assert check is not None and check.code == "breaks_literal" and check.failed
    assert "cardAgentSystemPrompt" in check.reason


def test_check_head_file_markers_in_markdown_never_break_on_outside_text() -> None:
    spec = RegionSpec("prompts/p.md", begin="<!-- begin -->", end="<!-- end -->")
    base = "# Title\n<!-- begin -->\nBe brief.\n<!-- end -->\nNotes.\n"
    check = check_head_file(spec, base, spec, base.replace("Notes.", "More notes.")
                            .replace("Be brief.", "Be very brief."))
    assert check is not None and check.code == "code_changed" and check.line == 5
    inside = check_head_file(spec, base, spec, base.replace("Be brief.", "<!-- end -->"))
    assert inside is not None and inside.code == "breaks_literal"
    assert check_head_file(spec, base, spec, base.replace("Be brief.", "Be short.")) == \
        HeadCheck("ok", region=locate(spec, base).describe(with_path=False))
    # a base without the region: nothing to guard against
    assert check_head_file(spec, "no markers\n", spec, "changed\n") is None


def test_check_head_file_python_fstring_and_js_template() -> None:
    py = RegionSpec("agent/prompts.py", variable="PROMPT")
    base = 'import os\n\nPROMPT = f"""Hello {name}.\nBe brief.\n"""\n'
    field = check_head_file(py, base, py, base.replace("Be brief.", "Be {tone}."))
    assert field is not None and field.code == "breaks_literal" and field.line == 4
    assert "interpolation '{tone}'" in field.reason
    braces = check_head_file(py, base, py, base.replace("Be brief.", "Use {{braces}}."))
    assert braces is not None and braces.code == "ok"
    js = RegionSpec("agent/prompt.js", variable="SYSTEM_PROMPT")
    base = "const SYSTEM_PROMPT = `Extract items.\nAnswer in JSON.`;\nmodule.exports = {};\n"
    tick = check_head_file(js, base, js, base.replace("Extract items.", "Extract `items`."))
    assert tick is not None and tick.code == "breaks_literal" and tick.line == 1
    assert "closing delimiter" in tick.reason


def test_a_refusal_names_the_line_in_the_region_and_in_the_file() -> None:
    """The package numbers the region's lines, an editor the file's: the message says both."""
    new_region = REGION.text.replace(RULE_BEFORE, RULE_BEFORE + "- It costs $5.\n")
    at = new_region.split("\n").index("- It costs $5.") + 1
    file_line = DART.split("\n").index(RULE_BEFORE.strip()) + 2  # the line after the rule
    message = check_region_patch(SPEC, DART, new_region) or ""
    assert f"region line {at}, file line {file_line})" in message, message
    assert file_line != at
