"""Prompt regions inside source files: locate, runtime value, splice, and every refusal."""

from __future__ import annotations

import difflib
import json
import random
import re
import shutil
import subprocess
import warnings
from dataclasses import dataclass

import pytest

from promptloop.optimizer.core.regions import (
    BreaksLiteralError,
    Region,
    RegionError,
    RegionSpec,
    check_literal,
    edited_region_text,
    language_of,
    locate,
    splice,
    value_of,
    writing_rules,
)

DART_PATH = "lib/agent/card_agent/prompts.dart"
DART = '''import 'package:memex/agent/card_agent/card_tools.dart';
import 'package:memex/agent/common/prompt_parts.dart' show sharedRules;

/// Version shown in the debug drawer.
const cardAgentPromptVersion = '2026.03';

// The old prompt, kept for reference while the new one is rolled out:
// const cardAgentSystemPrompt = """You save cards.""";

/* Block comment with a decoy:
   const cardAgentSystemPrompt = """decoy""";
*/

const cardAgentSystemPrompt = """
You are the Memex card agent. You turn one raw input from the user into at most one card.

## What a card is
- A card holds one thing worth remembering: a fact, a task, an idea or a link.
- Its title is short (at most 8 words) and says what the card is about.
- Its body keeps the user's own words; never invent facts.

## Tools
- Call `list_cards` before `save_card` when the input may repeat an existing card.
- Call `save_card` once, with YAML front matter: title, type, tags, created.
- Call `skip_card` when the input is only a greeting, filler or emoji.

## Format
- Dates are ISO 8601 (2026-03-14). Prices keep their currency: \\$12.50 stays \\$12.50.
- Quote the user's words with "double quotes"; a \\"""triple\\""" quote is escaped.
- Tags are lowercase words joined by '-', at most 3.
- Write the body in the language of the input (English, 中文, Español).

## Types
- fact: something true about the world or the user.
- task: something the user must do, with a due date when one is given.
- idea: a thought the user wants to keep, in their words.
- link: a URL with one sentence on why it matters.

## When in doubt
- Prefer one precise card over two vague ones.
- If the input names a person, keep the name exactly as written.
- Never save secrets (passwords, API keys, card numbers).

The current user is ${session.userName}; today is $today.
Answer with tool calls only.
""";

const cardAgentSystemPromptV2 = """
Experimental prompt, not used yet.
""";

final cardAgentTools = [listCards, saveCard, skipCard];
'''

PY_PATH = "agents/triage/prompts.py"
PY = '''"""Prompts of the triage agent."""

from __future__ import annotations

# SYSTEM_PROMPT = """an old version"""
MAX_TURNS = 6
GREETING = 'Hello, I\\'m the triage bot.'

SYSTEM_PROMPT = """\\
You triage support messages into exactly one queue.

Queues: billing, bugs, account, other.
- A refund or an invoice goes to billing.
- A crash, an error message or "it doesn't work" goes to bugs.
- A password reset goes to account.
Answer as JSON: {"queue": "...", "reason": "..."}.
Tab-separated logs look like a\\tb.
"""

SYSTEM_PROMPT_TESTS = ["SYSTEM_PROMPT = 'not this one'"]
'''

JS_PATH = "agent/prompt.js"
JS = '''// The action-items agent's prompt.
import { today } from "./clock.js";

const SLASH_RE = /`[^`]*`/g; // a regex with backticks, not a template
const ratio = 10 / 2 / 5;

export const SYSTEM_PROMPT = `You turn meeting notes into action items.

Each item has an owner and a due date (${today()} is today).
- Owners are people named in the notes; never "the team".
- Dates are YYYY-MM-DD; write \\`none\\` when the notes give no date.
- A price such as \\${amount} is text, not a placeholder.
Return JSON only.`;

const HELP = 'Use \\'owner\\' for the person.';
export default SYSTEM_PROMPT;
'''

TS_PATH = "src/prompts.ts"
TS = '''import type { Prompt } from "./types";

export const SUPPORT_PROMPT: string = `
You answer support tickets for Acme.
Be brief: at most 5 sentences.
`.trim();

export const NAME = "support" as const;
'''

MARKED_YAML_PATH = "config/agents.yaml"
MARKED_YAML = '''agent: card
model: local:smollm2
system: |
  # promptloop:begin card
  You save one card per input.
  Skip greetings.
  # promptloop:end card
tools: [save_card]
'''

