from __future__ import annotations

import json

import pytest
import xllamacpp
from pydantic import Field

from promptloop.agents.llm.errors import ModelConfigError
from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.structured import (
    FINAL_ANSWER,
    StructuredToolClient,
    parse_step,
    render_messages,
    simplify_schema,
    step_schema,
)
from promptloop.agents.llm.types import Message, ModelResponse, ModelSettings, ToolCall, ToolSpec
from promptloop.agents.tools import Tool, ToolArgs, ToolResult


class TagArgs(ToolArgs):
    name: str = Field(description="Tag name", title="Name")
    icon: str | None = Field(default=None, description="Emoji")


class SaveArgs(ToolArgs):
    title: str = Field(description="Card title")
    tags: list[TagArgs] = Field(default_factory=list)
    score: float | None = None


def _noop(_args: object) -> ToolResult:
    return ToolResult(content="ok")


SAVE = Tool("save_card", "Save the card.\nSecond line of detail.", SaveArgs, _noop).spec()
LIST = ToolSpec(name="list_tags", description="List tags", parameters={"type": "object"})


def test_simplify_schema_keeps_property_names_that_look_like_keywords() -> None:
    schema = simplify_schema(SAVE.parameters)
    assert set(schema["properties"]) == {"title", "tags", "score"}
    text = json.dumps(schema)
    assert '"default"' not in text and '"description"' not in text and "$ref" not in text
    tag = schema["properties"]["tags"]["items"]
    assert tag["required"] == ["name"] and "title" not in tag


def test_step_schema_has_one_branch_per_tool_plus_final_answer() -> None:
    schema = step_schema([SAVE, LIST])
    consts = [b["properties"]["tool"]["const"] for b in schema["oneOf"]]
    assert consts == ["save_card", "list_tags", FINAL_ANSWER]
    save = schema["oneOf"][0]
    assert save["required"] == ["tool", "arguments"]
    assert save["properties"]["arguments"]["additionalProperties"] is False
    assert schema["oneOf"][2]["properties"]["answer"] == {"type": "string"}
    # llama.cpp's converter accepts it (the embedded test exercises the real server).
    grammar = xllamacpp.json_schema_to_grammar(json.dumps(schema))
    assert "save_card" in grammar and FINAL_ANSWER in grammar


def test_render_messages_replays_tools_as_text() -> None:
    call = ToolCall(id="step_1", name="save_card", arguments={"title": "T"})
    bad = ToolCall(id="step_2", name="save_card", raw_arguments='{"tool": "save_card", "argu')
    bad = bad.model_copy(update={"parse_error": "not JSON"})
    messages = [
        Message.system("Be brief."),
        Message.user("Make a card."),
        Message.assistant("", (call,)),
        Message.tool(call, "Saved.", is_error=False),
        Message.assistant("", (bad,)),
        Message.tool(bad, "Invalid arguments", is_error=True),
        Message.user("Reminder."),
        Message.assistant("All done"),
    ]
    out = render_messages(messages, [SAVE, LIST])
    assert [m.role for m in out] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert out[0].content.startswith("Be brief.\n\n## How to act")
    assert (
        "- save_card(title, tags?, score?): Save the card. Second line of detail." in out[0].content
    )
    assert "- list_tags(): List tags" in out[0].content
    assert json.loads(out[2].content) == {"tool": "save_card", "arguments": {"title": "T"}}
    assert out[3].content == "Result of save_card (step_1): Saved."
    assert out[4].content == bad.raw_arguments
    assert out[5].content == "Result of save_card (step_2) [error]: Invalid arguments\n\nReminder."
    assert json.loads(out[6].content) == {"tool": FINAL_ANSWER, "answer": "All done"}
    assert all(not m.tool_calls for m in out)


def test_render_messages_without_system_adds_one() -> None:
    out = render_messages([Message.user("hi")], [LIST])
    assert out[0].role == "system" and "list_tags" in out[0].content
    assert render_messages([Message.user("hi")], []) == [Message.user("hi")]


@pytest.mark.parametrize(
    ("text", "expected_text", "expected_call"),
    [
        ('{"tool": "final_answer", "answer": "Done."}', "Done.", None),
        ('```json\n{"tool": "list_tags", "arguments": {}}\n```', "", ("list_tags", {}, False)),
        (
            '{"tool": "save_card", "arguments": {"title": "x"}}',
            "",
            ("save_card", {"title": "x"}, False),
        ),
        ('{"tool": "save_card", "arguments": [1]}', "", ("save_card", {}, True)),
        (
            '{\n  "tool": "save_card",\n  "arguments": {"title": "unfinish',
            "",
            ("save_card", {}, True),
        ),
        ('{"tool": "launch", "arguments": {}}', '{"tool": "launch", "arguments": {}}', None),
        ('{"tool": "lau', '{"tool": "lau', None),
        ("Just words.", "Just words.", None),
        ("[1, 2]", "[1, 2]", None),
    ],
)
def test_parse_step(
    text: str, expected_text: str, expected_call: tuple[str, dict[str, object], bool] | None
) -> None:
    final, calls = parse_step(text, ["save_card", "list_tags"])
    assert final == expected_text
    if expected_call is None:
        assert calls == ()
        return
    (call,) = calls
    name, arguments, broken = expected_call
    assert (call.name, call.arguments, call.parse_error is not None) == (name, arguments, broken)
    assert call.id.startswith("step_")
    assert call.raw_arguments == (text if broken else None)


async def test_client_sends_no_native_tools_and_parses_the_step() -> None:
    def script(request: Request) -> ModelResponse:
        assert request.tools == []
        assert request.settings is not None and request.settings.max_tokens == 99
        fmt = request.settings.response_format
        assert fmt is not None and fmt["type"] == "json_schema"
        assert fmt["json_schema"]["schema"] == step_schema([SAVE, LIST])
        return reply('{"tool": "save_card", "arguments": {"title": "Trip"}}')

    inner = ScriptedModel(script, model_id="openai:tiny")
    client = StructuredToolClient(inner)
    response = await client.complete(
        [Message.system("s"), Message.user("u")],
        tools=[SAVE, LIST],
        settings=ModelSettings(max_tokens=99),
    )
    assert client.model_id == "openai:tiny"
    assert response.text == ""
    assert response.stop_reason == "tool_use"
    (call,) = response.tool_calls
    assert (call.name, call.arguments) == ("save_card", {"title": "Trip"})
    assert response.usage.input_tokens == 10


async def test_client_without_tools_passes_text_through() -> None:
    inner = ScriptedModel([reply("plain answer")])
    response = await StructuredToolClient(inner).complete([Message.user("u")])
    assert response.text == "plain answer" and response.tool_calls == ()
    assert inner.calls[0].settings is None


async def test_reserved_final_answer_name_is_rejected() -> None:
    clash = ToolSpec(name=FINAL_ANSWER, description="x", parameters={"type": "object"})
    with pytest.raises(ModelConfigError, match=FINAL_ANSWER):
        await StructuredToolClient(ScriptedModel([])).complete([Message.user("u")], tools=[clash])
