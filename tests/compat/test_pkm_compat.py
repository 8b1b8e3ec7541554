"""Compatibility of the PKM Agent tools, reminders, runtime and PKM graders with the original
harness.

Each table row is one fact of docs/compat.md ("PKM Agent tools", "Graders", "Loader" for the
PKM grader configs, the runtime line) with the original's value or verdict, run through the real
tool, session, runtime or grader. Default behaviour only: our stricter checks are opt-in and
tested in tests/pkm and tests/graders.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from promptloop.agents.base import AgentInput, prepare_workspace
from promptloop.agents.llm.scripted import ScriptedModel, call, reply
from promptloop.agents.llm.types import ToolCall
from promptloop.agents.pkm.agent import PkmAgentSession
from promptloop.agents.pkm.reminders import STATS_FILE
from promptloop.agents.runtime import LOOP_DETECTED, RuntimeConfig, run_agent
from promptloop.agents.tools import ToolResult
from promptloop.agents.transcript import ToolCallRecord
from promptloop.agents.workspace import Workspace
from promptloop.graders import run_grader
from promptloop.graders.registry import GraderConfigError, validate_config
from tests.graders.builders import ctx, pkm_outcome, rec, skipped_outcome

FACT_ID = "2026/03/14.md#ts_2"
OTHER_FACT = "2026/03/10.md#ts_1"
ORIGINAL_ID = "fact_pkm_health_sleep_001"
"""The id style of the original suites' fixture notes (issue: 27 tasks use it)."""
PUBLISHED = datetime(2026, 3, 14, 9, 30, 5, tzinfo=UTC)


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _session(tmp: Path, published: datetime = PUBLISHED) -> PkmAgentSession:
    ws = Workspace(tmp / "ws")
    _write(ws.pkm, "Areas/Health/sleep.md", f"# Sleep\n- 5 h <!-- fact_id: {ORIGINAL_ID} -->\n")
    agent_input = AgentInput(fact_id=FACT_ID, content="Slept 5 h.", published_at=published)
    prepare_workspace(ws, agent_input)
    return PkmAgentSession(ws, agent_input, "system")


async def _invoke(session: PkmAgentSession, name: str, **arguments: Any) -> ToolResult:
    tool = {t.name: t for t in session.tools}[name]
    return await tool.invoke(ToolCall(id="c1", name=name, arguments=arguments))


def _insight(session: PkmAgentSession) -> dict[str, Any]:
    card = yaml.safe_load(session.workspace.card_path(FACT_ID).read_text(encoding="utf-8"))
    value = card["insight"]
    assert isinstance(value, dict)
    return value


# --- update_timeline_card_insight and skip_pkm_organization ----------------------------------

ToolStep = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class ToolCase:
    id: str
    steps: list[ToolStep]
    ok: bool
    """Whether the LAST step succeeds (earlier steps must succeed)."""
    expect: Callable[[PkmAgentSession], None] | None = None
    other_fact: bool = False
    """Add an entry for OTHER_FACT to its fact file first."""


def _insight_is(text: str, related: list[str]) -> Callable[[PkmAgentSession], None]:
    def check(session: PkmAgentSession) -> None:
        assert _insight(session) == {
            "text": text,
            "related_facts": [{"id": r} for r in related],
            "character_id": "0",
        }
        assert session.updated_insight

    return check


def _skipped_with(evidence: str) -> Callable[[PkmAgentSession], None]:
    def check(session: PkmAgentSession) -> None:
        assert session.skipped and session.skip_evidence == evidence
        assert session.missing_requirements() == []

    return check


def _other_card_updated(session: PkmAgentSession) -> None:
    card = yaml.safe_load(session.workspace.card_path(OTHER_FACT).read_text(encoding="utf-8"))
    assert card["insight"]["text"] == "older" and card["insight"]["character_id"] == "0"
    assert not session.updated_insight


