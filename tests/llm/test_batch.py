"""BatchJudge against loopback batch APIs through the real Anthropic and OpenAI SDKs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.llm.batch import FORMAT, BatchJudge, BatchRequest
from agents.llm.errors import ModelError
from agents.llm.providers.anthropic_provider import AnthropicProvider
from agents.llm.providers.openai_provider import OpenAIProvider
from agents.llm.registry import ModelOptions
from agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings
from tests.llm.batch_server import BatchServer
from tests.policies import judge_model


def _answer(prompt: str) -> str | None:
    if "poison" in prompt:
        return None
    return json.dumps({"coherence": 0.9, "rationale": f"judged {prompt[-3:]}"})


@pytest.fixture
def server() -> Iterator[BatchServer]:
    with BatchServer(_answer) as s:
        yield s


def _client(provider: str, server: BatchServer, monkeypatch: pytest.MonkeyPatch) -> ModelClient:
    if provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        return AnthropicProvider("claude-fake", options=ModelOptions(max_retries=0))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    options = ModelOptions(base_url=f"{server.url}/v1", max_retries=0, timeout_s=10)
    return OpenAIProvider("gpt-fake", options=options)


def _requests(*tails: str) -> list[BatchRequest]:
    settings = ModelSettings(temperature=0.0, max_tokens=100)
    return [BatchRequest(f"key-{t}", [Message.user(f"judge this: {t}")], settings) for t in tails]


async def _no_wait(_s: float) -> None:
    return None


PROVIDERS = ("anthropic", "openai")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_batch_polled_to_the_end_and_mapped_by_key(
    provider: str, server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = BatchJudge(_client(provider, server, monkeypatch), tmp_path, sleep=_no_wait)
    requests = _requests("aaa", "bbb", "ccc") + _requests("aaa")  # a repeated request
    got = asyncio.run(judge.run(requests))
    assert len(server.creates) == 1 and server.direct == 0
    sent = server.creates[0].get("requests") or server.creates[0]["lines"]
    assert len(sent) == 3  # the repeated request is sent once
    assert judge.report.polls == server.polls_before_end + 1  # in progress, ..., ended
    for tail in ("aaa", "bbb", "ccc"):
        reply = got[f"key-{tail}"]
        assert isinstance(reply, ModelResponse) and f"judged {tail}" in reply.text
    saved = json.loads((tmp_path / f"{judge.report.batch_id}.json").read_text())
    assert saved["format"] == FORMAT and saved["state"] == "ended"
    assert sorted(saved["requests"].values()) == ["key-aaa", "key-bbb", "key-ccc"]
    if provider == "openai":
        assert server.creates[0]["endpoint"] == "/v1/chat/completions"
        assert server.creates[0]["completion_window"] == "24h"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_errored_request_errors_only_itself(
    provider: str, server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = BatchJudge(_client(provider, server, monkeypatch), tmp_path, sleep=_no_wait)
    got = asyncio.run(judge.run(_requests("aaa", "poison", "ccc")))
    assert isinstance(got["key-poison"], ModelError)
    assert "judge fell over" in str(got["key-poison"])
    assert isinstance(got["key-aaa"], ModelResponse) and isinstance(got["key-ccc"], ModelResponse)


class Killed(BaseException):
    pass


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_killed_run_resumes_the_same_batch(
    provider: str, server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def killed(_s: float) -> None:
        raise Killed  # the process dies while polling: after the state file is written

    client = _client(provider, server, monkeypatch)
    first = BatchJudge(client, tmp_path, sleep=killed)
    with pytest.raises(Killed):
        asyncio.run(first.run(_requests("aaa", "bbb")))
    [state] = list(tmp_path.glob("*.json"))
    assert json.loads(state.read_text())["state"] == "submitted"
    batch_id = json.loads(state.read_text())["batch_id"]

    client = _client(provider, server, monkeypatch)  # a new process: a new SDK client
    again = BatchJudge(client, tmp_path, sleep=_no_wait)
    got = asyncio.run(again.run(list(reversed(_requests("aaa", "bbb")))))
    assert len(server.creates) == 1  # nothing new was submitted
    assert again.report.resumed and again.report.batch_id == batch_id
    assert all(isinstance(r, ModelResponse) for r in got.values())


def test_timeout_errors_every_request_and_keeps_the_batch(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.polls_before_end = 100
    judge = BatchJudge(_client("anthropic", server, monkeypatch), tmp_path, poll_s=10,
                       timeout_s=25, sleep=_no_wait)
    got = asyncio.run(judge.run(_requests("aaa", "bbb")))
    assert all(isinstance(e, ModelError) and "rerun to resume" in str(e) for e in got.values())
    assert json.loads(next(tmp_path.glob("*.json")).read_text())["state"] == "submitted"


def test_providers_without_a_batch_api_are_called_directly(tmp_path: Path) -> None:
    judge = BatchJudge(judge_model(), tmp_path, sleep=_no_wait)
    got = asyncio.run(judge.run(_requests("aaa", "bbb")))
    assert judge.report.direct == 2 and judge.report.batch_id is None
    assert all(isinstance(r, ModelResponse) and "groundedness" in r.text for r in got.values())
    assert not list(tmp_path.glob("*.json"))
