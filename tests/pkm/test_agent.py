"""End to end: PkmAgentSession driven by a ScriptedModel through agents.runtime.run_agent."""

from __future__ import annotations

from pathlib import Path

from promptloop.agents.base import AgentInput, load_prompt, prepare_workspace
from promptloop.agents.llm.scripted import ScriptedModel, call, reply
from promptloop.agents.llm.types import ToolCall
from promptloop.agents.pkm.agent import PkmAgentSession
from promptloop.agents.runtime import RuntimeConfig, run_agent
from promptloop.agents.workspace import Workspace
from promptloop.optimizer.run.agents import get_agent
from tests.pkm.conftest import CONTENT, FACT_ID, OLD_FACT_ID, PUBLISHED, make_session

SLEEP = "/Areas/Health/sleep.md"
LAST_LINE = f"- 03-10: 5.5 h, late screen time <!-- fact_id: {OLD_FACT_ID} -->\n"
NEW_LINE = f"- 03-14: ~5 h, coffee after 4pm <!-- fact_id: {FACT_ID} -->\n"
INSIGHT = "Second short night in five days; both followed something late in the evening."


def _edit() -> ToolCall:
    return call("Edit", file_path=SLEEP, old_string=LAST_LINE, new_string=LAST_LINE + NEW_LINE)


def _insight() -> ToolCall:
    return call(
        "update_timeline_card_insight",
        fact_id=FACT_ID,
        insight_text=INSIGHT,
        related_fact_ids=[OLD_FACT_ID],
    )


def test_first_message_and_registry(workspace: Workspace, tmp_path: Path) -> None:
    agent_input = AgentInput(
        fact_id=FACT_ID, content=CONTENT, published_at=PUBLISHED, user_language="German"
    )
    prepare_workspace(workspace, agent_input)
    prompt = load_prompt("pkm_agent")
    session = get_agent("pkm_agent")(workspace, agent_input, prompt)
    assert isinstance(session, PkmAgentSession) and session.name == "pkm_agent"
    assert "PARA" in prompt and "skip_pkm_organization" in prompt
    text = session.first_message()
    assert text.startswith("<system-reminder>")
    assert "  Areas/\n    Health/\n      sleep.md" in text
    assert "User language: German" in text
    # docs/compat.md: the publish time carries the UTC offset and zone
    assert "Published Time: 2026-03-14 09:30:05 UTC+0000 (UTC, Saturday)" in text
    assert f"Raw Input ID (fact_id): {FACT_ID}" in text
    assert text.endswith(f"Raw Input Content:\n{CONTENT}")
    empty = make_session(Workspace(tmp_path / "fresh"))
    assert "The PKM is empty" in empty.first_message()


async def test_persist_path_completes(workspace: Workspace) -> None:
    session = make_session(workspace)
    model = ScriptedModel(
        [
            reply("", call("Read", file_path=SLEEP)),
            reply("", _edit()),
            reply("", _insight()),
        ]
    )
    transcript = await run_agent(model, session)
    assert transcript.completed and transcript.metrics.n_runs == 1
    assert [c.tool_name for c in transcript.tool_calls] == [
        "Read",
        "Edit",
        "update_timeline_card_insight",
    ]
    assert not any(c.is_error for c in transcript.tool_calls)
    out = session.outcome(transcript)
    assert out["is_complete"] and out["wrote_para"] and out["updated_insight"]
    assert not out["skipped_pkm"] and out["successful_pkm_mutation"]
    assert out["missing_requirements"] == [] and out["skip_evidence"] is None
    assert NEW_LINE in out["file_contents"]["Areas/Health/sleep.md"]
    assert NEW_LINE not in out["file_contents_before"]["Areas/Health/sleep.md"]
    assert out["workspace_diff"].modified == ["Areas/Health/sleep.md"]
    assert out["workspace_diff"].created == [] and out["workspace_diff"].deleted == []
    assert out["insight"]["text"] == INSIGHT
    assert out["insight"]["related_facts"] == [{"id": OLD_FACT_ID}]
    assert session.record_session()


async def test_skip_path_completes_without_mutation(workspace: Workspace) -> None:
    session = make_session(workspace, content="hi 👋")
    model = ScriptedModel(
        [reply("", call("skip_pkm_organization", evidence="The input is only 'hi 👋'."))]
    )
    transcript = await run_agent(model, session)
    out = session.outcome(transcript)
    assert transcript.completed and out["is_complete"]
    assert out["skipped_pkm"] and not out["successful_pkm_mutation"]
    assert out["skip_evidence"] == "The input is only 'hi 👋'."
    assert out["insight"] is None
    diff = out["workspace_diff"]
    assert diff.created == diff.modified == diff.deleted == []
    assert out["file_contents"] == out["file_contents_before"]
    assert not session.record_session()


