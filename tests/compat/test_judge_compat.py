"""Compatibility of the LLM-judge graders with the original harness (docs/compat.md).

Every case runs the real registered grader with a scripted judge model: a table of judge
replies -> expected score value (None = null score), then the null / 0.0 rules of
`pkm_insight_quality` and `pkm_append_coherence`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.agents.transcript import ToolCallRecord
from promptloop.graders import Score, run_grader
from tests.graders.builders import FACT, ctx, pkm_outcome, rec, skipped_outcome

LOG = "Areas/Health/sleep.md"
ORIGINAL = "# Sleep log\n\n## March\n- 03-01: 7h, fine\n- 03-05: 5h, late screen time\n"
APPENDED = ORIGINAL + f"- 03-14: 6.5h, coffee at 4pm <!-- fact_id: {FACT} -->\n"
OLD = "- 03-05: 5h, late screen time"
NEW = OLD + f"\n- 03-14: 6.5h, coffee at 4pm <!-- fact_id: {FACT} -->"
INSIGHT = "Third late-coffee night this month; your log ties each one to short sleep."


def judge_of(*texts: str) -> ScriptedModel:
    return ScriptedModel([reply(t) for t in texts], model_id="scripted:judge")


def dims(g: Any, n: Any, e: Any, **extra: Any) -> str:
    """An insight-judge reply in the original's format."""
    return json.dumps(
        {"groundedness": g, "non_redundancy": n, "expression_quality": e, **extra}
    )


GOOD = dims(0.8, 0.6, 0.7, rationale="ties the note to the sleep log")  # mean 0.7
OTHER = dims(0.2, 0.2, 0.2, rationale="generic")  # mean 0.2


def insight_call(text: str = INSIGHT) -> ToolCallRecord:
    return rec("update_timeline_card_insight", fact_id=FACT, insight_text=text)


def edit(old: str = OLD, new: str = NEW, path: str = f"/{LOG}", **kw: Any) -> ToolCallRecord:
    return rec("Edit", "edited", file_path=path, old_string=old, new_string=new, **kw)


def edited_outcome(**overrides: Any) -> dict[str, Any]:
    return pkm_outcome(before={LOG: ORIGINAL}, after={LOG: APPENDED}, **overrides)


async def grade_insight(
    judge: ScriptedModel | None, calls: list[ToolCallRecord] | None = None, **outcome: Any
) -> Score:
    out = outcome.pop("outcome", None) or pkm_outcome(before={}, after={LOG: APPENDED}, **outcome)
    calls = calls if calls is not None else [edit(), insight_call()]
    return await run_grader("pkm_insight_quality", {}, ctx(out, calls, judge=judge))


async def grade_coherence(
    judge: ScriptedModel | None, calls: list[ToolCallRecord], outcome: dict[str, Any]
) -> Score:
    return await run_grader("pkm_append_coherence", {}, ctx(outcome, calls, judge=judge))


# --- reply parsing: insight replies -> value --------------------------------------------