INSIGHT = "update_timeline_card_insight"
TOOL_CASES = [
    ToolCase("insight: this input's fact id", [(INSIGHT, {"fact_id": FACT_ID,
                                                          "insight_text": "x"})],
             True, _insight_is("x", [])),
    ToolCase("insight: related ids of any form are kept",
             [(INSIGHT, {"fact_id": FACT_ID, "insight_text": "x",
                         "related_fact_ids": [ORIGINAL_ID, "anything", FACT_ID, ORIGINAL_ID]})],
             True, _insight_is("x", [ORIGINAL_ID, "anything", FACT_ID, ORIGINAL_ID])),
    ToolCase("insight: empty text is allowed",
             [(INSIGHT, {"fact_id": FACT_ID, "insight_text": ""})], True, _insight_is("", [])),
    ToolCase("insight: text is stored as given",
             [(INSIGHT, {"fact_id": FACT_ID, "insight_text": "  spaced  "})], True,
             _insight_is("  spaced  ", [])),
    ToolCase("insight: character_id is '0'",
             [(INSIGHT, {"fact_id": FACT_ID, "insight_text": "a"}),
              (INSIGHT, {"fact_id": FACT_ID, "insight_text": "b"})], True,
             _insight_is("b", [])),
    ToolCase("insight: another fact id that exists in its fact file",
             [(INSIGHT, {"fact_id": OTHER_FACT, "insight_text": "older"})], True,
             _other_card_updated, other_fact=True),
    ToolCase("insight: a fact id missing from the fact file is refused",
             [(INSIGHT, {"fact_id": "2026/03/14.md#ts_9", "insight_text": "x"})], False),
    ToolCase("insight: a malformed fact id is refused",
             [(INSIGHT, {"fact_id": ORIGINAL_ID, "insight_text": "x"})], False),
    ToolCase("skip: empty evidence is accepted",
             [("skip_pkm_organization", {"evidence": ""})], True, _skipped_with("")),
    ToolCase("skip: evidence is stored as given",
             [("skip_pkm_organization", {"evidence": " user said not to file it "})], True,
             _skipped_with(" user said not to file it ")),
]


@pytest.mark.parametrize("case", TOOL_CASES, ids=[c.id for c in TOOL_CASES])
async def test_insight_and_skip_tools(case: ToolCase, tmp_path: Path) -> None:
    session = _session(tmp_path)
    if case.other_fact:
        session.workspace.ensure_fact(OTHER_FACT, "an older note", PUBLISHED)
    result: ToolResult | None = None
    for name, args in case.steps:
        result = await _invoke(session, name, **args)
        if (name, args) != case.steps[-1]:
            assert not result.is_error, result.content
    assert result is not None
    assert result.is_error is not case.ok, result.content
    if case.ok:
        assert result.stop  # both tools end the run (no reminder fired)
    if case.expect is not None:
        case.expect(session)


# --- harness text outside the prompt ---------------------------------------------------------

TRIVIAL_WORDS = ("trivial", "greeting", "emoji", "filler", "not worth", "worth keeping", "ok")


def _harness_texts(session: PkmAgentSession) -> dict[str, str]:
    texts = {f"tool {t.name}": t.description for t in session.tools}
    texts["first message"] = session.first_message()
    for missing in (
        ["wrote_para_with_fact_id", "updated_timeline_card_insight", "skip_pkm_organization"],
        ["updated_timeline_card_insight", "skip_pkm_organization"],
        ["wrote_para_with_fact_id", "skip_without_successful_pkm_mutation"],
    ):
        texts[f"reminder {missing}"] = session.reminder(missing)
    return texts


@pytest.mark.parametrize("word", TRIVIAL_WORDS)
def test_harness_text_does_not_invite_skipping_trivial_input(word: str, tmp_path: Path) -> None:
    session = _session(tmp_path)
    for where, text in _harness_texts(session).items():
        words = text.lower().replace(",", " ").replace(".", " ").split()
        found = word in words if " " not in word else word in text.lower()
        assert not found, f"{where} mentions {word!r}: {text}"


