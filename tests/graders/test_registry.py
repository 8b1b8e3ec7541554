"""Score types, the grader registry, config validation, run_grader and trial_passed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from promptloop.graders import (
    Assertion,
    GraderConfigError,
    Score,
    UnknownGraderError,
    config_warnings,
    get_grader,
    known_graders,
    run_grader,
    trial_passed,
    validate_config,
)
from promptloop.graders.base import assertion_score, pkm_relative, routing_path
from promptloop.graders.card import SubstringsConfig
from promptloop.graders.pkm import NoRedundantFileConfig
from tests.graders.builders import card_outcome, ctx, pkm_outcome

CONTRACT = {
    "card_completion": ("code", 1.0, "card_agent"),
    "card_template_choice": ("code", 0.5, "card_agent"),
    "card_must_contain": ("code", 1.0, "card_agent"),
    "card_visible_must_contain": ("code", 1.0, "card_agent"),
    "card_must_not_contain": ("code", 1.0, "card_agent"),
    "card_template_data_valid": ("code", 1.0, "card_agent"),
    "pkm_completion": ("code", 1.0, "pkm_agent"),
    "pkm_routed_correctly": ("code", 0.5, "pkm_agent"),
    "pkm_no_overwrite": ("code", 1.0, "pkm_agent"),
    "pkm_read_before_write": ("code", 1.0, "pkm_agent"),
    "pkm_insight_quality": ("model", 0.6, "pkm_agent"),
    "pkm_append_coherence": ("model", 0.6, "pkm_agent"),
    # additive judges of ours (richer context); the two above stay the original's
    "pkm_insight_quality_plus": ("model", 0.6, "pkm_agent"),
    "pkm_append_coherence_plus": ("model", 0.6, "pkm_agent"),
    "terminal_path": ("code", 1.0, "pkm_agent"),
    "pkm_no_redundant_file": ("code", 1.0, "pkm_agent"),
    "pkm_fact_id_placement": ("code", 1.0, "pkm_agent"),
    # general graders any agent may name (graders/general.py)
    "json_path": ("code", 1.0, None),
    "json_schema": ("code", 1.0, None),
    "rubric_judge": ("model", 0.6, None),
    "command": ("code", 1.0, None),
}


def score(value: float | None, passed: bool | None) -> Score:
    return Score(grader="g", value=value, passed=passed)


def test_registry_matches_the_contract() -> None:
    assert known_graders() == sorted(CONTRACT)
    for name, (kind, threshold, agent) in CONTRACT.items():
        spec = get_grader(name)
        assert (spec.kind, spec.threshold, spec.agent) == (kind, threshold, agent), name
        assert spec.description


def test_unknown_grader_lists_known_names_and_suggests() -> None:
    with pytest.raises(UnknownGraderError) as err:
        get_grader("card_complete")
    message = str(err.value)
    assert "Did you mean 'card_completion'" in message
    assert "pkm_fact_id_placement" in message and "terminal_path" in message


def test_validate_config_accepts_good_configs() -> None:
    parsed = validate_config("card_must_contain", {"substrings": ["coffee"]})
    assert isinstance(parsed, SubstringsConfig) and parsed.substrings == ["coffee"]
    assert validate_config("card_completion", None) == validate_config("card_completion", {})
    redundant = validate_config("pkm_no_redundant_file", {"expected_files": ["a.md"]})
    assert isinstance(redundant, NoRedundantFileConfig) and redundant.max_new_files == 0
    assert validate_config("card_must_contain", parsed) is parsed


def test_unknown_config_keys_are_ignored_and_warned() -> None:
    # SPEC §8: unknown grader config keys are ignored, listed as warnings, never errors
    assert validate_config("card_completion", {"strict": True}) == validate_config(
        "card_completion", {}
    )
    assert config_warnings("card_completion", {"strict": True}) == [
        "grader 'card_completion': unknown config key 'strict' ignored"
    ]
    assert config_warnings("card_must_contain", {"substrings": ["x"]}) == []
    assert config_warnings("card_completion", None) == []


@pytest.mark.parametrize(
    ("name", "config", "fragment"),
    [
        # SPEC §8: unknown keys are ignored (a typo then misses the required key), an empty
        # expected_template_ids list loads (scores 0.0)
        ("card_template_choice", {"expected_template_id": ["link"]}, "'expected_template_ids'"),
        ("card_template_choice", {}, "'expected_template_ids'"),
        # docs/compat.md: an empty seed_marker is valid (found in every file); a missing one not
        ("pkm_no_overwrite", {}, "'seed_marker'"),
        ("pkm_no_redundant_file", {"expected_files": ["a"], "max_new_files": -1}, "max_new_files"),
        ("terminal_path", {"expected": "persisted"}, "'expected'"),
        # docs/compat.md: pkm_routed_correctly needs expected_buckets
        ("pkm_routed_correctly", {"expected_files": ["a.md"]}, "'expected_buckets'"),
        ("card_must_contain", ["coffee"], "config must be a JSON object"),
    ],
)
def test_validate_config_errors_name_grader_and_field(
    name: str, config: object, fragment: str
) -> None:
    with pytest.raises(GraderConfigError) as err:
        validate_config(name, config)  # type: ignore[arg-type]
    assert f"grader {name!r}" in str(err.value)
    assert fragment in str(err.value)


def test_score_invariants() -> None:
    with pytest.raises(ValidationError):
        score(1.5, True)
    with pytest.raises(ValidationError):
        score(None, True)
    with pytest.raises(ValidationError):
        score(0.5, None)
    assert not score(None, None).decided


def test_assertion_score_is_fraction_with_threshold_and_rationale() -> None:
    checks = [
        Assertion(description="a", passed=True),
        Assertion(description="b", passed=False, actual=1, expected=2),
        Assertion(description="c", passed=True),
    ]
    s = assertion_score("g", checks, 0.6)
    assert s.value == pytest.approx(2 / 3) and s.passed is True
    assert "failed 1/3: b (actual: 1; expected: 2)" == s.rationale
    assert s.metadata["threshold"] == 0.6
    assert assertion_score("g", checks, 1.0).passed is False
    with pytest.raises(ValueError):
        assertion_score("g", [], 1.0)


def test_path_helpers() -> None:
    assert pkm_relative("/Areas/Health/../Health/sleep.md") == "Areas/Health/sleep.md"
    assert pkm_relative("//Projects/x.md") == "Projects/x.md"
    assert pkm_relative("") == ""
    assert routing_path("/areas/health/sleep.md") == "Areas/health/sleep.md"
    assert routing_path("resources") == "Resources"


async def test_run_grader_turns_exceptions_into_null_scores() -> None:
    # terminal_path without config or reference expected_outcome raises inside the grader.
    s = await run_grader("terminal_path", {}, ctx(pkm_outcome()))
    assert s.value is None and s.passed is None
    assert s.rationale.startswith("grader raised ValueError: terminal_path needs")
    assert s.metadata["error_type"] == "ValueError"
    assert s.grader == "terminal_path"


async def test_run_grader_raises_for_configuration_problems() -> None:
    with pytest.raises(UnknownGraderError):
        await run_grader("nope", {}, ctx(card_outcome(), agent="card_agent"))
    with pytest.raises(GraderConfigError):
        await run_grader("card_must_contain", {"substring": ["x"]}, ctx(card_outcome()))


async def test_run_grader_scores_a_trial() -> None:
    s = await run_grader("card_completion", {}, ctx(card_outcome(), agent="card_agent"))
    assert (s.grader, s.value, s.passed) == ("card_completion", 1.0, True)


def test_trial_passed_rules() -> None:
    # docs/compat.md: every decided grader passed, nothing else (completion is a grader of its
    # own, so an incomplete run fails through it, and no decided score is not a failure)
    ok, bad, null = score(1.0, True), score(0.2, False), score(None, None)
    half = Score(grader="g", value=0.5, passed=False)
    assert trial_passed([ok, null])
    assert not trial_passed([ok, bad])
    assert trial_passed([null, null]) and trial_passed([])
    # a threshold below 1.0 applies to the trial's mean decided score, not to each verdict
    assert trial_passed([ok, half, null], threshold=0.75)
    assert not trial_passed([ok, bad], threshold=0.75)  # mean 0.6
    assert trial_passed([ok, bad], threshold=0.6)
    assert not trial_passed([null], threshold=0.5)  # no decided score: no mean to reach