FENCE = "```"
REPLIES: list[tuple[str, str, float | None]] = [
    # (case, reply text, expected value; None = null score)
    ("unfenced object", GOOD, 0.7),
    ("fenced json", f"{FENCE}json\n{GOOD}\n{FENCE}", 0.7),
    ("fenced, no language tag", f"{FENCE}\n{GOOD}\n{FENCE}", 0.7),
    ("fenced, upper-case tag on the same line", f"{FENCE}JSON {GOOD}{FENCE}", 0.7),
    ("prose inside the fence", f"{FENCE}\nMy grade: {GOOD} (final)\n{FENCE}", 0.7),
    ("prose around the braces", f"Here is my grade:\n{GOOD}\nHope this helps!", 0.7),
    ("two fences: only the first is parsed", f"{FENCE}json\n{GOOD}\n{FENCE}\n"
     f"{FENCE}json\n{OTHER}\n{FENCE}", 0.7),
    ("two fences, JSON only in the second", f"{FENCE}markdown\n- 03-14: 6.5h\n{FENCE}\n"
     f"{FENCE}json\n{GOOD}\n{FENCE}", None),
    ("fence wins over a JSON object before it", f"{OTHER}\n{FENCE}json\n{GOOD}\n{FENCE}", 0.7),
    ("unclosed fence is not a fence", f"{FENCE}json\n{GOOD}", 0.7),
    ("braces inside the rationale", dims(1, 1, 1, rationale="uses {the log} well }"), 1.0),
    ("two objects unfenced: first { to last } is not JSON", f"{GOOD}\n{OTHER}", None),
    ("prose braces before the object", f"A {{note}}: {GOOD}", None),
    ("NaN literal", GOOD.replace("0.8", "NaN"), None),
    ("Infinity literal", GOOD.replace("0.8", "Infinity"), None),
    ("-Infinity literal", GOOD.replace("0.8", "-Infinity"), None),
    ('"Infinity" string clamps to 1.0', dims("Infinity", 0.5, 0.0), 0.5),
    ('"-Infinity" string clamps to 0.0', dims("-Infinity", 0.6, 0.9), 0.5),
    ('"NaN" string is unknown', dims("NaN", 0.6, 0.8), 0.7),
    ("rationale is a number", dims(0.8, 0.6, 0.7, rationale=3), None),
    ("rationale is a list", dims(0.8, 0.6, 0.7, rationale=["a"]), None),
    ("rationale is an object", dims(0.8, 0.6, 0.7, rationale={"why": "x"}), None),
    ("rationale is a boolean", dims(0.8, 0.6, 0.7, rationale=False), None),
    ("rationale null", dims(0.8, 0.6, 0.7, rationale=None), 0.7),
    ("rationale missing", dims(0.8, 0.6, 0.7), 0.7),
    ("string numbers", dims("0.8", " 0.6 ", "7e-1"), 0.7),
    ("string numbers with sign and no leading digit", dims("+.5", "1.", "0"), 0.5),
    ("non-numeric strings are unknown", dims("high", "0.6", "80%"), 0.6),
    ("out of range numbers clamp", dims(1.5, -0.3, 42), 2 / 3),
    ("out of range string numbers clamp", dims("2", "-1", "1e3"), 2 / 3),
    ("huge exponent overflows to infinity and clamps", dims(0.5, 0.5, 0.5).replace(
        '"expression_quality": 0.5', '"expression_quality": 1e400'), 2 / 3),
    ("huge integer clamps", dims(0.0, 0.0, 10**400), 1 / 3),
    ("unknown dimensions are skipped", dims("unknown", 0.4, 0.5), 0.45),
    ("Unknown in any case is skipped", dims("Unknown", "UNKNOWN", 0.9), 0.9),
    ("null and booleans are unknown", dims(None, True, 0.3), 0.3),
    ("lists and objects are unknown", dims([1], {"v": 1}, 0.3), 0.3),
    ("missing dimensions are skipped", json.dumps({"groundedness": 0.9, "rationale": "x"}), 0.9),
    ("all dimensions unknown", dims("unknown", "unknown", "unknown"), None),
    ("no dimension key at all", json.dumps({"score": 0.9, "rationale": "x"}), None),
    ("extra keys are ignored", dims(0.8, 0.6, 0.7, coherence=0.0, overall=1), 0.7),
    ("integers", dims(1, 0, 1), 2 / 3),
    ("top-level list", f"[{GOOD}]", 0.7),  # first { to last } is the object inside
    ("JSON list of numbers", "[0.8, 0.6, 0.7]", None),
    ("single quotes", GOOD.replace('"', "'"), None),
    ("trailing comma", GOOD.replace("}", ",}"), None),
    ("no braces", "groundedness 0.8, non_redundancy 0.6", None),
    ("empty reply", "", None),
]


@pytest.mark.parametrize(
    ("text", "expected"), [r[1:] for r in REPLIES], ids=[r[0] for r in REPLIES]
)
async def test_insight_reply_parsing(text: str, expected: float | None) -> None:
    s = await grade_insight(judge_of(text))
    if expected is None:
        assert (s.value, s.passed) == (None, None), s.rationale
        assert s.metadata["judge_reply"] == text
    else:
        assert s.value == pytest.approx(expected), s.rationale
        assert s.passed is (expected >= 0.6)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"coherence": 0.8, "rationale": "matches the bullet list"}', 0.8),
        (f'{FENCE}json\n{{"coherence": 0.4, "rationale": "report tone"}}\n{FENCE}', 0.4),
        ('Grade: {"coherence": "0.9", "rationale": "fits"}', 0.9),
        ('{"coherence": 1.7}', 1.0),
        ('{"coherence": "unknown", "rationale": "old text too short"}', None),
        ('{"coherence": 0.8, "rationale": 0.8}', None),
        # our _plus dimensions are not the original's: the default judge cannot use them
        ('{"voice": 0.9, "formatting": 0.9, "structure": 0.9, "rationale": "fits"}', None),
        ('{"coherence": 0.7, "voice": 0.0, "rationale": "fits"}', 0.7),
    ],
    ids=[
        "original format", "fenced", "string number in prose", "clamped", "unknown",
        "numeric rationale", "plus dimensions only", "extra key ignored",
    ],
)
async def test_coherence_reply_in_the_original_format(text: str, expected: float | None) -> None:
    judge = judge_of(text)
    s = await grade_coherence(judge, [edit()], edited_outcome())
    assert s.value == (pytest.approx(expected) if expected is not None else None), s.rationale
    if expected is not None:
        assert s.metadata["dimensions"].keys() == {"coherence"}
    assert len(judge.calls) == 1


