"""A `python` agent function that never returns past its time limit: a thread cannot be
killed, but it must not hold the run. In the loop's default executor it kept `eval` alive
long after the run ended (asyncio.run joins that pool: 123 s for a 3 s trial, forever for a
function that never returns) and six of them starved every other trial (a team's agent)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from promptloop.optimizer.adapters.kinds.python import run_python
from promptloop.optimizer.adapters.outcome import TrialLabel
from tests.optimizer.adapters.fakes import World


def test_a_function_past_its_limit_does_not_hold_the_loop_or_its_pool(tmp_path: Any) -> None:
    release, started = threading.Event(), threading.Event()
    finished: list[bool] = []

    def stuck(request: Any, context: Any) -> dict[str, Any]:
        started.set()
        release.wait(60)
        finished.append(True)
        return {"outcome": {}}

    request = World.make(tmp_path).request(timeout_s=0.2)

    async def trials() -> None:
        label = TrialLabel("stuck", request)
        for _ in range(8):  # more than the default executor's threads on a small machine
            with pytest.raises(TimeoutError):
                await run_python(stuck, request, None, label=label)

    try:
        asyncio.run(trials())  # returns without waiting for the stuck threads
        assert started.is_set() and not finished, "the run waited for a stuck function"
    finally:
        release.set()


def test_a_function_that_returns_is_awaited_as_before(tmp_path: Any) -> None:
    request = World.make(tmp_path).request()

    def fine(req: Any, context: Any) -> dict[str, Any]:
        return {"outcome": {"thread": threading.current_thread().name}}

    got = asyncio.run(run_python(fine, request, None, label=TrialLabel("fine", request)))
    assert got.status == "ok" and got.result is not None
    assert got.result.outcome["thread"] == "promptloop-python-trial"
