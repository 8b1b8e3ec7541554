"""The real embedded llama.cpp server with SmolLM2 (no network; ~5 s on 2 cores)."""

from __future__ import annotations

import socket
from typing import Literal

import pytest
from pydantic import Field

from promptloop.agents.llm.providers import local
from promptloop.agents.llm.providers.local import LocalModelClient
from promptloop.agents.llm.registry import create_client
from promptloop.agents.llm.types import Message, ModelSettings
from promptloop.agents.tools import Tool, ToolArgs, ToolResult

pytestmark = pytest.mark.embedded


class ReadArgs(ToolArgs):
    path: str = Field(description="Note path, for example trip.md")


class TagArgs(ToolArgs):
    path: str
    tag: Literal["Trip", "Health", "Finance"]


def _unused(_args: object) -> ToolResult:
    return ToolResult(content="")


TOOLS = [
    Tool("read_note", "Read one note and return its text.", ReadArgs, _unused),
    Tool("tag_note", "Attach a tag to a note.", TagArgs, _unused),
]


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


async def test_structured_step_from_the_embedded_server() -> None:
    client = create_client("local:smollm2")
    assert isinstance(client, LocalModelClient)
    await client.preflight()
    assert client.server is not None and client.server.url is not None
    url = client.server.url
    assert url.startswith("http://127.0.0.1:")
    port = int(url.rsplit(":", 1)[1])

    other = LocalModelClient()  # a second client shares the one server
    await other.preflight()
    assert other.server is client.server

    by_name = {t.name: t for t in TOOLS}
    specs = [t.spec() for t in TOOLS]
    calls = []
    for seed in range(3):
        messages = [
            Message.system("You are a notes assistant. Use the tools on the user's notes."),
            Message.user("Read the note trip.md."),
        ]
        settings = ModelSettings(temperature=0.0 if seed == 0 else 0.7, seed=seed, max_tokens=96)
        response = await client.complete(messages, tools=specs, settings=settings)
        assert response.model == "local:smollm2"
        assert response.usage.output_tokens > 0
        if response.tool_calls:
            (call,) = response.tool_calls
            assert call.parse_error is None, call.raw_arguments
            calls.append(call)
            if len(calls) == 2:
                break
    assert calls, "the model never produced a tool step"
    for call in calls:
        tool = by_name[call.name]
        tool.args_model.model_validate(call.arguments)  # schema-valid arguments
        assert set(call.arguments) <= set(tool.args_model.model_fields)

    await client.aclose()
    assert _port_open(port), "the second client still holds the server"
    await other.aclose()
    assert local._shared is None
    assert not _port_open(port)
