"""Diff extraction, parsing (strict and lenient), content-located apply, rendering, edit format."""

from __future__ import annotations

import json

import pytest
import unidiff

from promptloop.optimizer.propose.apply import apply_diff, line_stats, render_unified
from promptloop.optimizer.propose.edits import (
    EDIT_PROPOSAL_SCHEMA,
    Edit,
    EditProposal,
    apply_edits,
    edits_to_diff,
    parse_edit_proposal,
)
from promptloop.optimizer.propose.patch import PatchError, extract_diff, parse_diff

TARGET = "prompts/pkm_agent.md"
PROMPT = """# PKM Agent

You keep the user's notes in order.

## When to skip
- the input has no content worth keeping;
- the user asks not to save it.

## Tools
- `Read`: read a file.
- `Edit`: change a file.
"""


def diff_of(body: str, path: str = TARGET) -> str:
    return f"--- a/{path}\n+++ b/{path}\n{body}"


def test_wrong_hunk_counts_are_tolerated() -> None:
    text = diff_of("@@ -5,2 +5,17 @@\n ## When to skip\n-- the input has no content worth "
                   "keeping;\n+- the input is only a greeting, filler or emoji;\n+- the input "
                   "has nothing worth keeping;\n")
    with pytest.raises(unidiff.UnidiffParseError):
        unidiff.PatchSet(text)
    parsed = parse_diff(text)
    assert parsed.lenient
    assert parsed.paths == (TARGET,)
    assert (parsed.added, parsed.removed) == (2, 1)
    new = apply_diff(PROMPT, parsed, TARGET)
    assert "- the input is only a greeting, filler or emoji;\n- the input has nothing" in new
    assert new.endswith("- `Edit`: change a file.\n")


def test_too_small_counts_do_not_drop_lines() -> None:
    # unidiff stops this hunk after 2 lines and silently loses the second '+' line.
    text = diff_of("@@ -3,1 +3,1 @@\n You keep the user's notes in order.\n+First added.\n"
                   "+Second added.\n")
    new = apply_diff(PROMPT, text, TARGET)
    assert "You keep the user's notes in order.\nFirst added.\nSecond added.\n" in new


def test_wrong_line_numbers_are_only_a_hint() -> None:
    text = diff_of("@@ -40,3 +40,3 @@\n ## Tools\n-- `Read`: read a file.\n+- `Read`: read a "
                   "file before editing it.\n")
    new = apply_diff(PROMPT, text, TARGET)
    assert "- `Read`: read a file before editing it.\n" in new
    assert "- `Read`: read a file.\n" not in new


def test_context_matched_ignoring_trailing_whitespace_keeps_file_text() -> None:
    text = diff_of("@@ -1,3 +1,4 @@\n # PKM Agent   \n \n+Be brief.\n You keep the user's "
                   "notes in order.\n")
    new = apply_diff(PROMPT, text, TARGET)
    assert new.startswith("# PKM Agent\n\nBe brief.\nYou keep")


def test_fenced_diff_is_extracted_from_prose() -> None:
    reply = ("Hypothesis: the agent saves greetings.\n\n```diff\n"
             + diff_of("@@ -6 +6,2 @@\n - the input has no content worth keeping;\n+- a "
                       "bare greeting;\n") + "```\n\nThis should help.")
    text = extract_diff(reply)
    assert text.startswith(f"--- a/{TARGET}\n")
    assert "This should help" not in text
    assert "- a bare greeting;" in apply_diff(PROMPT, text, TARGET)


def test_raw_diff_is_extracted_and_missing_diff_is_an_error() -> None:
    body = diff_of("@@ -3 +3 @@\n-You keep the user's notes in order.\n+You keep notes.\n")
    assert extract_diff("Sure.\n" + body) == body
    with pytest.raises(PatchError, match="no unified diff"):
        extract_diff("I would add a rule about greetings.")


def test_not_found_names_the_line_and_hunk() -> None:
    text = diff_of("@@ -5,2 +5,3 @@\n ## When to skip\n - the input has no content at all;\n"
                   "+- x\n@@ -9,2 +10,2 @@\n ## Tools\n - the user never said this;\n+- y\n")
    with pytest.raises(PatchError) as err:
        apply_diff(PROMPT, text, TARGET)
    msg = str(err.value)
    assert msg.startswith("hunk 1 does not apply to prompts/pkm_agent.md")
    assert "the line '- the input has no content at all;' was not found" in msg
    assert "match file line 5" in msg  # '## When to skip' matched, the next line did not
    assert "closest file lines: '- the input has no content worth keeping;'" in msg


