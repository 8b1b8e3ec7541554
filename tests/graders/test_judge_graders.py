"""LLM-judge graders with a scripted judge, plus reply parsing, rubric rendering and the
search for the append to judge. The original-compatibility table is tests/compat."""

from __future__ import annotations

import json
from typing import Any

import pytest

from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.agents.transcript import ToolCallRecord
from promptloop.graders import Score, run_grader
from promptloop.graders.appends import EditCase, find_append, first_edit, write_insertions
from promptloop.graders.judge import (
    dimension_value,
    load_rubric,
    parse_dimensions,
    parse_judge_json,
    render,
)
from tests.graders.builders import FACT, ctx, pkm_outcome, rec, skipped_outcome

LOG = "Areas/Health/sleep.md"
ORIGINAL = (
    "# Sleep log\n\n## March\n- 03-01: 7h, fine\n- 03-05: 5h, {late} screen time\n\n"
    "## Notes\nCaffeine after 3pm hurts.\n"
)
INSIGHT_JSON = {"groundedness": 0.9, "non_redundancy": 0.6, "expression_quality": 0.6}


def judge_of(*texts: str) -> ScriptedModel:
    return ScriptedModel([reply(t) for t in texts], model_id="scripted:judge")


def insight_call(
    text: str = "Third late-coffee night this month; your log ties it to 5h sleep.",
) -> ToolCallRecord:
    return rec(
        "update_timeline_card_insight",
        fact_id=FACT,
        insight_text=text,
        related_fact_ids=["2026/03/05.md#ts_1"],
    )


async def grade(
    name: str, outcome: dict[str, Any], calls: list[ToolCallRecord], judge: ScriptedModel | None
) -> Score:
    return await run_grader(name, {}, ctx(outcome, calls, judge=judge))


# --- parsing and rendering -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        # SPEC 8: first `{` to last `}`, so two objects or prose braces are unparseable
        ('Sure! Here you go: {"a": {"b": 2}} and {"c": 3}', None),
        ('prose {not json} then {"a": 1}', None),
        ('Sure! Here you go: {"a": {"b": 2}} Thanks.', {"a": {"b": 2}}),
        ('{"a": NaN}', None),
        (
            '{"x": 0}\n```json\n{"a": 1, "rationale": "uses {braces}"}\n```',
            {"a": 1, "rationale": "uses {braces}"},
        ),
        ('```\n{"a": 2}\n```', {"a": 2}),
        ("no json at all", None),
        ("[1, 2]", None),
        ('```\nno json\n```\n```json\n{"a": 1}\n```', None),  # only the first fence
    ],
)
def test_parse_judge_json(text: str, expected: dict[str, Any] | None) -> None:
    assert parse_judge_json(text) == expected


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (0.7, 0.7),
        (3, 1.0),
        (-0.2, 0.0),
        ("0.4", 0.4),
        ("Infinity", 1.0),
        ("inf", None),
        (" Unknown ", None),
        ("high", None),
        (None, None),
        (True, None),
        (float("nan"), None),
    ],
)
def test_dimension_value(raw: Any, value: float | None) -> None:
    assert dimension_value(raw) == value


def test_parse_dimensions_treats_missing_keys_as_unknown() -> None:
    # SPEC 8: a missing dimension is skipped like "unknown" (no key at all -> no known dims)
    assert parse_dimensions({"score": 1}, ("voice",)) == {"voice": None}
    assert parse_dimensions({"voice": 1}, ("voice", "structure")) == {
        "voice": 1.0,
        "structure": None,
    }


def test_render_is_single_pass_and_strict() -> None:
    out = render("A {{x}} B {{ y }}", {"x": "{{y}} {a}", "y": "Y"})
    assert out == "A {{y}} {a} B Y"
    with pytest.raises(ValueError, match="unknown \\['y'\\]"):
        render("{{x}} {{y}}", {"x": "1"})
    with pytest.raises(ValueError, match="unused \\['z'\\]"):
        render("{{x}}", {"x": "1", "z": "2"})


