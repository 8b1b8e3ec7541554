"""Card graders on hand-built outcomes."""

from __future__ import annotations

from typing import Any

import pytest

from promptloop.graders import Score, run_grader
from promptloop.graders.card import visible_card_fields
from tests.graders.builders import card_outcome, ctx


async def grade(name: str, config: dict[str, Any], **overrides: Any) -> Score:
    return await run_grader(name, config, ctx(card_outcome(**overrides), agent="card_agent"))


async def test_completion_all_five_assertions_pass() -> None:
    s = await grade("card_completion", {})
    assert (s.value, s.passed, len(s.assertions)) == (1.0, True, 5)
    assert s.rationale == "all 5 check(s) passed"


async def test_completion_partial_and_failure_reason() -> None:
    s = await grade(
        "card_completion",
        {},
        card_save_tool_called=False,
        status="pending",
        is_complete=False,
        missing_requirements=["matching_successful_save_timeline_card_tool_call"],
        failure_reason="card incomplete: no save",
    )
    assert s.value == pytest.approx(2 / 5) and s.passed is False
    failed = [a.description for a in s.assertions if not a.passed]
    assert failed == [
        "save_timeline_card was called successfully",
        "card status is completed",
        "run is complete with no missing requirements",
    ]
    assert "failure_reason: card incomplete: no save" in s.rationale


async def test_completion_missing_requirements_alone_fails() -> None:
    s = await grade("card_completion", {}, missing_requirements=["title_present"])
    assert s.value == pytest.approx(4 / 5) and s.passed is False


@pytest.mark.parametrize(
    ("ids", "expected", "value", "passed"),
    [
        (["metric", "snippet"], ["metric"], 1.0, True),
        (["metric", "snippet"], ["snippet", "quote"], 0.5, True),
        (["metric", "snippet"], ["mood"], 0.0, False),
        ([], ["metric"], 0.0, False),
        # SPEC §8: template ids are compared exactly, no trimming or case folding
        (["Metric"], [" metric "], 0.0, False),
        (["metric"], [], 0.0, False),
    ],
)
async def test_template_choice(
    ids: list[str], expected: list[str], value: float, passed: bool
) -> None:
    s = await grade("card_template_choice", {"expected_template_ids": expected}, template_ids=ids)
    assert (s.value, s.passed) == (value, passed)
    if not ids:
        assert s.rationale == "no template saved"
    if not expected:
        assert s.rationale == "no expected_template_ids configured"


async def test_template_choice_reads_only_template_ids() -> None:
    # SPEC §8: only the `template_ids` outcome key is read (was: fell back to the card dict)
    outcome = card_outcome()
    del outcome["template_ids"]
    s = await run_grader(
        "card_template_choice", {"expected_template_ids": ["snippet"]}, ctx(outcome)
    )
    assert s.value == 0.0


async def test_must_contain_scans_whole_yaml_case_insensitively() -> None:
    s = await grade("card_must_contain", {"substrings": ["LATE COFFEE", "lisbon", "tokyo"]})
    assert s.value == pytest.approx(2 / 3) and s.passed is False
    assert [a.passed for a in s.assertions] == [True, True, False]
    # SPEC weakness kept for compatibility: "1773" matches the timestamp.
    s = await grade("card_must_contain", {"substrings": ["1773"]})
    assert s.passed is True


async def test_must_contain_lower_cases_and_empty_list_scores_zero() -> None:
    s = await grade("card_must_contain", {"substrings": []})
    assert (s.value, s.passed, s.rationale) == (0.0, False, "no substrings configured")
    # str.lower, not casefold (SPEC §8): "STRASSE" does not find "Straße"
    s = await grade("card_must_contain", {"substrings": ["STRASSE", "STRAßE"]},
                    card_yaml_blob="address: Hauptstraße 1\n")
    assert [a.passed for a in s.assertions] == [False, True]


async def test_template_data_valid_applies_the_strict_checks() -> None:
    s = await grade("card_template_data_valid", {})
    assert (s.value, s.passed) == (1.0, True)
    bad = card_outcome()["card"] | {"ui_configs": [
        {"template_id": "mood", "data": {"mood_name": "Calm", "color_hex": "blue"}},
        {"template_id": "snippet", "data": {"text": "ok"}},
        {"template_id": "Event", "data": {}},
    ]}
    s = await grade("card_template_data_valid", {}, card=bad)
    assert s.value == pytest.approx(1 / 3) and s.passed is False
    assert "color_hex must be a hex colour" in str(s.assertions[0].actual)
    assert s.assertions[2].actual == ["unknown template_id 'Event'"]
    s = await grade("card_template_data_valid", {}, card={"ui_configs": []})
    assert (s.value, s.passed) == (None, None)


async def test_must_contain_without_card_fails() -> None:
    s = await grade("card_must_contain", {"substrings": ["coffee"]}, card_yaml_blob=None)
    assert (s.value, s.passed) == (0.0, False)


def test_visible_fields_exclude_bookkeeping_keys() -> None:
    fields = visible_card_fields(card_outcome()["card"])
    assert fields == [
        "Short night",
        "Sleep",
        "6.5",
        "Slept badly after late coffee",
        "Lisbon",
        "Health",
    ]
    assert visible_card_fields({"tags": ["Trip", None], "ui_configs": ["bad"]}) == ["Trip"]


async def test_visible_must_contain_ignores_timestamp_and_fact_id() -> None:
    s = await grade("card_visible_must_contain", {"substrings": ["1773", "ts_2", "completed"]})
    assert (s.value, s.passed) == (0.0, False)
    s = await grade("card_visible_must_contain", {"substrings": ["6.5", "short NIGHT", "health"]})
    assert (s.value, s.passed) == (1.0, True)
    assert "Lisbon" in s.metadata["visible_fields"]


async def test_visible_must_contain_parses_yaml_when_card_missing() -> None:
    s = await grade("card_visible_must_contain", {"substrings": ["late coffee"]}, card=None)
    assert s.passed is True


async def test_must_not_contain() -> None:
    s = await grade("card_must_not_contain", {"substrings": ["tokyo", "1773", "fact_id"]})
    assert (s.value, s.passed) == (1.0, True)
    s = await grade("card_must_not_contain", {"substrings": ["coffee", "tokyo"]})
    assert (s.value, s.passed) == (0.5, False)
    assert s.assertions[0].actual == ["Slept badly after late coffee"]


async def test_must_not_contain_is_null_without_a_saved_card() -> None:
    s = await grade("card_must_not_contain", {"substrings": ["x"]}, card_save_tool_called=False)
    assert (s.value, s.passed) == (None, None)
    assert "no card was saved" in s.rationale
