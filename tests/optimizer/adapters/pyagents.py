"""Python adapter entries for the tests (`tests.optimizer.adapters.pyagents:<function>`)."""

from __future__ import annotations

import asyncio
from typing import Any

from promptloop.optimizer.adapters.contract import TrialContext, TrialRequest, TrialResultDoc


async def echo(request: TrialRequest, context: TrialContext | None) -> TrialResultDoc:
    return TrialResultDoc(outcome={"prompt": request.prompt.text, "task": request.task_id,
                                   "has_context": context is not None})


def echo_sync(request: TrialRequest, context: TrialContext | None) -> dict[str, Any]:
    return {"outcome": {"seed": request.trial.seed}, "usage": {"input_tokens": 3}}


async def forgets_outcome(request: TrialRequest, context: TrialContext | None) -> dict[str, Any]:
    return {"transcript": []}


async def raises(request: TrialRequest, context: TrialContext | None) -> TrialResultDoc:
    raise ValueError("the agent's own bug")


async def sleeps(request: TrialRequest, context: TrialContext | None) -> TrialResultDoc:
    await asyncio.sleep(30)
    raise AssertionError("not reached")


NOT_CALLABLE = 3
