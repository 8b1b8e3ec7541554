"""A loopback OpenAI-compatible server that plays the scripted Card/PKM agents, with faults.

Good calls are answered by the prompt-sensitive policies of tests/policies.py, translated to
and from the Chat Completions wire format. A deterministic `FaultPlan` turns every n-th agent
call into a 429, a 500, a hang past the client timeout, malformed tool arguments or a
truncated JSON body, and can make every call of chosen inputs fail (provider exhausted).
Requests without tools (the client's preflight ping) are always answered.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from promptloop.agents.llm.scripted import Request
from promptloop.agents.llm.types import Message, ModelResponse, ToolCall
from promptloop.agents.tools import parse_arguments
from tests import policies
from tests.llm.fake_api import (
    RETRY_FAST,
    FakeAPI,
    Recorded,
    Reply,
    openai_completion,
    openai_error,
)

FaultKind = Literal["429", "500", "hang", "malformed_args", "truncated"]
ALL_FAULTS: tuple[FaultKind, ...] = ("429", "500", "hang", "malformed_args", "truncated")
_ERROR_PREFIXES = ("Invalid arguments", "Error", "Unknown tool", "Tool ")


@dataclass(frozen=True)
class FaultPlan:
    every: int = 3
    """Every `every`-th agent call (1-based count) is a fault; 0 disables faults."""
    rate: float = 0.0
    """When set, replaces `every`: the share of agent calls that are faults, spread evenly
    (call n is a fault when floor(n * rate) steps up), so two faults never follow each other
    for rates up to 0.5."""
    kinds: tuple[FaultKind, ...] = ALL_FAULTS
    """Faults used in turn: the k-th faulty call gets kinds[k % len(kinds)]."""
    hang_s: float = 1.0
    """How long a hanging reply sleeps (make it longer than the client timeout)."""
    poison: tuple[str, ...] = ()
    """Calls whose first user message contains one of these always get HTTP 500."""

    def fault_for(self, n: int) -> FaultKind | None:
        if self.rate > 0:
            k = math.floor(n * self.rate)
            if k == math.floor((n - 1) * self.rate):
                return None
            return self.kinds[(k - 1) % len(self.kinds)]
        if self.every <= 0 or n % self.every:
            return None
        return self.kinds[(n // self.every - 1) % len(self.kinds)]


def from_openai_messages(raw: list[dict[str, Any]]) -> list[Message]:
    """Our messages from a Chat Completions request (tool errors recognised by their text)."""
    names: dict[str, str] = {}
    out: list[Message] = []
    for m in raw:
        role = m["role"]
        if role in ("system", "user"):
            out.append(Message(role=role, content=m.get("content") or ""))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or ():
                args, error = parse_arguments(c["function"]["arguments"])
                names[c["id"]] = c["function"]["name"]
                calls.append(
                    ToolCall(
                        id=c["id"], name=c["function"]["name"], arguments=args, parse_error=error
                    )
                )
            out.append(Message.assistant(m.get("content") or "", tuple(calls)))
        else:
            content = m.get("content") or ""
            call = ToolCall(id=m["tool_call_id"], name=names.get(m["tool_call_id"], ""))
            out.append(Message.tool(call, content, is_error=content.startswith(_ERROR_PREFIXES)))
    return out


def to_completion(response: ModelResponse, *, malformed: bool = False) -> dict[str, Any]:
    calls = []
    for i, c in enumerate(response.tool_calls):
        args = json.dumps(c.arguments, ensure_ascii=False)
        if malformed and i == 0:
            args = args[: max(len(args) // 2, 1)]  # cut mid-object: not valid JSON
        calls.append((c.id, c.name, args))
    return openai_completion(
        response.text or None,
        calls,
        finish_reason="tool_calls" if calls else "stop",
        usage={"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220},
    )


class AgentServer(FakeAPI):
    """`with AgentServer(plan) as api:` then point `openai:<any>` at `{api.url}/v1`."""

    def __init__(self, plan: FaultPlan | None = None, *, reject_key: bool = False,
                 echo_key: bool = False) -> None:
        super().__init__()
        self.plan = plan or FaultPlan(every=0)
        self.reject_key = reject_key
        """Answer every request (the preflight ping too) with 401, as for a revoked key."""
        self.echo_key = echo_key
        """Quote the caller's key in error messages, as some providers do."""
        self.agent_calls = 0
        self.faults: Counter[str] = Counter()
        self.poisoned_calls = 0

    def __enter__(self) -> AgentServer:
        super().__enter__()
        return self

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
        body = recorded.body
        key = recorded.headers.get("authorization", "").removeprefix("Bearer ")
        quoted = f" (key {key})" if self.echo_key else ""
        if self.reject_key:
            return openai_error(401, f"Incorrect API key provided: {key}")
        tools = {t["function"]["name"] for t in body.get("tools") or ()}
        if not tools:
            return Reply(body=openai_completion("pong"))
        messages = from_openai_messages(body["messages"])
        first_user = next((m.content for m in messages if m.role == "user"), "")
        if any(p in first_user for p in self.plan.poison):
            with self._lock:
                self.poisoned_calls += 1
            return openai_error(500, "upstream overloaded")
        with self._lock:
            self.agent_calls += 1
            fault = self.plan.fault_for(self.agent_calls)
        policy = policies.card_policy if "save_timeline_card" in tools else policies.pkm_policy
        response = policy(Request(messages, [], None))
        if fault == "malformed_args" and not response.tool_calls:
            fault = None  # nothing to corrupt: answer normally
        if fault is not None:
            with self._lock:
                self.faults[fault] += 1
        if fault == "429":
            return Reply(
                429, {"error": {"message": f"slow down{quoted}", "type": "rate_limit"}},
                dict(RETRY_FAST),
            )
        if fault == "500":
            return openai_error(500, f"internal error{quoted}")
        good = to_completion(response, malformed=fault == "malformed_args")
        if fault == "hang":
            return Reply(body=good, delay_s=self.plan.hang_s)
        if fault == "truncated":
            blob = json.dumps(good).encode()
            return Reply(raw=blob[: len(blob) // 2])
        return Reply(body=good)
