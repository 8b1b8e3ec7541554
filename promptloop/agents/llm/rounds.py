"""`RoundBatchingClient`: the agent turns of concurrent trials sent as provider batches, round
by round.

Every trial of a batch-mode run talks to the same `RoundBatchingClient`. A call to `complete`
registers its request and awaits its reply. A round closes when every live trial (between
`trial_started` and `trial_finished`) is waiting on the client, or `settle_s` after the first
request of the round arrived (so a trial busy elsewhere cannot stall the others); then every
pending request goes out as ONE batch through `BatchJudge` (agents/llm/batch.py: same keys,
same `<folder>/<batch id>.json` state files, so a rerun resumes a round's batch instead of
paying for it again). Each caller gets its own reply, or its own `ModelError` raised.

Providers without a batch API (and OpenAI-compatible servers answering 404 to a batch submit)
get direct calls instead, transparently.

The trial timeout counts agent time only: `with client.clock(timeout):` around a trial's agent
run stops that `asyncio.Timeout` while one of its requests waits for a round's batch (minutes to
hours in the provider's queue) and restarts it with the time that was left once the reply is in.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from promptloop.agents.llm.batch import BatchJudge, BatchReport, BatchRequest
from promptloop.agents.llm.batch_backends import backend_for
from promptloop.agents.llm.errors import ProviderError
from promptloop.agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings, ToolSpec
from promptloop.agents.llm.wrapper import WrappedClient

SETTLE_S = 2.0
"""How long a round waits for trials that are not (yet) waiting on the client."""

KeyFn = Callable[[Sequence[Message], Sequence[ToolSpec], ModelSettings | None, str], str]
"""(messages, tools, settings, trial salt) -> the request key."""
_TRIAL: contextvars.ContextVar[str] = contextvars.ContextVar("promptloop_round_trial",
                                                             default="")
_CLOCK: contextvars.ContextVar[asyncio.Timeout | None] = contextvars.ContextVar(
    "promptloop_round_clock", default=None)
Metered = Callable[[ModelResponse], None]


class RoundBatchingClient(WrappedClient):
    """A ModelClient sending the concurrent calls of many trials as one batch per round."""

    def __init__(
        self,
        inner: ModelClient,
        folder: Path,
        key: KeyFn,
        *,
        settle_s: float | None = None,
        on_batched: Metered | None = None,
        batcher: Callable[[ModelClient, Path], BatchJudge] = BatchJudge,
    ) -> None:
        super().__init__(inner)
        self.inner: ModelClient = inner
        self.folder, self.key = folder, key
        self.settle_s = SETTLE_S if settle_s is None else settle_s
        self.on_batched = on_batched
        self.batcher = batcher
        self.batches = backend_for(inner) is not None
        """False once the provider turned out to have no batch API: direct calls from then."""
        self.live = 0
        self.in_flight = 0
        self.pending: list[tuple[BatchRequest, asyncio.Future[ModelResponse]]] = []
        self.reports: list[BatchReport] = []
        """One per round sent, in order."""
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # --- trial lifetime -----------------------------------------------------------------
    def trial_started(self) -> None:
        self.live += 1

    def trial_finished(self) -> None:
        self.live -= 1
        self._maybe_close()

    @contextlib.contextmanager
    def trial(self, salt: str = "") -> Iterator[None]:
        """`with client.trial(salt):` around one trial's agent run (in its own asyncio task).
        `salt` keys its requests apart from the same request of another trial, so two trials
        never share one reply (they are independent samples)."""
        token = _TRIAL.set(salt)
        self.trial_started()
        try:
            yield
        finally:
            self.trial_finished()
            _TRIAL.reset(token)

    @staticmethod
    @contextlib.contextmanager
    def clock(timeout: asyncio.Timeout) -> Iterator[None]:
        """`with client.clock(timeout):` stops `timeout` while this trial's requests wait in a
        batch (see the module docstring)."""
        token = _CLOCK.set(timeout)
        try:
            yield
        finally:
            _CLOCK.reset(token)

    # --- ModelClient --------------------------------------------------------------------
    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        if not self.batches:
            return await self.inner.complete(messages, tools=list(tools), settings=settings)
        key = self.key(messages, tools, settings, _TRIAL.get())
        request = BatchRequest(key, list(messages), settings, tuple(tools))
        future: asyncio.Future[ModelResponse] = asyncio.get_running_loop().create_future()
        self.pending.append((request, future))
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.settle_s, self._close)
        self._maybe_close()
        return await _off_the_clock(future)

    # --- rounds -------------------------------------------------------------------------
    def _waiting(self) -> list[tuple[BatchRequest, asyncio.Future[ModelResponse]]]:
        self.pending = [(r, f) for r, f in self.pending if not f.done()]  # drop cancelled ones
        return self.pending

    def _maybe_close(self) -> None:
        waiting = self._waiting()
        if waiting and len(waiting) + self.in_flight >= self.live:
            self._close()

    def _close(self) -> None:
        """Send every pending request as one batch (in a task; callers keep awaiting)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        round_ = self._waiting()
        self.pending = []
        if not round_:
            return
        self.in_flight += len(round_)
        task = asyncio.get_running_loop().create_task(self._send(round_))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, round_: list[tuple[BatchRequest, asyncio.Future[ModelResponse]]]
                    ) -> None:
        try:
            batcher = self.batcher(self.inner, self.folder)
            try:
                results = await batcher.run([r for r, _ in round_])
            except Exception as err:  # never leave a trial waiting forever
                for _, future in round_:
                    if not future.done():
                        future.set_exception(err)
                return
            self.reports.append(batcher.report)
            if batcher.report.direct:
                self.batches = False  # no batch API here: later turns call directly
            for request, future in round_:
                if future.done():
                    continue
                got = results.get(request.key)
                if isinstance(got, ModelResponse):
                    if self.on_batched is not None and not batcher.report.direct:
                        self.on_batched(got)
                    future.set_result(got)
                else:
                    future.set_exception(got or ProviderError("the batch returned no reply"))
        finally:
            self.in_flight -= len(round_)
            self._maybe_close()


async def _off_the_clock(future: asyncio.Future[ModelResponse]) -> ModelResponse:
    """Await a batched reply with the calling trial's timeout (if any) stopped meanwhile."""
    timeout = _CLOCK.get()
    loop = asyncio.get_running_loop()
    deadline = timeout.when() if timeout is not None and not timeout.expired() else None
    if timeout is None or deadline is None:
        return await future
    left = deadline - loop.time()
    timeout.reschedule(None)
    try:
        return await future
    finally:
        if not timeout.expired():
            timeout.reschedule(loop.time() + left)


__all__ = ["SETTLE_S", "RoundBatchingClient"]