def test_second_hunk_not_found_is_reported_as_hunk_2() -> None:
    text = diff_of("@@ -1 +1 @@\n-# PKM Agent\n+# The PKM Agent\n@@ -9 +9 @@\n ## Tools\n"
                   "-- `Grep`: search.\n+- `Grep`: search files.\n")
    with pytest.raises(PatchError, match=r"hunk 2 .*'- `Grep`: search.'"):
        apply_diff(PROMPT, text, TARGET)


def test_ambiguous_context_uses_header_hint_or_fails_without_one() -> None:
    doc = "## A\n- keep it short\n\n## B\n- keep it short\n"
    near_b = diff_of("@@ -5,1 +5,2 @@\n - keep it short\n+- and plain\n")
    assert apply_diff(doc, near_b, TARGET) == \
        "## A\n- keep it short\n\n## B\n- keep it short\n- and plain\n"
    near_a = diff_of("@@ -1,2 +1,3 @@\n - keep it short\n+- and plain\n")
    assert apply_diff(doc, near_a, TARGET) == \
        "## A\n- keep it short\n- and plain\n\n## B\n- keep it short\n"
    no_hint = diff_of("@@ @@\n - keep it short\n+- and plain\n")
    with pytest.raises(PatchError, match=r"ambiguous.*lines 2, 5"):
        apply_diff(doc, no_hint, TARGET)


def test_trailing_newline_is_preserved_both_ways() -> None:
    text = diff_of("@@ -1 +1 @@\n-alpha\n+beta\n")
    assert apply_diff("alpha\n", text, TARGET) == "beta\n"
    assert apply_diff("alpha", text, TARGET) == "beta"


def test_multiple_hunks_and_pure_insertion() -> None:
    text = diff_of("@@ -1 +1 @@\n-# PKM Agent\n+# PKM Agent (v2)\n@@ -11,0 +12,1 @@\n"
                   "+- `Grep`: search files.\n")
    new = apply_diff(PROMPT, text, TARGET)
    assert new.startswith("# PKM Agent (v2)\n")
    assert new.endswith("- `Edit`: change a file.\n- `Grep`: search files.\n")


@pytest.mark.parametrize("bad, match", [
    ("", "empty"),
    ("just some words\nno diff here\n", "no file headers"),
    (f"--- a/{TARGET}\n+++ b/{TARGET}\n", "no hunks"),
    ("@@ -1 +1 @@\n-a\n+b\n", "before any"),
    (diff_of("@@ -3,2 +3,2 @@\nYou keep the user's notes in order.\n+More.\n"), "one space"),
])
def test_malformed_diffs_raise_actionable_errors(bad: str, match: str) -> None:
    with pytest.raises(PatchError, match=match):
        parse_diff(bad)


def test_diff_without_target_hunks_is_an_apply_error() -> None:
    with pytest.raises(PatchError, match=r"no hunks for prompts/pkm_agent\.md"):
        apply_diff(PROMPT, diff_of("@@ -1 +1 @@\n-a\n+b\n", "tasks/x/task.json"), TARGET)


def test_paths_are_stripped_and_git_headers_skipped() -> None:
    text = (f"diff --git a/{TARGET} b/{TARGET}\nindex 1111111..2222222 100644\n"
            + diff_of("@@ -1 +1 @@\n-# PKM Agent\n+# PKM\n"))
    parsed = parse_diff(text)
    assert parsed.paths == (TARGET,)
    assert not parsed.lenient
    assert apply_diff(PROMPT, parsed, TARGET).startswith("# PKM\n")


def test_canonical_render_round_trips_through_unidiff() -> None:
    new = PROMPT.replace("- `Edit`: change a file.\n", "- `Edit`: change a file.\n- `LS`: list.")
    canonical = render_unified(PROMPT, new, TARGET)
    patch = unidiff.PatchSet(canonical)
    assert [f.path for f in patch] == [TARGET]
    assert patch[0].source_file == f"a/{TARGET}" and patch[0].target_file == f"b/{TARGET}"
    assert (patch[0].added, patch[0].removed) == (1, 0)
    assert "\\ No newline at end of file" in canonical
    assert apply_diff(PROMPT, canonical, TARGET) == new
    assert apply_diff(new, render_unified(new, PROMPT, TARGET), TARGET) == PROMPT
    assert render_unified(PROMPT, PROMPT, TARGET) == ""


