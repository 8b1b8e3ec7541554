"""The `command` adapter's process (`run_command`), and `run_adapter_trial`: one trial through
any adapter kind, outside a suite run (tests, benchmarks).

- `command`: the argv runs once per trial with cwd = the workspace (relative paths in the argv
  are read from the repository root, `process.resolve_argv`), the request on stdin or in the file
  named by $PROMPTLOOP_REQUEST (written in a private folder, mode 0600), the result on stdout or
  in the file named by $PROMPTLOOP_RESULT. Its process group is killed at the time limit and
  when it prints more than the cap; what it leaves running after it exits is killed too.
- the other kinds: `optimizer/adapters/kinds/` (worker, http, python, session), one module each,
  registered in `optimizer/adapters/registry.py`.

Whatever a command, worker or server does, the answer is an `AdapterOutcome`: never an
exception. The time limit is the request's `timeout_s` (the caller puts the agent's `timeout`
or the task's `timeout_seconds` there). Files written outside the workspace: `escape`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import stat
from pathlib import Path
from typing import Any

from promptloop.optimizer.adapters import box
from promptloop.optimizer.adapters.contract import TrialContext, TrialRequest
from promptloop.optimizer.adapters.escape import Snapshot
from promptloop.optimizer.adapters.outcome import (
    AdapterConfigError,
    AdapterOutcome,
    AgentRaised,
    TrialLabel,
    parse_result,
)
from promptloop.optimizer.adapters.process import (
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
from promptloop.optimizer.adapters.registry import AdapterSetup, open_adapter
from promptloop.optimizer.adapters.spec import AdapterSettingsBase, CommandSettings
from promptloop.optimizer.adapters.worker import WorkerPool

REQUEST_VAR = "PROMPTLOOP_REQUEST"
RESULT_VAR = "PROMPTLOOP_RESULT"
EOF_GRACE_S = 1.0
"""How long the readers wait for end of file once the command exited and its group is gone."""


async def run_adapter_trial(
    spec: AdapterSettingsBase,
    request: TrialRequest,
    *,
    repo_root: Path,
    agent: str,
    context: TrialContext | None = None,
    pool: WorkerPool | None = None,
) -> AdapterOutcome:
    """Run one trial of `agent` through `spec`'s adapter kind (built for this trial alone and
    closed after it; a suite run keeps one per run: run/external.AgentLink).

    `pool`: a running WorkerPool to use for a worker adapter. `context`: what an in-process
    kind's function gets. Raises AdapterConfigError when the adapter cannot run at all (an
    entry that does not import), and lets a python function's exceptions through
    (AgentRaised); everything else is an outcome.
    """
    if pool is not None and spec.adapter == "worker":
        return await pool.run(request, agent=agent)
    one = open_adapter(spec, AdapterSetup(repo_root=repo_root, agent=agent))
    try:
        return await one.attempt(request, context)
    finally:
        await one.aclose()


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


async def run_command(spec: CommandSettings, request: TrialRequest, *, repo_root: Path,
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


async def _command(spec: CommandSettings, request: TrialRequest, repo_root: Path,
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
    try:
        mechanism = box.for_trials()
    except box.SandboxUnavailable as err:
        return label.errored(str(err))
    if mechanism == "none":
        box.warn_unsandboxed()
    elif shutil.which(argv[0], path=env.get("PATH")) is None:
        why = ("not executable" if os.path.isfile(argv[0]) and not os.access(argv[0], os.X_OK)
               else "No such file or directory")
        return label.errored(f"could not start {spec.command[0]!r}: {why}")
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
            and "read-only file system" in got.stderr_tail.lower() and got.message):
        got.message += (f" ({box.REFUSED_WRITE}: in its sandbox only the "
                        "workspace, HOME and TMPDIR are writable)")
    return snap.judge(got, label, sandboxed=mechanism != "none")


def _setup_failed(got: AdapterOutcome) -> bool:
    return f"command exited {box.SETUP_FAILED}" in (got.message or "") and got.result is None


async def _drive(spec: CommandSettings, request: TrialRequest,
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


async def _read_result(spec: CommandSettings, code: int, out: bytes | None, result_file: Path,
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


__all__ = [
    "REQUEST_VAR",
    "RESULT_VAR",
    "AdapterConfigError",
    "AdapterOutcome",
    "AgentRaised",
    "WorkerPool",
    "run_adapter_trial",
    "run_command",
]
