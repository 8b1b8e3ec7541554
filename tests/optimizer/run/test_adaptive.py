"""Adaptive concurrency: halve once per burst of overloads, grow back one slot at a time."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from promptloop.agents.llm.errors import ProviderError
from promptloop.agents.llm.scripted import Request, ScriptedModel
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.core.results import TrialResult
from promptloop.optimizer.core.suites import load_suite
from promptloop.optimizer.run.adaptive import AdaptiveLimit, overloaded, provider_key
from tests import policies
from tests.optimizer import suite_builder as sb
from tests.optimizer.run.test_runner import options, run


def test_a_burst_of_overloads_halves_the_limit_once() -> None:
    async def scenario() -> AdaptiveLimit:
        limit = AdaptiveLimit(8, provider="p1")
        slots = [await limit.acquire() for _ in range(8)]
        for s in slots:  # all eight in flight saw the same 429 burst
            await limit.release(s, overloaded=True)
        return limit

    limit = asyncio.run(scenario())
    assert limit.limit == 4 and limit.stats.decreases == 1 and limit.stats.peak == 8


def test_clean_trials_grow_the_limit_back_to_the_configured_level() -> None:
    async def scenario() -> AdaptiveLimit:
        limit = AdaptiveLimit(4, provider="p2")
        await limit.release(await limit.acquire(), overloaded=True)  # 4 -> 2
        assert limit.limit == 2
        for _ in range(20):
            await limit.release(await limit.acquire(), overloaded=False)
        return limit

    limit = asyncio.run(scenario())
    assert limit.limit == 4  # 2 clean -> 3, 3 clean -> 4, then capped at the configured 4
    assert limit.stats.increases == 2 and limit.stats.lowest_limit == 2


def test_the_level_carries_over_to_the_providers_next_run() -> None:
    async def first() -> None:
        limit = AdaptiveLimit(6, provider="p3")
        await limit.release(await limit.acquire(), overloaded=True)

    asyncio.run(first())
    assert AdaptiveLimit(6, provider="p3").limit == 3
    assert AdaptiveLimit(6, provider="other").limit == 6
    assert provider_key("openai:gpt-4.1-mini") == "openai"


def test_a_run_under_429s_lowers_its_concurrency_and_records_it(
    tmp_path: Path, state: Path
) -> None:
    suite = load_suite(sb.suite(tmp_path / "s", sb.card_tasks(12)))
    inflight = peak_after_first_error = 0
    calls = 0

    async def pushy(req: Request) -> ModelResponse:
        nonlocal inflight, peak_after_first_error, calls
        calls += 1
        inflight += 1
        try:
            await asyncio.sleep(0.01)
            response = policies.card_policy(req)
            if calls <= 6:  # the first burst of calls needed retries (the SDK saw 429s)
                return response.model_copy(update={"retries": 2})
            return response
        finally:
            inflight -= 1

    result = run(suite, options(state, trials=1, concurrency=6), ScriptedModel(pushy))
    stats = result.concurrency
    assert stats is not None and stats.configured == 6
    assert stats.decreases >= 1 and stats.lowest_limit <= 3
    assert stats.peak <= 6


def _errored_by(tmp_path: Path, state: Path, err: ProviderError) -> TrialResult:
    suite = load_suite(sb.suite(tmp_path / "s", sb.card_tasks(1)))

    async def failing(req: Request) -> ModelResponse:
        raise err

    [trial] = run(suite, options(state, trials=1), ScriptedModel(failing)).trials
    assert trial.status == "errored"
    return trial


def test_overload_is_decided_by_the_providers_status_not_the_errors_text(
    tmp_path: Path, state: Path
) -> None:
    pushed = ProviderError("openai returned HTTP 429 after 4 retries: slow down", status=429)
    assert overloaded(_errored_by(tmp_path / "a", state, pushed))
    down = ProviderError("anthropic returned HTTP 529 after 2 retries: overloaded", status=529)
    assert overloaded(_errored_by(tmp_path / "b", state, down))
    # text that merely contains 429 or "rate limit" is not a status
    garbage = ProviderError("unparseable response body: {'id': 'HTTP 429', 'rate limit': 1}")
    assert not overloaded(_errored_by(tmp_path / "c", state, garbage))
    rejected = ProviderError("openai returned HTTP 400 after 0 retries: 429 tokens too many",
                             status=400)
    assert not overloaded(_errored_by(tmp_path / "d", state, rejected))


def test_the_overload_flag_is_not_saved() -> None:
    now = datetime.now(UTC)
    trial = TrialResult(task_id="t", trial_index=0, bucket="b", status="errored",
                        started_at=now, ended_at=now, infra_error="ProviderError: HTTP 429",
                        overloaded=True)
    again = TrialResult.model_validate_json(trial.model_dump_json())
    assert "overloaded" not in trial.model_dump() and not overloaded(again)


def test_the_report_says_what_concurrency_was_reached(tmp_path: Path, state: Path) -> None:
    from promptloop.optimizer.report.markdown import render_markdown
    from promptloop.optimizer.report.summary import summarize

    suite = load_suite(sb.suite(tmp_path / "s", sb.card_tasks(3)))
    result = run(suite, options(state, trials=1, concurrency=2),
                 ScriptedModel(policies.card_policy))
    assert result.concurrency is not None and result.concurrency.decreases == 0
    text = render_markdown(result, summarize(result))
    assert "- Concurrency: configured 2, reached 2" in text


def test_the_concurrency_record_survives_the_report_store(tmp_path: Path, state: Path) -> None:
    from promptloop.optimizer.report.store import default_store_dir, load_run, save_run

    suite = load_suite(sb.suite(tmp_path / "s", sb.card_tasks(2)))
    result = run(suite, options(state, trials=1, concurrency=3),
                 ScriptedModel(policies.card_policy))
    store = default_store_dir(state)
    save_run(result, store)
    assert load_run(store, result.run_name).concurrency == result.concurrency


def test_trial_seeds_survive_the_report_store(tmp_path: Path, state: Path) -> None:
    from promptloop.optimizer.report.store import default_store_dir, load_run, save_run

    suite = load_suite(sb.suite(tmp_path / "s", sb.card_tasks(2)))
    result = run(suite, options(state, trials=2), ScriptedModel(policies.card_policy))
    assert all(t.seed is not None for t in result.trials)  # scripted models take a seed
    store = default_store_dir(state)
    save_run(result, store)
    back = load_run(store, result.run_name)
    assert {(t.task_id, t.trial_index, t.seed) for t in back.trials} == {
        (t.task_id, t.trial_index, t.seed) for t in result.trials}