def test_line_stats_counts_a_rewrite_once() -> None:
    stats = line_stats("a\nb\nc\n", "a\nB\nc\nd\ne\n")
    assert (stats.added, stats.removed, stats.changed) == (3, 1, 3)
    assert stats.added_lines == ("B", "d", "e") and stats.removed_lines == ("b",)


# --- constrained edit format ---------------------------------------------------------------


def test_edits_render_to_a_diff_unidiff_parses() -> None:
    proposal = EditProposal(hypothesis="greetings are saved", edits=[
        Edit(action="insert_after", anchor="## When to skip",
             text="- the input is only a greeting, filler or emoji;"),
        Edit(action="replace", anchor="  - `Read`: read a file.  ",
             text="- `Read`: read a file before you change it."),
        Edit(action="delete", anchor="- the user asks not to save it.", text=""),
        Edit(action="insert_before", anchor="## Tools", text="Skip quietly.\n"),
    ])
    new = apply_edits(PROMPT, proposal.edits)
    assert "## When to skip\n- the input is only a greeting, filler or emoji;\n- the input has" \
        in new
    assert "the user asks not to save it" not in new
    assert "Skip quietly.\n## Tools\n- `Read`: read a file before you change it.\n" in new
    canonical = edits_to_diff(PROMPT, proposal, TARGET)
    patch = unidiff.PatchSet(canonical)
    assert [f.path for f in patch] == [TARGET]
    assert apply_diff(PROMPT, canonical, TARGET) == new


def test_edit_anchor_with_copied_line_number_is_accepted() -> None:
    new = apply_edits(PROMPT, [Edit(action="insert_after", anchor="9: ## Tools",
                                    text="- `LS`: list a folder.")])
    assert "## Tools\n- `LS`: list a folder.\n- `Read`" in new


def test_edit_anchor_not_found_lists_close_lines() -> None:
    with pytest.raises(PatchError, match=r"edit 1: .*not a line.*closest lines: '## When to skip'"):
        apply_edits(PROMPT, [Edit(action="insert_after", anchor="## When to skipp", text="x")])


def test_edit_anchor_ambiguous_is_an_error() -> None:
    with pytest.raises(PatchError, match="matches lines 1, 3"):
        apply_edits("same\nother\nsame\n", [Edit(action="delete", anchor="same")])


def test_edit_conflicts_and_empty_inserts_are_errors() -> None:
    with pytest.raises(PatchError, match="already replaced"):
        apply_edits(PROMPT, [Edit(action="delete", anchor="## Tools"),
                             Edit(action="replace", anchor="## Tools", text="## Tooling")])
    with pytest.raises(PatchError, match="non-empty text"):
        apply_edits(PROMPT, [Edit(action="insert_after", anchor="## Tools", text="  ")])


def test_edit_proposal_parsing_and_schema() -> None:
    payload = {"hypothesis": "h", "edits": [{"action": "insert_after", "anchor": "## Tools",
                                             "text": "- `LS`: list."}]}
    reply = f"Here you go:\n```json\n{json.dumps(payload)}\n```"
    proposal = parse_edit_proposal(reply)
    assert proposal.edits[0].action == "insert_after"
    with pytest.raises(PatchError, match=r"edits\.0\.action"):
        parse_edit_proposal(json.dumps({"hypothesis": "h", "edits": [
            {"action": "append", "anchor": "x", "text": "y"}]}))
    with pytest.raises(PatchError, match="no JSON object"):
        parse_edit_proposal("no json here")
    # The hand-written schema stays grammar friendly and in step with the pydantic model.
    dumped = json.dumps(EDIT_PROPOSAL_SCHEMA)
    assert "$ref" not in dumped and "$defs" not in dumped
    item = EDIT_PROPOSAL_SCHEMA["properties"]["edits"]["items"]
    assert set(item["properties"]) == set(Edit.model_fields)
    assert set(EDIT_PROPOSAL_SCHEMA["properties"]) == set(EditProposal.model_fields)
    enum = item["properties"]["action"]["enum"]
    for action in enum:
        Edit(action=action, anchor="a", text="t")


# --- the package's numbered lines, git extended headers -------------------------------------


