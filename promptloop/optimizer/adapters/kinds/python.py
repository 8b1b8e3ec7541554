"""`adapter = "python"`: `entry = "package.module:function"` is awaited (or run in a thread) in
promptloop's interpreter with the request and a `TrialContext`, under the time limit. Its
exceptions other than the limit, a stop or a model error are the agent's (`AgentRaised`)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Callable
from typing import Any

from promptloop.agents.llm.errors import ModelError
from promptloop.agents.registry import EntryError, is_session_factory, load_entry
from promptloop.optimizer.adapters.contract import TrialContext, TrialRequest
from promptloop.optimizer.adapters.outcome import (
    AdapterConfigError,
    AdapterOutcome,
    AgentRaised,
    TrialLabel,
    validate_doc,
)
from promptloop.optimizer.adapters.registry import Adapter, adapter, settings_of
from promptloop.optimizer.core.adapter_settings import PythonSettings


def python_entry(entry: str, root: Any = None) -> Callable[..., Any]:
    """The `(request, context)` function `entry` names, or an AdapterConfigError naming it."""
    try:
        fn: Callable[..., Any] = load_entry(entry, root)
    except EntryError as err:
        raise AdapterConfigError(f"python adapter {err}") from None
    if is_session_factory(fn):
        raise AdapterConfigError(
            f"python adapter entry {entry!r} is a @session_factory: declare adapter = "
            "\"session\" to run it in promptloop's agent loop")
    return fn


async def in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a daemon thread of its own, awaited. Not the loop's default executor:
    a function that never returns past its time limit (a thread cannot be killed) would hold
    one of that pool's few threads, starve the other trials, and keep the command from
    exiting (asyncio.run joins the pool). A daemon thread is left behind when the process
    ends; `contextvars` go with it, as with `asyncio.to_thread`."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if future.done():  # the trial timed out or was stopped meanwhile
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            value = ctx.run(fn, *args)
        except BaseException as err:  # handed to the awaiting trial (a SystemExit too)
            raised = err if isinstance(err, Exception) else RuntimeError(
                f"{type(err).__name__}: {err}")
            with contextlib.suppress(RuntimeError):  # the loop may be gone at exit
                loop.call_soon_threadsafe(settle, False, raised)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, True, value)

    threading.Thread(target=work, name="promptloop-python-trial", daemon=True).start()
    return await future


async def run_python(fn: Callable[..., Any], request: TrialRequest,
                     context: TrialContext | None, *, label: TrialLabel) -> AdapterOutcome:
    async with asyncio.timeout(request.timeout_s):
        try:
            if inspect.iscoroutinefunction(fn):
                value = await fn(request, context)
            else:
                value = await in_daemon_thread(fn, request, context)
                if inspect.isawaitable(value):
                    value = await value
        except (TimeoutError, asyncio.CancelledError, ModelError):
            raise  # the time limit, a stop, the model: not the agent's own failure
        except Exception as err:
            raise AgentRaised(f"{type(err).__name__}: {err}") from err
    return validate_doc(value, label, "returned")


@adapter("python")
class PythonAdapter(Adapter):
    _fn: Callable[..., Any] | None = None

    async def attempt(self, request: TrialRequest, context: TrialContext | None
                      ) -> AdapterOutcome:
        if self._fn is None:  # loaded once per run, on its first trial
            self._fn = python_entry(settings_of(self, PythonSettings).entry,
                                    self.setup.repo_root)
        return await run_python(self._fn, request, context,
                                label=TrialLabel(self.setup.agent, request))
