"""optimizer/run/record.py: the conversation the gateway recorded merged with the transcript an
agent returns, the richer kept and nothing dropped (issue 29)."""

from __future__ import annotations

from typing import Any

from promptloop.agents.llm.types import Message, ToolCall
from promptloop.agents.transcript import NO_RESULT, ConversationRecorder, Transcript
from promptloop.optimizer.adapters.contract import TrialResultDoc
from promptloop.optimizer.run.record import merge_messages, merge_result

LOOKUP = ToolCall(id="call_1", name="lookup", arguments={"email": "ana@example.com"})
SAVE = ToolCall(id="call_2", name="save", arguments={"category": "billing"})


def gateway_record(*calls: tuple[list[Message], Message]) -> Transcript:
    """What the gateway records: each model call's messages as sent and its reply."""
    transcript = Transcript()
    recorder = ConversationRecorder(transcript)
    for sent, got in calls:
        recorder.call(sent, got)
    return transcript


SYSTEM, USER = Message.system("You triage."), Message.user("Ticket: refund")
ASK = Message.assistant("", (LOOKUP,))
LOOKED = Message.tool(LOOKUP, "plan: pro")
SAVING = Message.assistant("", (SAVE,))
SAVED = Message.tool(SAVE, "saved")


def doc(*messages: dict[str, Any], **extra: Any) -> TrialResultDoc:
    return TrialResultDoc.model_validate({"outcome": {"category": "billing"},
                                          "transcript": list(messages), **extra})


def openai(m: Message) -> dict[str, Any]:
    """`m` as an agent returns it (the OpenAI shape)."""
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": c.arguments}}
                             for c in m.tool_calls]
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id
    return out


def roles(t: Transcript) -> list[str]:
    return [m.role for m in t.messages]


def test_an_agent_transcript_that_extends_the_gateways_adds_the_last_tool_result() -> None:
    # the gateway saw two calls; the last reply's tool result never reached a model call
    t = gateway_record(([SYSTEM, USER], ASK), ([SYSTEM, USER, ASK, LOOKED], SAVING))
    assert [(c.tool_name, c.result) for c in t.tool_calls] == [("lookup", "plan: pro")]
    merge_result(doc(*(openai(m) for m in (SYSTEM, USER, ASK, LOOKED, SAVING, SAVED))), t)
    assert t.messages == [SYSTEM, USER, ASK, LOOKED, SAVING, SAVED]
    assert [(c.tool_name, c.result) for c in t.tool_calls] == [("lookup", "plan: pro"),
                                                               ("save", "saved")]
    assert t.metrics.n_tool_calls == 2 and t.metrics.n_turns == 2
    assert not [e for e in t.events if e.kind == "agent_transcript"]


def test_an_empty_agent_transcript_keeps_the_gateways_record_whole() -> None:
    t = gateway_record(([SYSTEM, USER], ASK), ([SYSTEM, USER, ASK, LOOKED], SAVING))
    before = t.model_copy(deep=True)
    merge_result(doc(usage={"input_tokens": 5, "output_tokens": 2}), t)
    assert t.messages == before.messages
    # the call whose result nobody reported is still listed, and says so
    assert [(c.tool_name, c.result) for c in t.tool_calls] == [("lookup", "plan: pro"),
                                                               ("save", NO_RESULT)]
    assert t.completed and not t.events


def test_interleaved_records_keep_each_message_once_in_order() -> None:
    # the agent's record misses the system message the gateway saw, and holds a note the
    # model never saw (a log line it kept between two calls) and the final tool result
    ours = [SYSTEM, USER, ASK, LOOKED, SAVING]
    note = Message.user("(note: customer is on the pro plan)")
    theirs = [USER, ASK, LOOKED, note, SAVING, SAVED]
    merged, unplaced = merge_messages(ours, theirs)
    assert merged == [SYSTEM, USER, ASK, LOOKED, note, SAVING, SAVED]
    assert unplaced == []


def test_an_assistant_message_resent_without_its_text_is_the_same_message() -> None:
    said = Message.assistant("Let me look the customer up.", (LOOKUP,))
    merged, _ = merge_messages([USER, said, LOOKED], [USER, Message.assistant("", (LOOKUP,)),
                                                      LOOKED])
    assert merged == [USER, said, LOOKED]  # the gateway's copy (with the text) is kept


def test_records_with_nothing_in_common_keep_the_richer_and_the_other_in_an_event() -> None:
    t = gateway_record(([SYSTEM, USER], Message.assistant("billing")))
    other = [Message.user("a different conversation"), ASK, LOOKED,
             Message.assistant("done")]
    merge_result(doc(*(openai(m) for m in other)), t)
    # the agent's record is richer (more messages and a tool call): it is the conversation
    assert t.messages == other
    [event] = [e for e in t.events if e.kind == "agent_transcript"]
    kept = [Message.model_validate(m) for m in event.data["messages"]]
    assert kept == [SYSTEM, USER, Message.assistant("billing")]
    assert [c.tool_name for c in t.tool_calls] == ["lookup"]


def test_with_nothing_in_common_a_poorer_agent_record_goes_to_the_event() -> None:
    t = gateway_record(([SYSTEM, USER], ASK), ([SYSTEM, USER, ASK, LOOKED], SAVING))
    before = list(t.messages)
    merge_result(doc({"role": "assistant", "content": "unrelated"}), t)
    assert t.messages == before
    [event] = [e for e in t.events if e.kind == "agent_transcript"]
    assert [m["content"] for m in event.data["messages"]] == ["unrelated"]


def test_an_error_mark_from_the_agents_record_survives_the_merge() -> None:
    # the OpenAI wire has no error mark on a tool result: only the agent's record says so
    t = gateway_record(([SYSTEM, USER], ASK), ([SYSTEM, USER, ASK, LOOKED], SAVING))
    assert not t.tool_calls[0].is_error
    failed = {**openai(LOOKED), "is_error": True}
    inline = {**openai(SAVING)}
    inline["tool_calls"] = [{**inline["tool_calls"][0], "result": "disk full",
                             "is_error": True}]
    merge_result(doc(*(openai(m) for m in (SYSTEM, USER, ASK)), failed, inline), t)
    assert [m.is_error for m in t.messages if m.role == "tool"] == [True]
    assert [(c.tool_name, c.result, c.is_error) for c in t.tool_calls] == [
        ("lookup", "plan: pro", True), ("save", "disk full", True)]


def test_an_agent_error_leaves_the_trial_incomplete_and_usage_fills_an_empty_meter() -> None:
    t = Transcript()
    merge_result(doc(*(openai(m) for m in (SYSTEM, USER, ASK, LOOKED)),
                     usage={"input_tokens": 30, "output_tokens": 4},
                     error={"cause": "agent", "message": "bad reply"}), t)
    assert roles(t) == ["system", "user", "assistant", "tool"]
    assert (t.metrics.usage.input_tokens, t.metrics.usage.output_tokens) == (30, 4)
    assert t.metrics.n_turns == 1 and not t.completed
