"""save_timeline_card and get_card_metadata: checks, their order, and the card file written."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from promptloop.agents.card.card_file import read_card, write_card_atomic
from promptloop.agents.card.templates import TEMPLATE_IDS
from promptloop.agents.card.tools import (
    ALLOWED_TAGS,
    METADATA_TOOL,
    SAVE_TOOL,
    TAGS_FILE,
    CardTools,
)
from promptloop.agents.llm.scripted import call
from promptloop.agents.llm.types import ToolCall
from promptloop.agents.tools import Tool, ToolResult
from promptloop.agents.workspace import Workspace
from tests.card.support import FACT_ID, PUBLISHED

GOOD_CONFIGS = [{"template_id": "transaction", "data": {"merchant": "Noodle Bar",
                                                         "amount": "18.40"}}]
_DROP = object()


def _tool(tools: CardTools, name: str) -> Tool:
    return {t.name: t for t in tools.tools()}[name]


async def save(tools: CardTools, **overrides: Any) -> ToolResult:
    args: dict[str, Any] = {"fact_id": FACT_ID, "title": "Lunch with Mia",
                            "ui_configs": GOOD_CONFIGS}
    args.update(overrides)
    args = {k: v for k, v in args.items() if v is not _DROP}
    return await _tool(tools, SAVE_TOOL).invoke(call(SAVE_TOOL, **args))


def _card(workspace: Workspace) -> dict[str, Any]:
    return read_card(workspace.card_path(FACT_ID))


async def test_success_writes_an_ordered_completed_card(
    workspace: Workspace, card_tools: CardTools
) -> None:
    result = await save(card_tools, address="Main St 4",
                        tags=[{"name": "finance", "icon": "💶"}],
                        content_creation_date="2026-03-14 12:10:00")
    assert not result.is_error and result.stop
    assert "Card saved for 2026/03/14.md#ts_2" in result.content
    path = workspace.card_path(FACT_ID)
    card = yaml.safe_load(path.read_text(encoding="utf-8"))
    # SPEC §8: no keys beyond §3's (content_creation_date is not stored), tags are names, and
    # the timestamp is the creation date when it parses
    assert list(card) == ["fact_id", "timestamp", "status", "tags", "ui_configs", "title",
                          "address"]
    assert card["fact_id"] == FACT_ID
    assert card["timestamp"] == int(datetime(2026, 3, 14, 12, 10, tzinfo=UTC).timestamp())
    assert card["status"] == "completed"
    assert card["tags"] == ["Finance"]
    assert card["ui_configs"] == GOOD_CONFIGS
    assert card["title"] == "Lunch with Mia"
    assert [s.fact_id for s in card_tools.state.saves] == [FACT_ID]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


async def test_title_is_checked_first(card_tools: CardTools) -> None:
    # SPEC §8: the title check is "empty", untrimmed ("   " passes it, see test_card_compat)
    result = await save(card_tools, title="", ui_configs=[], fact_id="2026/03/14.md#ts_9")
    assert result.is_error and not result.stop
    assert "title is empty" in result.content


async def test_ui_configs_are_checked_before_the_fact(card_tools: CardTools) -> None:
    result = await save(card_tools, ui_configs=[{"template_id": "memo", "data": {}}],
                        fact_id="2026/03/14.md#ts_9")
    assert result.is_error
    assert "ui_configs[0].template_id 'memo' is not allowed" in result.content
    assert ", ".join(TEMPLATE_IDS) in result.content


async def test_fact_is_checked_before_tags(card_tools: CardTools) -> None:
    result = await save(card_tools, fact_id="2026/03/14.md#ts_9", tags=["Work"])
    assert result.is_error
    assert "fact 2026/03/14.md#ts_9 does not exist in Facts/2026/03/14.md" in result.content


async def test_tags_are_checked_and_a_bad_creation_date_is_not(card_tools: CardTools) -> None:
    # SPEC §8: an unparseable content_creation_date never refuses the save; tags still do
    result = await save(card_tools, tags=[{"name": "Work"}], content_creation_date="yesterday")
    assert result.is_error
    assert "tags[0] 'Work' is not an allowed tag" in result.content
    assert ", ".join(ALLOWED_TAGS) in result.content


async def test_bad_creation_date_is_ignored_and_logged(
    workspace: Workspace, card_tools: CardTools, caplog: pytest.LogCaptureFixture
) -> None:
    # SPEC §8: an unparseable content_creation_date is ignored (logged), the card keeps its
    # existing timestamp (the pending card's, written at the published time)
    with caplog.at_level(logging.WARNING, logger="promptloop.agents.card.tools"):
        result = await save(card_tools, content_creation_date="last Tuesday")
    assert not result.is_error
    card = _card(workspace)
    assert card["status"] == "completed"
    assert card["timestamp"] == int(PUBLISHED.timestamp())
    assert "last Tuesday" in caplog.text


async def test_every_invalid_config_is_reported_with_its_index(card_tools: CardTools) -> None:
    configs = [
        {"template_id": "snippet", "data": {"text": "ok"}},
        {"template_id": "metric", "data": {"items": [{"title": "Weight", "value": "71"}]}},
        {"template_id": "event", "data": {}},
        "snippet",
        {"data": {"text": "x"}},
    ]
    result = await save(card_tools, ui_configs=configs)
    assert result.is_error
    text = result.content
    assert "ui_configs[0]" not in text
    assert "ui_configs[1] (metric): data.items[0].value must be a number" in text
    assert "Required data for metric: items [{title, value (number)}]" in text
    assert "ui_configs[2] (event): data.start_time is missing" in text
    assert "ui_configs[3] must be an object" in text
    assert "ui_configs[4].template_id is missing" in text


async def test_bad_data_then_fixed_call_succeeds(
    workspace: Workspace, card_tools: CardTools
) -> None:
    bad = [{"template_id": "transaction", "data": {"merchant": "Noodle Bar", "amount": 18.4}}]
    first = await save(card_tools, ui_configs=bad)
    assert first.is_error and "data.amount must be a string" in first.content
    assert _card(workspace)["status"] == "pending"
    second = await save(card_tools)
    assert not second.is_error and _card(workspace)["status"] == "completed"


@pytest.mark.parametrize(
    ("ui_configs", "fragment"),
    [
        ([], "ui_configs is empty"),
        ("", "not valid JSON"),
        ("[{template_id: snippet}]", "not valid JSON"),
        ({"template_id": "snippet", "data": {"text": "x"}}, "ui_configs must be a list"),
        ('{"template_id": "snippet"}', "ui_configs must be a list"),
        (7, "ui_configs must be a list"),
    ],
)
async def test_ui_configs_shape_errors(
    card_tools: CardTools, ui_configs: Any, fragment: str
) -> None:
    result = await save(card_tools, ui_configs=ui_configs)
    assert result.is_error and fragment in result.content


async def test_ui_configs_as_json_string_is_accepted(
    workspace: Workspace, card_tools: CardTools
) -> None:
    result = await save(card_tools, ui_configs=json.dumps(GOOD_CONFIGS))
    assert not result.is_error
    assert _card(workspace)["ui_configs"] == GOOD_CONFIGS


async def test_template_id_must_match_exactly(
    workspace: Workspace, card_tools: CardTools
) -> None:
    # SPEC §8: template_id is matched exactly (was: trimmed and lower-cased)
    result = await save(card_tools, ui_configs=[{"template_id": " Snippet ",
                                                 "data": {"text": "hi"}}])
    assert result.is_error
    assert "template_id ' Snippet ' is not allowed (template ids are exact: 'snippet')" in (
        result.content
    )
    assert _card(workspace)["status"] == "pending"


SNAP = {"template_id": "snapshot", "data": {"image_url": "https://example.org/1.jpg"}}
SNAP2 = {"template_id": "snapshot", "data": {"image_url": "https://example.org/2.jpg"}}
NOTE = {"template_id": "snippet", "data": {"text": "sunset"}}


@pytest.mark.parametrize(
    ("configs", "kept"),
    [
        ([SNAP, NOTE], [NOTE]),
        ([NOTE, SNAP, SNAP2], [NOTE]),
        ([SNAP, SNAP2], [SNAP]),
        ([SNAP], [SNAP]),
    ],
)
async def test_snapshot_dropping(
    workspace: Workspace, card_tools: CardTools, configs: list[Any], kept: list[Any]
) -> None:
    result = await save(card_tools, ui_configs=configs)
    assert not result.is_error
    assert _card(workspace)["ui_configs"] == kept
    dropped = len(configs) - len(kept)
    assert (f"Dropped {dropped} snapshot" in result.content) == (dropped > 0)


async def test_tags_are_trimmed_capitalised_and_deduplicated(
    workspace: Workspace, card_tools: CardTools
) -> None:
    # SPEC §8: entries are {name, icon} objects, the icon is ignored, an empty name is skipped,
    # and the card stores the names
    tags = [{"name": " trip "}, {"name": "HEALTH", "icon": "🏃"}, {"name": "Trip", "icon": "✈️"},
            {"name": "audio", "icon": 3}, {"name": "  "}, {"icon": "x"}]
    result = await save(card_tools, tags=tags)
    assert not result.is_error
    assert _card(workspace)["tags"] == ["Trip", "Health", "Audio"]


@pytest.mark.parametrize(
    ("tags", "fragment"),
    [
        # SPEC §8: blank names are skipped and icons ignored (no longer errors); a bare
        # string entry is an error
        ([{"name": "Travel"}], "tags[0] 'Travel' is not an allowed tag"),
        (["Trip"], "tags[0] must be an object {name, icon}, got string 'Trip'"),
        ([{"name": "Trip"}, {"name": 3}], "tags[1].name must be a string"),
        ('["Trip"]', "tags must be a list"),
        ({"name": "Trip"}, "tags must be a list"),
    ],
)
async def test_tag_rejections(card_tools: CardTools, tags: Any, fragment: str) -> None:
    result = await save(card_tools, tags=tags)
    assert result.is_error and fragment in result.content


@pytest.mark.parametrize("fact_id", ["2026/03/14.md#ts_9", "2026/03/15.md#ts_2", "ts_2", ""])
async def test_missing_or_malformed_fact_is_rejected(
    workspace: Workspace, card_tools: CardTools, fact_id: str
) -> None:
    result = await save(card_tools, fact_id=fact_id)
    assert result.is_error
    assert "Raw Input ID" in result.content
    assert not workspace.card_path("2026/03/14.md#ts_9").exists()
    assert card_tools.state.saves == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"title": 5},
        {"title": _DROP},
        {"ui_configs": _DROP},
        {"fact_id": _DROP},
        {"fact_id": ["2026/03/14.md#ts_2"]},
        {"address": {"street": "Main"}},
        {"content_creation_date": 20260314},
        {"ui_configs": [{"template_id": 3, "data": None}]},
        {"ui_configs": [{"template_id": "snippet", "data": "text"}]},
        {"ui_configs": [None]},
        {"tags": [None, 4]},
    ],
)
async def test_malformed_arguments_never_crash(
    workspace: Workspace, card_tools: CardTools, overrides: dict[str, Any]
) -> None:
    result = await save(card_tools, **overrides)
    assert result.is_error and not result.stop
    assert _card(workspace)["status"] == "pending"


async def test_unparseable_arguments_are_an_error(card_tools: CardTools) -> None:
    bad = ToolCall(id="c1", name=SAVE_TOOL, raw_arguments="{oops", parse_error="not JSON")
    result = await _tool(card_tools, SAVE_TOOL).invoke(bad)
    assert result.is_error and "not JSON" in result.content


async def test_save_keeps_the_existing_fact_id_and_clears_failure_reason(
    workspace: Workspace, card_tools: CardTools
) -> None:
    path = workspace.card_path(FACT_ID)
    card = read_card(path)
    card.update(status="failed", failure_reason="model timed out", title="old")
    write_card_atomic(path, card)
    result = await save(card_tools, fact_id=" 2026/03/14.md#ts_2 ")
    assert not result.is_error
    saved = read_card(path)
    assert saved["fact_id"] == FACT_ID
    assert saved["status"] == "completed" and "failure_reason" not in saved


async def test_saving_another_existing_fact_creates_its_card(
    workspace: Workspace, card_tools: CardTools
) -> None:
    workspace.ensure_fact("2026/03/14.md#ts_1", "Morning run", datetime(2026, 3, 14, 7, 0))
    result = await save(card_tools, fact_id="2026/03/14.md#ts_1")
    assert not result.is_error
    other = read_card(workspace.card_path("2026/03/14.md#ts_1"))
    assert other["fact_id"] == "2026/03/14.md#ts_1" and other["status"] == "completed"
    assert _card(workspace)["status"] == "pending"


async def test_metadata_lists_the_existing_tags(workspace: Workspace) -> None:
    # SPEC §8: "# Existing Tags" and the names from _System/tags.md (was: allowed tags with
    # usage counts from the cards)
    workspace.system.mkdir(parents=True, exist_ok=True)
    (workspace.system / TAGS_FILE).write_text(
        "# Tags\n\n- Trip\n* Health\n1. Coffee\nTrip\n  Books  \n", encoding="utf-8"
    )
    tools = CardTools(workspace, PUBLISHED)
    result = await _tool(tools, METADATA_TOOL).invoke(call(METADATA_TOOL))
    assert not result.is_error and not result.stop
    assert result.content == "# Existing Tags\n- Trip\n- Health\n- Coffee\n- Books"


async def test_metadata_without_tags(card_tools: CardTools) -> None:
    result = await _tool(card_tools, METADATA_TOOL).invoke(call(METADATA_TOOL))
    assert result.content == "# Existing Tags\nThere are no existing tags yet."


def test_tool_specs_describe_templates_and_tags(card_tools: CardTools) -> None:
    spec = _tool(card_tools, SAVE_TOOL).spec()
    props = spec.parameters["properties"]
    assert props["ui_configs"]["items"]["properties"]["template_id"]["enum"] == list(TEMPLATE_IDS)
    assert props["tags"]["items"]["properties"]["name"]["enum"] == list(ALLOWED_TAGS)
    assert set(spec.parameters["required"]) == {"fact_id", "title", "ui_configs"}
    for template_id in TEMPLATE_IDS:
        assert f"- {template_id}: " in spec.description


async def test_strict_templates_is_an_explicit_opt_in(workspace: Workspace) -> None:
    mood = [{"template_id": "mood", "data": {"mood_name": "Calm", "color_hex": "blue"}}]
    strict = CardTools(workspace, PUBLISHED, strict_templates=True)
    result = await save(strict, ui_configs=mood)
    assert result.is_error and "data.color_hex must be a hex colour" in result.content
    assert not (await save(CardTools(workspace, PUBLISHED), ui_configs=mood)).is_error
