"""`BatchJudge`: many judge requests sent as one provider batch, with polling and resumption.

The caller hands over requests keyed by a stable request key (the same key the record/replay
cache uses). Requests with the same key are sent once. On Anthropic and OpenAI models the
requests go out as ONE batch (agents/llm/batch_backends.py); other providers (local, scripted)
and OpenAI-compatible servers that have no Batch API (404 on submit) get direct calls instead.

Resumption: right after the provider accepts a batch, `<folder>/<batch id>.json` is written
(format `promptloop.batch/1`, see docs/batch.md) with the model, the batch id and the
custom_id -> request key map, before any polling. A later `run` whose keys are all covered by
such a file of the same model polls and reads that batch instead of submitting (and paying for)
a new one (agents/llm/batch_state.py: the files indexed by key, old ended ones pruned). A kill
between the provider accepting a batch and that write loses the batch id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from promptloop.agents.llm.batch_backends import Backend, Outcome, backend_for
from promptloop.agents.llm.batch_state import FAILED, FORMAT, StateFolder
from promptloop.agents.llm.errors import BatchTimeoutError, ModelError, ProviderError
from promptloop.agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings, ToolSpec

POLL_START_S = 5.0
POLL_MAX_S = 60.0
POLL_GROWTH = 1.5
TIMEOUT_S = 6 * 3600.0
"""How long one run waits for a batch (providers allow 24 h; a rerun resumes the same batch)."""
DIRECT_CONCURRENCY = 4


@dataclass(frozen=True)
class BatchRequest:
    key: str
    messages: list[Message]
    settings: ModelSettings | None = None
    tools: tuple[ToolSpec, ...] = ()
    """Tool specs sent with the request (agent turns; judge requests have none)."""


@dataclass
class BatchReport:
    """What `BatchJudge.run` did: for the caller's log and tests."""

    batch_id: str | None = None
    resumed: bool = False
    direct: int = 0
    """Requests answered by direct calls (no batch API)."""
    polls: int = 0
    note: str = ""


Sleep = Callable[[float], Awaitable[None]]


class BatchJudge:
    """Sends judge requests as one batch of `client`'s provider (see the module docstring)."""

    def __init__(
        self,
        client: ModelClient,
        folder: Path,
        *,
        poll_s: float | None = None,
        max_poll_s: float | None = None,
        timeout_s: float | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        """Unset timings take this module's constants at construction time."""
        self.client = client
        self.folder = folder
        self.poll_s = POLL_START_S if poll_s is None else poll_s
        self.max_poll_s = POLL_MAX_S if max_poll_s is None else max_poll_s
        self.timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
        self.sleep = sleep or asyncio.sleep
        self.backend: Backend | None = backend_for(client)
        self.state = StateFolder.of(folder)
        self.report = BatchReport()

    async def run(self, requests: list[BatchRequest]) -> dict[str, ModelResponse | ModelError]:
        """Key -> reply, or the ModelError of that request: its own failure, or the whole
        batch's (not accepted, failed, expired, timed out) for every request."""
        unique = {r.key: r for r in requests}
        if not unique:
            return {}
        if self.backend is None:
            return await self._direct(unique, "the provider has no batch API")
        try:
            return await self._batched(unique)
        except ModelError as err:
            self.report.note = str(err)
            return dict.fromkeys(unique, err)

    async def _batched(self, unique: dict[str, BatchRequest], skip: frozenset[str] = frozenset()
                       ) -> dict[str, ModelResponse | ModelError]:
        assert self.backend is not None
        found = self.state.find(self.backend.provider, self.backend.model, set(unique), skip)
        if found is not None:
            batch_id, ids = found.batch_id, found.requests
            self.report.resumed = True
            if found.state == "ended":
                return await self._ended(batch_id, ids, unique, skip)
        else:
            ids = {f"r{n}": key for n, key in enumerate(unique)}
            try:
                batch_id = await self.backend.submit(
                    {cid: (unique[k].messages, unique[k].tools, unique[k].settings)
                     for cid, k in ids.items()}
                )
            except ProviderError as err:
                if err.status in (404, 405):
                    return await self._direct(unique, f"no batch API at this server ({err})")
                raise
            self._save(batch_id, ids, "submitted")
        self.report.batch_id = batch_id
        outcomes = await self._wait(batch_id)
        self._save(batch_id, ids, "ended")
        return {key: self._result(outcomes.get(cid)) for cid, key in ids.items()
                if key in unique}

    async def _ended(self, batch_id: str, ids: Mapping[str, str],
                     unique: dict[str, BatchRequest], skip: frozenset[str]
                     ) -> dict[str, ModelResponse | ModelError]:
        """The replies of a batch an earlier run read to its end; the requests that came back
        errored there (a rate limit, a 500 of that request alone) are sent again, in a new
        batch, never read back as the same error on every rerun."""
        outcomes = await self._wait(batch_id)
        got = {key: self._result(outcomes.get(cid)) for cid, key in ids.items() if key in unique}
        again = {k: unique[k] for k, v in got.items() if isinstance(v, ModelError)}
        if again:  # never this batch again for them (nor one already tried in this call)
            got.update(await self._batched(again, skip=skip | {batch_id}))
        return got

    def _mark_failed(self, batch_id: str) -> None:
        found = next((s for _, s in self.state.files.values()
                      if s is not None and s.batch_id == batch_id), None)
        if found is not None:
            self._save(batch_id, found.requests, FAILED)

    def _save(self, batch_id: str, ids: Mapping[str, str], state: str) -> None:
        assert self.backend is not None
        self.state.save(self.backend.provider, self.backend.model, batch_id, ids, state)

    # --- polling --------------------------------------------------------------------------
    async def _wait(self, batch_id: str) -> dict[str, Outcome]:
        assert self.backend is not None
        delay, waited = self.poll_s, 0.0
        while True:
            poll = await self.backend.poll(batch_id)
            self.report.polls += 1
            if poll.failed:
                # never resumed: a rerun submits a new batch (it would fail the same way)
                self._mark_failed(batch_id)
                raise ProviderError(f"batch {batch_id}: {poll.failed}")
            if poll.done:
                return await self.backend.results(batch_id)
            if waited + delay > self.timeout_s:
                raise BatchTimeoutError(
                    f"batch {batch_id} still {poll.status} after {self.timeout_s:g}s; "
                    "rerun to resume it"
                )
            await self.sleep(delay)
            waited += delay
            delay = min(delay * POLL_GROWTH, self.max_poll_s)

    @staticmethod
    def _result(outcome: Outcome | None) -> ModelResponse | ModelError:
        if outcome is None:
            return ProviderError("the batch returned no result for this request")
        if isinstance(outcome, str):
            return ProviderError(outcome)
        return outcome

    async def _direct(self, unique: Mapping[str, BatchRequest], why: str
                      ) -> dict[str, ModelResponse | ModelError]:
        """One direct call per request, a few at a time (providers without a batch API)."""
        self.report.direct, self.report.note = len(unique), why
        gate = asyncio.Semaphore(DIRECT_CONCURRENCY)

        async def one(r: BatchRequest) -> ModelResponse | ModelError:
            async with gate:
                try:
                    return await self.client.complete(r.messages, tools=list(r.tools),
                                                      settings=r.settings)
                except ModelError as err:
                    return err

        done = await asyncio.gather(*(one(r) for r in unique.values()))
        return dict(zip(unique, done, strict=True))


__all__ = ["FORMAT", "BatchJudge", "BatchReport", "BatchRequest", "BatchTimeoutError"]
