"""End-to-end Card Agent runs with a scripted model through the shared runtime."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.base import AgentInput, load_prompt, prepare_workspace
from promptloop.agents.card.agent import CHECKS, CardAgentSession
from promptloop.agents.card.templates import TEMPLATE_IDS
from promptloop.agents.card.tools import ALLOWED_TAGS, METADATA_TOOL, SAVE_TOOL
from promptloop.agents.llm.scripted import ScriptedModel, call, reply
from promptloop.agents.runtime import RuntimeConfig, run_agent
from promptloop.agents.transcript import Transcript
from promptloop.agents.workspace import Workspace
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.names import agent_names
from promptloop.optimizer.run.agents import get_agent
from tests.card.support import CONTENT, FACT_ID, PUBLISHED

OUTCOME_KEYS = {
    "is_complete", "card_save_tool_called", "card_path", "persisted_fact_id", "status",
    "has_title", "has_ui_configs", "missing_requirements", "failure_reason", "template_ids",
    "card_tags", "card_yaml_blob", "card",
}
GOOD_ARGS: dict[str, Any] = {
    "fact_id": FACT_ID,
    "title": "Lunch with Mia at Noodle Bar",
    "ui_configs": [
        {"template_id": "transaction",
         "data": {"merchant": "Noodle Bar", "amount": "18.40", "currency": "EUR"}},
        {"template_id": "person", "data": {"name": "Mia"}},
    ],
    "tags": [{"name": "finance", "icon": "💶"}],
}


def _session(workspace: Workspace, agent_input: AgentInput) -> CardAgentSession:
    return CardAgentSession(workspace, agent_input, load_prompt("card_agent"))


async def test_success_path(workspace: Workspace, agent_input: AgentInput) -> None:
    model = ScriptedModel([reply("", call(SAVE_TOOL, **GOOD_ARGS))])
    session = _session(workspace, agent_input)
    transcript = await run_agent(model, session)

    assert transcript.completed and transcript.missing_requirements == []
    assert len(model.calls) == 1, "a successful save must end the run"
    assert [t.name for t in model.calls[0].tools] == [SAVE_TOOL, METADATA_TOOL]
    assert model.calls[0].messages[0].content == load_prompt("card_agent")

    outcome = session.outcome(transcript)
    assert set(outcome) == OUTCOME_KEYS
    path = workspace.card_path(FACT_ID)
    assert outcome["is_complete"] is True
    assert outcome["card_save_tool_called"] is True
    assert outcome["card_path"] == "Cards/2026/03/14_ts_2.yaml"
    assert outcome["persisted_fact_id"] == FACT_ID
    assert outcome["status"] == "completed"
    assert outcome["has_title"] is True and outcome["has_ui_configs"] is True
    assert outcome["missing_requirements"] == [] and outcome["failure_reason"] is None
    assert outcome["template_ids"] == ["transaction", "person"]
    assert outcome["card_tags"] == ["Finance"]
    assert outcome["card_yaml_blob"] == path.read_text(encoding="utf-8")
    assert outcome["card"]["timestamp"] == int(PUBLISHED.timestamp())
    assert list(outcome["card"])[:6] == ["fact_id", "timestamp", "status", "tags", "ui_configs",
                                         "title"]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


async def test_tool_error_then_recovery(workspace: Workspace, agent_input: AgentInput) -> None:
    bad = dict(GOOD_ARGS, ui_configs=[{"template_id": "metric",
                                       "data": {"items": [{"title": "Bill", "value": "18.40"}]}}])
    model = ScriptedModel([
        reply("", call(SAVE_TOOL, **bad)),
        reply("Fixing the value type.", call(SAVE_TOOL, **GOOD_ARGS)),
    ])
    session = _session(workspace, agent_input)
    transcript = await run_agent(model, session)

    assert transcript.completed and transcript.metrics.n_runs == 1
    first, second = transcript.tool_calls
    assert first.is_error and "ui_configs[0] (metric): data.items[0].value" in first.result
    assert not second.is_error
    tool_message = model.calls[1].messages[-1]
    assert tool_message.role == "tool" and tool_message.is_error
    assert session.outcome(transcript)["template_ids"] == ["transaction", "person"]


async def test_text_only_answer_gets_a_reminder(
    workspace: Workspace, agent_input: AgentInput
) -> None:
    model = ScriptedModel([
        reply("Here is your card: Lunch with Mia."),
        reply("", call(SAVE_TOOL, **GOOD_ARGS)),
    ])
    session = _session(workspace, agent_input)
    transcript = await run_agent(model, session)

    assert transcript.completed and transcript.metrics.n_runs == 2
    reminders = [e for e in transcript.events if e.kind == "reminder"]
    assert len(reminders) == 1
    assert reminders[0].data["missing"] == [
        "matching_successful_save_timeline_card_tool_call",
        "status_completed",
        "title_present",
        "ui_configs_present",
    ]
    sent = model.calls[1].messages[-1]
    assert sent.role == "user" and sent.content.startswith("<system-reminder>")
    for name in reminders[0].data["missing"]:
        assert f"- {name}: {CHECKS[name]}" in sent.content
    assert f'fact_id "{FACT_ID}"' in sent.content
    assert "card_file_exists" not in sent.content


async def test_save_for_another_fact_does_not_count(
    workspace: Workspace, agent_input: AgentInput
) -> None:
    workspace.ensure_fact("2026/03/14.md#ts_1", "Morning run", datetime(2026, 3, 14, 7, 0))
    model = ScriptedModel([
        reply("", call(SAVE_TOOL, **dict(GOOD_ARGS, fact_id="2026/03/14.md#ts_1"))),
        reply("", call(SAVE_TOOL, **GOOD_ARGS)),
    ])
    session = _session(workspace, agent_input)
    transcript = await run_agent(model, session)
    assert transcript.metrics.n_runs == 2 and transcript.completed
    first_missing = next(e for e in transcript.events if e.kind == "reminder").data["missing"]
    assert first_missing[0] == "matching_successful_save_timeline_card_tool_call"


async def test_never_saving_is_incomplete_after_max_runs(
    workspace: Workspace, agent_input: AgentInput
) -> None:
    model = ScriptedModel([reply("I cannot do that.")] * 4)
    session = _session(workspace, agent_input)
    transcript = await run_agent(model, session, RuntimeConfig(max_runs=4))
    assert not transcript.completed and transcript.metrics.n_runs == 4
    outcome = session.outcome(transcript)
    assert outcome["is_complete"] is False and outcome["card_save_tool_called"] is False
    assert outcome["status"] == "pending" and outcome["has_title"] is False
    assert outcome["template_ids"] == [] and outcome["card_tags"] == []
    assert "status_completed" in outcome["missing_requirements"]
    assert "never called a tool" in outcome["failure_reason"]


async def test_failure_reason_names_the_last_save_error(
    workspace: Workspace, agent_input: AgentInput
) -> None:
    model = ScriptedModel([
        reply("", call(SAVE_TOOL, **dict(GOOD_ARGS, title=""))),
        reply("Done."),
    ])
    session = _session(workspace, agent_input)
    transcript = await run_agent(model, session, RuntimeConfig(max_runs=1))
    reason = session.outcome(transcript)["failure_reason"]
    assert "card incomplete" in reason and "title is empty" in reason


def test_outcome_without_a_card_file(tmp_path: Path, agent_input: AgentInput) -> None:
    workspace = Workspace(tmp_path)
    session = _session(workspace, agent_input)
    assert session.missing_requirements() == list(CHECKS)
    outcome = session.outcome(Transcript())
    assert outcome["card_path"] == "Cards/2026/03/14_ts_2.yaml"
    assert outcome["card_yaml_blob"] == "" and outcome["card"] is None
    assert outcome["persisted_fact_id"] is None and outcome["status"] is None


def test_outcome_with_an_unreadable_card(tmp_path: Path, agent_input: AgentInput) -> None:
    workspace = Workspace(tmp_path)
    path = workspace.card_path(FACT_ID)
    path.parent.mkdir(parents=True)
    path.write_text("status: [broken\n", encoding="utf-8")
    session = _session(workspace, agent_input)
    outcome = session.outcome(Transcript())
    assert outcome["card_yaml_blob"] == "status: [broken\n"
    assert "card_file_exists" not in outcome["missing_requirements"]
    assert "persisted_fact_id_matches" in outcome["missing_requirements"]


def test_first_message_format(workspace: Workspace, agent_input: AgentInput) -> None:
    text = _session(workspace, agent_input).first_message()
    head, _, rest = text.partition("</system-reminder>\n\n")
    assert head.startswith("<system-reminder>\nUser language: English.")
    assert f"do not call {METADATA_TOOL} again" in head
    # SPEC §8: the tag list is the get_card_metadata result ("# Existing Tags"); the allowed
    # names follow it, and the Published time carries offset, zone and a do-not-show note
    assert "# Existing Tags\nThere are no existing tags yet." in head
    for tag in ALLOWED_TAGS:
        assert f"- {tag}: " in head
    lines = rest.splitlines()
    assert SAVE_TOOL in lines[0]
    assert lines[2:5] == [
        f"Raw Input ID (fact_id): {FACT_ID}",
        "Published time: 2026-03-14 09:30:05 UTC+00:00 (UTC). Do not show this date in the card.",
        "Raw Input Content:",
    ]
    assert "\n".join(lines[5:]) == CONTENT


def test_first_message_marks_empty_input(tmp_path: Path) -> None:
    agent_input = AgentInput(fact_id=FACT_ID, content="  ", published_at=PUBLISHED,
                             user_language="Deutsch")
    workspace = Workspace(tmp_path)
    prepare_workspace(workspace, agent_input)
    text = _session(workspace, agent_input).first_message()
    assert "User language: Deutsch." in text
    assert text.endswith("Raw Input Content:\n(empty: the user sent no text)")


def test_prompt_covers_every_template_and_tag() -> None:
    prompt = load_prompt("card_agent")
    assert 80 <= len(prompt.splitlines()) <= 150
    assert max(len(line) for line in prompt.splitlines()) <= 100
    for template_id in TEMPLATE_IDS:
        assert f"`{template_id}`" in prompt
    assert "## " in prompt and SAVE_TOOL in prompt


def test_the_project_declares_the_card_agent(
    workspace: Workspace, agent_input: AgentInput
) -> None:
    assert {"card_agent", "pkm_agent"} <= set(agent_names())
    session = get_agent("card_agent")(workspace, agent_input, "prompt")
    assert isinstance(session, CardAgentSession) and session.name == "card_agent"
    with pytest.raises(ConfigError, match=r"promptloop.toml.*unknown agent.*card_agent, pkm_agent"):
        get_agent("cards")
