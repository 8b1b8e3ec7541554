from __future__ import annotations

import json

import pytest
from openai import AsyncOpenAI

from promptloop.agents.llm.errors import CredentialsError, ModelConfigError, ProviderError
from promptloop.agents.llm.providers.openai_provider import LOCAL_PLACEHOLDER_KEY, OpenAIProvider
from promptloop.agents.llm.registry import ModelOptions, create_client
from promptloop.agents.llm.types import Message, ModelSettings, ToolCall, ToolSpec
from promptloop.agents.tools import Tool, ToolArgs, ToolResult
from tests.llm.fake_api import FakeAPI, Reply, openai_completion, openai_error

SECRET = "sk-proj-test-0123456789abcdefSECRET"
WRITE = ToolSpec(
    name="Write",
    description="Write a file",
    parameters={
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["file_path", "content"],
    },
)


def provider(api: FakeAPI, max_retries: int = 2, timeout: float = 10.0) -> OpenAIProvider:
    sdk = AsyncOpenAI(
        api_key="test-key", base_url=f"{api.url}/v1", max_retries=max_retries, timeout=timeout
    )
    return OpenAIProvider("gpt-fake", client=sdk)


async def test_request_shape_and_tool_call_response(fake_api: FakeAPI) -> None:
    fake_api.queue(
        Reply(
            body=openai_completion(
                None,
                [("call_9", "Write", '{"file_path": "/x.md", "content": "hi"}')],
                finish_reason="tool_calls",
                usage={
                    "prompt_tokens": 120,
                    "completion_tokens": 9,
                    "total_tokens": 129,
                    "prompt_tokens_details": {"cached_tokens": 100},
                },
            )
        )
    )
    call = ToolCall(id="call_1", name="Write", arguments={"file_path": "/a.md", "content": "é"})
    messages = [
        Message.system("sys"),
        Message.user("go"),
        Message.assistant("", (call,)),
        Message.tool(call, "Wrote /a.md", is_error=False),
    ]
    client = provider(fake_api)
    response = await client.complete(messages, tools=[WRITE], settings=ModelSettings(seed=7))
    await client._sdk().close()

    sent = fake_api.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "Write",
                "description": "Write a file",
                "parameters": WRITE.parameters,
            },
        }
    ]
    assert [m["role"] for m in sent.body["messages"]] == ["system", "user", "assistant", "tool"]
    tool_call = sent.body["messages"][2]["tool_calls"][0]
    assert tool_call["id"] == "call_1" and tool_call["type"] == "function"
    assert isinstance(tool_call["function"]["arguments"], str)
    assert json.loads(tool_call["function"]["arguments"]) == call.arguments
    assert sent.body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Wrote /a.md",
    }
    assert sent.body["max_tokens"] == 2048  # a custom base URL gets the portable name
    assert sent.body["seed"] == 7
    assert "response_format" not in sent.body

    assert response.tool_calls == (
        ToolCall(id="call_9", name="Write", arguments={"file_path": "/x.md", "content": "hi"}),
    )
    assert response.stop_reason == "tool_use"
    assert response.usage.input_tokens == 20
    assert response.usage.cache_read_tokens == 100
    assert response.usage.output_tokens == 9


async def test_malformed_tool_arguments_become_parse_errors(fake_api: FakeAPI) -> None:
    fake_api.queue(
        Reply(
            body=openai_completion(
                None,
                [
                    ("call_a", "Write", '{"file_path": "/x.md", "content": '),
                    ("call_b", "Write", '["not", "an", "object"]'),
                ],
                finish_reason="tool_calls",
            )
        )
    )
    client = provider(fake_api)
    response = await client.complete([Message.user("go")], tools=[WRITE])
    await client._sdk().close()
    broken, listed = response.tool_calls
    assert broken.arguments == {} and broken.parse_error is not None
    assert "not valid JSON" in broken.parse_error
    assert broken.raw_arguments == '{"file_path": "/x.md", "content": '
    assert listed.parse_error == "arguments must be a JSON object, got list"

    class WriteArgs(ToolArgs):
        file_path: str
        content: str

    tool = Tool("Write", "Write a file", WriteArgs, lambda _a: ToolResult(content="ok"))
    result = await tool.invoke(broken)
    assert result.is_error and "Invalid arguments for Write" in result.content

    # Sending the broken call back replays the model's raw text verbatim.
    fake_api.queue(Reply(body=openai_completion("fixed")))
    client = provider(fake_api)
    await client.complete([Message.assistant("", (broken,)), Message.tool(broken, result.content)])
    await client._sdk().close()
    replayed = fake_api.requests[1].body["messages"][0]["tool_calls"][0]["function"]
    assert replayed["arguments"] == broken.raw_arguments


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_retryable_error_then_success_counts_one_retry(
    fake_api: FakeAPI, status: int
) -> None:
    fake_api.queue(openai_error(status, "try again"), Reply(body=openai_completion("ok")))
    client = provider(fake_api)
    response = await client.complete([Message.user("hi")])
    await client._sdk().close()
    assert response.text == "ok" and response.stop_reason == "end_turn"
    assert response.retries == 1
    assert [r.headers["x-stainless-retry-count"] for r in fake_api.requests] == ["0", "1"]


