"""PKM code graders on hand-built outcomes and transcripts."""

from __future__ import annotations

from typing import Any

import pytest

from promptloop.agents.transcript import ToolCallRecord
from promptloop.graders import Score, run_grader
from promptloop.graders.registry import GraderConfigError
from tests.graders.builders import FACT, ctx, pkm_outcome, rec, skipped_outcome

SLEEP = "Areas/Health/sleep.md"
SEED = "# Sleep log\n\n- 2026-03-01: 7h, fine <!-- seed:SLEEP-1 -->\n"
MARK = f"<!-- fact_id: {FACT} -->"


def persisted(files: dict[str, str] | None = None) -> dict[str, Any]:
    """Outcome whose PKM starts with the seeded sleep log and ends with `files` on top."""
    return pkm_outcome(before={SLEEP: SEED}, after={SLEEP: SEED, **(files or {})})


async def grade(
    name: str,
    config: dict[str, Any],
    outcome: dict[str, Any],
    calls: list[ToolCallRecord] | None = None,
    expected: dict[str, Any] | None = None,
) -> Score:
    return await run_grader(name, config, ctx(outcome, calls, expected_outcome=expected))


# --- pkm_completion ---------------------------------------------------------------------


async def test_completion_persist_and_skip_both_pass() -> None:
    assert (await grade("pkm_completion", {}, persisted())).value == 1.0
    assert (await grade("pkm_completion", {}, skipped_outcome())).value == 1.0


async def test_completion_skip_with_mutation_fails_one_check() -> None:
    s = await grade("pkm_completion", {}, skipped_outcome(successful_pkm_mutation=True))
    assert s.value == pytest.approx(4 / 5) and s.passed is False
    assert "did not both skip and mutate PKM" in s.rationale


async def test_completion_incomplete_persist() -> None:
    out = pkm_outcome(is_complete=False, updated_insight=False, missing_requirements=["insight"])
    s = await grade("pkm_completion", {}, out)
    assert s.value == pytest.approx(2 / 5)


# --- pkm_routed_correctly ---------------------------------------------------------------


# docs/compat.md: pkm_routed_correctly needs expected_buckets, so every config names them.
@pytest.mark.parametrize(
    ("config", "files", "value"),
    [
        (
            {"expected_buckets": ["Areas"], "expected_files": [SLEEP]},
            {SLEEP: SEED + "- new\n"},
            1.0,
        ),
        ({"expected_files": [SLEEP], "expected_buckets": ["Areas/Health"]}, {SLEEP: "x"}, 1.0),
        # bucket hit counts fully only when no files were configured
        ({"expected_buckets": ["Areas/Health"]}, {"Areas/Health/coffee.md": "c"}, 1.0),
        (
            {"expected_buckets": ["Areas/Health"], "expected_files": [SLEEP]},
            {"Areas/Health/coffee.md": "c"},
            0.5,
        ),
        # expected_files: null is [] (docs/compat.md)
        (
            {"expected_buckets": ["Areas/Health"], "expected_files": None},
            {"Areas/Health/coffee.md": "c"},
            1.0,
        ),
        # string prefix: "Areas/Health" also covers "Areas/HealthLog"
        ({"expected_buckets": ["Areas/Health"]}, {"Areas/HealthLog/x.md": "c"}, 1.0),
        ({"expected_buckets": ["Areas/Health"]}, {"Resources/coffee.md": "c"}, 0.0),
        (
            {"expected_buckets": ["Resources"], "expected_files": [SLEEP]},
            {"Areas/Health/coffee.md": "c"},
            0.0,
        ),
        ({"expected_buckets": ["Projects"]}, {}, 0.0),
        # an empty bucket list is accepted: only expected files can score
        ({"expected_buckets": [], "expected_files": [SLEEP]}, {SLEEP: "x"}, 1.0),
        ({"expected_buckets": []}, {"Areas/Health/coffee.md": "c"}, 0.0),
    ],
)
async def test_routing_values(config: dict[str, Any], files: dict[str, str], value: float) -> None:
    after = {SLEEP: SEED, **files}
    s = await grade("pkm_routed_correctly", config, pkm_outcome(before={SLEEP: SEED}, after=after))
    assert s.value == value
    assert s.passed is (value >= 0.5)


async def test_routing_normalises_leading_slash_and_first_segment() -> None:
    out = pkm_outcome(before={}, after={"areas/Health/sleep.md": "x"})
    for config in (
        {"expected_buckets": ["Projects"], "expected_files": ["/Areas/Health/sleep.md"]},
        {"expected_buckets": ["Projects"], "expected_files": ["areas/Health/sleep.md"]},
        {"expected_buckets": ["/Areas/Health"]},
    ):
        assert (await grade("pkm_routed_correctly", config, out)).value == 1.0, config
    # only the first letter is capitalised; deeper segments stay case-sensitive
    s = await grade("pkm_routed_correctly", {"expected_buckets": ["Areas/health"]}, out)
    assert s.value == 0.0