def test_context_copied_with_the_package_line_numbers_applies() -> None:
    from promptloop.optimizer.propose.apply import number_line, numbered

    assert numbered("a\nb").splitlines() == [number_line(1, "a"), number_line(2, "b")]
    assert number_line(7, "x") == "   7  x"
    with_space = diff_of("@@ -5,3 +5,3 @@\n " + number_line(5, "## When to skip") + "\n-"
                         + number_line(6, "- the input has no content worth keeping;")
                         + "\n+- the input is empty;\n " + number_line(7, "- the user asks "
                                                                      "not to save it.") + "\n")
    without_space = with_space.replace("\n    5  ", "\n   5  ").replace("\n    7  ", "\n   7  ")
    blank_numbered = diff_of("@@ -3,3 +3,3 @@\n " + number_line(3, "You keep the user's notes in "
                             "order.") + "\n-   4\n+Intro.\n    5  ## When to skip\n")
    expected = PROMPT.replace("- the input has no content worth keeping;", "- the input is empty;")
    assert apply_diff(PROMPT, with_space, TARGET) == expected
    assert apply_diff(PROMPT, without_space, TARGET) == expected
    assert apply_diff(PROMPT, blank_numbered, TARGET) == PROMPT.replace(
        "order.\n\n## When", "order.\nIntro.\n## When")


def test_lines_that_really_start_with_digits_still_match_as_written() -> None:
    prompt = "# Steps\n   2  bake\n  12  cool\n"
    diff = diff_of("@@ -2,2 +2,2 @@\n    2  bake\n-  12  cool\n+  12  cool fully\n")
    assert apply_diff(prompt, diff, TARGET) == "# Steps\n   2  bake\n  12  cool fully\n"
    numbered_copy = diff_of("@@ -2,1 +2,1 @@\n-   2     2  bake\n+   2  bake well\n")
    assert apply_diff(prompt, numbered_copy, TARGET) == "# Steps\n   2  bake well\n  12  cool\n"
    wrong_number = diff_of("@@ -2,1 +2,1 @@\n-   9  bake\n+bake well\n")
    with pytest.raises(PatchError, match="was not found"):
        apply_diff(prompt, wrong_number, TARGET)


def test_git_extended_headers_are_read() -> None:
    text = (f"diff --git a/{TARGET} b/prompts/v2.md\nsimilarity index 90%\nrename from {TARGET}\n"
            f"rename to prompts/v2.md\n--- a/{TARGET}\n+++ b/prompts/v2.md\n"
            "@@ -1 +1 @@\n-# PKM Agent\n+# PKM\n"
            "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"
            "diff --git a/logo.png b/logo.png\nindex 1..2 100644\nGIT binary patch\nliteral 3\n"
            "KcmZ?wbhEHbRA5kG\n\n"
            'diff --git "a/prompts/t\\303\\251st.md" "b/prompts/t\\303\\251st.md"\n'
            "new file mode 120000\n--- /dev/null\n+++ \"b/prompts/t\\303\\251st.md\"\n"
            "@@ -0,0 +1 @@\n+/etc/passwd\n")
    rename, mode, binary, link = parse_diff(text).files
    assert (rename.operation, rename.source, rename.target) == ("rename", TARGET, "prompts/v2.md")
    assert len(rename.hunks) == 1
    assert (mode.old_mode, mode.new_mode, mode.hunks) == ("100644", "100755", ())
    assert binary.binary and binary.path == "logo.png"
    assert (link.source, link.target, link.new_mode) == (None, "prompts/tést.md", "120000")
    assert parse_diff(text).paths == (TARGET, "prompts/v2.md", "run.sh", "logo.png",
                                      "prompts/tést.md")


def test_a_patch_to_a_crlf_file_keeps_its_line_endings() -> None:
    """A proposer writes LF lines: inserted into a CRLF file, they left it with mixed line
    endings (and the PR's diff, read back with LF, rewrote every line)."""
    from promptloop.optimizer.propose.apply import apply_diff, render_unified

    original = "# Prompt\r\nAnswer with JSON only.\r\nUse the keys reply and lang.\r\n"
    diff = ("--- a/p.md\n+++ b/p.md\n@@ -1,3 +1,4 @@\n # Prompt\n Answer with JSON only.\n"
            "+Repeat the user's text verbatim.\n Use the keys reply and lang.\n")
    new = apply_diff(original, diff, "p.md")
    assert new == ("# Prompt\r\nAnswer with JSON only.\r\nRepeat the user's text verbatim.\r\n"
                   "Use the keys reply and lang.\r\n")
    shown = render_unified(original, new, "p.md")
    body = shown.splitlines()[3:]  # past ---, +++ and @@
    assert [x[0] for x in body] == [" ", " ", "+", " "]
    lf = "a\nb\n"
    assert apply_diff(lf, "--- a/p.md\n+++ b/p.md\n@@ -1,2 +1,3 @@\n a\n+c\n b\n", "p.md") \
        == "a\nc\nb\n"