MARKED_JS_PATH = "agent/build_prompt.js"
MARKED_JS = '''const parts = [];
// promptloop:begin card
parts.push("You save one card per input.");
parts.push("Skip greetings.");
// promptloop:end card
export const PROMPT = parts.join("\\n");
'''

MARKED_PY_PATH = "agents/card/prompt.py"
MARKED_PY = '''PROMPT = """
Header that stays.
# promptloop:begin rules
- Save one card per input.
- Skip greetings.
# promptloop:end rules
Footer that stays.
"""
'''


def touched_lines(old: str, new: str) -> list[tuple[str, int, int]]:
    """(op, first old line, last old line) of every change, 1-based; inserts have last < first."""
    a, b = old.splitlines(), new.splitlines()
    out = []
    for op, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            out.append((op, i1 + 1, i2))
    return out


def assert_only_region(old: str, new: str, region: Region) -> None:
    changes = touched_lines(old, new)
    assert changes, "nothing changed"
    for op, first, last in changes:
        if op == "insert":  # inserted after old line `last`
            # a marker region starts at a line start: inserting after the begin line is inside
            lowest = region.start_line - (region.kind == "markers")
            assert lowest <= last <= region.end_line, (op, first, last)
        else:
            assert region.start_line <= first and last <= region.end_line, (op, first, last)


def line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


# --- languages ---------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "lang"), [
    ("lib/a.dart", "dart"), ("x.py", "python"), ("a.js", "javascript"), ("a.mjs", "javascript"),
    ("a.cjs", "javascript"), ("a.jsx", "javascript"), ("a.ts", "typescript"),
    ("a.tsx", "typescript"), ("a.mts", "typescript"), ("prompts/card.md", "other"),
    ("config.yaml", "other"), ("Makefile", "other"), ("dir.d/file", "other"),
])
def test_language_of(path: str, lang: str) -> None:
    assert language_of(path) == lang


def test_spec_is_a_variable_or_markers_or_nothing() -> None:
    assert RegionSpec("a.md").kind == "file"
    assert RegionSpec("a.dart", variable="x").kind == "literal"
    assert RegionSpec("a.yaml", begin="# b", end="# e").kind == "markers"
    with pytest.raises(RegionError, match="not both"):
        RegionSpec("a.dart", variable="x", begin="# b", end="# e")
    with pytest.raises(RegionError, match="needs both"):
        RegionSpec("a.dart", begin="# b")


# --- Dart --------------------------------------------------------------------------------

DART_SPEC = RegionSpec(DART_PATH, variable="cardAgentSystemPrompt")


def test_dart_locate() -> None:
    r = locate(DART_SPEC, DART)
    opener_line = line_of(DART, 'const cardAgentSystemPrompt = """\nYou')
    assert (r.start_line, r.end_line) == (opener_line, line_of(DART, "Answer with tool calls"))
    assert r.end_line - r.start_line >= 28
    assert r.opener == r.closer == '"""' and r.language == "dart" and not r.raw
    assert r.text.startswith("\nYou are the Memex card agent.")
    assert r.text.endswith("Answer with tool calls only.\n")
    assert DART[r.start:r.end] == r.text
    assert DART[r.end:].startswith('""";\n\nconst cardAgentSystemPromptV2')
    assert r.describe() == (f"triple-quoted string cardAgentSystemPrompt in {DART_PATH} "
                            f"(lines {r.start_line}-{r.end_line})")
    assert r.file_line(2) == r.start_line + 1


def test_dart_value() -> None:
    value = value_of(locate(DART_SPEC, DART))
    assert value.startswith("You are the Memex card agent.")  # Dart drops the blank first line
    assert "Prices keep their currency: $12.50 stays $12.50." in value
    assert 'a """triple""" quote is escaped' in value
    assert "The current user is ${session.userName}; today is $today." in value  # as written
    assert "中文" in value


def test_dart_second_literal_with_similar_name() -> None:
    r = locate(RegionSpec(DART_PATH, variable="cardAgentSystemPromptV2"), DART)
    assert r.text == "\nExperimental prompt, not used yet.\n"


