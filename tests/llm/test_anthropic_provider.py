from __future__ import annotations

import pytest
from anthropic import AsyncAnthropic

from promptloop.agents.llm.errors import CredentialsError, ProviderError
from promptloop.agents.llm.providers.anthropic_provider import AnthropicProvider
from promptloop.agents.llm.registry import ModelOptions, create_client
from promptloop.agents.llm.types import Message, ModelSettings, ToolCall, ToolSpec
from tests.llm.fake_api import FakeAPI, Reply, anthropic_error, anthropic_message

SECRET = "sk-ant-test-0123456789abcdefSECRET"
READ = ToolSpec(
    name="Read",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


def provider(api: FakeAPI, max_retries: int = 2) -> AnthropicProvider:
    sdk = AsyncAnthropic(api_key="test-key", base_url=api.url, max_retries=max_retries)
    return AnthropicProvider("claude-fake", client=sdk)


def conversation() -> list[Message]:
    first = ToolCall(id="toolu_1", name="Read", arguments={"path": "/a.md"})
    second = ToolCall(id="toolu_2", name="Read", arguments={"path": "/b.md"})
    return [
        Message.system("You organise notes."),
        Message.user("File this."),
        Message.assistant("Reading both.", (first, second)),
        Message.tool(first, "1\tHello"),
        Message.tool(second, "No such file", is_error=True),
        Message.user("Reminder: update the insight."),
    ]


async def test_request_shape_and_tool_call_response(fake_api: FakeAPI) -> None:
    fake_api.queue(
        Reply(
            body=anthropic_message(
                {"type": "text", "text": "Writing."},
                {"type": "tool_use", "id": "toolu_9", "name": "Read", "input": {"path": "/c"}},
                stop_reason="tool_use",
                usage={
                    "input_tokens": 20,
                    "output_tokens": 7,
                    "cache_read_input_tokens": 300,
                    "cache_creation_input_tokens": 40,
                },
            )
        )
    )
    client = provider(fake_api)
    response = await client.complete(conversation(), tools=[READ])
    await client._sdk().close()

    sent = fake_api.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.body["system"] == [
        {"type": "text", "text": "You organise notes.", "cache_control": {"type": "ephemeral"}}
    ]
    assert sent.body["tools"] == [
        {"name": "Read", "description": "Read a file", "input_schema": READ.parameters}
    ]
    roles = [m["role"] for m in sent.body["messages"]]
    assert roles == ["user", "assistant", "user"]
    assistant = sent.body["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Reading both."}
    assert [b["type"] for b in assistant[1:]] == ["tool_use", "tool_use"]
    assert assistant[2]["input"] == {"path": "/b.md"}
    results = sent.body["messages"][2]["content"]
    assert results[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "1\tHello",
        "is_error": False,
    }
    assert results[1]["is_error"] is True and results[1]["tool_use_id"] == "toolu_2"
    assert results[2] == {"type": "text", "text": "Reminder: update the insight."}

    assert response.text == "Writing."
    assert response.tool_calls == (ToolCall(id="toolu_9", name="Read", arguments={"path": "/c"}),)
    assert response.stop_reason == "tool_use"
    assert response.usage.cache_read_tokens == 300
    assert response.usage.cache_write_tokens == 40
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 7)
    assert response.retries == 0


async def test_rate_limit_then_success_counts_one_retry(fake_api: FakeAPI) -> None:
    fake_api.queue(
        anthropic_error(429, "slow down"),
        Reply(body=anthropic_message({"type": "text", "text": "ok"})),
    )
    client = provider(fake_api)
    response = await client.complete([Message.user("hi")])
    await client._sdk().close()
    assert response.text == "ok"
    assert response.retries == 1
    assert len(fake_api.requests) == 2


async def test_server_errors_exhaust_retries_into_provider_error(fake_api: FakeAPI) -> None:
    fake_api.queue(*(anthropic_error(529, f"overloaded for {SECRET}") for _ in range(3)))
    client = provider(fake_api, max_retries=2)
    with pytest.raises(ProviderError) as info:
        await client.complete([Message.user("hi")])
    await client._sdk().close()
    assert info.value.retries == 2
    assert info.value.status == 529
    assert len(fake_api.requests) == 3


async def test_rejected_key_is_credentials_error_without_the_key(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    fake_api.queue(anthropic_error(401, f"invalid x-api-key {SECRET}"))
    client = create_client("anthropic:claude-fake", ModelOptions(base_url=fake_api.url))
    with pytest.raises(CredentialsError) as info:
        await client.preflight()
    sent_auth = fake_api.requests[0].headers
    assert SECRET in (sent_auth.get("x-api-key", ""), sent_auth.get("authorization", "")[7:])
    assert info.value.variable == "ANTHROPIC_API_KEY"
    assert "ANTHROPIC_API_KEY" in str(info.value)
    for text in (str(info.value), repr(info.value), repr(client)):
        assert SECRET not in text and SECRET[:12] not in text
    assert info.value.__cause__ is None and info.value.__suppress_context__
    await client.aclose()


async def test_missing_key_fails_before_any_request(fake_api: FakeAPI) -> None:
    client = AnthropicProvider("claude-fake", options=ModelOptions(base_url=fake_api.url))
    with pytest.raises(CredentialsError, match="ANTHROPIC_API_KEY"):
        await client.preflight()
    with pytest.raises(CredentialsError):
        await client.complete([Message.user("hi")])
    assert fake_api.requests == []


async def test_preflight_sends_one_token_request(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.url)
    fake_api.queue(
        Reply(body=anthropic_message({"type": "text", "text": "p"}, stop_reason="max_tokens"))
    )
    client = create_client("anthropic:claude-fake")
    await client.preflight()
    await client.aclose()
    assert fake_api.requests[0].body["max_tokens"] == 1


async def test_settings_map_to_request_and_stop_reasons(fake_api: FakeAPI) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "number"}}}
    fake_api.queue(
        Reply(body=anthropic_message({"type": "text", "text": "{}"}, stop_reason="max_tokens")),
        Reply(body=anthropic_message({"type": "text", "text": "no"}, stop_reason="refusal")),
    )
    client = provider(fake_api)
    settings = ModelSettings(max_tokens=600, response_format=schema)
    first = await client.complete([Message.user("judge")], settings=settings)
    second = await client.complete([Message.user("judge")])
    await client._sdk().close()
    body = fake_api.requests[0].body
    assert body["max_tokens"] == 600
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert "system" not in body and "tools" not in body
    assert first.stop_reason == "max_tokens"
    assert second.stop_reason == "other"


def test_tool_use_input_that_is_not_an_object_becomes_a_parse_error() -> None:
    from types import SimpleNamespace

    from promptloop.agents.llm.providers.anthropic_provider import from_anthropic

    block = SimpleNamespace(type="tool_use", id="toolu_x", name="Read", input=["a", "b"])
    message = SimpleNamespace(
        content=[block],
        usage=SimpleNamespace(input_tokens=1, output_tokens=1),
        stop_reason="pause_turn",
        model="m",
    )
    response = from_anthropic(message, retries=0, fallback_model="m")
    (call,) = response.tool_calls
    assert call.arguments == {} and call.parse_error == "arguments must be a JSON object, got list"
    assert call.raw_arguments == '["a", "b"]'
    assert response.stop_reason == "other"