def test_harness_text_invites_skipping_on_an_opt_out(tmp_path: Path) -> None:
    session = _session(tmp_path)
    skip = next(t for t in session.tools if t.name == "skip_pkm_organization")
    assert "not to file" in skip.description
    assert "not to file" in session.first_message()
    assert "asked not to file" in session.reminder(["skip_pkm_organization"])


# --- Grep and LS arguments -------------------------------------------------------------------


@dataclass(frozen=True)
class SearchCase:
    id: str
    tool: str
    args: dict[str, Any]
    lines: list[str] | None
    """Expected output lines; None = the call is an error."""


GREP_FILE = "/Areas/Health/run.md"
SEARCH_CASES = [
    SearchCase("Grep A", "Grep", {"pattern": "5k", "output_mode": "content", "A": 1},
               [f"{GREP_FILE}:1:Run 5k", f"{GREP_FILE}-2-run 10k"]),
    SearchCase("Grep B", "Grep", {"pattern": "rest", "output_mode": "content", "B": 1},
               [f"{GREP_FILE}-2-run 10k", f"{GREP_FILE}:3:rest"]),
    SearchCase("Grep C", "Grep", {"pattern": "10k", "output_mode": "content", "C": 1},
               [f"{GREP_FILE}-1-Run 5k", f"{GREP_FILE}:2:run 10k", f"{GREP_FILE}-3-rest"]),
    SearchCase("Grep n false", "Grep", {"pattern": "rest", "output_mode": "content", "n": False},
               [f"{GREP_FILE}:rest"]),
    SearchCase("Grep i default true", "Grep",
               {"pattern": "^run", "output_mode": "content", "include": "*.md"},
               [f"{GREP_FILE}:1:Run 5k", f"{GREP_FILE}:2:run 10k"]),
    SearchCase("Grep i false", "Grep",
               {"pattern": "^Run", "output_mode": "content", "i": False},
               [f"{GREP_FILE}:1:Run 5k"]),
    SearchCase("Grep type md", "Grep", {"pattern": "run", "type": "md"}, [GREP_FILE]),
    SearchCase("Grep type txt", "Grep", {"pattern": "run", "type": "txt"},
               ["/Areas/Health/run.txt"]),
    SearchCase("Grep -A still accepted", "Grep",
               {"pattern": "5k", "output_mode": "content", "-A": 1},
               [f"{GREP_FILE}:1:Run 5k", f"{GREP_FILE}-2-run 10k"]),
    SearchCase("LS requires path", "LS", {}, None),
    SearchCase("LS with path", "LS", {"path": "/Areas/Health"},
               ["/Areas/Health/", "  run.md", "  run.txt", "  sleep.md"]),
]


@pytest.mark.parametrize("case", SEARCH_CASES, ids=[c.id for c in SEARCH_CASES])
async def test_search_arguments(case: SearchCase, tmp_path: Path) -> None:
    session = _session(tmp_path)
    _write(session.workspace.pkm, "Areas/Health/run.md", "Run 5k\nrun 10k\nrest\n")
    _write(session.workspace.pkm, "Areas/Health/run.txt", "run 1k\n")
    result = await _invoke(session, case.tool, **case.args)
    if case.lines is None:
        assert result.is_error
    else:
        assert not result.is_error, result.content
        assert result.content.splitlines() == case.lines


# --- missing_requirements --------------------------------------------------------------------

Setup = Callable[[PkmAgentSession], Awaitable[None]]


async def _nothing(_s: PkmAgentSession) -> None:
    return None


async def _wrote(s: PkmAgentSession) -> None:
    await _invoke(s, "Write", file_path="/Areas/x.md", content=f"<!-- fact_id: {FACT_ID} -->")


async def _insight_only(s: PkmAgentSession) -> None:
    await _invoke(s, INSIGHT, fact_id=FACT_ID, insight_text="x")