@pytest.mark.parametrize(
    ("rubric", "markers", "keys"),
    [
        # the default rubrics show what the original judges saw; _plus ones show more
        (
            "insight_quality",
            ("fact_id", "input", "insight", "target_paths"),
            ("groundedness", "non_redundancy", "expression_quality"),
        ),
        (
            "insight_quality_plus",
            ("input", "insight", "written_files", "consulted", "related_facts", "fact_id"),
            ("groundedness", "non_redundancy", "expression_quality"),
        ),
        ("append_coherence", ("path", "old_string", "new_string", "fact_id"), ("coherence",)),
        (
            "append_coherence_plus",
            ("path", "original", "change", "fact_id"),
            ("voice", "formatting", "structure"),
        ),
    ],
)
def test_rubrics_have_the_markers_the_graders_fill(
    rubric: str, markers: tuple[str, ...], keys: tuple[str, ...]
) -> None:
    text = load_rubric(rubric)
    for marker in markers:
        assert "{{" + marker + "}}" in text
    for key in (*keys, "rationale"):
        assert f"`{key}`" in text


# --- pkm_insight_quality ---------------------------------------------------------------


async def test_insight_plus_judged_with_evidence_in_prompt() -> None:
    # the files and reads in the prompt are ours: the default judge sees only paths (compat)
    judge = judge_of(json.dumps({**INSIGHT_JSON, "rationale": "ties to the log"}))
    after = {LOG: ORIGINAL + f"- 03-14: 6.5h, coffee 4pm <!-- fact_id: {FACT} -->\n"}
    calls = [rec("Read", ORIGINAL, file_path=f"/{LOG}"), insight_call()]
    s = await grade(
        "pkm_insight_quality_plus", pkm_outcome(before={LOG: ORIGINAL}, after=after), calls, judge
    )
    assert s.value == pytest.approx(0.7) and s.passed is True
    assert "groundedness=0.90" in s.rationale and "ties to the log" in s.rationale
    assert s.metadata["judge_model"] == "scripted:judge" and s.metadata["threshold"] == 0.6
    (request,) = judge.calls
    assert request.settings is not None and request.settings.temperature == 0.0
    assert request.settings.max_tokens == 600
    prompt = request.messages[0].content
    assert "Third late-coffee night" in prompt and "Slept 6.5 hours" in prompt
    assert "Caffeine after 3pm hurts." in prompt  # what it read and wrote
    assert "2026/03/05.md#ts_1" in prompt and "{late}" in prompt


async def test_insight_unknown_dims_are_left_out_of_the_mean() -> None:
    judge = judge_of(
        '```json\n{"groundedness": "unknown", "non_redundancy": 0.4, '
        '"expression_quality": 0.5, "rationale": "paraphrase"}\n```'
    )
    s = await grade("pkm_insight_quality", pkm_outcome(), [insight_call()], judge)
    assert s.value == pytest.approx(0.45) and s.passed is False
    assert s.metadata["dimensions"]["groundedness"] is None
    assert "groundedness=unknown" in s.rationale
    assert [a.description for a in s.assertions] == [
        "non_redundancy >= 0.6",
        "expression_quality >= 0.6",
    ]


async def test_insight_clamps_out_of_range_numbers() -> None:
    judge = judge_of('{"groundedness": 8, "non_redundancy": 1.2, "expression_quality": -1}')
    s = await grade("pkm_insight_quality", pkm_outcome(), [insight_call()], judge)
    assert s.value == pytest.approx(2 / 3)


async def test_insight_all_unknown_or_unparseable_is_null() -> None:
    unknown = '{"groundedness": "unknown", "non_redundancy": "unknown", "expression_quality": null}'
    s = await grade("pkm_insight_quality", pkm_outcome(), [insight_call()], judge_of(unknown))
    assert s.value is None and "could not decide" in s.rationale
    s = await grade(
        "pkm_insight_quality", pkm_outcome(), [insight_call()], judge_of("Looks great!")
    )
    assert (s.value, s.passed) == (None, None)
    assert "not JSON" in s.rationale and s.metadata["judge_reply"] == "Looks great!"


