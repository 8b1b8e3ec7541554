"""Per-trial seeds (common random numbers): derived from task id and trial index, sent through
the real OpenAI SDK, identical for the base and the candidate trial of a pair, and recorded."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from promptloop.agents.llm.providers.anthropic_provider import AnthropicProvider
from promptloop.agents.llm.registry import accepts_seed
from promptloop.agents.llm.types import Message, ModelSettings
from promptloop.agents.runtime import RuntimeConfig
from promptloop.optimizer.core.results import pairing_label, seeded_pairing
from promptloop.optimizer.core.suites import load_suite, resolve_suite_path
from promptloop.optimizer.run.models import ModelIds, ModelSet
from promptloop.optimizer.run.runner import RunOptions
from promptloop.optimizer.run.trial import trial_seed
from promptloop.optimizer.workflows.paired import run_and_save
from tests.llm.agent_server import AgentServer, from_openai_messages
from tests.llm.fake_api import FakeAPI, Reply, anthropic_message

EXTRA_RULE = "\nWhen in doubt, keep the card short.\n"


def test_trial_seed_is_stable_31_bit_and_depends_on_task_and_index() -> None:
    seeds = {trial_seed(task, i) for task in ("a", "b", "card-reg-1") for i in range(20)}
    assert len(seeds) == 60
    assert all(0 <= s < 2**31 for s in seeds)
    assert trial_seed("a", 3) == trial_seed("a", 3)
    # a fixed value: a change of the derivation would silently unpair old and new trials
    assert trial_seed("card-reg-plain-transaction-coffee", 0) == 1135556969


def test_which_providers_take_a_seed() -> None:
    assert accepts_seed("openai:gpt-4.1-mini") and accepts_seed("local:smollm2")
    assert accepts_seed("scripted:card")
    assert not accepts_seed("anthropic:claude-haiku-4-5")


async def test_base_and_candidate_trials_send_the_same_seed(state: Path) -> None:
    suite = load_suite(resolve_suite_path("card_agent", "regression"))
    suite = suite.select(task_ids=[t.id for t in suite.tasks[:3]])
    base_prompt = (Path(__file__).resolve().parents[2] / "prompts" / "card_agent.md").read_text()
    runs = []
    with AgentServer() as api:
        ids = ModelIds(agent="openai:fake", base_url=f"{api.url}/v1")
        async with ModelSet(ids) as models:
            for prompt in (base_prompt, base_prompt + EXTRA_RULE):
                options = RunOptions(agent_model="openai:fake", trials=2, reuse=False,
                                     state_dir=state, prompt_text=prompt)
                saved = await run_and_save(suite, options, models, None, None)
                runs.append(saved.run)
        requests = [r.body for r in api.requests if r.body.get("tools")]
    # every agent call carried a seed; group the seeds by (prompt, task input)
    sent: dict[tuple[str, str], set[int]] = defaultdict(set)
    for body in requests:
        assert isinstance(body.get("seed"), int), body.keys()
        messages = from_openai_messages(body["messages"])
        first_user = next(m.content for m in messages if m.role == "user")
        sent[(messages[0].content, first_user)].add(body["seed"])
    inputs = {t.id: t.spec.input.content for t in suite.tasks}
    for task_id, content in inputs.items():
        expected = {trial_seed(task_id, 0), trial_seed(task_id, 1)}
        by_prompt = [seeds for (system, user), seeds in sent.items() if content in user]
        assert len(by_prompt) == 2, (task_id, sent.keys())
        assert by_prompt[0] == by_prompt[1] == expected
    base, cand = runs
    assert all(t.seed == trial_seed(t.task_id, t.trial_index) for r in runs for t in r.trials)
    assert base.seeded and cand.seeded and seeded_pairing([base], [cand])


async def test_anthropic_sends_no_seed_and_its_pairing_is_unseeded(
    state: Path, fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.url)
    fake_api.queue(Reply(body=anthropic_message({"type": "text", "text": "hello"})))
    client = AnthropicProvider("claude-fake")
    await client.complete([Message.user("hi")], settings=ModelSettings(seed=7))
    await client.aclose()
    assert "seed" not in fake_api.requests[-1].body

    suite = load_suite(resolve_suite_path("card_agent", "regression"))
    suite = suite.select(task_ids=[suite.tasks[0].id])
    runs = []
    async with ModelSet(ModelIds(agent="anthropic:claude-fake")) as models:
        for _ in range(2):
            fake_api.queue(*[Reply(body=anthropic_message({"type": "text", "text": "done"}))] * 8)
            options = RunOptions(agent_model="anthropic:claude-fake", trials=1, reuse=False,
                                 state_dir=state, runtime=RuntimeConfig(max_runs=1))
            runs.append((await run_and_save(suite, options, models, None, None)).run)
    assert all(t.seed is None and t.counts for r in runs for t in r.trials)
    assert not seeded_pairing(runs[:1], runs[1:])
    assert pairing_label(False) == "paired (unseeded)"
