"""Shared test setup: no network by accident, scripted models registered by name."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from tests import policies

# Real providers must never be reached from tests: clear any keys a developer has exported.
for _var in (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "PROMPTLOOP_HOME",
    "PROMPTLOOP_AGENT_OPTIONS",
):
    os.environ.pop(_var, None)

SCRIPTED_MODELS.update(
    {
        "pkm": policies.pkm_model,
        "card": policies.card_model,
        "judge": policies.judge_model,
    }
)


@pytest.fixture
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A fresh promptloop state folder."""
    yield tmp_path_factory.mktemp("state")


@pytest.fixture(autouse=True)
def _fresh_concurrency_levels() -> None:
    """Every test starts each provider at its configured concurrency (the adaptive limit
    otherwise carries what an earlier test's 429s taught it)."""
    from promptloop.optimizer.run.adaptive import forget_learned

    forget_learned()