def test_dart_splice_roundtrip_and_only_region_lines() -> None:
    r = locate(DART_SPEC, DART)
    assert splice(DART_SPEC, DART, r.text) == DART
    new_text = r.text.replace("- Prefer one precise card over two vague ones.\n",
                              "- Prefer one precise card over two vague ones.\n"
                              "- A link alone is a card of type link.\n")
    new_text = new_text.replace("at most 8 words", "at most 6 words")
    out = splice(DART_SPEC, DART, new_text)
    assert_only_region(DART, out, r)
    assert locate(DART_SPEC, out).text == new_text
    assert "- A link alone is a card of type link." in value_of(locate(DART_SPEC, out))
    # appending at the very end of the region lands just before the closing delimiter
    out = splice(DART_SPEC, DART, r.text + "Be brief.\n")
    assert_only_region(DART, out, r)
    assert 'Be brief.\n""";' in out


@pytest.mark.parametrize(("new_end", "reason"), [
    ('Close early """;\nconst evil = """x\n', "contains '\"\"\"', the literal's closing"),
    ("Trailing backslash \\", "odd number of backslashes"),
    ("Trailing backslashes \\\\\\", "odd number of backslashes"),
    ('Ends with a quote "', "ends with '\"'"),
    ("Hello ${user.secret}\n", "adds the interpolation '${user.secret}'"),
    ("Hello $password\n", "adds the interpolation '$password'"),
    ("Costs $5 now\n", "'$' not followed by a name"),
    ("Bad escape \\xZZ\n", "invalid escape"),
])
def test_dart_refusals(new_end: str, reason: str) -> None:
    r = locate(DART_SPEC, DART)
    with pytest.raises(BreaksLiteralError, match="cardAgentSystemPrompt in lib/agent") as err:
        splice(DART_SPEC, DART, r.text + new_end)
    assert reason in str(err.value)
    assert "would break triple-quoted string cardAgentSystemPrompt" in str(err.value)


def test_dropping_the_final_line_break_is_refused() -> None:
    """It would move the closing delimiter (or the end marker) line, outside the region."""
    r = locate(DART_SPEC, DART)
    with pytest.raises(BreaksLiteralError, match="drops the line break before the closing"):
        splice(DART_SPEC, DART, r.text.rstrip("\n"))
    with pytest.raises(BreaksLiteralError, match=f"change file line {r.end_line + 1} outside"):
        splice(DART_SPEC, DART, r.text.rstrip("\n"))
    m = locate(YAML_SPEC, MARKED_YAML)
    with pytest.raises(BreaksLiteralError, match="before the end marker"):
        splice(YAML_SPEC, MARKED_YAML, m.text.rstrip("\n"))
    emptied = splice(YAML_SPEC, MARKED_YAML, "")  # an empty marker region is fine
    assert locate(YAML_SPEC, emptied).text == ""
    with pytest.raises(BreaksLiteralError, match="before the end marker"):
        splice(YAML_SPEC, emptied, "  One line without its line break")
    js = locate(JS_SPEC, JS)  # this template ends on its last line: no line break to keep
    check_literal(js, js.text + "\nMore.")


def test_dart_accepts_escaped_and_existing() -> None:
    r = locate(DART_SPEC, DART)
    fine = r.text + 'Write \\"""x\\""" and \\$5 and \\${no}; greet $today by name.\n'
    out = splice(DART_SPEC, DART, fine)
    assert "$5 and ${no}; greet $today" in value_of(locate(DART_SPEC, out))
    check_literal(r, r.text.replace("${session.userName}", "the user"))  # dropping one is fine


def test_dart_raw_and_single_quoted_literals() -> None:
    src = ("const a = r'''\nC:\\new\\table $notInterp\n''';\n"
           "static const String b = 'one line: \\'quoted\\'';\n"
           "final String? c =\n    r\"raw \\d+\";\n")
    a = locate(RegionSpec("x.dart", variable="a"), src)
    assert a.opener == "r'''" and a.raw and a.closer == "'''"
    assert value_of(a) == "C:\\new\\table $notInterp\n"
    check_literal(a, a.text + "$more \\ backslash\n")  # raw: neither interpolation nor escape
    with pytest.raises(RegionError, match="'''"):
        check_literal(a, a.text + "'''")
    b = locate(RegionSpec("x.dart", variable="b"), src)
    assert b.opener == "'" and value_of(b) == "one line: 'quoted'"
    with pytest.raises(RegionError, match="line break"):
        check_literal(b, "two\nlines")
    with pytest.raises(RegionError, match="closing delimiter"):
        check_literal(b, "it's")
    c = locate(RegionSpec("x.dart", variable="c"), src)
    assert c.opener == 'r"' and value_of(c) == "raw \\d+" and c.start_line == 6


