"""`--batch` agent turns and the trial timeout: a turn's wait in the provider's batch queue is
off the trial clock, the agent's own time is on it (run/trial.py, agents/llm/rounds.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

import promptloop.optimizer.adapters.kinds.session as trial_module
from promptloop.agents.llm.batch import BatchReport, BatchRequest
from promptloop.agents.llm.errors import ModelError
from promptloop.agents.llm.rounds import RoundBatchingClient
from promptloop.agents.llm.scripted import ScriptedModel
from promptloop.agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings, ToolSpec
from promptloop.optimizer.core.results import TrialResult
from promptloop.optimizer.core.suites import load_suite
from promptloop.optimizer.run.trial import RunOptions, run_trial
from tests import policies
from tests.optimizer import suite_builder as sb

PROMPT = "You turn raw input into a timeline card."
TIMEOUT_S = 0.3
QUEUE_S = 0.5
"""How long each round waits in the (scripted) provider queue: longer than the timeout."""


class SlowQueue:
    """A scripted batch API: each round waits QUEUE_S, then answers with the inner model."""

    rounds = 0

    def __init__(self, client: ModelClient, folder: Path) -> None:
        self.client, self.report = client, BatchReport(batch_id="scripted")

    async def run(self, requests: list[BatchRequest]) -> dict[str, ModelResponse | ModelError]:
        SlowQueue.rounds += 1
        await asyncio.sleep(QUEUE_S)
        return {r.key: await self.client.complete(r.messages, tools=list(r.tools),
                                                  settings=r.settings) for r in requests}


def _key(messages: Sequence[Message], tools: Sequence[ToolSpec],
         settings: ModelSettings | None, salt: str) -> str:
    return f"{salt}:{len(messages)}"


def _trial(tmp_path: Path) -> TrialResult:
    suite = load_suite(sb.suite(tmp_path / "s", [sb.task("coffee", "Coffee $3", 1, trials=1)]))
    client = RoundBatchingClient(ScriptedModel(policies.card_policy, model_id="scripted:card"),
                                 tmp_path / "batches", _key, settle_s=0.0, batcher=SlowQueue)
    client.batches = True  # the scripted model has no batch API: the scripted queue is it
    options = RunOptions(agent_model="scripted:card", state_dir=tmp_path / "state",
                         prompt_text=PROMPT, timeout_s=TIMEOUT_S, batch=True)
    return asyncio.run(run_trial(suite, suite.tasks[0], 0, PROMPT, client, None, options))


def test_the_wait_in_the_batch_queue_is_off_the_trial_clock(tmp_path: Path) -> None:
    SlowQueue.rounds = 0
    result = _trial(tmp_path)
    assert SlowQueue.rounds >= 1  # each round waited longer than the whole timeout
    assert result.status == "passed", (result.status, result.failure_reason)


def test_an_agent_slower_than_the_timeout_still_times_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = trial_module.run_agent

    async def slow_agent(*args: object, **kwargs: object) -> object:
        await asyncio.sleep(TIMEOUT_S + 0.2)  # agent time (tools, parsing): on the clock
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(trial_module, "run_agent", slow_agent)
    result = _trial(tmp_path)
    assert result.status == "timedOut"
    assert result.failure_reason == f"trial exceeded {TIMEOUT_S:g}s"


def test_agent_time_before_and_after_a_queued_turn_adds_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clock restarts with the time that was left, not a fresh timeout."""
    real = trial_module.run_agent

    async def agent(*args: object, **kwargs: object) -> object:
        await asyncio.sleep(TIMEOUT_S * 0.7)
        out = await real(*args, **kwargs)  # type: ignore[arg-type]
        await asyncio.sleep(TIMEOUT_S * 0.7)
        return out

    monkeypatch.setattr(trial_module, "run_agent", agent)
    assert _trial(tmp_path).status == "timedOut"
