"""The gateway's Anthropic Messages route: an agent written against the Messages API (Python
standard library only, in its own process) and the real `anthropic` SDK run through it, with
record/replay and metering as on the OpenAI route (issue 29)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic

from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse, Usage
from promptloop.agents.transcript import Transcript
from promptloop.optimizer.adapters.gateway import ModelGateway, RequestError, parse_messages_request
from promptloop.optimizer.run.cache import RecordReplayClient
from promptloop.optimizer.run.usage import Meter, MeteredClient

AGENT = r'''"""A weather agent written against the Anthropic Messages API, standard library only."""
import json
import sys
import urllib.request

base_url, key, stream = sys.argv[1], sys.argv[2], sys.argv[3] == "stream"
TOOLS = [{"name": "get_weather", "description": "Weather of a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}]


def post(body):
    request = urllib.request.Request(
        base_url + "/v1/messages", data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "x-api-key": key,
                 "anthropic-version": "2023-06-01"})
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read().decode()
    if not stream:
        return json.loads(raw)
    message, blocks, partial = None, [], {}
    for chunk in raw.split("\n\n"):
        data = [line[6:] for line in chunk.splitlines() if line.startswith("data: ")]
        if not data:
            continue
        event = json.loads(data[0])
        if event["type"] == "message_start":
            message = event["message"]
        elif event["type"] == "content_block_start":
            blocks.append(dict(event["content_block"]))
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[event["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
        elif event["type"] == "message_delta":
            message["stop_reason"] = event["delta"]["stop_reason"]
            message["usage"]["output_tokens"] = event["usage"]["output_tokens"]
    for index, text in partial.items():
        blocks[index]["input"] = json.loads(text)
    message["content"] = blocks
    return message


messages = [{"role": "user", "content": "Weather in Lisbon?"}]
body = {"model": "claude-x", "max_tokens": 300, "system": "You help with weather.",
        "tools": TOOLS, "tool_choice": {"type": "any"}, "messages": messages, "stream": stream}
first = post(body)
assert first["stop_reason"] == "tool_use", first
use = next(b for b in first["content"] if b["type"] == "tool_use")
messages += [{"role": "assistant", "content": first["content"]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                           "content": "22C, sun " + use["input"]["city"]}]}]
body.pop("tool_choice")
second = post(body)
text = "".join(b["text"] for b in second["content"] if b["type"] == "text")
print(json.dumps({"answer": text, "stop": second["stop_reason"],
                  "tokens": [first["usage"]["input_tokens"], second["usage"]["output_tokens"]]}))
'''


def weather(req: Request) -> ModelResponse:
    tool = [m for m in req.messages if m.role == "tool"]
    if not tool:
        return reply("Let me check.", call("get_weather", city="Lisbon"), tokens=(30, 7))
    return reply(f"Sunny: {tool[0].content}.", tokens=(50, 4))


@pytest.fixture
async def gateway() -> AsyncIterator[ModelGateway]:
    async with ModelGateway() as gw:
        yield gw


async def run_agent(script: Path, gw: ModelGateway, token: str, mode: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), gw.anthropic_base_url_for(token), token, mode,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return dict(json.loads(out))


@pytest.mark.parametrize("mode", ["plain", "stream"])
async def test_a_stdlib_messages_agent_records_replays_and_is_metered(
        gateway: ModelGateway, tmp_path: Path, mode: str) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    store = tmp_path / "recordings"
    model = ScriptedModel(weather, model_id="scripted:agent")
    meter = Meter()
    recording = RecordReplayClient(MeteredClient(model, meter, "agent"), store, "record",
                                   "weather#0", "scripted:agent")
    transcript = Transcript()
    token = gateway.register(recording, transcript)
    got = await run_agent(script, gateway, token, mode)
    assert got == {"answer": "Sunny: 22C, sun Lisbon.", "stop": "end_turn", "tokens": [30, 4]}
    # the model saw the Messages request translated: system, user, tools, tool choice, result
    first, second = model.calls
    assert [m.role for m in first.messages] == ["system", "user"]
    assert first.messages[0].content == "You help with weather."
    assert [t.name for t in first.tools] == ["get_weather"]
    assert first.tools[0].parameters["required"] == ["city"]
    assert first.settings is not None and first.settings.tool_choice == "required"
    assert first.settings.max_tokens == 300
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[3].tool_name == "get_weather"
    # metered: the run's meter and the gateway's count both calls
    assert meter.spend.usage["agent"] == Usage(input_tokens=80, output_tokens=11)
    assert gateway.usage(token) == Usage(input_tokens=80, output_tokens=11)
    assert gateway.calls(token) == 2 and gateway.errors(token) == []
    # recorded: the whole conversation, the tool call with the result the agent sent back
    assert [m.role for m in transcript.messages] == ["system", "user", "assistant", "tool",
                                                     "assistant"]
    [record] = transcript.tool_calls
    assert (record.tool_name, record.arguments, record.result) == (
        "get_weather", {"city": "Lisbon"}, "22C, sun Lisbon")
    assert transcript.metrics.n_model_calls == 2 and transcript.metrics.n_turns == 2
    gateway.unregister(token)

    # replayed: no model behind the gateway, the same answers from the recordings
    replay = RecordReplayClient(None, store, "replay", "weather#0", "scripted:agent")
    again = Transcript()
    token = gateway.register(replay, again)
    assert await run_agent(script, gateway, token, mode) == got
    assert len(model.calls) == 2
    assert [m.content for m in again.messages] == [m.content for m in transcript.messages]
    assert gateway.usage(token) == Usage(input_tokens=80, output_tokens=11)


async def test_the_anthropic_sdk_works_through_the_gateway(gateway: ModelGateway) -> None:
    model = ScriptedModel(weather, model_id="scripted:agent")
    token = gateway.register(model, Transcript())
    client = AsyncAnthropic(base_url=gateway.anthropic_base_url_for(token), api_key=token,
                            max_retries=0)
    tools: Any = [{"name": "get_weather", "description": "Weather of a city",
                   "input_schema": {"type": "object",
                                    "properties": {"city": {"type": "string"}}}}]
    async with client:
        first = await client.messages.create(
            model="claude-x", max_tokens=200, system=[{"type": "text", "text": "Be brief."}],
            tools=tools, messages=[{"role": "user", "content": "Weather in Lisbon?"}])
        assert first.stop_reason == "tool_use"
        text, use = first.content
        assert text.type == "text" and text.text == "Let me check."
        assert use.type == "tool_use" and use.name == "get_weather"
        assert use.input == {"city": "Lisbon"}
        assert (first.usage.input_tokens, first.usage.output_tokens) == (30, 7)
        history: Any = [
            {"role": "user", "content": "Weather in Lisbon?"},
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                          "content": [{"type": "text", "text": "22C"}]}]}]
        async with client.messages.stream(model="claude-x", max_tokens=200, tools=tools,
                                          messages=history) as stream:
            final = await stream.get_final_message()
        assert final.stop_reason == "end_turn"
        assert final.content[0].type == "text" and final.content[0].text == "Sunny: 22C."
        assert final.usage.output_tokens == 4
        with pytest.raises(Exception) as bad:
            await client.messages.create(model="claude-x", max_tokens=0, messages=history)
    assert "max_tokens" in str(bad.value)
    assert len(model.calls) == 2  # the malformed request never reached the model


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
    ({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]},
     "messages[0].content[0].type"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
      "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "web_search_20250305", "name": "web"}]}, "tools[0].type"),
])
def test_malformed_messages_requests_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestError) as err:
        parse_messages_request(body)
    assert err.value.param == param