async def test_judge_threshold_is_0_6() -> None:
    s = await grade_insight(judge_of(dims(0.6, 0.6, 0.6)))
    assert (s.value, s.passed) == (pytest.approx(0.6), True)
    s = await grade_insight(judge_of(dims(0.6, 0.6, 0.57)))
    assert s.passed is False
    s = await grade_coherence(judge_of('{"coherence": 0.6}'), [edit()], edited_outcome())
    assert s.passed is True and s.metadata["threshold"] == 0.6


# --- pkm_insight_quality: null / 0.0 rules and what the judge sees --------------------


async def test_insight_null_when_skipped() -> None:
    judge = judge_of(GOOD)
    s = await grade_insight(judge, [insight_call()], outcome=skipped_outcome())
    assert (s.value, s.passed) == (None, None) and judge.calls == []


@pytest.mark.parametrize(
    "calls",
    [
        [],
        [edit()],
        [rec("update_timeline_card_insight", "no such fact", error=True, insight_text=INSIGHT)],
    ],
    ids=["no calls", "no insight call", "only a failed insight call"],
)
async def test_insight_zero_without_a_successful_insight_call(calls: list[ToolCallRecord]) -> None:
    judge = judge_of(GOOD)
    s = await grade_insight(judge, calls)
    assert (s.value, s.passed) == (0.0, False) and judge.calls == []


async def test_insight_zero_for_an_empty_insight_text() -> None:
    judge = judge_of(GOOD)
    s = await grade_insight(judge, [edit(), insight_call("")])
    assert (s.value, s.passed) == (0.0, False) and judge.calls == []
    assert "empty" in s.rationale


@pytest.mark.parametrize("text", ["  ", "\n\t "])
async def test_insight_blank_text_scores_zero_unjudged(text: str) -> None:
    # issue 21: the original fails a successful call with blank insight text, as empty text
    judge = judge_of(GOOD)
    s = await grade_insight(judge, [edit(), insight_call(text)])
    assert (s.value, s.passed) == (0.0, False) and judge.calls == []


async def test_insight_just_under_the_threshold_fails() -> None:
    # issue 21: the original compares with a plain `>=` (no float tolerance)
    s = await grade_insight(judge_of(dims(0.5999999999, 0.5999999999, 0.5999999999)))
    assert s.value == pytest.approx(0.5999999999) and s.passed is False
    s = await grade_coherence(judge_of('{"coherence": 0.5999999999}'), [edit()], edited_outcome())
    assert s.passed is False


async def test_insight_judge_sees_fact_insight_and_target_paths_only() -> None:
    judge = judge_of(GOOD)
    calls = [
        rec("Read", "SECRET-READ-RESULT", file_path=f"/{LOG}"),
        rec("Write", "no", error=True, file_path="/Inbox/failed.md", content="x"),
        rec("Write", file_path="/Resources/coffee.md", content="# Coffee"),
        edit(),
        edit(old="- 03-01: 7h, fine", new="- 03-01: 7h, fine!"),
        insight_call(),
    ]
    s = await grade_insight(judge, calls)
    assert s.value == pytest.approx(0.7)
    (request,) = judge.calls
    assert request.settings is not None
    assert (request.settings.temperature, request.settings.max_tokens) == (0.0, 600)
    prompt = request.messages[0].content
    assert "Slept 6.5 hours, coffee after 4pm again." in prompt  # the fact
    assert FACT in prompt and INSIGHT in prompt
    assert "- /Resources/coffee.md\n- /Areas/Health/sleep.md" in prompt  # target paths, once
    assert "/Inbox/failed.md" not in prompt
    assert "SECRET-READ-RESULT" not in prompt and "03-05" not in prompt  # no file contents
    for key in ("groundedness", "non_redundancy", "expression_quality", "rationale"):
        assert f"`{key}`" in prompt