# --- Python ------------------------------------------------------------------------------

PY_SPEC = RegionSpec(PY_PATH, variable="SYSTEM_PROMPT")


def test_python_locate_value_splice() -> None:
    r = locate(PY_SPEC, PY)
    assert r.opener == '"""' and r.language == "python"
    assert r.start_line == line_of(PY, 'SYSTEM_PROMPT = """\\\n')
    assert r.end_line == line_of(PY, "Tab-separated")
    value = value_of(r)
    assert value.startswith("You triage")  # the backslash-newline joins the lines
    assert "a\tb." in value and '"it doesn\'t work"' in value
    assert splice(PY_SPEC, PY, r.text) == PY
    new_text = r.text.replace("- A password reset goes to account.\n",
                              "- A password reset goes to account.\n"
                              "- Spam goes to other.\n")
    out = splice(PY_SPEC, PY, new_text)
    assert_only_region(PY, out, r)
    namespace: dict[str, object] = {}
    exec(compile(out, PY_PATH, "exec"), namespace)  # the spliced module is valid Python
    assert namespace["SYSTEM_PROMPT"] == value_of(locate(PY_SPEC, out))


@pytest.mark.parametrize(("new_end", "reason"), [
    ('"""\nimport os\n', "closing delimiter"),
    ("ends \\", "odd number of backslashes"),
    ('ends "', "ends with '\"'"),
    ("bad \\N{NOT A NAME}", "invalid escape"),
    ("bad \\x4", "invalid escape"),
])
def test_python_refusals(new_end: str, reason: str) -> None:
    r = locate(PY_SPEC, PY)
    with pytest.raises(RegionError, match=f"SYSTEM_PROMPT in {PY_PATH}") as err:
        splice(PY_SPEC, PY, r.text + new_end)
    assert reason in str(err.value)


def test_python_single_line_raw_and_fstrings() -> None:
    src = ("GREETING = 'Hello, I\\'m the bot.'\n"
           "PATTERN: str = r'\\d+ items'\n"
           "TEMPLATE = f\"Hi {name}, {{literal}} braces\"\n"
           "WRAPPED = (\n    '''inside parens'''\n)\n")
    g = locate(RegionSpec("p.py", variable="GREETING"), src)
    assert value_of(g) == "Hello, I'm the bot."
    with pytest.raises(RegionError, match="line break"):
        check_literal(g, "a\nb")
    check_literal(g, "a \\\nb")  # a backslash-newline continues a Python string
    p = locate(RegionSpec("p.py", variable="PATTERN"), src)
    assert p.raw and value_of(p) == "\\d+ items"
    with pytest.raises(RegionError, match="backslashes"):
        check_literal(p, "ends \\")  # even raw strings cannot end with one backslash
    t = locate(RegionSpec("p.py", variable="TEMPLATE"), src)
    assert t.fstring and value_of(t) == "Hi {name}, {literal} braces"
    check_literal(t, "Bye {name}, {{x}}")
    with pytest.raises(RegionError, match=re.escape("adds the interpolation '{os.environ}'")):
        check_literal(t, "Bye {os.environ}")
    w = locate(RegionSpec("p.py", variable="WRAPPED"), src)
    assert w.text == "inside parens" and w.start_line == 5


# --- JavaScript / TypeScript -------------------------------------------------------------

JS_SPEC = RegionSpec(JS_PATH, variable="SYSTEM_PROMPT")


def test_js_locate_value_splice() -> None:
    r = locate(JS_SPEC, JS)
    assert r.opener == r.closer == "`" and r.language == "javascript"
    assert r.describe() == (f"template literal SYSTEM_PROMPT in {JS_PATH} "
                            f"(lines {r.start_line}-{r.end_line})")
    assert (r.start_line, r.end_line) == (line_of(JS, "export const SYSTEM_PROMPT"),
                                          line_of(JS, "Return JSON only."))
    value = value_of(r)
    assert "(${today()} is today)" in value  # interpolation as written
    assert "write `none` when" in value and "such as ${amount} is text" in value
    assert r.describe(with_path=False) == (f"template literal SYSTEM_PROMPT "
                                           f"(lines {r.start_line}-{r.end_line})")
    assert splice(JS_SPEC, JS, r.text) == JS
    out = splice(JS_SPEC, JS, r.text.replace("Return JSON only.",
                                             "Merge duplicate items.\nReturn JSON only."))
    assert_only_region(JS, out, r)


