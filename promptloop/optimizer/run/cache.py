"""Record/replay of model calls, and the trial result cache.

Model calls are keyed by the full request (model id, messages, tools, settings) plus a trial
salt, so identical requests in different trials get their own recordings and a replayed suite
is deterministic. Trial results are keyed by task content, prompt, models and trial index, so a
baseline that did not change is never paid for twice.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from promptloop.agents.data import data_dir
from promptloop.agents.llm.errors import ModelError
from promptloop.agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings, ToolSpec
from promptloop.agents.llm.wrapper import WrappedClient
from promptloop.optimizer.core.files import atomic_write_text

Mode = Literal["live", "record", "replay"]
HARNESS_VERSION = "1"


class ReplayMissError(ModelError):
    """Replay mode found no recording for a request (the suite or prompt changed)."""


def request_key(
    model_id: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    settings: ModelSettings | None,
    salt: str,
) -> str:
    payload = {
        "model": model_id,
        "salt": salt,
        "messages": [
            m.model_dump(mode="json", exclude={"tool_calls"})
            | {"tool_calls": [{"name": c.name, "arguments": c.arguments} for c in m.tool_calls]}
            for m in messages
        ],
        "tools": [t.model_dump(mode="json") for t in tools],
        # the seed is left out: it is derived from the task id and trial index the salt names,
        # so recordings made before trials were seeded still replay
        "settings": settings.model_dump(
            mode="json", exclude={"timeout_s", "max_retries", "seed"}
        )
        if settings
        else None,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class RecordReplayClient(WrappedClient):
    """Wraps a client: `live` passes through, `record` stores responses, `replay` serves them.

    Tool call ids are excluded from the key (providers generate them randomly) so a recorded
    trial replays even though ids differ between runs.
    """

    def __init__(
        self, inner: ModelClient | None, store: Path, mode: Mode, salt: str, model_id: str
    ) -> None:
        super().__init__(inner, model_id=model_id)
        self.store = store
        self.mode = mode
        self.salt = salt

    def _path(self, key: str) -> Path:
        return self.store / key[:2] / f"{key}.json"

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        if self.mode == "live":
            assert self.inner is not None
            return await self.inner.complete(messages, tools=list(tools), settings=settings)
        key = request_key(self.model_id, messages, tools, settings, self.salt)
        path = self._path(key)
        if self.mode == "replay":
            if not path.is_file():
                raise ReplayMissError(
                    f"no recording for this request of {self.model_id}: the "
                    "task, the prompt or the settings changed since it was recorded, or this "
                    "trial never was; record it with --mode record"
                )
            return ModelResponse.model_validate_json(path.read_text(encoding="utf-8"))
        assert self.inner is not None
        response = await self.inner.complete(messages, tools=list(tools), settings=settings)
        atomic_write_text(path, response.model_dump_json())
        return response

    async def preflight(self) -> None:
        if self.mode != "replay":
            await super().preflight()

    async def aclose(self) -> None:
        return None  # a trial's view of the run's client: the run closes the client


def trial_cache_key(
    task_hash: str,
    prompt_hash: str,
    agent_model: str,
    judge_model: str | None,
    trial_index: int,
    variant: str = "",
) -> str:
    """`variant` covers anything else that changes a trial's behaviour (runtime limits). The
    agents', graders' and judge rubrics' source is part of the key, so a code change never
    serves stale trials."""
    blob = json.dumps(
        [
            HARNESS_VERSION,
            code_fingerprint(),
            task_hash,
            prompt_hash,
            agent_model,
            judge_model,
            trial_index,
            variant,
        ]
    )
    return hashlib.sha256(blob.encode()).hexdigest()


@functools.cache
def code_fingerprint() -> str:
    """Hash of the code and rubrics that decide a trial's outcome and scores."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    folders = (
        ("agents", root / "agents", "*.py"),
        ("graders", root / "graders", "*.py"),
        ("prompts/judges", data_dir("prompts") / "judges", "*.md"),
    )
    for name, folder, pattern in folders:
        for path in sorted(folder.rglob(pattern)):
            h.update(f"{name}/{path.relative_to(folder).as_posix()}".encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
