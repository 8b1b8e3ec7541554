"""The base of every client that wraps another (metering, record/replay, batching rounds,
structured tool mode): it keeps the inner client and its model id, and passes `preflight`
and `aclose` through; each wrapper writes its own `complete` (what it is for)."""

from __future__ import annotations

from promptloop.agents.llm.types import ModelClient


class WrappedClient:
    """A ModelClient in front of `inner` (None only for a client that never calls it, such as
    a replay of recorded responses)."""

    def __init__(self, inner: ModelClient | None, *, model_id: str | None = None) -> None:
        self.inner = inner
        self.model_id = model_id if model_id is not None else (
            inner.model_id if inner is not None else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    async def preflight(self) -> None:
        if self.inner is not None:
            await self.inner.preflight()

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()


__all__ = ["WrappedClient"]