@pytest.mark.parametrize(("new_end", "reason"), [
    ("\nUse `code` here", "contains '`'"),
    ("\nends \\", "odd number of backslashes"),
    ("\nLeak ${process.env.OPENAI_API_KEY}", "adds the interpolation"),
    ("\nUnclosed ${oops", "never closed"),
    ("\nOld octal \\1", "invalid escape"),
])
def test_js_refusals(new_end: str, reason: str) -> None:
    r = locate(JS_SPEC, JS)
    with pytest.raises(RegionError, match=f"template literal SYSTEM_PROMPT in {JS_PATH}") as err:
        splice(JS_SPEC, JS, r.text + new_end)
    assert reason in str(err.value)


def test_js_existing_interpolation_may_stay_and_move() -> None:
    r = locate(JS_SPEC, JS)
    moved = r.text.replace(" (${today()} is today)", "") + "\nToday is ${today()}."
    out = splice(JS_SPEC, JS, moved)
    assert value_of(locate(JS_SPEC, out)).endswith("Today is ${today()}.")


def test_js_plain_strings() -> None:
    help_ = locate(RegionSpec(JS_PATH, variable="HELP"), JS)
    assert help_.opener == "'" and value_of(help_) == "Use 'owner' for the person."
    check_literal(help_, "A ${not} interpolation in a quoted string is text")
    with pytest.raises(RegionError, match="closing delimiter"):
        check_literal(help_, "it's")
    with pytest.raises(RegionError, match="line break"):
        check_literal(help_, "two\nlines")


def test_ts_annotation_and_trim() -> None:
    spec = RegionSpec(TS_PATH, variable="SUPPORT_PROMPT")
    r = locate(spec, TS)
    assert r.trim == "both" and r.language == "typescript"
    assert value_of(r) == "You answer support tickets for Acme.\nBe brief: at most 5 sentences."
    assert splice(spec, TS, r.text) == TS
    name = locate(RegionSpec(TS_PATH, variable="NAME"), TS)
    assert value_of(name) == "support"


def test_js_string_raw_and_let() -> None:
    src = "let RAW = String.raw`C:\\temp ${dir}`;\nvar Q = \"say \\\"hi\\\"\";\n"
    raw = locate(RegionSpec("a.js", variable="RAW"), src)
    assert raw.raw and raw.opener == "String.raw`" and value_of(raw) == "C:\\temp ${dir}"
    assert value_of(locate(RegionSpec("a.js", variable="Q"), src)) == 'say "hi"'


# --- markers -----------------------------------------------------------------------------

YAML_SPEC = RegionSpec(MARKED_YAML_PATH, begin="# promptloop:begin card",
                       end="# promptloop:end card")
MJS_SPEC = RegionSpec(MARKED_JS_PATH, begin="// promptloop:begin card",
                      end="// promptloop:end card")
MPY_SPEC = RegionSpec(MARKED_PY_PATH, begin="# promptloop:begin rules",
                      end="# promptloop:end rules")


@pytest.mark.parametrize(("spec", "src", "first_line"), [
    (YAML_SPEC, MARKED_YAML, "  You save one card per input.\n"),
    (MJS_SPEC, MARKED_JS, 'parts.push("You save one card per input.");\n'),
    (MPY_SPEC, MARKED_PY, "- Save one card per input.\n"),
])
def test_markers_locate_splice(spec: RegionSpec, src: str, first_line: str) -> None:
    r = locate(spec, src)
    assert r.text.startswith(first_line) and r.text.count("\n") == 2
    assert (r.start_line, r.end_line) == (line_of(src, first_line.strip()),
                                          line_of(src, first_line.strip()) + 1)
    assert r.describe().startswith(f"the region between {spec.begin!r} and {spec.end!r} in "
                                   f"{spec.path} (lines ")
    # a YAML block's indentation is the file's: its runtime value drops it (what yaml reads)
    yaml_block = spec.path.endswith(".yaml")
    assert value_of(r) == ("You save one card per input.\nSkip greetings.\n" if yaml_block
                           else r.text)
    assert splice(spec, src, r.text) == src
    new_text = r.text.replace(first_line, first_line + first_line.replace("one card", "two cards"))
    out = splice(spec, src, new_text)
    assert_only_region(src, out, r)
    for marker in (spec.begin, spec.end):
        assert marker is not None
        with pytest.raises(RegionError, match=r"contains the (begin|end) marker") as err:
            splice(spec, src, r.text + marker + "\n")
        assert spec.path in str(err.value)


