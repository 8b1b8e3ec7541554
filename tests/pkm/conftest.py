"""Shared fixtures for the PKM Agent tests: a prepared workspace, a session, a tool caller."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.base import AgentInput, prepare_workspace
from promptloop.agents.llm.types import ToolCall
from promptloop.agents.pkm.agent import PkmAgentSession, PkmOptions
from promptloop.agents.tools import ToolResult
from promptloop.agents.workspace import Workspace

FACT_ID = "2026/03/14.md#ts_2"
OLD_FACT_ID = "2026/03/10.md#ts_1"
PUBLISHED = datetime(2026, 3, 14, 9, 30, 5, tzinfo=UTC)
CONTENT = "Slept badly again, maybe 5 hours. Coffee after 4pm was a mistake."
SLEEP_LOG = (
    "# Sleep\n"
    "\n"
    "## March 2026\n"
    "- 03-09: 7 h, felt fine\n"
    f"- 03-10: 5.5 h, late screen time <!-- fact_id: {OLD_FACT_ID} -->\n"
)


def make_session(
    ws: Workspace,
    content: str = CONTENT,
    prompt: str = "system",
    options: PkmOptions | None = None,
) -> PkmAgentSession:
    agent_input = AgentInput(fact_id=FACT_ID, content=content, published_at=PUBLISHED)
    prepare_workspace(ws, agent_input)
    return PkmAgentSession(ws, agent_input, prompt, options)


async def invoke(session: PkmAgentSession, name: str, **arguments: Any) -> ToolResult:
    """Call one of the session's tools the way the runtime does."""
    tool = {t.name: t for t in session.tools}[name]
    return await tool.invoke(ToolCall(id="t1", name=name, arguments=arguments))


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    write(ws.pkm, "Areas/Health/sleep.md", SLEEP_LOG)
    write(ws.pkm, "Projects/Garden/plan.md", "# Garden plan\n- buy seeds\n")
    write(ws.pkm, "Resources/Cooking/recipes.md", "# Recipes\n\n## Soups\n- lentil soup\n")
    return ws


@pytest.fixture
def session(workspace: Workspace) -> PkmAgentSession:
    return make_session(workspace)