async def test_insight_judges_the_last_successful_insight_call() -> None:
    judge = judge_of(GOOD)
    s = await grade_insight(judge, [insight_call("first"), insight_call("second")])
    assert s.metadata["insight"] == "second"
    assert "second" in judge.calls[0].messages[0].content


# --- pkm_append_coherence: which Edit, and when it is null ------------------------------

COHERENT = '{"coherence": 0.9, "rationale": "same bullet style"}'


async def test_coherence_judges_the_first_successful_edit_from_old_and_new_string() -> None:
    judge = judge_of(COHERENT)
    calls = [
        rec("Edit", "no match", error=True, file_path=LOG, old_string="zzz", new_string="y"),
        edit(),
        edit(old="- 03-01: 7h, fine", new="- 03-01: 7h, fine (SECOND EDIT)"),
    ]
    s = await grade_coherence(judge, calls, edited_outcome())
    assert s.value == pytest.approx(0.9) and s.passed is True
    assert (s.metadata["path"], s.metadata["tool"]) == (LOG, "Edit")
    prompt = judge.calls[0].messages[0].content
    assert OLD in prompt and NEW in prompt and "SECOND EDIT" not in prompt
    assert "# Sleep log" not in prompt  # the original sees old_string, not the whole file
    assert "`coherence`" in prompt and "`voice`" not in prompt


@pytest.mark.parametrize(
    ("calls", "outcome", "why"),
    [
        ([edit()], skipped_outcome(), "skipped"),
        ([], edited_outcome(), "no successful Edit"),
        ([rec("Read", file_path=LOG)], edited_outcome(), "no successful Edit"),
        (
            [rec("Write", file_path=f"/{LOG}", content=APPENDED)],
            edited_outcome(),
            "no successful Edit",
        ),
        (
            [rec("Edit", "no match", error=True, file_path=LOG, old_string="zzz", new_string="y")],
            edited_outcome(),
            "no successful Edit",
        ),
        ([edit(old="")], edited_outcome(), "blank old_string"),
        ([edit(old=" \n\t")], edited_outcome(), "blank old_string"),
        ([edit(new="")], edited_outcome(), "empty new_string"),
        (
            [
                rec("Write", file_path="/Resources/tea.md", content="# Tea\n- green\n"),
                edit(old="- green", new="- green\n- oolong", path="/Resources/tea.md"),
            ],
            pkm_outcome(before={}, after={"Resources/tea.md": "# Tea\n- green\n- oolong\n"}),
            "new file",
        ),
        (
            # the first Edit decides: a later Edit of an existing file is not looked at
            [
                edit(old="", new="# Tea", path="/Resources/tea.md"),
                edit(),
            ],
            edited_outcome(),
            "blank old_string",
        ),
    ],
    ids=[
        "skipped", "no calls", "no Edit", "Write-based append", "only a failed Edit",
        "empty old_string", "blank old_string", "empty new_string", "Edit of a new file",
        "first Edit is not judgeable",
    ],
)
async def test_coherence_null_cases(
    calls: list[ToolCallRecord], outcome: dict[str, Any], why: str
) -> None:
    judge = judge_of(COHERENT)
    s = await grade_coherence(judge, calls, outcome)
    assert (s.value, s.passed) == (None, None)
    assert why in s.rationale
    assert judge.calls == []


async def test_coherence_without_before_contents_is_judged() -> None:
    # issue 21: without file_contents_before the original cannot tell a new file; it judges
    out = pkm_outcome(before={}, after={"Resources/tea.md": "# Tea\n- green\n- oolong\n"})
    del out["file_contents_before"]
    calls = [edit(old="- green", new="- green\n- oolong", path="/Resources/tea.md")]
    judge = judge_of(COHERENT)
    s = await grade_coherence(judge, calls, out)
    assert s.value == pytest.approx(0.9) and len(judge.calls) == 1
    existing = edited_outcome()
    del existing["file_contents_before"]
    s = await grade_coherence(judge_of(COHERENT), [edit()], existing)
    assert s.value == pytest.approx(0.9)
