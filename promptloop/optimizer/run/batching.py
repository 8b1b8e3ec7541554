"""Batch mode for judge calls (`--batch`): every trial is graded once, its judge requests
answered from one provider batch.

Each trial whose task has a judge grader runs its agent as usual and is then held back (not
graded, cached or reported finished yet). Once every trial of the run has come to that point,
the held trials are graded together, each grader once. Their judge graders talk to a
`DeferredJudge`, which registers the request under the key record/replay uses and waits. When
every grader still running is waiting on the judge, the waiting requests go out as ONE batch
(agents/llm/batch.py), with its state file under `<state>/batches/` so a killed run resumes the
same batch; each grader then gets its own reply (or its own error, which becomes a judge error
of that trial only). A grader that asked the judge a second time after the batch came back
would start another round the same way. The trials' status is decided as on the direct path.
The judge sits behind RecordReplayClient, so `--mode record` records batched replies as direct
ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from promptloop.agents.llm.batch import BatchJudge, BatchReport, BatchRequest
from promptloop.agents.llm.errors import ProviderError
from promptloop.agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings, ToolSpec
from promptloop.agents.llm.wrapper import WrappedClient
from promptloop.optimizer.run.cache import request_key
from promptloop.optimizer.run.usage import MeteredClient

T = TypeVar("T")
_Waiting = tuple[BatchRequest, "asyncio.Future[ModelResponse]"]


class DeferredJudge(WrappedClient):
    """The judge of one held trial: each request waits for the run's judge batch (no inner
    client of its own: preflight and aclose have nothing to do)."""

    def __init__(self, batch: JudgeBatch, salt: str) -> None:
        super().__init__(None, model_id=batch.model_id)
        self.batch, self.salt = batch, salt

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        key = request_key(self.model_id, messages, tools, settings, self.salt)
        return await self.batch.ask(BatchRequest(key, list(messages), settings))


@dataclass
class JudgeBatch:
    """The judge requests of one run (see the module docstring)."""

    judge: ModelClient
    batcher: BatchJudge
    held: set[str] = field(default_factory=set)
    """Salts of the trials held back for grading."""
    expected: set[str] = field(default_factory=set)
    """Held trials whose graders have not started yet."""
    running: int = 0
    """Graders started and not finished."""
    waiting: list[_Waiting] = field(default_factory=list)
    sent: int = 0
    """Rounds sent (one per run unless a grader asks twice)."""
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def model_id(self) -> str:
        return self.judge.model_id

    @property
    def report(self) -> BatchReport:
        return self.batcher.report

    def hold(self, salt: str) -> None:
        """Phase 1: the trial `salt` ran its agent and waits to be graded."""
        self.held.add(salt)

    def is_held(self, salt: str) -> bool:
        return salt in self.held

    def expect(self) -> None:
        """Phase 2 starts: every held trial is about to be graded."""
        self.expected = set(self.held)

    def for_trial(self, salt: str) -> DeferredJudge:
        return DeferredJudge(self, salt)

    def graders(self, salt: str, calls: Iterable[Awaitable[T]]) -> list[Awaitable[T]]:
        """The graders of trial `salt`, counted so a round closes only when every running
        grader waits on the judge."""
        wrapped: list[Awaitable[T]] = [self._counted(c) for c in calls]
        self.running += len(wrapped)
        self.expected.discard(salt)
        self._maybe_close()
        return wrapped

    def done_with(self, salt: str) -> None:
        """Trial `salt` is graded (or failed before its graders ran)."""
        self.expected.discard(salt)
        self._maybe_close()

    async def _counted(self, call: Awaitable[T]) -> T:
        try:
            return await call
        finally:
            self.running -= 1
            self._maybe_close()

    async def ask(self, request: BatchRequest) -> ModelResponse:
        future: asyncio.Future[ModelResponse] = asyncio.get_running_loop().create_future()
        self.waiting.append((request, future))
        self._maybe_close()
        return await future

    def _maybe_close(self) -> None:
        self.waiting = [(r, f) for r, f in self.waiting if not f.done()]
        if self.waiting and not self.expected and len(self.waiting) >= self.running:
            round_, self.waiting = self.waiting, []
            task = asyncio.get_running_loop().create_task(self._send(round_))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, round_: list[_Waiting]) -> None:
        self.sent += 1
        try:
            results = await self.batcher.run([r for r, _ in round_])
        except Exception as err:  # never leave a grader waiting forever
            for _, future in round_:
                if not future.done():
                    future.set_exception(err)
            return
        for request, future in round_:
            got = results.get(request.key)
            if future.done():
                continue
            if isinstance(got, ModelResponse):
                self.meter(got)
                future.set_result(got)
            else:
                future.set_exception(got or ProviderError(
                    "the judge batch has no reply for this request"))

    def meter(self, response: ModelResponse) -> None:
        """Count a batched reply's tokens under the judge role, marked as batched so they are
        priced at the batch rate (a direct fallback call was counted when it was made)."""
        if isinstance(self.judge, MeteredClient) and not self.report.direct:
            self.judge.meter.add(self.judge.role, response.usage, batched=True)


__all__ = ["DeferredJudge", "JudgeBatch"]
