"""ModelSet: one client per model id and base URL, metered per role, preflighted once per
client, closed when the set closes (injected clients belong to the caller)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.agents.llm.types import Message
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.run.models import ModelIds, ModelSet


@dataclass
class Counting(ScriptedModel):
    """A scripted model that counts its preflights and closes."""

    preflights: int = 0
    closed: int = 0
    log: list[str] = field(default_factory=list)

    async def preflight(self) -> None:
        self.preflights += 1

    async def aclose(self) -> None:
        self.closed += 1


def built(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Counting]]:
    """Register scripted:a and scripted:b; returns the clients built for each, by name."""
    made: dict[str, list[Counting]] = {"a": [], "b": []}
    for name in made:

        def factory(name: str = name) -> Counting:
            client = Counting(lambda _r: reply("ok", tokens=(10, 2)), model_id=f"scripted:{name}")
            made[name].append(client)
            return client

        monkeypatch.setitem(SCRIPTED_MODELS, name, factory)
    return made


async def ask(client: object) -> None:
    await client.complete([Message.user("hi")])  # type: ignore[attr-defined]


def test_roles_with_the_same_model_share_one_client(monkeypatch: pytest.MonkeyPatch) -> None:
    made = built(monkeypatch)

    async def scenario() -> ModelSet:
        ids = ModelIds(agent="scripted:a", judge="scripted:a", proposer="scripted:b")
        async with ModelSet(ids) as models:
            await models.preflight("agent", "judge", "proposer")
            await models.preflight("agent")  # again: no second call
            await ask(models.agent)
            await ask(models.judge)
            await ask(models.judge)
            await ask(models.proposer)
        return models

    models = asyncio.run(scenario())
    [a], [b] = made["a"], made["b"]
    assert a.preflights == 1 and b.preflights == 1  # once per distinct client
    assert len(a.calls) == 3 and len(b.calls) == 1
    assert a.closed == 1 and b.closed == 1
    spend = models.spend.usage  # metered per role, though agent and judge share a client
    assert spend["agent"].input_tokens == 10 and spend["judge"].input_tokens == 20
    assert spend["proposer"].output_tokens == 2
    assert models.usage.total_tokens == 4 * 12
    assert models.usd() == 0.0  # scripted models are free


def test_injected_clients_are_shared_by_id_and_not_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    made = built(monkeypatch)
    mine = Counting(lambda _r: reply("ok"), model_id="scripted:a")

    async def scenario() -> None:
        ids = ModelIds(agent="scripted:a", judge="scripted:a", proposer="scripted:b")
        async with ModelSet(ids, agent=mine) as models:
            await ask(models.judge)  # the judge has the agent's id: it uses the injected client
            await ask(models.proposer)

    asyncio.run(scenario())
    assert len(mine.calls) == 1 and mine.closed == 0
    assert made["a"] == [] and len(made["b"]) == 1 and made["b"][0].closed == 1


def test_clients_are_built_on_first_use_and_bad_ids_fail_clearly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = built(monkeypatch)

    async def scenario() -> None:
        async with ModelSet(ModelIds(agent="scripted:a", proposer="antropic:x")) as models:
            assert made["a"] == []
            await ask(models.agent)  # the proposer is not needed yet: not built
            assert len(made["a"]) == 1
            with pytest.raises(ConfigError, match="Did you mean 'anthropic'"):
                models.build("proposer")

    asyncio.run(scenario())


def test_default_judge_and_proposer() -> None:
    ids = ModelIds(agent="anthropic:claude-haiku-4-5")
    assert ids.of("judge") == "anthropic:claude-sonnet-4-5"
    assert ids.of("proposer") == "anthropic:claude-haiku-4-5"