async def test_routing_normalisation_is_the_originals() -> None:
    # docs/compat.md: exactly one leading '/' is stripped, and the first letter is capitalised
    # only when the (stripped) path contains a '/'.
    top = pkm_outcome(before={}, after={"notes.md": "x"})
    s = await grade("pkm_routed_correctly", {"expected_buckets": ["Notes"]}, top)
    assert s.value == 0.0  # "notes.md" has no '/': not capitalised
    s = await grade("pkm_routed_correctly", {"expected_buckets": ["notes"]}, top)
    assert s.value == 1.0
    double = pkm_outcome(workspace_diff={"created": ["//Areas/x.md"], "modified": []})
    s = await grade("pkm_routed_correctly", {"expected_buckets": ["Areas"]}, double)
    assert s.value == 0.0  # one '/' stripped: "/Areas/x.md" does not start with "Areas"


async def test_routing_needs_expected_buckets_and_ignores_unknown_keys() -> None:
    with pytest.raises(GraderConfigError, match="expected_buckets"):
        await grade("pkm_routed_correctly", {"expected_files": [SLEEP]}, persisted())
    config = {"expected_buckets": ["Areas"], "weight": 2}
    s = await grade("pkm_routed_correctly", config, persisted({SLEEP: "x"}))
    assert s.value == 1.0


async def test_routing_diff_may_be_a_plain_dict() -> None:
    out = pkm_outcome(workspace_diff={"created": ["/Projects/move.md"], "modified": []})
    s = await grade("pkm_routed_correctly", {"expected_buckets": ["Projects"]}, out)
    assert s.value == 1.0


async def test_routing_is_null_when_skipped() -> None:
    s = await grade("pkm_routed_correctly", {"expected_buckets": ["Areas"]}, skipped_outcome())
    assert (s.value, s.passed) == (None, None)


# --- pkm_no_overwrite -------------------------------------------------------------------


async def test_no_overwrite() -> None:
    ok = await grade("pkm_no_overwrite", {"seed_marker": "seed:SLEEP-1"}, persisted())
    assert (ok.value, ok.passed) == (1.0, True)
    gone = pkm_outcome(before={SLEEP: SEED}, after={SLEEP: "# Sleep\n- rewritten\n"})
    bad = await grade("pkm_no_overwrite", {"seed_marker": "seed:SLEEP-1"}, gone)
    assert (bad.value, bad.passed) == (0.0, False)


async def test_no_overwrite_empty_marker_is_found_in_every_file() -> None:
    # docs/compat.md: an empty seed_marker is found in every file
    gone = pkm_outcome(before={SLEEP: SEED}, after={SLEEP: "# Sleep\n- rewritten\n"})
    s = await grade("pkm_no_overwrite", {"seed_marker": ""}, gone)
    assert (s.value, s.passed) == (1.0, True)


# --- pkm_read_before_write --------------------------------------------------------------

READ_CFG = {"required_read_path": SLEEP}


async def test_read_before_write_passes_with_path_normalisation() -> None:
    calls = [rec("Read", file_path="/areas/health/SLEEP.md"), rec("Edit", file_path=f"/{SLEEP}")]
    s = await grade("pkm_read_before_write", READ_CFG, persisted(), calls)
    assert (s.value, s.passed) == (1.0, True)


async def test_read_after_write_fails() -> None:
    # docs/compat.md: ONE assertion (read before the first write), so no partial 0.5 any more
    calls = [rec("Write", file_path="/Areas/x.md", content="x"), rec("Read", file_path=SLEEP)]
    s = await grade("pkm_read_before_write", READ_CFG, persisted(), calls)
    assert (s.value, s.passed) == (0.0, False) and len(s.assertions) == 1


async def test_read_before_write_takes_path_argument() -> None:
    # docs/compat.md: the Read's path comes from `file_path` or `path`
    calls = [rec("Read", path="/Areas/Health/sleep.md"), rec("Edit", file_path=f"/{SLEEP}")]
    s = await grade("pkm_read_before_write", READ_CFG, persisted(), calls)
    assert (s.value, s.passed) == (1.0, True)


async def test_failed_calls_do_not_count() -> None:
    calls = [
        rec("Read", "no such file", error=True, file_path=SLEEP),
        rec("Write", "denied", error=True, file_path="/x.md", content=""),
        rec("Edit", file_path=SLEEP),
        rec("Read", file_path=SLEEP),
    ]
    s = await grade("pkm_read_before_write", READ_CFG, persisted(), calls)
    # the errored Read is ignored; the first real write is the Edit (one assertion, SPEC 8)
    assert s.value == 0.0
    calls = [rec("Write", "denied", error=True, file_path="/x.md"), rec("Read", file_path=SLEEP)]
    s = await grade("pkm_read_before_write", READ_CFG, persisted(), calls)
    assert s.value == 1.0  # the errored Write is not "the first Write"


async def test_read_before_write_never_read() -> None:
    calls = [rec("Read", file_path="/Areas/Health/other.md"), rec("Edit", file_path=SLEEP)]
    s = await grade("pkm_read_before_write", READ_CFG, persisted(), calls)
    assert (s.value, s.passed) == (0.0, False)