def test_a_yaml_block_keeps_its_indentation_and_the_file_keeps_parsing() -> None:
    """Issue 32's team: a line written at column 0 inside a `|` block ended the block and
    left config/agents.yaml unparseable, and optimize and review both passed it."""
    import yaml

    r = locate(YAML_SPEC, MARKED_YAML)
    assert r.indent == "  "
    rules = writing_rules(r)
    assert rules is not None and "YAML block" in rules and "2 space(s)" in rules
    with pytest.raises(BreaksLiteralError, match=r"region line 2, file line 6 is not indented "
                       r"by the block's 2 space\(s\)") as err:
        splice(YAML_SPEC, MARKED_YAML, r.text.replace("  Skip", "Skip"))
    assert err.value.line == 2
    # the indented text goes in; yaml reads the prompt as the region's value
    out = splice(YAML_SPEC, MARKED_YAML, r.text + "  Never invent a date.\n")
    loaded = yaml.safe_load(out)["system"]
    assert "Never invent a date.\n" in loaded
    assert value_of(locate(YAML_SPEC, out)) in loaded


def test_a_change_that_leaves_a_config_file_unparseable_is_refused() -> None:
    spec = RegionSpec("agent.yaml", begin="# promptloop:begin", end="# promptloop:end")
    src = "model: x\n# promptloop:begin\nrules:\n  - be brief\n# promptloop:end\nname: y\n"
    assert "rules:\n  - be kind" in splice(spec, src, "rules:\n  - be kind\n")
    with pytest.raises(BreaksLiteralError, match=r"would no longer parse as YAML"):
        splice(spec, src, "rules: [be brief\n")
    # a file that did not parse before (a template) is not held to it
    template = src.replace("name: y", "name: {{ name }: broken")
    assert splice(spec, template, "rules: [x\n").count("rules: [x") == 1
    toml_spec = RegionSpec("agent.toml", begin="# promptloop:begin", end="# promptloop:end")
    toml_src = 'a = 1\n# promptloop:begin\nprompt = "be brief"\n# promptloop:end\n'
    with pytest.raises(BreaksLiteralError, match=r"would no longer parse as TOML"):
        splice(toml_spec, toml_src, 'prompt = "be brief\n')


def test_markers_inside_a_literal_are_checked_against_it() -> None:
    r = locate(MPY_SPEC, MARKED_PY)
    assert r.enclosing is not None
    with pytest.raises(RegionError, match="closing delimiter"):
        splice(MPY_SPEC, MARKED_PY, r.text + '"""\n')


def test_markers_errors() -> None:
    with pytest.raises(RegionError, match="begin marker '# promptloop:begin nope' is not found"):
        locate(RegionSpec("a.yaml", begin="# promptloop:begin nope", end="# end"), MARKED_YAML)
    twice = MARKED_YAML + "# promptloop:begin card\n"
    with pytest.raises(RegionError, match="found twice, at lines 4, 9") as err:
        locate(YAML_SPEC, twice)
    assert MARKED_YAML_PATH in str(err.value)
    backwards = "# promptloop:end card\n# promptloop:begin card\n"
    with pytest.raises(RegionError, match="does not come after"):
        locate(YAML_SPEC, backwards)
    similar = MARKED_YAML.replace("# promptloop:end card", "# promptloop:end card\n"
                                  "# promptloop:begin cards\n# promptloop:end cards")
    assert locate(YAML_SPEC, similar).text == locate(YAML_SPEC, MARKED_YAML).text


# --- not found, found twice, tricky inputs -----------------------------------------------


def test_not_found_names_file_and_variable_with_hint() -> None:
    with pytest.raises(RegionError) as err:
        locate(RegionSpec(DART_PATH, variable="cardAgentSystemPromt"), DART)
    msg = str(err.value)
    assert DART_PATH in msg and "'cardAgentSystemPromt' is not found" in msg
    assert "Did you mean 'cardAgentSystemPrompt'?" in msg


