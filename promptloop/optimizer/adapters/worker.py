"""The `worker` adapter: one long-lived agent process per concurrency slot, speaking JSON lines.

promptloop writes one request per line (compact JSON, one line) on the worker's stdin and reads
one result per line from its stdout; the worker may log on stderr. A slot's process starts when
the slot first serves a trial (a Dart or Node agent pays its start-up once), runs from the
repository root in its own process group with the environment `process.build_env` makes (the
model variables of the request that started it), and is replaced when it dies, hangs past a
trial's time limit (its group is killed), prints more than the cap, or breaks the framing
(a line that is not a valid result: what follows could belong to the wrong trial).

Each slot's process runs in a box of its own (`box`, where bwrap or unshare works): the
repository read-only, other trials, the state folder and caches hidden, its own PID namespace
with the worker as PID 1. The slot has a folder that is writable in its box; each trial's
workspace is moved into it as `<slot folder>/workspace` for the trial (the request names that
path, the same for every trial of the slot) and moved back after; between trials every
process of the box but the worker is killed. A worker that dies before answering takes no
trial with it: the trial is retried once on a fresh worker (in the same workspace), and only
then errored.

A worker must take the model endpoint from each request (`model.base_url`, `model.api_key`):
the gateway's token is per trial and dies with it, so the OPENAI_BASE_URL / OPENAI_API_KEY of
a worker's environment are those of the trial that started it and stop working after it. A
pool belongs to one run; a worker's start-up counts against its first trial's time limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from promptloop.optimizer.adapters import box
from promptloop.optimizer.adapters.contract import TrialRequest
from promptloop.optimizer.adapters.escape import Snapshot
from promptloop.optimizer.adapters.outcome import AdapterOutcome, TrialLabel, parse_result
from promptloop.optimizer.adapters.process import (
    KILL_GRACE_S,
    Tail,
    build_env,
    close_pipes,
    drain,
    kill_group,
    new_scratch,
    remove_scratch,
    resolve_argv,
    size_text,
    spawn,
)
from promptloop.optimizer.adapters.spec import AdapterSpec
from promptloop.optimizer.core.files import owned_dir

REAP_S = 1.0
"""How long a worker that closed its stdout gets to exit (for its exit code and stderr)."""


@dataclass
class _Slot:
    """One concurrency slot: its process (None until first used or after it was replaced)."""

    number: int
    proc: asyncio.subprocess.Process | None = None
    scratch: Path | None = None
    tail: Tail = field(default_factory=Tail)
    stderr_task: asyncio.Task[None] | None = None
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    boxed: box.BoxProcesses | None = None
    """The processes of the slot's box (None without a sandbox)."""
    folder: Path | None = None
    """The slot's folder, writable in its box: the trial's workspace is moved in for the
    trial."""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def stop(self, polite: bool = False) -> None:
        """End the slot's process (`polite`: close its stdin and let it exit first)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if polite and not self.exited.is_set() and proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.exited.wait(), KILL_GRACE_S)
            await kill_group(proc, self.exited, close=False)
        if self.stderr_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self.stderr_task, REAP_S)
            self.stderr_task = None
        if proc is not None:
            await close_pipes(proc)
        if self.scratch is not None:
            remove_scratch(self.scratch)
            self.scratch = None
        self.boxed = None

    def discard_folder(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


class WorkerPool:
    """The worker processes of one agent for one run: `await pool.run(request)` per trial,
    `await pool.aclose()` at the end (or `async with WorkerPool(...) as pool`)."""

    def __init__(self, spec: AdapterSpec, *, repo_root: Path, agent: str,
                 size: int | None = None) -> None:
        self.spec = spec
        self.repo_root = repo_root
        self.agent = agent
        self.size = size or spec.workers
        self.starts = 0
        """Processes started so far (a pool serving every trial with one process: 1)."""
        self._slots = [_Slot(i) for i in range(self.size)]
        self._idle: asyncio.Queue[_Slot] = asyncio.Queue()
        for slot in self._slots:
            self._idle.put_nowait(slot)
        self._closed = False

    async def __aenter__(self) -> WorkerPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop every worker: stdin closed, 2 s to exit, then its process group killed."""
        self._closed = True
        await asyncio.gather(*(slot.stop(polite=True) for slot in self._slots))
        for slot in self._slots:
            slot.discard_folder()

    async def _start(self, slot: _Slot, request: TrialRequest) -> None:
        slot.scratch = new_scratch("promptloop-worker-")
        env = build_env(self.spec, request, self.repo_root, slot.scratch)
        slot.tail = Tail()
        argv = resolve_argv(self.spec.command, self.repo_root)
        mechanism = box.for_trials()
        slot.discard_folder()
        if mechanism == "none":
            box.warn_unsandboxed()
        else:
            if shutil.which(argv[0], path=env.get("PATH")) is None:
                raise FileNotFoundError(2, "No such file or directory")
            # beside the trial folders: a workspace moves in and out by a rename
            near = Path(request.workspace).parent.parent
            slot.folder = owned_dir("promptloop-slot-", near if near.is_dir() else None)
            layout = box.trial_layout(self.repo_root, self.repo_root,
                                      (slot.folder, slot.scratch), argv)
            argv = box.wrap(mechanism, layout, argv)
        slot.proc, slot.exited = await spawn(argv, cwd=self.repo_root, env=env,
                                             limit=self.spec.max_output_bytes + 1)
        slot.boxed = box.BoxProcesses(slot.proc.pid) if mechanism != "none" else None
        self.starts += 1
        slot.stderr_task = asyncio.create_task(drain(slot.proc.stderr, slot.tail))

    async def run(self, request: TrialRequest, *, agent: str | None = None) -> AdapterOutcome:
        """One trial on an idle worker (waiting for one when all are busy); a trial whose
        worker died before answering is retried once on a fresh worker."""
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        label = TrialLabel(agent or self.agent, request)
        slot = await self._idle.get()
        try:
            got, died = await self._trial(slot, request, label)
            if died:
                got, _ = await self._trial(slot, request, label, retried=True)
            return got
        finally:
            self._idle.put_nowait(slot)

    async def _trial(self, slot: _Slot, request: TrialRequest, label: TrialLabel,
                     retried: bool = False) -> tuple[AdapterOutcome, bool]:
        """The trial's outcome, and whether the worker died before answering."""
        if not slot.alive:
            await slot.stop()
            try:
                await self._start(slot, request)
            except OSError as err:
                await slot.stop()
                return label.errored(f"could not start the worker {self.spec.command[0]!r}: "
                                     f"{err.strerror or err}"), False
        workspace = Path(request.workspace)
        sandboxed = slot.boxed is not None and slot.folder is not None
        if slot.folder is not None and sandboxed:
            inner = slot.folder / "workspace"
            _move(workspace, inner)
            request = request.model_copy(update={"workspace": str(inner)})
        try:
            snap = Snapshot.take(Path(request.workspace), self.repo_root,
                                 deep=not sandboxed)
            got, died = await self._exchange(slot, request, label, retried)
            if slot.boxed is not None:  # every process of the box but the worker, off the
                await asyncio.to_thread(slot.boxed.sweep)  # loop (other trials wait on it)
            return snap.judge(got, label, sandboxed=sandboxed), died
        finally:
            if slot.folder is not None and sandboxed:
                _move(slot.folder / "workspace", workspace)

    async def _exchange(self, slot: _Slot, request: TrialRequest, label: TrialLabel,
                        retried: bool) -> tuple[AdapterOutcome, bool]:
        proc = slot.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        mark = slot.tail.total
        limit = request.timeout_s
        line = request.model_dump_json().encode() + b"\n"
        try:
            async with asyncio.timeout(limit):
                proc.stdin.write(line)
                await proc.stdin.drain()
                data = await proc.stdout.readuntil(b"\n")
        except TimeoutError:
            await slot.stop()
            return label.errored(f"exceeded {limit:g}s; process group killed",
                                 stderr=slot.tail.since(mark), timed_out=True), False
        except asyncio.LimitOverrunError:
            await slot.stop()
            return label.errored(f"printed more than {size_text(self.spec.max_output_bytes)}",
                                 stderr=slot.tail.since(mark)), False
        except (asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError):
            code = await self._reap(slot)
            again = ", twice (retried once on a fresh worker)" if retried else ""
            if code == box.SETUP_FAILED and slot.boxed is not None:
                last = (slot.tail.since(mark).strip().splitlines() or [""])[-1].strip()
                return label.errored(
                    f"the sandbox could not be set up for the worker (exit "
                    f"{box.SETUP_FAILED}{': ' + last if last else ''}); set "
                    f"{box.SANDBOX_VAR}=off to run unboxed, and please report it",
                    stderr=slot.tail.since(mark)), False
            return label.errored(f"the worker {_ended(code)} before answering{again}",
                                 stderr=slot.tail.since(mark), quote_stderr=True), not retried
        got = parse_result(data, label, "printed", stderr=slot.tail.since(mark))
        if got.status == "errored" and got.result is None:
            await slot.stop()  # the framing is broken: never hand its next line on
        return got, False

    async def _reap(self, slot: _Slot) -> int | None:
        """The exit code of a worker that closed its stdout (None if it would not exit)."""
        proc = slot.proc
        code = None
        if proc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(slot.exited.wait(), REAP_S)
            code = proc.returncode
        if slot.stderr_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(slot.stderr_task), REAP_S)
        await slot.stop()
        return code


def _move(src: Path, dest: Path) -> None:
    """A workspace into or out of a slot's folder: a rename (a copy across file systems)."""
    try:
        os.rename(src, dest)
    except OSError:
        shutil.move(str(src), str(dest))


def _ended(code: int | None) -> str:
    if code is None:
        return "closed its stdout"
    if code < 0:
        return f"was killed by signal {-code}"
    return f"exited {code}"


__all__ = ["WorkerPool"]
