"""Shared fixtures for the Card Agent tests: a prepared workspace and its input."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptloop.agents.base import AgentInput, prepare_workspace
from promptloop.agents.card.tools import CardTools
from promptloop.agents.workspace import Workspace
from tests.card.support import CONTENT, FACT_ID, PUBLISHED


@pytest.fixture
def agent_input() -> AgentInput:
    return AgentInput(fact_id=FACT_ID, content=CONTENT, published_at=PUBLISHED)


@pytest.fixture
def workspace(tmp_path: Path, agent_input: AgentInput) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    prepare_workspace(ws, agent_input)
    return ws


@pytest.fixture
def card_tools(workspace: Workspace) -> CardTools:
    return CardTools(workspace, PUBLISHED)