def test_found_twice_names_both_lines() -> None:
    src = PY + 'SYSTEM_PROMPT = """again"""\n'
    with pytest.raises(RegionError) as err:
        locate(PY_SPEC, src)
    first, second = line_of(src, 'SYSTEM_PROMPT = """\\'), src.count("\n")
    assert f"found twice: it is assigned at lines {first}, {second}" in str(err.value)
    assert PY_PATH in str(err.value)


@dataclass(frozen=True)
class Tricky:
    name: str
    path: str
    src: str
    variable: str
    text: str | None
    """The region's text, or None when locate must fail with `error`."""
    error: str = ""


TRICKY = [
    Tricky("escaped quotes", "a.dart", 'const p = "say \\"hi\\" now";\n', "p", 'say \\"hi\\" now'),
    Tricky("escaped triple quotes", "a.py", 'P = """a \\""" b"""\n', "P", 'a \\""" b'),
    Tricky("similar longer name first", "a.js",
           "const PROMPTV2 = `two`;\nconst PROMPT = `one`;\n", "PROMPT", "one"),
    Tricky("similar name with suffix only", "a.js", "const PROMPT_OLD = `old`;\n", "PROMPT",
           None, "is not found"),
    Tricky("line comment", "a.dart",
           "// const p = '''old''';\nconst p = '''new''';\n", "p", "new"),
    Tricky("python comment", "a.py", "# P = 'old'\nP = 'new'\n", "P", "new"),
    Tricky("declaration quoted inside another prompt", "a.js",
           "const DOC = `Example:\nconst PROMPT = \\`x\\`;\n`;\nconst PROMPT = `real`;\n",
           "PROMPT", "real"),
    Tricky("declaration inside a python docstring", "a.py",
           '"""Usage:\n\nP = "doc"\n"""\nP = "real"\n', "P", "real"),
    Tricky("comparison is not an assignment", "a.py", "if P == 'x':\n    pass\nP = 'y'\n",
           "P", "y"),
    Tricky("keyword argument does not count", "a.js", "f({ PROMPT: `x` });\nconst PROMPT = 'y';\n",
           "PROMPT", "y"),
    Tricky("concatenation", "a.js", "const PROMPT = `a` + `b`;\n", "PROMPT", None,
           "concatenation"),
    Tricky("adjacent literals", "a.dart", "const p = 'a' 'b';\n", "p", None, "concatenation"),
    Tricky("python implicit concatenation", "a.py", "P = (\n    'a'\n    'b'\n)\n", "P", None,
           "not one string literal"),
    Tricky("a call, not a literal", "a.js", "const PROMPT = build(`x`);\n", "PROMPT", None,
           "not assigned a supported string literal"),
    Tricky("tagged template", "a.js", "const PROMPT = dedent`x`;\n", "PROMPT", None,
           "not assigned a supported string literal"),
    Tricky("unterminated triple", "a.dart", 'const p = """never closed;\n', "p", None,
           "unterminated"),
    Tricky("unterminated one-line", "a.py", "P = 'never closed\nQ = 1\n", "P", None,
           "unterminated"),
    Tricky("bytes", "a.py", "P = b'x'\n", "P", None, "bytes"),
    Tricky("regex with a backtick before", "a.js",
           "const R = /`/;\nconst PROMPT = `ok`;\n", "PROMPT", "ok"),
    Tricky("division is not a regex", "a.js",
           "const x = a / b; const y = c / d;\nconst PROMPT = `ok`;\n", "PROMPT", "ok"),
    Tricky("nested template in an interpolation", "a.ts",
           "export const PROMPT = `a ${xs.map(x => `<${x}>`).join()} b`;\n", "PROMPT",
           "a ${xs.map(x => `<${x}>`).join()} b"),
    Tricky("markdown file has no variables", "a.md", "P = 'x'\n", "P", None,
           "use begin/end markers"),
]


@pytest.mark.parametrize("case", TRICKY, ids=[c.name for c in TRICKY])
def test_tricky_inputs(case: Tricky) -> None:
    spec = RegionSpec(case.path, variable=case.variable)
    if case.text is None:
        with pytest.raises(RegionError, match=case.error) as err:
            locate(spec, case.src)
        assert case.path in str(err.value) and case.variable in str(err.value)
        return
    r = locate(spec, case.src)
    assert r.text == case.text
    assert splice(spec, case.src, r.text) == case.src