async def test_timeouts_after_retries_raise_provider_error(fake_api: FakeAPI) -> None:
    slow = Reply(body=openai_completion("late"), delay_s=1.0)
    fake_api.queue(slow, slow)
    client = provider(fake_api, max_retries=1, timeout=0.2)
    with pytest.raises(ProviderError, match="timed out after 1 retries") as info:
        await client.complete([Message.user("hi")])
    await client._sdk().close()
    assert info.value.retries == 1


async def test_rejected_key_is_credentials_error_without_the_key(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    fake_api.queue(openai_error(401, f"Incorrect API key provided: {SECRET}"))
    client = create_client("openai:gpt-fake", ModelOptions(base_url=f"{fake_api.url}/v1"))
    with pytest.raises(CredentialsError) as info:
        await client.complete([Message.user("hi")])
    assert fake_api.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert info.value.variable == "OPENAI_API_KEY"
    assert "OPENAI_API_KEY" in str(info.value)
    for text in (str(info.value), repr(info.value), repr(client)):
        assert SECRET not in text and SECRET[:12] not in text
    await client.aclose()


async def test_provider_error_text_is_scrubbed_of_the_key(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_api.url}/v1")
    fake_api.queue(openai_error(400, f"bad request from key {SECRET}"))
    client = create_client("openai:gpt-fake")
    with pytest.raises(ProviderError) as info:
        await client.complete([Message.user("hi")])
    await client.aclose()
    assert info.value.status == 400 and info.value.retries == 0
    assert "bad request from key ***" in str(info.value)
    assert SECRET not in str(info.value)


async def test_missing_key_fails_before_any_request(fake_api: FakeAPI) -> None:
    client = OpenAIProvider("gpt-fake", options=ModelOptions(base_url="https://llm.example/v1"))
    with pytest.raises(CredentialsError, match="OPENAI_API_KEY"):
        await client.preflight()
    without_url = OpenAIProvider("gpt-fake")
    with pytest.raises(CredentialsError, match="OPENAI_API_KEY"):
        await without_url.complete([Message.user("hi")])
    assert fake_api.requests == []


async def test_local_base_url_needs_no_key(fake_api: FakeAPI) -> None:
    fake_api.queue(Reply(body=openai_completion("pong")))
    client = OpenAIProvider("qwen", options=ModelOptions(base_url=f"{fake_api.url}/v1"))
    await client.preflight()
    await client.aclose()
    sent = fake_api.requests[0]
    assert sent.headers["authorization"] == f"Bearer {LOCAL_PLACEHOLDER_KEY}"
    assert sent.body["max_tokens"] == 1


async def test_preflight_unknown_model_is_config_error(fake_api: FakeAPI) -> None:
    fake_api.queue(openai_error(404, "model 'nope' not found"))
    client = OpenAIProvider("nope", options=ModelOptions(base_url=f"{fake_api.url}/v1"))
    with pytest.raises(ModelConfigError, match="nope"):
        await client.preflight()
    await client.aclose()


@pytest.mark.parametrize(
    "response_format",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}},
        {
            "type": "json_schema",
            "json_schema": {
                "name": "step",
                "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
                "strict": True,
            },
        },
    ],
)
async def test_response_format_is_sent_as_json_schema(
    fake_api: FakeAPI, response_format: dict[str, object]
) -> None:
    fake_api.queue(Reply(body=openai_completion('{"a": "b"}', finish_reason="length")))
    client = provider(fake_api)
    settings = ModelSettings(response_format=response_format, temperature=0.0, max_tokens=50)
    response = await client.complete([Message.user("json")], settings=settings)
    await client._sdk().close()
    body = fake_api.requests[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "step",
            "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
            "strict": True,
        },
    }
    assert body["temperature"] == 0.0 and body["max_tokens"] == 50
    assert response.stop_reason == "max_tokens"
