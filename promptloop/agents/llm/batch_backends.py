"""The two provider batch APIs behind `BatchJudge` (agents/llm/batch.py), via the real SDKs.

Anthropic: Message Batches (`messages.batches.create / retrieve / results`), each request is
`{"custom_id", "params"}` with the same parameters a direct Messages call sends. OpenAI: the
Batch API, a JSONL input file uploaded with `files.create(purpose="batch")`, then
`batches.create(endpoint="/v1/chat/completions", completion_window="24h")`, polled with
`batches.retrieve`, and the output and error files read with `files.content`. Both backends
turn results into `ModelResponse`s with the providers' own mappers, so a batched reply is read
exactly like a direct one; a failed request becomes an error message for that request only.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from promptloop.agents.llm.errors import ModelError
from promptloop.agents.llm.providers.anthropic_provider import AnthropicProvider, from_anthropic
from promptloop.agents.llm.providers.common import map_sdk_error
from promptloop.agents.llm.providers.openai_provider import OpenAIProvider, from_openai
from promptloop.agents.llm.types import Message, ModelResponse, ModelSettings, ToolSpec

T = TypeVar("T")
Outcome = ModelResponse | str
Requests = Mapping[str, tuple[list[Message], tuple[ToolSpec, ...], ModelSettings | None]]
"""custom_id -> (messages, tool specs, settings) of one batch."""
"""A request's result: the reply, or why it failed (that request only)."""


@dataclass(frozen=True)
class Poll:
    """One look at a submitted batch."""

    done: bool
    status: str
    """The provider's own status word (`in_progress`, `ended`, `completed`, `failed`...)."""
    failed: str | None = None
    """Set when the whole batch failed, expired or was cancelled: why."""


class Backend(Protocol):
    provider: str
    model: str

    async def submit(self, requests: Requests) -> str: ...

    async def poll(self, batch_id: str) -> Poll: ...

    async def results(self, batch_id: str) -> dict[str, Outcome]: ...


async def _guard(call: Callable[[], Awaitable[T]], provider: Any, label: str) -> T:
    """Run one SDK call; SDK errors become ModelErrors without key material."""
    try:
        return await call()
    except ModelError:
        raise
    except Exception as err:
        if type(err).__module__.split(".")[0] not in ("anthropic", "openai"):
            raise
        raise map_sdk_error(err, label=label, key_var=provider.KEY_VAR,
                            secrets=provider._secrets()) from None


class AnthropicBatches:
    """Message Batches of one Anthropic model."""

    provider = "anthropic"
    _LABEL = "Anthropic Message Batches API"

    def __init__(self, client: AnthropicProvider) -> None:
        self.client = client
        self.model = client.model

    async def submit(self, requests: Requests) -> str:
        sdk = self.client._sdk()
        items: list[Any] = [
            {"custom_id": cid, "params": self.client.request_params(messages, tools, settings)}
            for cid, (messages, tools, settings) in requests.items()
        ]
        batch = await _guard(lambda: sdk.messages.batches.create(requests=items),
                             self.client, self._LABEL)
        return str(batch.id)

    async def poll(self, batch_id: str) -> Poll:
        sdk = self.client._sdk()
        batch = await _guard(lambda: sdk.messages.batches.retrieve(batch_id),
                             self.client, self._LABEL)
        status = str(batch.processing_status)
        return Poll(done=status == "ended", status=status)

    async def results(self, batch_id: str) -> dict[str, Outcome]:
        sdk = self.client._sdk()

        async def read() -> dict[str, Outcome]:
            out: dict[str, Outcome] = {}
            async for line in await sdk.messages.batches.results(batch_id):
                out[line.custom_id] = self._outcome(line.result)
            return out

        return await _guard(read, self.client, self._LABEL)

    def _outcome(self, result: Any) -> Outcome:
        kind = getattr(result, "type", "")
        if kind == "succeeded":
            return from_anthropic(result.message, retries=0, fallback_model=self.model)
        if kind == "errored":
            inner = getattr(getattr(result, "error", None), "error", None)
            what = getattr(inner, "type", "error")
            return f"the batched request errored ({what}: {getattr(inner, 'message', '')})"
        return f"the batched request was not processed ({kind})"


