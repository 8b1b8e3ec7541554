"""The one ask / check / ask-again loop of the proposers (`proposer.ask_model` for one patch,
`several.ask_several` for K patches in one reply): send the conversation, let the caller read
the reply, and when the caller says what was wrong, send the reply and that complaint back, at
most `max_retries` more times."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from promptloop.agents.llm.types import Message, ModelClient, ModelSettings, Usage


@dataclass(frozen=True)
class Attempt:
    """One reply of the model."""

    n: int
    """1-based."""
    text: str
    usage: Usage
    seconds: float


async def converse(
    client: ModelClient,
    messages: list[Message],
    settings: ModelSettings,
    *,
    max_retries: int,
    read: Callable[[Attempt], str | None],
) -> tuple[list[Attempt], Usage]:
    """Ask until `read(attempt)` returns None (the reply is usable) or `max_retries + 1`
    replies were read; otherwise `read` returns the message that goes back to the model with
    its reply. Returns every attempt and the usage of them all."""
    history = list(messages)
    attempts: list[Attempt] = []
    usage = Usage()
    for n in range(1, max_retries + 2):
        started = time.monotonic()
        response = await client.complete(history, settings=settings)
        usage = usage + response.usage
        attempt = Attempt(n, response.text, response.usage, time.monotonic() - started)
        attempts.append(attempt)
        complaint = read(attempt)
        if complaint is None:
            break
        history += [Message.assistant(response.text), Message.user(complaint)]
    return attempts, usage


__all__ = ["Attempt", "converse"]