async def test_insight_null_when_skipped_and_zero_without_insight_call() -> None:
    judge = judge_of()
    s = await grade("pkm_insight_quality", skipped_outcome(), [insight_call()], judge)
    assert s.value is None
    failed_call = rec("update_timeline_card_insight", "bad fact id", error=True, insight_text="x")
    s = await grade("pkm_insight_quality", pkm_outcome(), [failed_call], judge)
    assert (s.value, s.passed) == (0.0, False)
    assert judge.calls == []


async def test_judges_without_a_judge_model_are_null() -> None:
    s = await grade("pkm_insight_quality", pkm_outcome(), [insight_call()], None)
    assert (s.value, s.rationale) == (None, "no judge model configured")
    out = pkm_outcome(before={LOG: ORIGINAL}, after={LOG: ORIGINAL + "x\n"})
    calls = [rec("Edit", file_path=LOG, old_string="fine", new_string="fine, rested")]
    s = await grade("pkm_append_coherence", out, calls, None)
    assert (s.value, s.rationale) == (None, "no judge model configured")


async def test_judge_infrastructure_error_becomes_null_score() -> None:
    s = await grade("pkm_insight_quality", pkm_outcome(), [insight_call()], judge_of())
    assert s.value is None and "ScriptExhaustedError" in s.rationale


# --- pkm_append_coherence_plus ---------------------------------------------------------
# Whole-file context, Write-based appends and three dimensions are ours, so these tests moved
# from pkm_append_coherence to the additive _plus grader (the original: tests/compat).

COHERENT = '{"voice": 1, "formatting": 0.8, "structure": 0.6, "rationale": "fits the list"}'


async def test_coherence_judge_sees_the_whole_original_file_for_an_edit() -> None:
    judge = judge_of(COHERENT)
    new = "- 03-05: 5h, {late} screen time\n- 03-14: 6.5h, coffee at 4pm"
    calls = [
        rec("Edit", "created", file_path="/Areas/Health/new.md", old_string="", new_string="hi"),
        rec(
            "Edit",
            file_path=f"/{LOG}",
            old_string="- 03-05: 5h, {late} screen time",
            new_string=new,
        ),
    ]
    out = pkm_outcome(
        before={LOG: ORIGINAL}, after={LOG: ORIGINAL.replace("time\n", "time\n- 03-14\n")}
    )
    s = await grade("pkm_append_coherence_plus", out, calls, judge)
    assert s.value == pytest.approx(0.8) and s.passed is True
    assert s.metadata["tool"] == "Edit" and s.metadata["path"] == LOG
    prompt = judge.calls[0].messages[0].content
    assert ORIGINAL in prompt  # the whole file, not only old_string
    assert "coffee at 4pm" in prompt and f"<!-- fact_id: {FACT} -->" in prompt


async def test_coherence_judges_a_write_based_append() -> None:
    judge = judge_of('```json\n{"voice": 0.2, "formatting": 0.4, "structure": "unknown"}\n```')
    appended = ORIGINAL + "\n## Summary Report\nThe user reported 6.5 hours.\n"
    calls = [rec("Write", file_path=LOG, content=appended)]
    out = pkm_outcome(before={LOG: ORIGINAL}, after={LOG: appended})
    s = await grade("pkm_append_coherence_plus", out, calls, judge)
    assert s.value == pytest.approx(0.3) and s.passed is False
    assert s.metadata["tool"] == "Write"
    assert "The user reported 6.5 hours." in s.metadata["new_text"]
    prompt = judge.calls[0].messages[0].content
    assert ORIGINAL in prompt and "after original line 8" in prompt