async def test_incomplete_run_is_reprompted(workspace: Workspace) -> None:
    session = make_session(workspace)
    model = ScriptedModel(
        [
            reply("", call("Write", file_path="/Areas/Health/caffeine.md", content=NEW_LINE)),
            reply("Saved it."),
            reply("", _insight()),
        ]
    )
    transcript = await run_agent(model, session)
    assert transcript.completed and transcript.metrics.n_runs == 2
    reminders = [e for e in transcript.events if e.kind == "reminder"]
    # docs/compat.md names; both ways to finish are listed
    assert len(reminders) == 1 and reminders[0].data["missing"] == [
        "updated_timeline_card_insight",
        "skip_pkm_organization",
    ]
    assert "update_timeline_card_insight" in model.calls[2].messages[-1].content
    out = session.outcome(transcript)
    assert out["is_complete"] and out["workspace_diff"].created == ["Areas/Health/caffeine.md"]


async def test_never_finishing_leaves_missing_requirements(workspace: Workspace) -> None:
    session = make_session(workspace)
    model = ScriptedModel([reply("thinking"), reply("still thinking")])
    transcript = await run_agent(model, session, RuntimeConfig(max_runs=2))
    out = session.outcome(transcript)
    assert not transcript.completed and not out["is_complete"]
    # docs/compat.md names
    assert out["missing_requirements"] == [
        "wrote_para_with_fact_id",
        "updated_timeline_card_insight",
        "skip_pkm_organization",
    ]
    assert transcript.missing_requirements == out["missing_requirements"]


async def test_tool_error_then_recovery(workspace: Workspace) -> None:
    session = make_session(workspace)
    model = ScriptedModel(
        [
            reply(
                "",
                call(
                    "Edit",
                    file_path=SLEEP,
                    old_string="- 03-10: 5.5 h late screen time",
                    new_string="x",
                ),
            ),
            reply("", call("Read", file_path=SLEEP)),
            reply("", _edit()),
            reply("", _insight()),
        ]
    )
    transcript = await run_agent(model, session)
    assert [c.is_error for c in transcript.tool_calls] == [True, False, False, False]
    assert "0 matches" in transcript.tool_calls[0].result
    assert transcript.completed and session.outcome(transcript)["is_complete"]


async def test_insight_after_reminder_lets_the_model_continue(workspace: Workspace) -> None:
    dated = workspace.pkm / "Areas" / "Health" / "2026-03-13.md"
    dated.write_text("- 03-13: 6 h\n", encoding="utf-8")
    session = make_session(workspace)
    model = ScriptedModel(
        [
            reply("", call("Read", file_path="/Areas/Health/2026-03-13.md")),
            reply("", _edit(), _insight()),
            reply(
                "",
                call(
                    "Edit",
                    file_path=SLEEP,
                    old_string=NEW_LINE,
                    new_string="- 03-13: 6 h\n" + NEW_LINE,
                ),
                call("Remove", path="/Areas/Health/2026-03-13.md", confirm=True),
            ),
            reply("Moved the dated note into the sleep log."),
        ]
    )
    transcript = await run_agent(model, session)
    assert transcript.completed and transcript.metrics.n_runs == 1
    assert transcript.metrics.n_model_calls == 4
    assert not any(e.kind == "stop" for e in transcript.events)
    out = session.outcome(transcript)
    assert out["workspace_diff"].deleted == ["Areas/Health/2026-03-13.md"]
    assert "- 03-13: 6 h\n" + NEW_LINE in out["file_contents"]["Areas/Health/sleep.md"]


async def test_malformed_arguments_become_error_results(workspace: Workspace) -> None:
    session = make_session(workspace, content="ok")
    broken = ToolCall(id="raw", name="Read", parse_error="arguments are not valid JSON")
    model = ScriptedModel(
        [
            reply(
                "",
                call("Read", file_path=123),
                call("Write", file_path="/Areas/x.md"),
                call("BatchRead", file_patterns='["/Areas/Health/sleep.md"]'),
                call("Grep", pattern="x", **{"-A": "many"}),
                call("LS", depth=0),
                call("Remove", path="/Areas", confirm="maybe"),
                call("update_timeline_card_insight", fact_id=FACT_ID),
                call("NoSuchTool", x=1),
                broken,
            ),
            reply("", call("skip_pkm_organization", evidence="The whole input is 'ok'.")),
        ]
    )
    transcript = await run_agent(model, session)
    first_turn = transcript.tool_calls[:9]
    assert all(c.is_error for c in first_turn), [c.result for c in first_turn]
    assert "file_path" in first_turn[0].result and "content" in first_turn[1].result
    assert "file_patterns" in first_turn[2].result
    assert "Unknown tool" in first_turn[7].result
    assert "valid JSON" in first_turn[8].result
    out = session.outcome(transcript)
    assert transcript.completed and out["is_complete"] and out["skipped_pkm"]
    assert not out["successful_pkm_mutation"] and out["n_tool_errors"] == 9
    assert (workspace.pkm / "Areas" / "Health" / "sleep.md").is_file()