async def _persisted(s: PkmAgentSession) -> None:
    await _wrote(s)
    await _insight_only(s)


async def _clean_skip(s: PkmAgentSession) -> None:
    await _invoke(s, "skip_pkm_organization", evidence="")


async def _dirty_skip(s: PkmAgentSession) -> None:
    await _invoke(s, "Write", file_path="/Areas/y.md", content="no id")
    await _clean_skip(s)


async def _moved_then_skip(s: PkmAgentSession) -> None:
    await _invoke(s, "Move", source_path="/Areas/Health", destination_path="/Areas/Sleep")
    await _clean_skip(s)


MISSING_CASES: list[tuple[str, Setup, list[str]]] = [
    ("nothing done", _nothing,
     ["wrote_para_with_fact_id", "updated_timeline_card_insight", "skip_pkm_organization"]),
    ("wrote only", _wrote, ["updated_timeline_card_insight", "skip_pkm_organization"]),
    ("insight only", _insight_only, ["wrote_para_with_fact_id", "skip_pkm_organization"]),
    ("persisted", _persisted, []),
    ("clean skip", _clean_skip, []),
    ("skip after a Write", _dirty_skip,
     ["wrote_para_with_fact_id", "updated_timeline_card_insight",
      "skip_without_successful_pkm_mutation"]),
    ("skip after a Move", _moved_then_skip,
     ["wrote_para_with_fact_id", "updated_timeline_card_insight",
      "skip_without_successful_pkm_mutation"]),
]


@pytest.mark.parametrize(("label", "setup", "expected"), MISSING_CASES,
                         ids=[c[0] for c in MISSING_CASES])
async def test_missing_requirements_names(
    label: str, setup: Setup, expected: list[str], tmp_path: Path
) -> None:
    session = _session(tmp_path)
    await setup(session)
    assert session.missing_requirements() == expected, label


# --- reminders -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "dated"),
    [
        ("2026-03-14.md", True),
        ("20260314.md", True),
        ("2026-0314 notes.md", True),
        ("notes 2025-12-01.md", True),
        ("2026-13-40.md", True),  # no month/day check
        ("v202603141.md", True),  # anywhere in the name, no digit boundary
        ("1999-01-01.md", False),
        ("2026-3-14.md", False),
        ("notes-2026.md", False),
        ("2026_03_14.md", False),
    ],
)
async def test_date_name_pattern(name: str, dated: bool, tmp_path: Path) -> None:
    session = _session(tmp_path)
    _write(session.workspace.pkm, f"Areas/Journal/{name}", "entry\n")
    result = await _invoke(session, "Read", file_path=f"/Areas/Journal/{name}")
    assert ("is a date" in result.content) is dated


@pytest.mark.parametrize(
    ("files", "fires"),
    [
        (["- a <!-- fact_id: 2026/03/0{i}.md#ts_1 -->\n"] * 6, True),
        (["- a <!-- fact_id: 2026/03/0{i}.md#ts_1 -->\n"] * 5, False),
        (["fact_id={i} (no comment form)\n"] * 6, True),  # lines containing `fact_id`
        # two comments on ONE line count once: still a one-fact file
        (["a <!-- fact_id: x{i} --> b <!-- fact_id: y{i} -->\n"] * 6, True),
        # two lines with fact_id in each file: not single-fact files
        (["a <!-- fact_id: x{i} -->\nb <!-- fact_id: y{i} -->\n"] * 6, False),
        (["fact_id\n"] * 5 + ["no id here\n"], False),
    ],
    ids=["6 single", "5 single", "line not comment", "2 on 1 line", "2 lines", "5 plus plain"],
)
async def test_fragmentation_counts_lines_with_fact_id(
    files: list[str], fires: bool, tmp_path: Path
) -> None:
    session = _session(tmp_path)
    for i, text in enumerate(files):
        _write(session.workspace.pkm, f"Resources/Frag/f{i}.md", text.format(i=i))
    result = await _invoke(session, "Read", file_path="/Resources/Frag/f0.md")
    assert ("fragmented" in result.content) is fires