@pytest.mark.parametrize(
    ("outcome", "calls", "why"),
    [
        (skipped_outcome(), [], "skipped"),
        (
            pkm_outcome(before={LOG: ORIGINAL}),
            [rec("Read", file_path=LOG)],
            "no successful Write/Edit",
        ),
        (
            pkm_outcome(before={}, after={"Resources/tea.md": "tea"}),
            [rec("Write", file_path="/Resources/tea.md", content="tea")],
            "Write Resources/tea.md: new file",
        ),
        (
            pkm_outcome(before={LOG: ORIGINAL}),
            [rec("Write", file_path=LOG, content="# Sleep\nall replaced\n")],
            "not an append",
        ),
        (
            pkm_outcome(before={LOG: ORIGINAL}),
            [rec("Edit", "no match", error=True, file_path=LOG, old_string="zzz", new_string="y")],
            "no successful Write/Edit",
        ),
    ],
)
async def test_coherence_null_cases(
    outcome: dict[str, Any], calls: list[ToolCallRecord], why: str
) -> None:
    judge = judge_of(COHERENT)
    s = await grade("pkm_append_coherence_plus", outcome, calls, judge)
    assert (s.value, s.passed) == (None, None)
    assert why in s.rationale
    assert judge.calls == []


async def test_coherence_without_before_contents_is_a_null_with_reason() -> None:
    out = pkm_outcome()
    del out["file_contents_before"]
    calls = [rec("Edit", file_path=LOG, old_string="a")]
    s = await grade("pkm_append_coherence_plus", out, calls, None)
    assert s.value is None and "file_contents_before" in s.rationale


# --- finding the append ----------------------------------------------------------------


def test_write_insertions_in_the_middle_and_containment_fallback() -> None:
    middle = ORIGINAL.replace("screen time\n", "screen time\n- 03-14: 6.5h\n")
    (ins,) = write_insertions(ORIGINAL, middle) or ()
    assert (ins.after_line, ins.text) == (5, "- 03-14: 6.5h")
    # the original's last line got text glued to it: lines differ, but the text is contained
    glued = ORIGINAL.rstrip("\n") + " (and again on 03-14)\n"
    found = write_insertions(ORIGINAL, glued)
    assert found is not None and found[-1].text == " (and again on 03-14)"
    assert write_insertions(ORIGINAL, ORIGINAL) is None
    assert write_insertions(ORIGINAL, "fresh text") is None


def test_find_append_matches_paths_case_insensitively_and_skips_blank_files() -> None:
    before = {LOG: ORIGINAL, "Areas/empty.md": "  \n"}
    calls = [
        rec("Write", file_path="/Areas/empty.md", content="now text"),
        rec("Edit", file_path="/areas/health/SLEEP.md", old_string="fine", new_string="fine!"),
    ]
    search = find_append(calls, before)
    assert search.case is not None and search.case.path == LOG and search.case.original == ORIGINAL
    assert search.notes == ["Write Areas/empty.md: new file"]


def test_first_edit_picks_the_first_successful_edit_and_says_why_not() -> None:
    before = {LOG: ORIGINAL}
    good = rec("Edit", file_path="/areas/health/SLEEP.md", old_string="fine", new_string="ok")
    failed = rec("Edit", "no match", error=True, file_path=LOG, old_string="x", new_string="y")
    pick = first_edit([rec("Write", file_path=LOG, content="x"), failed, good], before)
    assert pick.case == EditCase(path="areas/health/SLEEP.md", old_string="fine", new_string="ok")
    assert first_edit([], before).reason == "no successful Edit"
    new = rec("Edit", file_path="/New.md", old_string="a", new_string="b")
    assert "new file" in first_edit([new, good], before).reason
    # without the contents before the run the original cannot tell a new file: it judges
    assert first_edit([new], None).case is not None


async def test_insight_plus_follows_the_same_zero_and_null_rules() -> None:
    judge = judge_of()
    s = await grade("pkm_insight_quality_plus", pkm_outcome(), [insight_call("")], judge)
    assert (s.value, s.passed) == (0.0, False)
    s = await grade("pkm_insight_quality_plus", skipped_outcome(), [insight_call()], judge)
    assert s.value is None and judge.calls == []
