"""Batch mode for judge calls (`--batch`): grade in two phases around one provider batch.

Phase 1: every trial runs its agent as usual, but its judge graders talk to a
`CollectingJudge`, which notes each request under the key record/replay uses and answers with
an empty placeholder. Such a trial is held back (not cached, not reported finished).
Then `JudgeBatch.resolve` sends every noted request as ONE batch (agents/llm/batch.py), with its
state file under `<state>/batches/` so a killed run resumes the same batch.
Phase 2: each held-back trial is graded again from its saved outcome and transcript, now with
a `ResolvedJudge` that serves the batch's replies (through RecordReplayClient, so `--mode
record` records them like direct replies) and its status is decided as in the direct path.
A request the batch did not answer becomes a judge error of that trial only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agents.llm.batch import BatchJudge, BatchReport, BatchRequest
from agents.llm.errors import ModelError, ProviderError
from agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings, ToolSpec
from optimizer.run.cache import request_key
from optimizer.run.usage import MeteredClient


class CollectingJudge:
    """Phase-1 judge of one trial: records each request and returns an empty reply."""

    def __init__(self, batch: JudgeBatch, salt: str) -> None:
        self.batch, self.salt = batch, salt
        self.model_id = batch.model_id

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        key = request_key(self.model_id, messages, tools, settings, self.salt)
        self.batch.pending.setdefault(self.salt, {})[key] = BatchRequest(
            key, list(messages), settings
        )
        return ModelResponse(text="", model=self.model_id)

    async def preflight(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class ResolvedJudge:
    """Phase-2 judge of one trial: serves the batch's reply of each request by its key."""

    def __init__(self, batch: JudgeBatch, salt: str) -> None:
        self.batch, self.salt = batch, salt
        self.model_id = batch.model_id

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        key = request_key(self.model_id, messages, tools, settings, self.salt)
        got = self.batch.results.get(key)
        if got is None:
            raise ProviderError("the judge batch has no reply for this request")
        if isinstance(got, ModelError):
            raise got
        self.batch.meter(got)
        return got

    async def preflight(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


@dataclass
class JudgeBatch:
    """The judge requests of one run (see the module docstring)."""

    judge: ModelClient
    batcher: BatchJudge
    pending: dict[str, dict[str, BatchRequest]] = field(default_factory=dict)
    """Trial salt -> request key -> request."""
    results: dict[str, ModelResponse | ModelError] = field(default_factory=dict)

    @property
    def model_id(self) -> str:
        return self.judge.model_id

    @property
    def report(self) -> BatchReport:
        return self.batcher.report

    def for_trial(self, salt: str) -> CollectingJudge:
        return CollectingJudge(self, salt)

    def resolved(self, salt: str) -> ResolvedJudge:
        return ResolvedJudge(self, salt)

    def waiting(self, salt: str) -> bool:
        return bool(self.pending.get(salt))

    async def resolve(self) -> None:
        """Send every pending request as one batch and keep the replies."""
        requests = [r for per_trial in self.pending.values() for r in per_trial.values()]
        if requests:
            self.results = await self.batcher.run(requests)

    def meter(self, response: ModelResponse) -> None:
        """Count a batched reply's tokens under the judge role, marked as batched so they are
        priced at the batch rate (a direct fallback call was counted when it was made)."""
        if isinstance(self.judge, MeteredClient) and not self.report.direct:
            self.judge.meter.add(self.judge.role, response.usage, batched=True)


__all__ = ["CollectingJudge", "JudgeBatch", "ResolvedJudge"]
