"""The `worker` adapter: one long-lived agent process per concurrency slot, speaking JSON lines.

promptloop writes one request per line (compact JSON, one line) on the worker's stdin and reads
one result per line from its stdout; the worker may log on stderr. A slot's process starts when
the slot first serves a trial (a Dart or Node agent pays its start-up once), runs from the
repository root in its own process group with the environment `process.build_env` makes (the
model variables of the request that started it), and is replaced when it dies, hangs past a
trial's time limit (its group is killed), prints more than the cap, or breaks the framing
(a line that is not a valid result: what follows could belong to the wrong trial).

A worker must take the model endpoint from each request (`model.base_url`, `model.api_key`):
the gateway's token is per trial and dies with it, so the OPENAI_BASE_URL / OPENAI_API_KEY of
a worker's environment are those of the trial that started it and stop working after it. A
pool belongs to one run; a worker's start-up counts against its first trial's time limit.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from optimizer.adapters.contract import TrialRequest
from optimizer.adapters.escape import Snapshot
from optimizer.adapters.outcome import AdapterOutcome, TrialLabel, parse_result
from optimizer.adapters.process import (
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
from optimizer.adapters.spec import AdapterSpec

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

    async def _start(self, slot: _Slot, request: TrialRequest) -> None:
        slot.scratch = new_scratch("promptloop-worker-")
        env = build_env(self.spec, request, self.repo_root, slot.scratch)
        slot.tail = Tail()
        slot.proc, slot.exited = await spawn(resolve_argv(self.spec.command, self.repo_root),
                                cwd=self.repo_root, env=env, limit=self.spec.max_output_bytes + 1)
        self.starts += 1
        slot.stderr_task = asyncio.create_task(drain(slot.proc.stderr, slot.tail))

    async def run(self, request: TrialRequest, *, agent: str | None = None) -> AdapterOutcome:
        """One trial on an idle worker (waiting for one when all are busy)."""
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        label = TrialLabel(agent or self.agent, request)
        slot = await self._idle.get()
        try:
            return await self._trial(slot, request, label)
        finally:
            self._idle.put_nowait(slot)

    async def _trial(self, slot: _Slot, request: TrialRequest,
                     label: TrialLabel) -> AdapterOutcome:
        if not slot.alive:
            await slot.stop()
            try:
                await self._start(slot, request)
            except OSError as err:
                await slot.stop()
                return label.errored(f"could not start the worker {self.spec.command[0]!r}: "
                                     f"{err.strerror or err}")
        proc = slot.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        snap = Snapshot.take(Path(request.workspace), self.repo_root)
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
            got = label.errored(f"exceeded {limit:g}s; process group killed",
                                stderr=slot.tail.since(mark), timed_out=True)
        except asyncio.LimitOverrunError:
            await slot.stop()
            got = label.errored(f"printed more than {size_text(self.spec.max_output_bytes)}",
                                stderr=slot.tail.since(mark))
        except (asyncio.IncompleteReadError, BrokenPipeError, ConnectionResetError):
            code = await self._reap(slot)
            got = label.errored(f"the worker {_ended(code)} before answering",
                                stderr=slot.tail.since(mark), quote_stderr=True)
        else:
            got = parse_result(data, label, "printed", stderr=slot.tail.since(mark))
            if got.status == "errored" and got.result is None:
                await slot.stop()  # the framing is broken: never hand its next line on
        return snap.judge(got, label)

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


def _ended(code: int | None) -> str:
    if code is None:
        return "closed its stdout"
    if code < 0:
        return f"was killed by signal {-code}"
    return f"exited {code}"


__all__ = ["WorkerPool"]