class OpenAIBatches:
    """The OpenAI Batch API over Chat Completions for one model."""

    provider = "openai"
    _LABEL = "OpenAI Batch API"
    ENDPOINT = "/v1/chat/completions"

    def __init__(self, client: OpenAIProvider) -> None:
        self.client = client
        self.model = client.model
        self._files: dict[str, tuple[str | None, str | None]] = {}
        """Batch id -> (output file, error file), from the poll that saw it completed."""

    async def submit(self, requests: Requests) -> str:
        sdk = self.client._sdk()
        lines = [
            json.dumps({"custom_id": cid, "method": "POST", "url": self.ENDPOINT,
                        "body": self.client.request_params(messages, tools, settings)},
                       ensure_ascii=False)
            for cid, (messages, tools, settings) in requests.items()
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        upload = await _guard(
            lambda: sdk.files.create(file=("promptloop-batch.jsonl", data), purpose="batch"),
            self.client, self._LABEL)
        batch = await _guard(
            lambda: sdk.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                       completion_window="24h"),
            self.client, self._LABEL)
        return str(batch.id)

    async def poll(self, batch_id: str) -> Poll:
        sdk = self.client._sdk()
        batch = await _guard(lambda: sdk.batches.retrieve(batch_id), self.client, self._LABEL)
        status = str(batch.status)
        if status in ("failed", "expired", "cancelled", "cancelling"):
            errors = [e.message or e.code or "" for e in (batch.errors.data or [])] \
                if batch.errors else []
            why = f"the batch {status}" + (f": {'; '.join(errors)}" if errors else "")
            return Poll(done=True, status=status, failed=why)
        if status == "completed":
            self._files[batch_id] = (batch.output_file_id, batch.error_file_id)
        return Poll(done=status == "completed", status=status)

    async def results(self, batch_id: str) -> dict[str, Outcome]:
        """The outcomes of a completed batch, from the files its last poll named (the batch is
        retrieved again only when this backend did not poll it to completion)."""
        sdk = self.client._sdk()
        if batch_id not in self._files:
            batch = await _guard(lambda: sdk.batches.retrieve(batch_id), self.client,
                                 self._LABEL)
            self._files[batch_id] = (batch.output_file_id, batch.error_file_id)
        out: dict[str, Outcome] = {}
        for file_id in self._files[batch_id]:
            if not file_id:
                continue
            content = await _guard(lambda f=file_id: sdk.files.content(f),  # type: ignore[misc]
                                   self.client, self._LABEL)
            for raw in content.text.splitlines():
                if raw.strip():
                    line = json.loads(raw)
                    out[str(line.get("custom_id"))] = self._outcome(line)
        return out

    def _outcome(self, line: dict[str, Any]) -> Outcome:
        from openai.types.chat import ChatCompletion

        error = line.get("error")
        response = line.get("response") or {}
        status = response.get("status_code")
        if error or status != 200:
            body = response.get("body") or {}
            detail = (error or body.get("error") or {}).get("message", "") \
                if isinstance(error or body.get("error"), dict) else str(error or "")
            return f"the batched request errored (HTTP {status}: {detail})"
        completion = ChatCompletion.model_validate(response.get("body") or {})
        return from_openai(completion, retries=0, fallback_model=self.model)


def backend_for(client: Any) -> Backend | None:
    """The batch backend of a client (looked up through wrappers' `.inner`), or None when its
    provider has no batch API (local and scripted models)."""
    seen = 0
    while client is not None and seen < 10:
        if isinstance(client, AnthropicProvider):
            return AnthropicBatches(client)
        if isinstance(client, OpenAIProvider):
            return OpenAIBatches(client)
        client = getattr(client, "inner", None)
        seen += 1
    return None


__all__ = ["AnthropicBatches", "Backend", "OpenAIBatches", "Outcome", "Poll", "Requests",
           "backend_for"]