@pytest.mark.parametrize(
    ("n_lines", "read_args", "expected"),
    [
        (1001, {}, "Consider splitting"),
        (1001, {"limit": 1000}, None),
        (1500, {"offset": 500}, "Consider splitting"),  # returns lines 500-1500: 1001
        (1500, {"offset": 501}, None),  # returns 1000 lines of a 1500-line file
        (2500, {}, "Restructure"),  # returns 2000 lines
        (2500, {"offset": 1501}, None),  # returns 1000 lines
        (1999, {}, "Consider splitting"),
    ],
)
async def test_size_reminders_count_returned_lines(
    n_lines: int, read_args: dict[str, int], expected: str | None, tmp_path: Path
) -> None:
    session = _session(tmp_path)
    _write(session.workspace.pkm, "Resources/long.md", "x\n" * n_lines)
    result = await _invoke(session, "Read", file_path="/Resources/long.md", **read_args)
    assert not result.is_error
    returned = len([line for line in result.content.splitlines() if "\t" in line])
    if expected is None:
        assert "<system-reminder>" not in result.content, returned
    else:
        assert expected in result.content and f"returned {returned} lines" in result.content


async def test_session_stats_file_counts_write_edit_sessions(tmp_path: Path) -> None:
    s1 = _session(tmp_path)
    await _invoke(s1, "Move", source_path="/Areas/Health", destination_path="/Areas/Sleep")
    assert not s1.record_session()  # a Move-only session is not a Write/Edit session
    stats = s1.workspace.root / STATS_FILE
    assert STATS_FILE.as_posix() == "_System/pkm_stats.json" and not stats.exists()
    log = "Areas/Sleep/sleep.md"
    for _ in range(3):
        s = PkmAgentSession(s1.workspace, s1.agent_input, "system")
        await _invoke(s, "Edit", file_path="/" + log, old_string="# Sleep", new_string="# Sleep")
        await _invoke(s, "Write", file_path="/" + log, content="# Sleep\n")
        assert s.record_session()
    sessions = json.loads(stats.read_text(encoding="utf-8"))["sessions"]
    assert [e["edited"] for e in sessions] == [[log]] * 3
    hot = await _invoke(PkmAgentSession(s1.workspace, s1.agent_input, "s"), "Read",
                        file_path="/" + log)
    assert "edited in 3 of the user's last 3 sessions" in hot.content


# --- runtime and first message ---------------------------------------------------------------


def test_runtime_defaults() -> None:
    config = RuntimeConfig()
    assert (config.max_turns, config.require_tool_first_turn, config.on_max_turns) == (
        20,
        False,
        "error",
    )


async def test_twenty_turns_then_loop_detection(tmp_path: Path) -> None:
    session = _session(tmp_path)
    model = ScriptedModel(lambda _r: reply("", call("LS", path="/")))
    transcript = await run_agent(model, session)
    assert transcript.metrics.n_turns == 20 and transcript.metrics.n_runs == 1
    assert transcript.events[-1].kind == LOOP_DETECTED and not transcript.completed
    assert all(c.settings is None or c.settings.tool_choice == "auto" for c in model.calls)


@pytest.mark.parametrize(
    ("published", "text"),
    [
        (PUBLISHED, "Published Time: 2026-03-14 09:30:05 UTC+0000 (UTC, Saturday)"),
        (
            datetime(2026, 3, 14, 21, 5, 0, tzinfo=ZoneInfo("Asia/Shanghai")),
            "Published Time: 2026-03-14 21:05:00 UTC+0800 (Asia/Shanghai, Saturday)",
        ),
    ],
)
def test_published_time_carries_offset_and_zone(
    published: datetime, text: str, tmp_path: Path
) -> None:
    first = _session(tmp_path, published).first_message()
    assert text in first
    assert f"Raw Input ID (fact_id): {FACT_ID}" in first and "Raw Input Content:\n" in first


