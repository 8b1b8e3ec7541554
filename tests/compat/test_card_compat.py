"""Compatibility of the Card Agent tools and card graders with the original harness.

Each table row is one fact of docs/compat.md ("Card Agent tools", "Graders", "Loader") with the
original's verdict, run through the real tool, grader or writer. Default behaviour only: our
stricter checks are opt-in and tested in tests/card.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from promptloop.agents.base import AgentInput, load_prompt, prepare_workspace
from promptloop.agents.card.agent import CardAgentSession
from promptloop.agents.card.card_file import dump_card, read_card, write_card_atomic
from promptloop.agents.card.tools import METADATA_TOOL, SAVE_TOOL, TAGS_FILE, CardTools
from promptloop.agents.llm.scripted import ScriptedModel, call, reply
from promptloop.agents.runtime import RuntimeConfig, run_agent
from promptloop.agents.tools import ToolResult
from promptloop.agents.workspace import Workspace
from promptloop.graders import Score, config_warnings, run_grader, validate_config
from tests.graders.builders import card_outcome, ctx

FACT_ID = "2026/03/14.md#ts_2"
PUBLISHED = datetime(2026, 3, 14, 9, 30, 5, tzinfo=UTC)
NOW = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
SNIPPET = {"template_id": "snippet", "data": {"text": "hi"}}


def cfg(template_id: Any, data: Any = None, **item: Any) -> dict[str, Any]:
    """One ui_config; `data=None` leaves the key out."""
    out: dict[str, Any] = {"template_id": template_id, **item}
    if data is not None:
        out["data"] = data
    return out


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    prepare_workspace(ws, AgentInput(fact_id=FACT_ID, content="hi", published_at=PUBLISHED))
    return ws


async def save(tools: CardTools, **args: Any) -> ToolResult:
    full: dict[str, Any] = {"fact_id": FACT_ID, "title": "A card", "ui_configs": [SNIPPET]}
    full.update(args)
    tool = {t.name: t for t in tools.tools()}[SAVE_TOOL]
    return await tool.invoke(call(SAVE_TOOL, **full))


# --- save_timeline_card: template data (type checks only) ------------------------------------

# (case id, ui_config, accepted?, error fragment when refused)
DATA_CASES: list[tuple[str, dict[str, Any], bool, str]] = [
    # no hex, ISO, non-empty-list or sign checks
    ("mood color_hex 'blue'", cfg("mood", {"mood_name": "Calm", "color_hex": "blue"}), True, ""),
    ("compact color 'orange'", cfg("compact", {"color": "orange"}), True, ""),
    ("event start_time 'tomorrow 7pm'", cfg("event", {"start_time": "tomorrow 7pm"}), True, ""),
    ("metric items []", cfg("metric", {"items": []}), True, ""),
    ("conversation messages []", cfg("conversation", {"messages": []}), True, ""),
    ("gallery image_urls []", cfg("gallery", {"image_urls": []}), True, ""),
    ("procedure steps []", cfg("procedure", {"steps": []}), True, ""),
    ("duration elapsed -5", cfg("duration", {"elapsed": -5}), True, ""),
    ("progress current > total, negative", cfg("progress", {"current": -3, "total": 0}), True,
     ""),
    # non-blank only for url, body, text, content, image_url, video_url
    ("person name ''", cfg("person", {"name": ""}), True, ""),
    ("place name '  '", cfg("place", {"name": "  "}), True, ""),
    ("transaction merchant/amount ''", cfg("transaction", {"merchant": "", "amount": ""}), True,
     ""),
    ("routine habit_name ''", cfg("routine", {"habit_name": "", "streak": 0}), True, ""),
    ("rating subject ''", cfg("rating", {"subject": "", "score": 0}), True, ""),
    ("mood mood ''", cfg("mood", {"mood": "", "color_hex": ""}), True, ""),
    ("gallery blank url item", cfg("gallery", {"image_urls": [""]}), True, ""),
    ("link url ''", cfg("link", {"url": ""}), False, "data.url must be a non-empty string"),
    ("article body '  '", cfg("article", {"body": "  "}), False, "data.body must be a non-empty"),
    ("snippet text ''", cfg("snippet", {"text": ""}), False, "data.text must be a non-empty"),
    ("conversation message text ''", cfg("conversation", {"messages": [{"text": " "}]}), False,
     "data.messages[0].text must be a non-empty"),
    ("quote content ''", cfg("quote", {"content": ""}), False, "data.content must be a non-empty"),
    ("snapshot image_url ''", cfg("snapshot", {"image_url": ""}), False,
     "data.image_url must be a non-empty"),
    ("video video_url ''", cfg("video", {"video_url": "\n"}), False,
     "data.video_url must be a non-empty"),
    # type checks: strings are strings, numbers numbers, lists lists
    ("transaction amount number", cfg("transaction", {"merchant": "A", "amount": 3.5}), False,
     "data.amount must be a string"),
    ("rating score '8'", cfg("rating", {"subject": "Dune", "score": "8"}), False,
     "data.score must be a number"),
    ("routine streak true", cfg("routine", {"habit_name": "Run", "streak": True}), False,
     "data.streak must be a number"),
    ("metric value '71'", cfg("metric", {"items": [{"title": "W", "value": "71"}]}), False,
     "data.items[0].value must be a number"),
    ("metric item not an object", cfg("metric", {"items": ["W 71"]}), False,
     "data.items[0] must be an object"),
    ("procedure steps string", cfg("procedure", {"steps": "boil, eat"}), False,
     "data.steps must be a list"),
    ("procedure steps[1] number", cfg("procedure", {"steps": ["boil", 2]}), False,
     "data.steps[1] must be a string"),
    ("gallery image_urls[0] number", cfg("gallery", {"image_urls": [1]}), False,
     "data.image_urls[0] must be a string"),
    ("person name number", cfg("person", {"name": 42}), False, "data.name must be a string"),
    ("event start_time number", cfg("event", {"start_time": 1500}), False,
     "data.start_time must be a string"),
    ("link optional title number", cfg("link", {"url": "https://x.org", "title": 3}), False,
     "data.title must be a string"),
    ("rating optional max_score '10'", cfg("rating", {"subject": "D", "score": 8,
                                                      "max_score": "10"}), False,
     "data.max_score must be a number"),
    ("optional field null is absent", cfg("link", {"url": "https://x.org", "title": None}),
     True, ""),
    ("unknown extra field", cfg("snippet", {"text": "x", "mood": 3, "extra": [1]}), True, ""),
    ("required field missing", cfg("event", {"title": "Dentist"}), False,
     "data.start_time is missing"),
    ("mood without mood_name or mood", cfg("mood", {"color_hex": "#fff"}), False,
     "data.mood_name (or mood) is missing"),
    # template_id matched exactly; data required
    ("template_id 'Event'", cfg("Event", {"start_time": "2026-03-15T15:00:00"}), False,
     "template_id 'Event' is not allowed"),
    ("template_id ' event'", cfg(" event", {"start_time": "x"}), False,
     "template_id ' event' is not allowed"),
    ("template_id 'memo'", cfg("memo", {"text": "x"}), False, "template_id 'memo' is not allowed"),
    ("template_id missing", {"data": {"text": "x"}}, False, "template_id is missing"),
    ("template_id a list", cfg(["snippet"], {"text": "x"}), False,
     "template_id ['snippet'] is not allowed"),
    ("data missing", cfg("snippet"), False, "ui_configs[0].data is missing"),
    ("data null", {"template_id": "task", "data": None}, False, "ui_configs[0].data is missing"),
    ("data missing, no required fields", cfg("task"), False, "ui_configs[0].data is missing"),
    ("data not an object", cfg("task", "buy milk"), False, "data must be an object"),
    ("data {} for task", cfg("task", {}), True, ""),
]


@pytest.mark.parametrize(
    ("config", "accepted", "fragment"),
    [c[1:] for c in DATA_CASES],
    ids=[c[0] for c in DATA_CASES],
)
async def test_template_data_rules(
    workspace: Workspace, config: dict[str, Any], accepted: bool, fragment: str
) -> None:
    result = await save(CardTools(workspace, PUBLISHED), ui_configs=[config])
    assert result.is_error is not accepted, result.content
    if accepted:
        assert read_card(workspace.card_path(FACT_ID))["ui_configs"] == [config]
    else:
        assert fragment in result.content


# --- save_timeline_card: title, tags, timestamp, card keys -----------------------------------


@dataclass(frozen=True)
class SaveCase:
    id: str
    args: dict[str, Any]
    error: str = ""
    """Refused with this fragment; "" = accepted."""
    card: dict[str, Any] = field(default_factory=dict)
    """Expected card values when accepted."""
    absent: tuple[str, ...] = ()
    """Keys the card must not have."""


def _ts(text: str, zone: Any = UTC) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=zone).timestamp())


SAVE_CASES = [
    SaveCase("title '' refused", {"title": ""}, error="title is empty"),
    SaveCase("title '   ' passes the untrimmed empty check", {"title": "   "},
             card={"title": "   "}),
    SaveCase("title kept untrimmed", {"title": " Lunch "}, card={"title": " Lunch "}),
    SaveCase("ui_configs [] refused", {"ui_configs": []}, error="ui_configs is empty"),
    SaveCase("tag with empty name skipped", {"tags": [{"name": ""}, {"name": "trip"}]},
             card={"tags": ["Trip"]}),
    SaveCase("tag with blank name skipped", {"tags": [{"name": "  ", "icon": "x"}]},
             card={"tags": []}),
    SaveCase("tag without name skipped", {"tags": [{"icon": "✈️"}]}, card={"tags": []}),
    SaveCase("tag icon ignored (even non-string)",
             {"tags": [{"name": "Health", "icon": 3}]}, card={"tags": ["Health"]}),
    SaveCase("tags trimmed and capitalised", {"tags": [{"name": " finance "}]},
             card={"tags": ["Finance"]}),
    SaveCase("bare string tag entry refused", {"tags": ["Trip"]},
             error="tags[0] must be an object {name, icon}"),
    SaveCase("tag not in the allowed list refused", {"tags": [{"name": "Work"}]},
             error="tags[0] 'Work' is not an allowed tag"),
    SaveCase("tags stored as a list of names",
             {"tags": [{"name": "Trip", "icon": "✈️"}, {"name": "Audio", "icon": "🎵"}]},
             card={"tags": ["Trip", "Audio"]}),
    SaveCase("timestamp = content_creation_date",
             {"content_creation_date": "2026-03-10 08:00:00"},
             card={"timestamp": _ts("2026-03-10 08:00:00")}),
    SaveCase("unparseable content_creation_date ignored, existing timestamp kept",
             {"content_creation_date": "yesterday evening"},
             card={"timestamp": int(PUBLISHED.timestamp()), "status": "completed"}),
    SaveCase("empty content_creation_date = none", {"content_creation_date": ""},
             card={"timestamp": int(PUBLISHED.timestamp())}),
    SaveCase("no content_creation_date: existing timestamp", {},
             card={"timestamp": int(PUBLISHED.timestamp())}),
    SaveCase("no keys beyond docs/compat.md",
             {"address": "Main St 4", "user_mark_address": "Home",
              "content_creation_date": "2026-03-10 08:00:00"},
             card={"address": "Main St 4"},
             absent=("user_mark_address", "content_creation_date")),
]


@pytest.mark.parametrize("case", SAVE_CASES, ids=[c.id for c in SAVE_CASES])
async def test_save_rules(workspace: Workspace, case: SaveCase) -> None:
    result = await save(CardTools(workspace, PUBLISHED), **case.args)
    card = read_card(workspace.card_path(FACT_ID))
    if case.error:
        assert result.is_error and case.error in result.content
        assert card["status"] == "pending"
        return
    assert not result.is_error, result.content
    for key, value in case.card.items():
        assert card[key] == value, key
    for key in case.absent:
        assert key not in card
    assert set(card) <= {"fact_id", "timestamp", "status", "tags", "ui_configs", "title",
                         "address", "insight", "failure_reason"}


async def test_unparseable_creation_date_is_logged(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="promptloop.agents.card.tools"):
        result = await save(CardTools(workspace, PUBLISHED), content_creation_date="14/03/2026")
    assert not result.is_error
    assert "ignoring content_creation_date '14/03/2026'" in caplog.text


async def test_timestamp_falls_back_to_now_without_date_or_existing_card(
    workspace: Workspace,
) -> None:
    path = workspace.card_path(FACT_ID)
    write_card_atomic(path, {"fact_id": FACT_ID, "status": "pending"})
    tools = CardTools(workspace, PUBLISHED, clock=lambda: NOW)
    assert not (await save(tools, content_creation_date="not a date")).is_error
    assert read_card(path)["timestamp"] == int(NOW.timestamp())


async def test_naive_creation_date_is_read_in_the_published_zone(workspace: Workspace) -> None:
    berlin = ZoneInfo("Europe/Berlin")
    tools = CardTools(workspace, PUBLISHED.astimezone(berlin))
    assert not (await save(tools, content_creation_date="2026-03-10 08:00:00")).is_error
    card = read_card(workspace.card_path(FACT_ID))
    assert card["timestamp"] == _ts("2026-03-10 08:00:00", berlin)


async def test_blank_title_saves_but_the_card_is_not_complete(workspace: Workspace) -> None:
    agent_input = AgentInput(fact_id=FACT_ID, content="hi", published_at=PUBLISHED)
    session = CardAgentSession(workspace, agent_input, load_prompt("card_agent"))
    model = ScriptedModel([reply("", call(SAVE_TOOL, fact_id=FACT_ID, title="  ",
                                          ui_configs=[SNIPPET]))] * 2)
    transcript = await run_agent(model, session, RuntimeConfig(max_runs=1))
    assert not transcript.tool_calls[0].is_error
    assert "title_present" in session.outcome(transcript)["missing_requirements"]


# --- get_card_metadata and the first user message --------------------------------------------

METADATA_CASES: list[tuple[str, str | None, str]] = [
    ("no tags file", None, "# Existing Tags\nThere are no existing tags yet."),
    ("empty tags file", "\n", "# Existing Tags\nThere are no existing tags yet."),
    ("tags file", "- Trip\n- Coffee\n", "# Existing Tags\n- Trip\n- Coffee"),
]


@pytest.mark.parametrize(
    ("tags_md", "expected"), [c[1:] for c in METADATA_CASES], ids=[c[0] for c in METADATA_CASES]
)
async def test_get_card_metadata(
    workspace: Workspace, tags_md: str | None, expected: str
) -> None:
    if tags_md is not None:
        workspace.system.mkdir(parents=True, exist_ok=True)
        (workspace.system / TAGS_FILE).write_text(tags_md, encoding="utf-8")
    tools = CardTools(workspace, PUBLISHED)
    tool = {t.name: t for t in tools.tools()}[METADATA_TOOL]
    result = await tool.invoke(call(METADATA_TOOL))
    assert result.content == expected
    session = CardAgentSession(
        workspace, AgentInput(FACT_ID, "hi", PUBLISHED), load_prompt("card_agent")
    )
    assert expected in session.first_message()  # the first message carries the same result


PUBLISHED_CASES = [
    (PUBLISHED, "2026-03-14 09:30:05 UTC+00:00 (UTC)"),
    (datetime(2026, 7, 1, 18, 0, tzinfo=ZoneInfo("Europe/Berlin")),
     "2026-07-01 18:00:00 UTC+02:00 (Europe/Berlin)"),
    (datetime(2026, 3, 14, 6, 0, tzinfo=ZoneInfo("Asia/Kolkata")),
     "2026-03-14 06:00:00 UTC+05:30 (Asia/Kolkata)"),
]


@pytest.mark.parametrize(("published", "shown"), PUBLISHED_CASES, ids=lambda v: str(v)[:25])
def test_published_time_has_offset_zone_and_note(
    workspace: Workspace, published: datetime, shown: str
) -> None:
    session = CardAgentSession(
        workspace, AgentInput(FACT_ID, "hi", published), load_prompt("card_agent")
    )
    line = next(
        x for x in session.first_message().splitlines() if x.startswith("Published time:")
    )
    assert line == f"Published time: {shown}. Do not show this date in the card."


# --- graders ----------------------------------------------------------------------------------


async def grade(name: str, config: Any, **outcome: Any) -> Score:
    return await run_grader(name, config, ctx(card_outcome(**outcome), agent="card_agent"))


# (case id, saved template_ids, expected_template_ids, value)
TEMPLATE_CHOICE: list[tuple[str, list[Any], list[str], float]] = [
    ("first expected", ["event"], ["event"], 1.0),
    ("first of two expected", ["event", "snippet"], ["snippet", "event"], 1.0),
    ("only a later one expected", ["snippet", "event"], ["event"], 0.5),
    ("none expected", ["snippet"], ["event"], 0.0),
    ("no template saved", [], ["event"], 0.0),
    ("case differs", ["Event"], ["event"], 0.0),
    ("expected has case", ["event"], ["Event"], 0.0),
    ("saved id has space", [" event"], ["event"], 0.0),
    ("expected id has space", ["event"], ["event "], 0.0),
    ("empty expected list", ["event"], [], 0.0),
    ("empty expected and no template", [], [], 0.0),
]


@pytest.mark.parametrize(
    ("ids", "expected", "value"),
    [c[1:] for c in TEMPLATE_CHOICE],
    ids=[c[0] for c in TEMPLATE_CHOICE],
)
async def test_template_choice(ids: list[Any], expected: list[str], value: float) -> None:
    s = await grade("card_template_choice", {"expected_template_ids": expected},
                    template_ids=ids)
    assert s.value == value
    assert s.passed is (value >= 0.5)


async def test_template_choice_reads_only_template_ids() -> None:
    outcome = card_outcome()  # the card dict and YAML hold metric + snippet
    del outcome["template_ids"]
    s = await run_grader("card_template_choice", {"expected_template_ids": ["metric"]},
                         ctx(outcome, agent="card_agent"))
    assert s.value == 0.0


# (case id, card YAML, substrings, value)
MUST_CONTAIN: list[tuple[str, str | None, list[str], float]] = [
    ("case-insensitive", "title: Morning Coffee\n", ["MORNING coffee"], 1.0),
    ("fraction found", "title: Morning Coffee\n", ["coffee", "tea"], 0.5),
    ("whole YAML, bookkeeping keys too", "fact_id: 2026/03/14.md#ts_2\n", ["TS_2"], 1.0),
    ("German ß: lower() keeps ß (casefold would give ss)", "address: Hauptstraße 1\n",
     ["HAUPTSTRASSE"], 0.0),
    ("German ß: same letters on both sides", "address: HAUPTSTRAßE 1\n", ["hauptstraße"], 1.0),
    ("ligature ﬁ: lower() keeps it (casefold would give fi)", "title: ﬁle\n", ["FILE"], 0.0),
    ("Turkish İ lower-cases to i + combining dot", "place: İstanbul\n", ["istanbul"], 0.0),
    ("Turkish İ on both sides", "place: İSTANBUL\n", ["İstanbul"], 1.0),
    ("Turkish ı is not i", "place: ISPARTA\n", ["ısparta"], 0.0),
    ("empty substring is found", "title: x\n", [""], 1.0),
    ("empty substrings list", "title: x\n", [], 0.0),
    ("no card YAML", None, ["x"], 0.0),
]


@pytest.mark.parametrize(
    ("blob", "substrings", "value"),
    [c[1:] for c in MUST_CONTAIN],
    ids=[c[0] for c in MUST_CONTAIN],
)
async def test_must_contain(blob: str | None, substrings: list[str], value: float) -> None:
    s = await grade("card_must_contain", {"substrings": substrings}, card_yaml_blob=blob)
    assert s.value == value
    assert s.passed is (value == 1.0)


# issue 21: substrings that are not strings are stringified as the original does
NON_STRING_SUBSTRINGS: list[tuple[str, str, list[Any], float]] = [
    ("a number", "value: 7\n", [7], 1.0),
    ("a float", "value: 6.5\n", [6.5], 1.0),
    ("true lower-cased", "flag: true\n", [True], 1.0),
    ("null as the original writes it", "address: null\n", [None], 1.0),
    ("a number that is not there", "value: 8\n", [7], 0.0),
    ("mixed with a string", "title: Run 5k\n", ["run", 5], 1.0),
]


@pytest.mark.parametrize(
    ("blob", "substrings", "value"),
    [c[1:] for c in NON_STRING_SUBSTRINGS],
    ids=[c[0] for c in NON_STRING_SUBSTRINGS],
)
async def test_must_contain_stringifies_non_string_substrings(
    blob: str, substrings: list[Any], value: float
) -> None:
    validate_config("card_must_contain", {"substrings": substrings})
    s = await grade("card_must_contain", {"substrings": substrings}, card_yaml_blob=blob)
    assert (s.value, s.passed) == (value, value == 1.0)


@pytest.mark.parametrize("flag", ["true", 1, "yes"])
async def test_completion_needs_the_boolean_save_flag(flag: Any) -> None:
    # issue 21: the original compares the flag with `== true`: 4 of 5 assertions, a failure
    s = await grade("card_completion", {}, card_save_tool_called=flag)
    assert (s.value, s.passed) == (pytest.approx(0.8), False)
    assert [a.passed for a in s.assertions] == [False, True, True, True, True]
    ok = await grade("card_completion", {}, card_save_tool_called=True)
    assert (ok.value, ok.passed) == (1.0, True)


# (case id, grader, config, loads?, ignored keys)
CONFIGS: list[tuple[str, str, Any, bool, list[str]]] = [
    ("empty expected_template_ids loads", "card_template_choice",
     {"expected_template_ids": []}, True, []),
    ("empty substrings loads", "card_must_contain", {"substrings": []}, True, []),
    ("config null means {}", "card_completion", None, True, []),
    ("unknown key ignored", "card_completion", {"threshold": 0.5}, True, ["threshold"]),
    ("unknown key beside a known one", "card_must_contain",
     {"substrings": ["x"], "case_sensitive": True}, True, ["case_sensitive"]),
    ("required key missing", "card_template_choice", {}, False, []),
    ("typo misses the required key", "card_must_contain", {"substring": ["x"]}, False,
     ["substring"]),
]


@pytest.mark.parametrize(
    ("name", "config", "loads", "ignored"),
    [c[1:] for c in CONFIGS],
    ids=[c[0] for c in CONFIGS],
)
def test_grader_configs(name: str, config: Any, loads: bool, ignored: list[str]) -> None:
    assert [w.split(" (did you mean")[0] for w in config_warnings(name, config)] == [
        f"grader {name!r}: unknown config key {k!r} ignored" for k in ignored
    ]
    if loads:
        validate_config(name, config)
    else:
        with pytest.raises(ValueError, match=name):
            validate_config(name, config)


# --- the card YAML writer ---------------------------------------------------------------------

LONG = (
    "Notes from the planning meeting, where we agreed to move the product launch to the second "
    "week of May, keep the budget at 12,500 EUR, and ask Mia to draft the press release "
    "before the offsite in Lisbon; the venue booking reference is XK-2291-B and it expires "
    "on Friday."
)
"""A 269-character plain string with spaces everywhere, so a width-100 writer folds it."""

# (case id, string value, expected text of the value in the YAML line)
WRITER_CASES: list[tuple[str, str, str]] = [
    ("long string stays plain on one line", LONG, LONG),
    ("long string needing quotes stays on one line", f"{LONG}: ok", f'"{LONG}: ok"'),
    ("long multi-line string stays on one line", f"{LONG}\n{LONG}", f'"{LONG}\\n{LONG}"'),
    ("leading zeros", "007", '"007"'),
    ("exponent (YAML 1.2 float)", "1e3", '"1e3"'),
    ("boolean word", "true", '"true"'),
    ("null word", "null", '"null"'),
    ("sexagesimal time (YAML 1.1 int)", "12:30", '"12:30"'),
    ("decimal amount", "18.40", '"18.40"'),
    ("ISO date", "2026-03-15", '"2026-03-15"'),
    ("yes/no word", "Yes", '"Yes"'),
    ("number with unit stays plain", "18.40 EUR", "18.40 EUR"),
    ("empty", "", '""'),
    ("leading space", " x", '" x"'),
    ("colon-space", "Note: buy milk", '"Note: buy milk"'),
    ("space-hash", "room #4 a", '"room #4 a"'),
    ("leading dash", "- item", '"- item"'),
    ("leading quote", "'hi'", '"\'hi\'"'),
    ("inner double quotes stay plain", 'he said "hi"', 'he said "hi"'),
    ("leading double quote escaped", '"hi"', '"\\"hi\\""'),
    ("backslash in a quoted string", "#a\\b", '"#a\\\\b"'),
    ("multi-line", "line one\nline two", '"line one\\nline two"'),
    ("tab", "a\tb", '"a\\tb"'),
    ("unicode raw", "Café · Straße · 日本 · 🎉", "Café · Straße · 日本 · 🎉"),
    ("unicode quoted stays raw", "Straße: 5", '"Straße: 5"'),
    ("url with fragment", "https://example.org/a?b=c#frag", "https://example.org/a?b=c#frag"),
    ("fact id", FACT_ID, FACT_ID),
]


@pytest.mark.parametrize(
    ("value", "written"), [c[1:] for c in WRITER_CASES], ids=[c[0] for c in WRITER_CASES]
)
def test_yaml_writer_scalars(value: str, written: str) -> None:
    card = {"fact_id": FACT_ID, "title": value, "ui_configs": [
        {"template_id": "snippet", "data": {"text": value}}]}
    text = dump_card(card)
    assert f"title: {written}\n" in text
    assert f"    text: {written}\n" in text
    assert yaml.safe_load(text) == card  # round trip: same values, strings stay strings
    assert yaml.load(text, Loader=yaml.CSafeLoader) == card


def test_yaml_writer_one_scalar_per_line_and_no_folding() -> None:
    card = {
        "fact_id": FACT_ID,
        "timestamp": 1773478800,
        "status": "completed",
        "tags": ["Trip", "Finance"],
        "ui_configs": [{"template_id": "article", "data": {"body": LONG * 3, "count": 1.5}}],
        "title": "Planning",
        "address": "x" * 500,
    }
    lines = dump_card(card).splitlines()
    assert lines == [
        f"fact_id: {FACT_ID}",
        "timestamp: 1773478800",
        "status: completed",
        "tags:",
        "- Trip",
        "- Finance",
        "ui_configs:",
        "- template_id: article",
        "  data:",
        f"    body: {LONG * 3}",
        "    count: 1.5",
        "title: Planning",
        f"address: {'x' * 500}",
    ]


def test_a_substring_across_the_old_fold_point_is_found() -> None:
    card = {"fact_id": FACT_ID, "ui_configs": [{"template_id": "snippet",
                                                 "data": {"text": LONG}}]}
    folded = yaml.dump(card, Dumper=yaml.SafeDumper, sort_keys=False, allow_unicode=True,
                       width=100)
    fold = next(x for x in folded.splitlines() if "text:" in x)  # the line the old writer broke
    assert fold.strip().startswith("text:") and fold.strip() != f"text: {LONG}"
    tail = fold.split()[-1]
    spanning = f"{tail} {LONG[LONG.index(tail) + len(tail) + 1:].split()[0]}"
    assert spanning in LONG and spanning not in folded  # the old writer split it
    assert spanning in dump_card(card)


async def test_must_contain_finds_a_long_value_end_to_end(workspace: Workspace) -> None:
    agent_input = AgentInput(fact_id=FACT_ID, content=LONG, published_at=PUBLISHED)
    session = CardAgentSession(workspace, agent_input, load_prompt("card_agent"))
    model = ScriptedModel([reply("", call(SAVE_TOOL, fact_id=FACT_ID, title="Planning",
                                          ui_configs=[cfg("article", {"body": LONG})]))])
    transcript = await run_agent(model, session)
    outcome = session.outcome(transcript)
    score = await run_grader(
        "card_must_contain",
        {"substrings": ["press release before the offsite", "XK-2291-B and it expires"]},
        ctx(outcome, agent="card_agent"),
    )
    assert (score.value, score.passed) == (1.0, True)


# Keep the suite honest about its size: a table that silently shrinks hides a lost rule.
def test_case_counts() -> None:
    tables: dict[str, list[Any]] = {
        "data": DATA_CASES, "save": SAVE_CASES, "metadata": METADATA_CASES,
        "published": PUBLISHED_CASES, "template_choice": TEMPLATE_CHOICE,
        "must_contain": MUST_CONTAIN, "configs": CONFIGS, "writer": WRITER_CASES,
    }
    assert all(tables.values())
    assert sum(len(t) for t in tables.values()) >= 128

