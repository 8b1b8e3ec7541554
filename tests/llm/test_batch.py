"""BatchJudge against loopback batch APIs through the real Anthropic and OpenAI SDKs."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptloop.agents.llm.batch import FORMAT, BatchJudge, BatchRequest
from promptloop.agents.llm.batch_state import KEEP_ENDED_S, StateFolder
from promptloop.agents.llm.errors import ModelError
from promptloop.agents.llm.providers.anthropic_provider import AnthropicProvider
from promptloop.agents.llm.providers.openai_provider import OpenAIProvider
from promptloop.agents.llm.registry import ModelOptions
from promptloop.agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings
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


def test_openai_results_read_the_files_the_last_poll_named_without_retrieving_again(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = BatchJudge(_client("openai", server, monkeypatch), tmp_path, sleep=_no_wait)
    got = asyncio.run(judge.run(_requests("aaa", "bbb")))
    assert all(isinstance(r, ModelResponse) for r in got.values())
    assert server.polls == {judge.report.batch_id: judge.report.polls}


def _state_file(folder: Path, batch_id: str, state: str, keys: list[str],
                model: str = "claude-fake", age_s: float = 0.0) -> Path:
    path = folder / f"{batch_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "format": FORMAT, "provider": "anthropic", "model": model, "batch_id": batch_id,
        "state": state, "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
        "requests": {f"r{n}": k for n, k in enumerate(keys)}}))
    if age_s:
        stamp = time.time() - age_s
        os.utime(path, (stamp, stamp))
    return path


def test_state_files_are_read_once_and_looked_up_by_key(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(20):  # other models' batches: indexed once, never read again
        _state_file(tmp_path, f"msgbatch_other{n}", "ended", [f"other-{n}"], model="other")
    client = _client("anthropic", server, monkeypatch)
    for round_ in ("aaa", "bbb", "ccc"):  # three rounds, each a new BatchJudge
        judge = BatchJudge(client, tmp_path, sleep=_no_wait)
        asyncio.run(judge.run(_requests(round_)))
    assert len(server.creates) == 3
    assert StateFolder.of(tmp_path).reads == 20  # our own saves are indexed as written
    found = StateFolder.of(tmp_path).find("anthropic", "claude-fake", {"key-bbb"})
    assert found is not None and found.requests == {"r0": "key-bbb"}


def test_ended_state_files_are_pruned_once_old_and_submitted_ones_kept(tmp_path: Path) -> None:
    old_ended = _state_file(tmp_path, "msgbatch_old", "ended", ["a"], age_s=KEEP_ENDED_S + 60)
    old_open = _state_file(tmp_path, "msgbatch_open", "submitted", ["b"],
                           age_s=KEEP_ENDED_S + 60)
    recent = _state_file(tmp_path, "msgbatch_new", "ended", ["c"], age_s=60)
    folder = StateFolder.of(tmp_path)
    assert folder.find("anthropic", "claude-fake", {"a"}) is None
    assert not old_ended.exists() and old_open.exists() and recent.exists()
    assert folder.find("anthropic", "claude-fake", {"b"}) is not None  # a rerun resumes it
    assert folder.find("anthropic", "claude-fake", {"c"}) is not None


@pytest.mark.parametrize("status", ["failed", "expired"])
def test_a_failed_batch_is_not_resumed_by_a_rerun(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    """A batch that failed or expired as a whole kept its state file 'submitted', and every
    rerun polled the same dead batch again and failed the same way (a team's CI stayed red
    until the files were deleted by hand): it is marked failed and a rerun submits anew."""
    server.openai_status = status
    judge = BatchJudge(_client("openai", server, monkeypatch), tmp_path, sleep=_no_wait)
    got = asyncio.run(judge.run(_requests("aaa", "bbb")))
    assert all(isinstance(e, ModelError) for e in got.values())
    [state] = list(tmp_path.glob("*.json"))
    assert json.loads(state.read_text())["state"] == "failed"
    server.openai_status = None  # the provider is well again
    again = BatchJudge(_client("openai", server, monkeypatch), tmp_path, sleep=_no_wait)
    got = asyncio.run(again.run(_requests("aaa", "bbb")))
    assert len(server.creates) == 2 and not again.report.resumed
    assert all(isinstance(r, ModelResponse) for r in got.values())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_request_that_errored_in_an_ended_batch_is_sent_again(
    provider: str, server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun read an ended batch's replies back, its errored ones too: a request the
    provider failed alone (a 500, a rate limit) stayed errored on every rerun for the 7 days
    the state file is kept (a team's judge). It goes out again, alone, in a new batch."""
    requests = [*_requests("aaa"), BatchRequest("key-bad", [Message.user("poison")],
                                                ModelSettings(temperature=0.0))]
    first = BatchJudge(_client(provider, server, monkeypatch), tmp_path, sleep=_no_wait)
    got = asyncio.run(first.run(requests))
    assert isinstance(got["key-bad"], ModelError) and isinstance(got["key-aaa"], ModelResponse)
    server.answer = lambda _prompt: json.dumps({"coherence": 0.8, "rationale": "fine now"})
    again = BatchJudge(_client(provider, server, monkeypatch), tmp_path, sleep=_no_wait)
    got = asyncio.run(again.run(requests))
    assert all(isinstance(r, ModelResponse) for r in got.values()), got
    assert len(server.creates) == 2  # the ended batch read again, one new batch for the error
    new = server.creates[1]
    sent = new.get("requests") or new.get("lines")
    assert len(sent) == 1