# --- PKM graders -----------------------------------------------------------------------------


@dataclass(frozen=True)
class GraderCase:
    id: str
    grader: str
    config: dict[str, Any]
    outcome: dict[str, Any]
    calls: list[ToolCallRecord]
    value: float | None
    n_assertions: int | None = None


def _changed(*paths: str) -> dict[str, Any]:
    return pkm_outcome(workspace_diff={"created": list(paths), "modified": []})


SEED = "# Log\n<!-- seed:S1 -->\n"
ROUTE = "pkm_routed_correctly"
RBW = "pkm_read_before_write"
RBW_CFG = {"required_read_path": "Areas/Health/sleep.md"}
GRADER_CASES = [
    # routing: exactly one leading '/' stripped, first letter capitalised only with a '/'
    GraderCase("routing: leading slash", ROUTE, {"expected_buckets": ["Areas"]},
               _changed("/Areas/x.md"), [], 1.0),
    GraderCase("routing: only one slash stripped", ROUTE, {"expected_buckets": ["Areas"]},
               _changed("//Areas/x.md"), [], 0.0),
    GraderCase("routing: lower-case first segment capitalised", ROUTE,
               {"expected_buckets": ["Areas/Health"]}, _changed("areas/Health/x.md"), [], 1.0),
    GraderCase("routing: only the first letter", ROUTE, {"expected_buckets": ["Areas/Health"]},
               _changed("areas/health/x.md"), [], 0.0),
    GraderCase("routing: no '/' no capital", ROUTE, {"expected_buckets": ["Inbox"]},
               _changed("inbox.md"), [], 0.0),
    GraderCase("routing: no '/' matches as written", ROUTE, {"expected_buckets": ["inbox"]},
               _changed("inbox.md"), [], 1.0),
    GraderCase("routing: expected file", ROUTE,
               {"expected_buckets": ["Areas"], "expected_files": ["Areas/Health/sleep.md"]},
               _changed("Areas/Health/sleep.md"), [], 1.0),
    GraderCase("routing: bucket only, files configured", ROUTE,
               {"expected_buckets": ["Areas"], "expected_files": ["Areas/Health/sleep.md"]},
               _changed("Areas/Health/coffee.md"), [], 0.5),
    GraderCase("routing: expected_files null is []", ROUTE,
               {"expected_buckets": ["Areas"], "expected_files": None},
               _changed("Areas/Health/coffee.md"), [], 1.0),
    GraderCase("routing: string prefix", ROUTE, {"expected_buckets": ["Areas/Health"]},
               _changed("Areas/HealthLog/x.md"), [], 1.0),
    GraderCase("routing: null when skipped", ROUTE, {"expected_buckets": ["Areas"]},
               skipped_outcome(), [], None),
    GraderCase("routing: unknown config key ignored", ROUTE,
               {"expected_buckets": ["Areas"], "bonus": True}, _changed("Areas/x.md"), [], 1.0),
    # no overwrite
    GraderCase("no_overwrite: marker kept", "pkm_no_overwrite", {"seed_marker": "seed:S1"},
               pkm_outcome(after={"Areas/log.md": SEED}), [], 1.0, 1),
    GraderCase("no_overwrite: marker gone", "pkm_no_overwrite", {"seed_marker": "seed:S1"},
               pkm_outcome(after={"Areas/log.md": "# Log\n"}), [], 0.0, 1),
    GraderCase("no_overwrite: empty marker found in every file", "pkm_no_overwrite",
               {"seed_marker": ""}, pkm_outcome(after={"Areas/log.md": "# Log\n"}), [], 1.0),
    GraderCase("no_overwrite: unknown config key ignored", "pkm_no_overwrite",
               {"seed_marker": "seed:S1", "file": "x"},
               pkm_outcome(after={"Areas/log.md": SEED}), [], 1.0),
    # read before write: ONE assertion, path from file_path or path
    GraderCase("rbw: Read file_path before Edit", RBW, RBW_CFG, pkm_outcome(),
               [rec("Read", file_path="/Areas/Health/sleep.md"),
                rec("Edit", file_path="/Areas/Health/sleep.md")], 1.0, 1),
    GraderCase("rbw: Read path before Write", RBW, RBW_CFG, pkm_outcome(),
               [rec("Read", path="Areas/Health/sleep.md"), rec("Write", file_path="/a.md")],
               1.0, 1),
    GraderCase("rbw: case-insensitive", RBW, RBW_CFG, pkm_outcome(),
               [rec("Read", file_path="/AREAS/health/Sleep.MD"), rec("Edit", file_path="/a")],
               1.0, 1),
    GraderCase("rbw: read after the first write", RBW, RBW_CFG, pkm_outcome(),
               [rec("Write", file_path="/a.md"), rec("Read", file_path="Areas/Health/sleep.md")],
               0.0, 1),
    GraderCase("rbw: never read", RBW, RBW_CFG, pkm_outcome(),
               [rec("Edit", file_path="/Areas/Health/sleep.md")], 0.0, 1),
    GraderCase("rbw: failed Read does not count", RBW, RBW_CFG, pkm_outcome(),
               [rec("Read", "no", error=True, file_path="Areas/Health/sleep.md"),
                rec("Edit", file_path="/a")], 0.0, 1),
    GraderCase("rbw: read, no write at all", RBW, RBW_CFG, pkm_outcome(),
               [rec("Read", file_path="Areas/Health/sleep.md")], 1.0, 1),
    # issue 21: exactly one leading '/' is ignored; '//Areas/...' is another path
    GraderCase("rbw: double leading slash does not match", RBW, RBW_CFG, pkm_outcome(),
               [rec("Read", file_path="//Areas/Health/sleep.md"), rec("Edit", file_path="/a")],
               0.0, 1),
    GraderCase("rbw: double slash in the config too", RBW,
               {"required_read_path": "//Areas/Health/sleep.md"}, pkm_outcome(),
               [rec("Read", file_path="/Areas/Health/sleep.md"), rec("Edit", file_path="/a")],
               0.0, 1),
    GraderCase("rbw: unknown config key ignored", RBW, {**RBW_CFG, "strict": True},
               pkm_outcome(), [rec("Read", file_path="Areas/Health/sleep.md")], 1.0, 1),
    # completion: five assertions
    GraderCase("completion: persisted", "pkm_completion", {}, pkm_outcome(), [], 1.0, 5),
    GraderCase("completion: clean skip", "pkm_completion", {}, skipped_outcome(), [], 1.0, 5),
    GraderCase("completion: skip after mutation", "pkm_completion", {},
               skipped_outcome(successful_pkm_mutation=True, is_complete=False,
                               missing_requirements=["skip_without_successful_pkm_mutation"]),
               [], 2 / 5, 5),
    GraderCase("completion: unknown config key ignored", "pkm_completion", {"x": 1},
               pkm_outcome(), [], 1.0, 5),
]


@pytest.mark.parametrize("case", GRADER_CASES, ids=[c.id for c in GRADER_CASES])
async def test_pkm_graders(case: GraderCase) -> None:
    score = await run_grader(case.grader, case.config, ctx(case.outcome, case.calls))
    assert score.value == (pytest.approx(case.value) if case.value is not None else None), (
        score.rationale
    )
    if case.n_assertions is not None:
        assert len(score.assertions) == case.n_assertions


@pytest.mark.parametrize(
    ("grader", "config"),
    [
        (ROUTE, {}),
        (ROUTE, {"expected_files": ["Areas/x.md"]}),
        (ROUTE, {"expected_buckets": None}),
    ],
)
def test_routing_needs_expected_buckets(grader: str, config: dict[str, Any]) -> None:
    with pytest.raises(GraderConfigError, match="expected_buckets"):
        validate_config(grader, config)