# --- whole files, external edits ---------------------------------------------------------


def test_whole_file() -> None:
    spec = RegionSpec("prompts/card_agent.md")
    text = "# Card agent\n\nSave cards.\n"
    r = locate(spec, text)
    assert (r.start, r.end, r.start_line, r.end_line) == (0, len(text), 1, 3)
    assert value_of(r) == text and r.describe() == "the whole file prompts/card_agent.md"
    assert splice(spec, text, "new\n") == "new\n"


def test_edited_region_text() -> None:
    r = locate(DART_SPEC, DART)
    new_file = DART.replace("at most 8 words", "at most 6 words")
    assert edited_region_text(DART_SPEC, DART, new_file) == r.text.replace("8 words", "6 words")
    outside = new_file.replace("import 'package:memex", "import 'package:evil", 1)
    with pytest.raises(RegionError, match="outside triple-quoted string cardAgentSystemPrompt"):
        edited_region_text(DART_SPEC, DART, outside)


# --- what is accepted is valid in the host language --------------------------------------

PIECES = ['"', "'", "`", "\\", "$", "{", "}", "\n", "\r", "a", " ", "n", "x", "4", '"""', "'''",
          "${", "\\n", "\\x41", "\\u0041", "\\a", "N", "0"]


def _samples(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8))) for _ in range(count)]


@pytest.mark.parametrize("template", [
    'X = """%s"""\nY = 1\n', "X = '''%s'''\nY = 1\n", 'X = r"""%s"""\n', "X = '%s'\nY = 1\n",
    'X = "%s"\n', "X = r'%s'\n", 'name = "N"\nX = f"""%s {name}"""\n',
])
def test_accepted_python_text_compiles_to_its_value(template: str) -> None:
    spec = RegionSpec("a.py", variable="X")
    base = template % "seed"
    accepted = 0
    for text in _samples(7, 400):
        try:
            out = splice(spec, base, text)
        except BreaksLiteralError:
            continue
        accepted += 1
        namespace: dict[str, object] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes such as '\$' only warn
            exec(compile(out, "a.py", "exec"), namespace)
        if "f" not in template:
            assert namespace["X"] == value_of(locate(spec, out)), text
    assert accepted > 50


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_accepted_javascript_text_runs_to_its_value() -> None:
    cases = []
    for template in ('const name = "N";\nconst X = `%s`;\n', "const X = '%s';\n",
                     'const X = "%s";\n', 'const name = "N";\nconst X = String.raw`%s`;\n'):
        spec = RegionSpec("a.mjs", variable="X")
        base = template % ("seed ${name}" if "`" in template else "seed")
        for text in _samples(11, 300):
            try:
                out = splice(spec, base, text)
            except BreaksLiteralError:
                continue
            cases.append((out, value_of(locate(spec, out)).replace("${name}", "N")))
    script = ("const vm = require('vm'); const cases = JSON.parse(require('fs')"
              ".readFileSync(0, 'utf8')); const bad = [];\n"
              "for (const [src, want] of cases) { let got;\n"
              "  try { got = vm.runInNewContext('\"use strict\";\\n' + "
              "src.replace(/^const /gm, 'var ') + '\\n;X', {}); } catch (e) { got = String(e); }\n"
              "  if (got !== want) bad.push([src, got, want]); }\n"
              "console.log(JSON.stringify(bad.slice(0, 5)));")
    done = subprocess.run(["node", "-e", script], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == []
    assert len(cases) > 200


def test_fstring_braces_and_carriage_returns() -> None:
    src = 'name = "N"\nX = f"Hi {name}"\n'
    r = locate(RegionSpec("a.py", variable="X"), src)
    with pytest.raises(BreaksLiteralError, match="single '}'"):
        check_literal(r, "Hi {name} }")
    with pytest.raises(BreaksLiteralError, match="adds the interpolation"):
        check_literal(r, "Hi \\{os}")  # a backslash does not escape a brace in an f-string
    check_literal(r, "Hi {name} \\N{BULLET}")  # a named escape is not a field
    with pytest.raises(BreaksLiteralError, match="carriage return"):
        check_literal(locate(JS_SPEC, JS), "one\rtwo")
    assert value_of(locate(RegionSpec("a.py", variable="B"), "B = '\\a'\n")) == "\a"
