"""The model gateway, driven through the real `openai` SDK against scripted model clients."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from promptloop.agents.llm.errors import ProviderError
from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse, ToolCall, Usage
from promptloop.agents.transcript import Transcript
from promptloop.optimizer.adapters.gateway import (
    JSON_OBJECT_FORMAT,
    ModelGateway,
    RequestError,
    parse_chat_request,
)

SECRET = "sk-live-0123456789abcdefSECRETVALUE"
WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}


@pytest.fixture
async def gateway() -> AsyncIterator[ModelGateway]:
    async with ModelGateway() as gw:
        yield gw


def sdk(gw: ModelGateway, token: str, **kwargs: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=gw.base_url_for(token), api_key=token, **kwargs)


async def test_tool_call_round_trip_records_the_transcript(gateway: ModelGateway) -> None:
    model = ScriptedModel([
        reply("", call("get_weather", city="Lisbon"), tokens=(30, 7)),
        reply("Sunny in Lisbon.", tokens=(50, 4)),
    ], model_id="scripted:agent")
    transcript = Transcript()
    token = gateway.register(model, transcript)
    async with sdk(gateway, token) as client:
        messages: list[Any] = [{"role": "system", "content": "You help."},
                               {"role": "user", "content": "Weather in Lisbon?"}]
        first = await client.chat.completions.create(
            model="local:smollm2", messages=messages, tools=[WEATHER], tool_choice="required",
            temperature=0.2, max_tokens=300, seed=42)
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        (tc,) = choice.message.tool_calls or []
        assert tc.type == "function"
        assert tc.function.name == "get_weather"
        assert json.loads(tc.function.arguments) == {"city": "Lisbon"}
        assert first.usage is not None and first.usage.prompt_tokens == 30
        assert first.usage.completion_tokens == 7 and first.usage.total_tokens == 37
        messages += [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": tc.id, "content": "22C, sun"}]
        second = await client.chat.completions.create(model="local:smollm2",
                                                      messages=messages, tools=[WEATHER])
    assert second.choices[0].message.content == "Sunny in Lisbon."
    assert second.choices[0].finish_reason == "stop"
    assert second.model == "scripted"

    one, two = model.calls
    assert [m.role for m in one.messages] == ["system", "user"]
    assert [t.name for t in one.tools] == ["get_weather"]
    assert one.tools[0].parameters["required"] == ["city"]
    assert one.settings is not None
    assert (one.settings.tool_choice, one.settings.temperature, one.settings.max_tokens,
            one.settings.seed) == ("required", 0.2, 300, 42)
    assert [m.role for m in two.messages] == ["system", "user", "assistant", "tool"]
    assert two.messages[2].tool_calls[0].arguments == {"city": "Lisbon"}
    assert two.messages[3].tool_call_id == tc.id
    assert two.messages[3].tool_name == "get_weather"
    assert two.messages[3].content == "22C, sun"

    assert transcript.metrics.n_model_calls == 2
    assert transcript.metrics.usage == Usage(input_tokens=80, output_tokens=11)
    # the whole conversation as the agent sent it, each reply, the tool call with its result
    assert [m.role for m in transcript.messages] == ["system", "user", "assistant", "tool",
                                                     "assistant"]
    assert transcript.messages[0].content == "You help."
    assert transcript.messages[1].content == "Weather in Lisbon?"
    assert transcript.messages[2].tool_calls[0].name == "get_weather"
    assert transcript.messages[3].content == "22C, sun"
    assert transcript.messages[4].content == "Sunny in Lisbon."
    [record] = transcript.tool_calls
    assert (record.call_id, record.tool_name, record.arguments, record.result,
            record.is_error) == (tc.id, "get_weather", {"city": "Lisbon"}, "22C, sun", False)
    assert record.started_at <= record.ended_at
    assert transcript.metrics.n_turns == 2 and transcript.metrics.n_tool_calls == 1
    assert gateway.usage(token) == Usage(input_tokens=80, output_tokens=11)
    assert gateway.calls(token) == 2 and gateway.errors(token) == []


async def test_response_format_and_tool_choice_none_pass_through(
        gateway: ModelGateway) -> None:
    model = ScriptedModel([reply('{"ok": true}'), reply("{}"), reply("plain")])
    token = gateway.register(model)
    schema: Any = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    async with sdk(gateway, token) as client:
        got = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "json please"}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "answer", "schema": schema, "strict": True}})
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": [{"type": "text", "text": "a"},
                                                              {"type": "text", "text": "b"}]}],
            response_format={"type": "json_object"})
        await client.chat.completions.create(
            model="m", messages=[{"role": "developer", "content": "d"},
                                 {"role": "user", "content": "x"}],
            tools=[WEATHER], tool_choice="none", response_format={"type": "text"})
    assert json.loads(got.choices[0].message.content or "") == {"ok": True}
    first, second, third = (r.settings for r in model.calls)
    assert first is not None and second is not None and third is not None
    assert first.response_format == {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": schema,
                                               "strict": True}}
    assert first.max_tokens == 2048 and first.temperature is None and first.seed is None
    assert second.response_format == JSON_OBJECT_FORMAT
    assert model.calls[1].messages[0].content == "a\nb"
    assert third.response_format is None and model.calls[2].tools == []
    assert model.calls[2].messages[0].role == "system"


async def test_named_tool_choice_offers_only_that_tool(gateway: ModelGateway) -> None:
    other: Any = {"type": "function", "function": {"name": "noop"}}
    model = ScriptedModel([reply("", call("noop"))])
    token = gateway.register(model)
    async with sdk(gateway, token) as client:
        got = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], tools=[WEATHER, other],
            tool_choice={"type": "function", "function": {"name": "noop"}})
    (tc,) = got.choices[0].message.tool_calls or []
    assert tc.type == "function" and tc.function.arguments == "{}"
    assert [t.name for t in model.calls[0].tools] == ["noop"]
    assert model.calls[0].tools[0].parameters == {"type": "object", "properties": {}}
    assert model.calls[0].settings is not None
    assert model.calls[0].settings.tool_choice == "required"


async def test_models_endpoint_and_bearer_token_on_plain_v1(gateway: ModelGateway) -> None:
    token = gateway.register(ScriptedModel([reply("hi")], model_id="local:smollm2"))
    async with sdk(gateway, token) as client:
        models = await client.models.list()
    assert [m.id for m in models.data] == ["local:smollm2"]
    plain = f"http://127.0.0.1:{gateway.port}/v1"
    async with AsyncOpenAI(base_url=plain, api_key=token) as client:
        got = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}])
    assert got.choices[0].message.content == "hi"


async def test_streaming_reply_is_one_sse_body(gateway: ModelGateway) -> None:
    model = ScriptedModel([reply("streamed", tokens=(3, 2)),
                           reply("", call("get_weather", city="Oslo"))])
    token = gateway.register(model)
    async with sdk(gateway, token) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True,
            stream_options={"include_usage": True})
        chunks = [c async for c in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        stream2 = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], tools=[WEATHER],
            stream=True)
        calls = [tc for c in [c async for c in stream2] if c.choices
                 for tc in c.choices[0].delta.tool_calls or []]
    assert text == "streamed"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 5
    assert [(tc.function.name, tc.function.arguments) for tc in calls if tc.function] == [
        ("get_weather", '{"city": "Oslo"}')]


async def test_unknown_or_revoked_token_is_401(gateway: ModelGateway) -> None:
    token = gateway.register(ScriptedModel([reply("x")]))
    gateway.unregister(token)
    for bad in (token, "nope"):
        async with sdk(gateway, bad, max_retries=0) as client:
            with pytest.raises(openai.AuthenticationError) as err:
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}])
        assert err.value.status_code == 401
        assert "token" in str(err.value)


@pytest.mark.parametrize(("body", "field"), [
    ({"model": "m"}, "messages"),
    ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages[0].content[0].type"),
    ({"model": "m", "messages": [{"role": "tool", "content": "x"}]},
     "messages[0].tool_call_id"),
    ({"model": "m", "messages": [{"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"arguments": "{}"}}]}]},
     "messages[0].tool_calls[0].function.name"),
    ({"model": 3, "messages": [{"role": "user", "content": "x"}]}, "model"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [
        {"type": "function", "function": {"name": "a", "parameters": "no"}}]},
     "tools[0].function.parameters"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "always"},
     "tool_choice"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema.schema"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "yaml"}}, "response_format.type"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 9},
     "temperature"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
     "max_tokens"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "seed": "s"}, "seed"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
])
async def test_malformed_body_is_400_naming_the_field(
        gateway: ModelGateway, body: dict[str, Any], field: str) -> None:
    model = ScriptedModel([reply("never")])
    token = gateway.register(model)
    async with sdk(gateway, token, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as err:
            await client.post("/chat/completions", body=body, cast_to=object)
    assert err.value.status_code == 400
    assert err.value.param == field
    assert str(err.value).count(field) >= 1
    assert model.calls == [] and gateway.errors(token) == []


async def raw(gw: ModelGateway, method: str, path: str, body: bytes = b"",
              headers: dict[str, str] | None = None, chunked: bool = False,
              ) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request over a fresh connection; (status, headers, body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
    head = {"Host": "127.0.0.1", "Connection": "close", **(headers or {})}
    if chunked:
        head["Transfer-Encoding"] = "chunked"
        half = len(body) // 2
        payload = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n"
                           for p in (body[:half], body[half:])) + b"0\r\n\r\n"
    else:
        head.setdefault("Content-Length", str(len(body)))
        payload = body
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
    await writer.drain()
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    top, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = top.decode("latin-1").split("\r\n")
    got = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return int(status_line.split(" ")[1]), got, rest


async def test_body_that_is_not_json_and_other_paths(gateway: ModelGateway) -> None:
    token = gateway.register(ScriptedModel([reply("x")]))
    base = f"/t/{token}/v1"
    status, headers, body = await raw(gateway, "POST", f"{base}/chat/completions", b"{not json")
    assert status == 400 and json.loads(body)["error"]["param"] == "body"
    assert headers["x-should-retry"] == "false"
    assert (await raw(gateway, "GET", f"{base}/embeddings"))[0] == 404
    assert (await raw(gateway, "GET", f"{base}/chat/completions"))[0] == 405
    assert (await raw(gateway, "POST", f"{base}/chat/completions",
                      headers={"Content-Length": str(10**9)}))[0] == 413
    status, _, body = await raw(gateway, "GET", f"{base}/models/anything")
    assert status == 200 and json.loads(body)["object"] == "model"


async def test_model_error_is_502_redacted_and_reported(
        gateway: ModelGateway, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)

    def fail(_: Request) -> ModelResponse:
        raise ProviderError(f"upstream 503 for key {SECRET}", status=503)

    transcript = Transcript()
    token = gateway.register(ScriptedModel(fail), transcript)
    async with sdk(gateway, token) as client:  # the SDK's own retries are switched off
        with pytest.raises(openai.APIStatusError) as err:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}])
    assert err.value.status_code == 502
    assert SECRET not in str(err.value) and "***" in str(err.value)
    (error,) = gateway.errors(token)
    assert error.startswith("ProviderError: upstream 503") and SECRET not in error
    assert [e.kind for e in transcript.events] == ["infra_error"]
    assert transcript.metrics.n_model_calls == 0
    assert gateway.unregister(token) == [error]
    assert gateway.errors(token) == []


async def test_client_bug_is_500_and_reported(gateway: ModelGateway) -> None:
    def boom(_: Request) -> ModelResponse:
        raise RuntimeError("oops")

    token = gateway.register(ScriptedModel(boom))
    async with sdk(gateway, token) as client:
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}])
    assert gateway.errors(token) == ["promptloop bug: the model client raised RuntimeError: oops"]


async def test_twenty_parallel_requests_on_distinct_tokens(gateway: ModelGateway) -> None:
    running = peak = 0

    async def echo(request: Request) -> ModelResponse:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.3)
        running -= 1
        return reply(f"echo {request.messages[-1].content}", tokens=(1, 1))

    models = [ScriptedModel(echo) for _ in range(20)]
    transcripts = [Transcript() for _ in models]
    tokens = [gateway.register(m, t) for m, t in zip(models, transcripts, strict=True)]
    assert len(set(tokens)) == 20

    async def ask(i: int, token: str) -> str:
        async with sdk(gateway, token) as client:
            got = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"#{i}"}])
        return got.choices[0].message.content or ""

    answers = await asyncio.gather(*(ask(i, t) for i, t in enumerate(tokens)))
    assert answers == [f"echo #{i}" for i in range(20)]
    assert peak == 20  # all twenty were in the model at once: served concurrently
    for i, (model, transcript) in enumerate(zip(models, transcripts, strict=True)):
        assert len(model.calls) == 1 and model.calls[0].messages[0].content == f"#{i}"
        assert [m.content for m in transcript.messages] == [f"#{i}", f"echo #{i}"]
        assert transcript.metrics.usage == Usage(input_tokens=1, output_tokens=1)


async def test_keep_alive_connection_serves_many_requests(gateway: ModelGateway) -> None:
    model = ScriptedModel(lambda r: reply("ok"))
    token = gateway.register(model)
    async with sdk(gateway, token) as client:
        for _ in range(5):
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}])
    assert len(model.calls) == 5


async def test_chunked_body_and_raw_arguments_kept(gateway: ModelGateway) -> None:
    bad = ToolCall(id="c1", name="get_weather", raw_arguments="{city: Oslo",
                   parse_error="not JSON")
    model = ScriptedModel([ModelResponse(text="", tool_calls=(bad,), stop_reason="tool_use")])
    token = gateway.register(model)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
    status, _, got = await raw(gateway, "POST", f"/t/{token}/v1/chat/completions", body,
                               chunked=True)
    assert status == 200
    message = json.loads(got)["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["arguments"] == "{city: Oslo"


async def test_closing_cancels_requests_in_flight() -> None:
    gateway = ModelGateway()
    await gateway.start()
    token = gateway.register(ScriptedModel([reply("late")], latency_s=30))
    client = sdk(gateway, token, max_retries=0, timeout=10)
    pending = asyncio.ensure_future(client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]))
    await asyncio.sleep(0.1)
    await asyncio.wait_for(gateway.aclose(), 5)
    with pytest.raises(openai.APIConnectionError):
        await pending
    await client.close()


def test_history_arguments_that_are_not_an_object_are_kept_raw() -> None:
    parsed = parse_chat_request({"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "[1]"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{oops"}},
        ]},
    ]})
    first, second = parsed.messages[1].tool_calls
    assert first.parse_error and first.raw_arguments == "[1]"
    assert second.parse_error and second.raw_arguments == "{oops"
    with pytest.raises(RequestError, match=r"tool_choice\.function\.name"):
        parse_chat_request({"messages": [{"role": "user", "content": "x"}],
                            "tool_choice": {"type": "function", "function": {"name": "zz"}}})


async def test_promptloops_own_openai_provider_through_the_gateway(
        gateway: ModelGateway) -> None:
    """Messages, tools and settings survive a round trip: OpenAIProvider -> gateway -> model."""
    from promptloop.agents.llm.providers.openai_provider import OpenAIProvider
    from promptloop.agents.llm.types import Message, ModelSettings, ToolSpec

    model = ScriptedModel([reply("", call("get_weather", city="Rome"), tokens=(9, 3))])
    token = gateway.register(model)
    provider = OpenAIProvider("agent-model", client=sdk(gateway, token, max_retries=0))
    earlier = ToolCall(id="c0", name="get_weather", arguments={"city": "Oslo"})
    spec = ToolSpec(name="get_weather", description="Weather", parameters=WEATHER["function"][
        "parameters"])
    got = await provider.complete(
        [Message.system("s"), Message.user("u"), Message.assistant("", (earlier,)),
         Message.tool(earlier, "cold")],
        tools=[spec], settings=ModelSettings(seed=3, tool_choice="required"))
    await provider.aclose()
    assert got.tool_calls[0].arguments == {"city": "Rome"}
    assert got.usage.input_tokens == 9 and got.stop_reason == "tool_use"
    seen = model.calls[0]
    assert seen.messages[2].tool_calls[0].arguments == {"city": "Oslo"}
    assert seen.messages[3].tool_name == "get_weather" and seen.tools == [spec]
    assert seen.settings is not None and seen.settings.seed == 3
    assert seen.settings.tool_choice == "required"


async def test_unregister_cancels_calls_in_flight_and_records_nothing_more(
        gateway: ModelGateway) -> None:
    transcript = Transcript()
    model = ScriptedModel([reply("too late")], latency_s=30)
    token = gateway.register(model, transcript)
    client = sdk(gateway, token, max_retries=0, timeout=10)
    pending = asyncio.ensure_future(client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]))
    while not model.calls:
        await asyncio.sleep(0.01)
    assert gateway.unregister(token) == []
    with pytest.raises(openai.APIConnectionError):
        await asyncio.wait_for(pending, 5)
    await client.close()
    assert transcript.messages == [] and transcript.metrics.n_model_calls == 0
    assert transcript.metrics.model_seconds == 0
