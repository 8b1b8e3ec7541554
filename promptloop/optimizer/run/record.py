"""One record of what an agent saw: the conversation the model gateway recorded, merged with
the transcript the agent returned in its result, whichever is richer, nothing dropped.

The gateway sees every model call of a trial (the messages as the agent sent them, each reply,
each tool result sent back on the next call); the agent's own transcript may add what the
gateway cannot see (the results of the last tool calls, after which the model was not called
again) or be all there is (an agent that called another endpoint). `merge_result` aligns the
two in order: messages both have are kept once, messages only one has are kept in place. Two
records with nothing in common are not interleaved: the richer is the conversation and the
other is kept whole in an `agent_transcript` event. Tool calls without a `ToolCallRecord` get one
from the merged messages (or the result the agent's transcript gives inline).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from promptloop.agents.llm.types import Message, Role, ToolCall, Usage
from promptloop.agents.transcript import Transcript, message_key, tool_record, utcnow
from promptloop.optimizer.adapters.contract import ToolCallDoc, TranscriptMessage, TrialResultDoc

ROLES = ("system", "user", "assistant", "tool")


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _call(doc: ToolCallDoc, n: int) -> ToolCall:
    if isinstance(doc.arguments, dict):
        return ToolCall(id=doc.id or f"call_{n}", name=doc.name, arguments=doc.arguments)
    try:
        parsed = json.loads(doc.arguments)
    except ValueError as err:
        return ToolCall(id=doc.id or f"call_{n}", name=doc.name, raw_arguments=doc.arguments,
                        parse_error=f"arguments are not JSON: {err}")
    if isinstance(parsed, dict):
        return ToolCall(id=doc.id or f"call_{n}", name=doc.name, arguments=parsed,
                        raw_arguments=doc.arguments)
    return ToolCall(id=doc.id or f"call_{n}", name=doc.name, raw_arguments=doc.arguments,
                    parse_error="arguments are not a JSON object")


Inline = dict[str, tuple[str, bool]]
"""call id -> (the result an agent gave inline on its tool call, whether it is an error)."""


def agent_messages(docs: Sequence[TranscriptMessage]) -> tuple[list[Message], Inline]:
    """The agent's transcript as messages, and the results it gave inline on its tool calls.
    An unknown role is kept as an assistant message."""
    out: list[Message] = []
    inline: Inline = {}
    names: dict[str, str] = {}
    n = 0
    for m in docs:
        role = m.role if m.role in ROLES else "assistant"
        if role == "assistant":
            calls = []
            for c in m.tool_calls:
                call = _call(c, n)
                n += 1
                calls.append(call)
                names[call.id] = call.name
                if c.result is not None:
                    inline[call.id] = (_text(c.result), c.is_error)
            out.append(Message.assistant(m.content or "", tuple(calls)))
        elif role == "tool":
            out.append(Message(role="tool", content=m.content or "",
                               tool_call_id=m.tool_call_id,
                               tool_name=names.get(m.tool_call_id or "") or m.name,
                               is_error=m.is_error))
        else:
            out.append(Message(role=cast(Role, role), content=m.content or ""))
    return out, inline


def _weight(messages: Sequence[Message]) -> int:
    return len(messages) + sum(len(m.tool_calls) for m in messages)


def merge_messages(ours: Sequence[Message],
                   theirs: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(the merged conversation, the messages that could not be placed in it).

    `theirs` is walked in order; each message found in `ours` (at or after the last one found)
    is kept once (a tool result marked as an error in either record stays marked: the OpenAI
    wire the gateway reads has no such mark, the agent's own transcript may), with the messages
    of `theirs` not found before it placed just before it and those after the last one found
    at the end. With nothing in common the richer list wins and the other is returned as
    unplaced."""
    if not theirs:
        return list(ours), []
    if not ours:
        return list(theirs), []
    keys = [message_key(m) for m in ours]
    merged: list[Message] = []
    pending: list[Message] = []
    at = matched = 0
    for m in theirs:
        key = message_key(m)
        try:
            j = keys.index(key, at)
        except ValueError:
            pending.append(m)
            continue
        kept = ours[j].model_copy(update={"is_error": True}) if m.is_error else ours[j]
        merged += [*ours[at:j], *pending, kept]
        pending = []
        at = j + 1
        matched += 1
    if not matched:
        if _weight(theirs) > _weight(ours):
            return list(theirs), list(ours)
        return list(ours), list(theirs)
    return [*merged, *ours[at:], *pending], []


def _complete_tool_calls(transcript: Transcript, inline: Inline) -> None:
    """A ToolCallRecord for every call in the messages that has none; a recorded call whose
    result the merged record marks as an error is marked so."""
    have = {c.call_id for c in transcript.tool_calls}
    results = {m.tool_call_id: m for m in transcript.messages
               if m.role == "tool" and m.tool_call_id}
    for record in transcript.tool_calls:
        said = results.get(record.call_id)
        if (said is not None and said.is_error) or inline.get(record.call_id, ("", False))[1]:
            record.is_error = True
    now = utcnow()
    for m in transcript.messages:
        for call in m.tool_calls:
            if call.id in have:
                continue
            have.add(call.id)
            result = results.get(call.id)
            if result is None and call.id in inline:
                text, is_error = inline[call.id]
                result = Message(role="tool", content=text, tool_call_id=call.id,
                                 tool_name=call.name, is_error=is_error)
            transcript.tool_calls.append(tool_record(call, result, now, now))
    transcript.metrics.n_tool_calls = len(transcript.tool_calls)


def merge_result(doc: TrialResultDoc, transcript: Transcript) -> None:
    """The agent's own transcript and usage merged into the trial's (which holds what the
    gateway recorded), in place."""
    theirs, inline = agent_messages(doc.transcript)
    merged, unplaced = merge_messages(transcript.messages, theirs)
    transcript.messages[:] = merged
    if unplaced:
        transcript.event(
            "agent_transcript",
            f"{len(unplaced)} message(s) of a second record that shares no message with the "
            "conversation shown (kept here)",
            messages=[m.model_dump(mode="json") for m in unplaced])
    _complete_tool_calls(transcript, inline)
    if not transcript.metrics.n_turns:
        transcript.metrics.n_turns = sum(m.role == "assistant" for m in merged)
    if doc.usage is not None and transcript.metrics.usage.total_tokens == 0:
        transcript.metrics.usage = transcript.metrics.usage + Usage(
            input_tokens=doc.usage.input_tokens, output_tokens=doc.usage.output_tokens)
    transcript.completed = doc.error is None


__all__ = ["agent_messages", "merge_messages", "merge_result"]