# --- terminal_path ----------------------------------------------------------------------


async def test_terminal_path_from_reference_or_config() -> None:
    skip, persist = skipped_outcome(), persisted()
    assert (await grade("terminal_path", {}, skip, expected={"terminal_path": "skip"})).value == 1.0
    s = await grade("terminal_path", {}, persist, expected={"terminal_path": "Skip"})
    assert (s.value, s.passed) == (0.0, False)
    assert "intended skip" in s.rationale and s.metadata["actual"] == "persist"
    # config wins over the reference solution
    s = await grade(
        "terminal_path", {"expected": "persist"}, persist, expected={"terminal_path": "skip"}
    )
    assert s.value == 1.0


async def test_terminal_path_persist_needs_both_write_and_insight() -> None:
    half = pkm_outcome(updated_insight=False)
    s = await grade("terminal_path", {"expected": "persist"}, half)
    assert (s.value, s.passed) == (0.0, False)  # binary, not a fraction
    assert [a.passed for a in s.assertions] == [True, False]


async def test_terminal_path_skip_with_mutation_fails() -> None:
    s = await grade(
        "terminal_path", {"expected": "skip"}, skipped_outcome(successful_pkm_mutation=True)
    )
    assert s.value == 0.0


async def test_terminal_path_bad_reference_is_null() -> None:
    s = await grade("terminal_path", {}, persisted(), expected={"terminal_path": "maybe"})
    assert s.value is None and "must be 'skip' or 'persist'" in s.rationale


# --- pkm_no_redundant_file --------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "max_new", "value"),
    [
        ({SLEEP: SEED + "- more\n"}, 0, 1.0),
        ({SLEEP: SEED + "- more\n", "Areas/Health/coffee.md": "c"}, 0, 0.5),
        ({SLEEP: SEED + "- more\n", "Areas/Health/coffee.md": "c"}, 1, 1.0),
        ({"Areas/Health/sleep-2026.md": "dup"}, 0, 0.0),
        ({}, 0, 0.0),
    ],
)
async def test_no_redundant_file(files: dict[str, str], max_new: int, value: float) -> None:
    out = pkm_outcome(before={SLEEP: SEED}, after={SLEEP: SEED, **files})
    config = {"expected_files": [f"/{SLEEP}"], "max_new_files": max_new}
    s = await grade("pkm_no_redundant_file", config, out)
    assert s.value == value and s.passed is (value == 1.0)


async def test_no_redundant_file_null_when_skipped() -> None:
    s = await grade("pkm_no_redundant_file", {"expected_files": [SLEEP]}, skipped_outcome())
    assert s.value is None


# --- pkm_fact_id_placement --------------------------------------------------------------


async def test_fact_id_placement_passes() -> None:
    text = SEED + f"- 2026-03-14: 6.5h, late coffee {MARK}\n"
    calls = [rec("Edit", file_path=f"/{SLEEP}", old_string="fine", new_string=text)]
    s = await grade("pkm_fact_id_placement", {}, persisted({SLEEP: text}), calls)
    assert (s.value, s.passed) == (1.0, True)


async def test_fact_id_placement_tolerates_comment_spacing() -> None:
    text = f"note <!--fact_id:{FACT}-->\n"
    calls = [rec("Write", file_path="/Areas/Health/coffee.md", content=text)]
    s = await grade("pkm_fact_id_placement", {}, persisted({"Areas/Health/coffee.md": text}), calls)
    assert s.value == 1.0


async def test_fact_id_in_a_different_file_than_the_carrier() -> None:
    # the comment sits in a pre-existing, untouched file; the written file lacks it
    before = {SLEEP: SEED + MARK}
    after = {**before, "Areas/Health/coffee.md": f"mentions {FACT} without the comment"}
    calls = [
        rec("Write", file_path="/Areas/Health/coffee.md", content=after["Areas/Health/coffee.md"])
    ]
    s = await grade("pkm_fact_id_placement", {}, pkm_outcome(before=before, after=after), calls)
    assert s.value == pytest.approx(1 / 3) and s.passed is False


async def test_fact_id_comment_in_changed_file_not_carried() -> None:
    # the Edit that touched coffee.md carried no fact id; the id came through a failed Write
    after = {SLEEP: SEED, "Areas/coffee.md": f"x {MARK}"}
    calls = [
        rec("Write", "error", error=True, file_path="/Areas/coffee.md", content=f"x {MARK}"),
        rec("Edit", file_path="/Areas/coffee.md", old_string="", new_string="x"),
    ]
    s = await grade(
        "pkm_fact_id_placement", {}, pkm_outcome(before={SLEEP: SEED}, after=after), calls
    )
    assert s.value == pytest.approx(1 / 3)
    assert [a.passed for a in s.assertions] == [False, True, False]


async def test_fact_id_placement_null_when_skipped() -> None:
    assert (await grade("pkm_fact_id_placement", {}, skipped_outcome())).value is None
