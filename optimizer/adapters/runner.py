"""One trial through the agent's adapter: `run_adapter_trial`.

- `command`: the argv runs once per trial with cwd = the workspace (relative paths in the argv
  are read from the repository root, `process.resolve_argv`), the request on stdin or in the file
  named by $PROMPTLOOP_REQUEST (written in a private folder, mode 0600), the result on stdout or
  in the file named by $PROMPTLOOP_RESULT. Its process group is killed at the time limit and
  when it prints more than the cap; what it leaves running after it exits is killed too.
- `worker`: `worker.WorkerPool`.
- `http`: POST the request to `url`; a non-2xx status, an unreachable server, a timeout or an
  oversize body is an errored trial.
- `python`: `entry = "package.module:function"`, awaited (or run in a thread) in promptloop's
  interpreter with the request and a `TrialContext`, under the time limit; its exceptions
  (TimeoutError included) propagate to the caller, which classifies them as for the bundled
  agents.

Whatever a command, worker or server does, the answer is an `AdapterOutcome`: never an
exception. The time limit is the request's `timeout_s` (the caller puts the agent's `timeout`
or the task's `timeout_seconds` there). Files written outside the workspace: `escape`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import shutil
import signal
import stat
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agents.llm.errors import ModelError
from agents.registry import EntryError
from agents.registry import load_entry as registry_load_entry
from optimizer.adapters import box
from optimizer.adapters.contract import TrialContext, TrialRequest
from optimizer.adapters.escape import Snapshot
from optimizer.adapters.outcome import (
    AdapterConfigError,
    AdapterOutcome,
    TrialLabel,
    parse_result,
    validate_doc,
)
from optimizer.adapters.process import (
    Oversize,
    Tail,
    build_env,
    drain,
    feed,
    kill_group,
    new_scratch,
    read_into,
    remove_scratch,
    resolve_argv,
    settle,
    signal_group,
    size_text,
    spawn,
)
from optimizer.adapters.spec import AdapterSpec
from optimizer.adapters.worker import WorkerPool

REQUEST_VAR = "PROMPTLOOP_REQUEST"
RESULT_VAR = "PROMPTLOOP_RESULT"
EOF_GRACE_S = 1.0
"""How long the readers wait for end of file once the command exited and its group is gone."""


async def run_adapter_trial(
    spec: AdapterSpec,
    request: TrialRequest,
    *,
    repo_root: Path,
    agent: str,
    context: TrialContext | None = None,
    pool: WorkerPool | None = None,
) -> AdapterOutcome:
    """Run one trial of `agent` through `spec`'s adapter.

    `pool`: the run's WorkerPool for a worker adapter (without one, a pool is started and closed
    for this trial alone). `context`: what a python adapter's function gets. Raises
    AdapterConfigError when the adapter cannot run at all (a python entry that does not import),
    and lets a python function's exceptions through; everything else is an outcome.
    """
    label = TrialLabel(agent, request)
    if spec.kind == "command":
        return await run_command(spec, request, repo_root=repo_root, label=label)
    if spec.kind == "worker":
        if pool is not None:
            return await pool.run(request, agent=agent)
        async with WorkerPool(spec, repo_root=repo_root, agent=agent, size=1) as alone:
            return await alone.run(request)
    if spec.kind == "http":
        return await run_http(spec, request, label=label)
    return await run_python(spec, request, context, label=label)


# --- command ---------------------------------------------------------------------------------


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _read_file_capped(path: Path, cap: int) -> bytes:
    """At most `cap + 1` bytes of the regular file `path` (a link is refused, never followed:
    the agent made this file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        return f.read(cap + 1)


def _exit_text(code: int) -> str:
    return f"was killed by signal {-code}" if code < 0 else f"exited {code}"


async def run_command(spec: AdapterSpec, request: TrialRequest, *, repo_root: Path,
                      label: TrialLabel) -> AdapterOutcome:
    """One trial of a `command` adapter, boxed (`box.for_trials()`: bwrap, unshare, or none
    with a warning once and the deep after-the-fact check)."""
    workspace = Path(request.workspace)
    scratch = new_scratch()
    try:
        got = await _command(spec, request, repo_root, workspace, scratch, label)
    finally:
        remove_scratch(scratch)
    return got


async def _command(spec: AdapterSpec, request: TrialRequest, repo_root: Path,
                   workspace: Path, scratch: Path, label: TrialLabel) -> AdapterOutcome:
    payload = request.model_dump_json().encode()
    extra: dict[str, str] = {}
    stdin_data = payload
    if spec.request == "file":
        _write_private(scratch / "request.json", payload)
        extra[REQUEST_VAR], stdin_data = str(scratch / "request.json"), b""
    result_file = scratch / "result.json"
    if spec.result == "file":
        extra[RESULT_VAR] = str(result_file)
    env = build_env(spec, request, repo_root, scratch, extra)
    argv = resolve_argv(spec.command, repo_root)
    mechanism = box.for_trials()
    if mechanism == "none":
        box.warn_unsandboxed()
    elif shutil.which(argv[0], path=env.get("PATH")) is None:
        return label.errored(f"could not start {spec.command[0]!r}: No such file or directory")
    else:
        layout = box.trial_layout(repo_root, workspace, (workspace, scratch), argv)
        argv = box.wrap(mechanism, layout, argv)
    snap = Snapshot.take(workspace, repo_root, deep=mechanism == "none")
    try:
        proc, exited = await spawn(argv, cwd=workspace, env=env)
    except OSError as err:
        return label.errored(f"could not start {spec.command[0]!r}: {err.strerror or err}")
    got = await _drive(spec, request, (proc, exited), stdin_data, result_file, label)
    if mechanism != "none" and got.status == "errored" and _setup_failed(got):
        got = label.errored(f"the {mechanism} sandbox could not be set up (exit "
                            f"{box.SETUP_FAILED}); set {box.SANDBOX_VAR}=off to run unboxed",
                            stderr=got.stderr_tail)
    if (mechanism != "none" and got.status != "ok"
            and "Read-only file system" in got.stderr_tail and got.message):
        got.message += " (in its sandbox only the workspace, HOME and TMPDIR are writable)"
    return snap.judge(got, label, sandboxed=mechanism != "none")


def _setup_failed(got: AdapterOutcome) -> bool:
    return f"command exited {box.SETUP_FAILED}" in (got.message or "") and got.result is None


async def _drive(spec: AdapterSpec, request: TrialRequest,
                 child: tuple[asyncio.subprocess.Process, asyncio.Event], stdin_data: bytes,
                 result_file: Path, label: TrialLabel) -> AdapterOutcome:
    """Feed, read and wait for one command under the time limit. The result is what it printed
    by the time its main process exited (and the pipe held then): a daemon keeping stdout
    open cannot turn it into "printed nothing"."""
    proc, exited = child
    err_tail, log_tail = Tail(), Tail()
    cap = spec.max_output_bytes
    to_stdout = spec.result == "stdout"
    printed = bytearray()
    stderr = asyncio.create_task(drain(proc.stderr, err_tail))
    feeder = asyncio.create_task(feed(proc, stdin_data))
    reader: asyncio.Task[Any] = asyncio.create_task(
        read_into(proc.stdout, printed, cap) if to_stdout else drain(proc.stdout, log_tail)
    )
    waiter = asyncio.create_task(exited.wait())
    limit = request.timeout_s
    problem: str | None = None
    code = 0
    try:
        async with asyncio.timeout(limit):
            await asyncio.wait({reader, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done() and not reader.cancelled() and reader.exception() is not None:
                raise reader.exception()  # type: ignore[misc]
            await waiter
            code = proc.returncode if proc.returncode is not None else -1
            signal_group(proc.pid, signal.SIGKILL)  # what it left running in its group
            await asyncio.wait({reader, stderr}, timeout=EOF_GRACE_S)
            if reader.done() and not reader.cancelled() and reader.exception() is not None:
                raise reader.exception()  # type: ignore[misc]
    except TimeoutError:
        problem = "timeout"
    except Oversize:
        problem = "oversize"
    finally:
        await settle(reader, stderr, feeder, waiter, timeout=0)
        await kill_group(proc, exited)
    if problem == "timeout":
        return label.errored(f"exceeded {limit:g}s; process group killed",
                             stderr=err_tail.since(), timed_out=True)
    if problem == "oversize":
        return label.errored(f"printed more than {size_text(cap)}", stderr=err_tail.since())
    return await _read_result(spec, code, bytes(printed) if to_stdout else None, result_file,
                              label, err_tail)


async def _read_result(spec: AdapterSpec, code: int, out: bytes | None, result_file: Path,
                       label: TrialLabel, err_tail: Tail) -> AdapterOutcome:
    stderr = err_tail.since()
    if out is None:  # result = "file"
        try:
            out = _read_file_capped(result_file, spec.max_output_bytes)
        except FileNotFoundError:
            out = None
        except OSError as err:
            return label.errored(f"result file (${RESULT_VAR}) unreadable: "
                                 f"{err.strerror or err}", stderr=stderr)
        if out is not None and len(out) > spec.max_output_bytes:
            return label.errored(
                f"wrote more than {size_text(spec.max_output_bytes)} in its result file",
                stderr=stderr)
        if out is None and code == 0:
            return label.errored(f"wrote no result file (${RESULT_VAR})", stderr=stderr,
                                 quote_stderr=True)
        out = out or b""
        source = "wrote in its result file"
    else:
        source = "printed"
    if code != 0:
        # a result that says what went wrong is taken at its word; anything else is errored
        said = parse_result(out, label, source, stderr=stderr)
        if said.result is not None and said.result.error is not None:
            return said
        return label.errored(f"command {_exit_text(code)}", stderr=stderr, quote_stderr=True)
    return parse_result(out, label, source, stderr=stderr)


# --- http ------------------------------------------------------------------------------------

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _post(url: str, body: bytes, timeout: float, cap: int) -> tuple[int, bytes]:
    """(status, body up to cap + 1 bytes); raises URLError / OSError when unreachable."""
    host = urlsplit(url).hostname or ""
    handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK else []
    opener = urllib.request.build_opener(*handlers)
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json"})
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read(cap + 1)
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read(2000)


async def run_http(spec: AdapterSpec, request: TrialRequest, *,
                   label: TrialLabel) -> AdapterOutcome:
    assert spec.url is not None
    limit = request.timeout_s
    cap = spec.max_output_bytes
    call = asyncio.to_thread(_post, spec.url, request.model_dump_json().encode(), limit, cap)
    try:
        status, body = await asyncio.wait_for(call, limit)
    except TimeoutError:
        return label.errored(f"{spec.url} did not answer within {limit:g}s", timed_out=True)
    except urllib.error.URLError as err:
        if isinstance(err.reason, TimeoutError):
            return label.errored(f"{spec.url} did not answer within {limit:g}s",
                                 timed_out=True)
        return label.errored(f"could not reach {spec.url}: {err.reason}")
    except OSError as err:
        return label.errored(f"could not reach {spec.url}: {err}")
    if not 200 <= status < 300:
        text = body.decode("utf-8", "replace").strip()[:500]
        return label.errored(f"{spec.url} answered HTTP {status}" + (f": {text}" if text else ""))
    if len(body) > cap:
        return label.errored(f"{spec.url} answered more than {size_text(cap)}")
    return parse_result(body, label, "answered")


# --- python ----------------------------------------------------------------------------------


class AgentRaised(Exception):
    """A python adapter's function raised: the agent's own code failed (the trial fails)."""


@functools.cache
def load_entry(entry: str) -> Callable[..., Any]:
    """The function `package.module:function` names (`agents.registry.load_entry`, loaded
    once), or an AdapterConfigError naming the entry."""
    try:
        fn: Callable[..., Any] = registry_load_entry(entry)
        return fn
    except EntryError as err:
        raise AdapterConfigError(f"python adapter {err}") from None


async def run_python(spec: AdapterSpec, request: TrialRequest, context: TrialContext | None,
                     *, label: TrialLabel) -> AdapterOutcome:
    assert spec.entry is not None
    fn = load_entry(spec.entry)
    async with asyncio.timeout(request.timeout_s):
        try:
            if inspect.iscoroutinefunction(fn):
                value = await fn(request, context)
            else:
                value = await asyncio.to_thread(fn, request, context)
                if inspect.isawaitable(value):
                    value = await value
        except (TimeoutError, asyncio.CancelledError, ModelError):
            raise  # the time limit, a stop, the model: not the agent's own failure
        except Exception as err:
            raise AgentRaised(f"{type(err).__name__}: {err}") from err
    return validate_doc(value, label, "returned")


__all__ = [
    "REQUEST_VAR",
    "RESULT_VAR",
    "AdapterConfigError",
    "AdapterOutcome",
    "AgentRaised",
    "WorkerPool",
    "load_entry",
    "run_adapter_trial",
    "run_command",
    "run_http",
    "run_python",
]
