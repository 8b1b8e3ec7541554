"""Graders on outcomes produced by the real agent sessions (scripted agent models), so the
grader code and the agents' outcome shapes cannot drift apart."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.base import AgentInput, prepare_workspace
from promptloop.agents.card.agent import CardAgentSession
from promptloop.agents.llm.scripted import ScriptedModel, call, reply
from promptloop.agents.pkm.agent import PkmAgentSession
from promptloop.agents.runtime import run_agent
from promptloop.agents.workspace import Workspace
from promptloop.graders import run_grader, trial_passed
from promptloop.graders.base import GradeContext

FACT = "2026/03/14.md#ts_2"
PUBLISHED = datetime(2026, 3, 14, 9, 30, 5, tzinfo=UTC)
LOG = "# Sleep\n\n## March 2026\n- 03-09: 7 h, felt fine <!-- seed:S1 -->\n"
CONTENT = "Slept 5 hours, coffee after 4pm again."


def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    path = ws.pkm / "Areas/Health/sleep.md"
    path.parent.mkdir(parents=True)
    path.write_text(LOG, encoding="utf-8")
    return ws


async def test_pkm_agent_outcome_grades_end_to_end(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    agent_input = AgentInput(fact_id=FACT, content=CONTENT, published_at=PUBLISHED)
    prepare_workspace(ws, agent_input)
    session = PkmAgentSession(ws, agent_input, "system")
    line = f"- 03-14: 5 h, coffee after 4pm <!-- fact_id: {FACT} -->"
    insight = "Two short nights this month both followed late coffee."
    agent = ScriptedModel(
        [
            reply("", call("Read", file_path="/Areas/Health/sleep.md")),
            reply("", call("Write", file_path="/Areas/Health/sleep.md", content=LOG + line + "\n")),
            reply("", call("update_timeline_card_insight", fact_id=FACT, insight_text=insight)),
        ]
    )
    transcript = await run_agent(agent, session)
    outcome = session.outcome(transcript)
    judge = ScriptedModel(
        [
            reply('{"groundedness": 0.8, "non_redundancy": 0.7, "expression_quality": 0.9}'),
            reply('{"voice": 0.9, "formatting": 0.9, "structure": 0.9, "rationale": "fits"}'),
        ]
    )
    ctx = GradeContext(
        task_id="sleep",
        agent_name="pkm_agent",
        fact_id=FACT,
        input_content=CONTENT,
        outcome=outcome,
        transcript=transcript,
        expected_outcome={"terminal_path": "persist"},
        judge=judge,
    )
    configs: dict[str, dict[str, Any]] = {
        "pkm_completion": {},
        # docs/compat.md: pkm_routed_correctly needs expected_buckets
        "pkm_routed_correctly": {
            "expected_buckets": ["Areas/Health"],
            "expected_files": ["Areas/Health/sleep.md"],
        },
        "pkm_no_overwrite": {"seed_marker": "seed:S1"},
        "pkm_read_before_write": {"required_read_path": "/Areas/Health/sleep.md"},
        "terminal_path": {},
        "pkm_no_redundant_file": {"expected_files": ["Areas/Health/sleep.md"]},
        "pkm_fact_id_placement": {},
        "pkm_insight_quality": {},
        # the original judges Edits only, so this Write-append is judged by our _plus grader
        "pkm_append_coherence": {},
        "pkm_append_coherence_plus": {},
    }
    scores = [await run_grader(name, config, ctx) for name, config in configs.items()]
    assert {s.grader: s.value for s in scores} == pytest.approx(
        {
            "pkm_completion": 1.0,
            "pkm_routed_correctly": 1.0,
            "pkm_no_overwrite": 1.0,
            "pkm_read_before_write": 1.0,
            "terminal_path": 1.0,
            "pkm_no_redundant_file": 1.0,
            "pkm_fact_id_placement": 1.0,
            "pkm_insight_quality": 0.8,
            "pkm_append_coherence": None,
            "pkm_append_coherence_plus": 0.9,
        }
    )
    assert outcome["is_complete"] and trial_passed(scores)
    coherence_prompt = judge.calls[1].messages[0].content
    assert LOG in coherence_prompt and "after original line 4" in coherence_prompt


async def test_card_agent_outcome_grades_end_to_end(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    content = "Lunch at Noodle Bar with Mia, paid 18.40 EUR"
    agent_input = AgentInput(fact_id=FACT, content=content, published_at=PUBLISHED)
    prepare_workspace(ws, agent_input)
    session = CardAgentSession(ws, agent_input, "system")
    ui = [{"template_id": "transaction", "data": {"merchant": "Noodle Bar", "amount": "18.40"}}]
    agent = ScriptedModel(
        [
            reply(
                "",
                call(
                    "save_timeline_card",
                    fact_id=FACT,
                    title="Noodles with Mia",
                    ui_configs=json.dumps(ui),
                    tags=[{"name": "relationship", "icon": "people"}],
                ),
            )
        ]
    )
    transcript = await run_agent(agent, session)
    outcome = session.outcome(transcript)
    ctx = GradeContext(
        task_id="lunch",
        agent_name="card_agent",
        fact_id=FACT,
        input_content=content,
        outcome=outcome,
        transcript=transcript,
    )
    card_configs: dict[str, tuple[dict[str, Any], float]] = {
        "card_completion": ({}, 1.0),
        "card_template_choice": ({"expected_template_ids": ["transaction"]}, 1.0),
        "card_must_contain": ({"substrings": ["noodle bar", "18.40"]}, 1.0),
        # "1773" only occurs in the timestamp: the whole-YAML check finds it, ours does not
        "card_visible_must_contain": ({"substrings": ["mia", "Relationship", "1773"]}, 2 / 3),
        "card_must_not_contain": ({"substrings": ["pending", FACT]}, 1.0),
    }
    for name, (config, value) in card_configs.items():
        score = await run_grader(name, config, ctx)
        assert score.value == value, (name, score.rationale)
    timestamp = str(outcome["card"]["timestamp"])
    assert timestamp.startswith("1773")
    whole = await run_grader("card_must_contain", {"substrings": ["1773"]}, ctx)
    assert whole.value == 1.0
