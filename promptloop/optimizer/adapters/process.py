"""Process hygiene shared by the `command` and `worker` adapters.

- The environment is built from nothing: PATH, HOME, LANG, LC_ALL, TMPDIR, the names the agent's
  table lists in `env`, and the model variables (OPENAI_BASE_URL, OPENAI_API_KEY = the gateway's
  URL and per-run token, PROMPTLOOP_MODEL, PROMPTLOOP_REPO). HOME and TMPDIR point into a private
  scratch folder made for the process (removed after it); list "HOME" in `env` to pass the real
  one (a Dart or Node tool that needs its package cache there).
- Each process starts its own session (process group); on a timeout or oversize output the
  whole group gets SIGTERM, then SIGKILL after 2 s; leftovers of a finished command are killed.
- Output is read incrementally and never held beyond the cap; stderr keeps only its tail.
- Every message or stderr tail handed back is redacted (`optimizer.core.redact`: any variable
  whose name says key, token or secret, plus the per-run token).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import signal
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from promptloop.agents.exits import start
from promptloop.optimizer.adapters.contract import TrialRequest
from promptloop.optimizer.adapters.spec import MB, AdapterSpec
from promptloop.optimizer.core.files import owned_dir
from promptloop.optimizer.core.redact import redact

BASE_VARS = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
KILL_GRACE_S = 2.0
TAIL_BYTES = 4000
"""Characters of stderr kept for a message."""
CHUNK = 64 * 1024


def size_text(n: int) -> str:
    """`10 MB`, `512 KB`, `100 bytes`."""
    if n >= MB:
        return f"{n / MB:g} MB"
    if n >= 1024:
        return f"{n / 1024:g} KB"
    return f"{n} bytes"


def resolve_argv(argv: list[str], repo_root: Path) -> list[str]:
    """`argv` as run from the repository root, whatever the working folder: an argument that
    names an existing file or folder relative to the root (`agent/agent.js`) becomes absolute.
    A bare program name (`node`) is left to PATH."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg and not arg.startswith("-") and not os.path.isabs(arg) and (
            i > 0 or "/" in arg
        ) and (repo_root / arg).exists():
            out.append(str((repo_root / arg).resolve()))
        else:
            out.append(arg)
    return out


def build_env(
    spec: AdapterSpec,
    request: TrialRequest,
    repo_root: Path,
    scratch: Path,
    extra: Mapping[str, str] | None = None,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of an agent process (nothing else of promptloop's)."""
    source = os.environ if source is None else source
    env = {k: source[k] for k in ("PATH", "LANG", "LC_ALL") if k in source}
    env.setdefault("PATH", os.defpath)
    home, tmp = scratch / "home", scratch / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    env["HOME"], env["TMPDIR"] = str(home), str(tmp)
    env.update({k: source[k] for k in spec.env if k in source})
    env.update(
        OPENAI_BASE_URL=request.model.base_url,
        OPENAI_API_KEY=request.model.api_key,
        PROMPTLOOP_MODEL=request.model.model,
        PROMPTLOOP_REPO=str(repo_root),
    )
    env.update(extra or {})
    return env


def new_scratch(prefix: str = "promptloop-adapter-") -> Path:
    """A private folder (mode 0700) for one process's HOME, TMPDIR and contract files, named
    after this process (a killed run's is swept: `run.workspaces.stale_folders`)."""
    return owned_dir(prefix)


def remove_scratch(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def clean(text: str, request: TrialRequest | None = None, extra: Iterable[str] = ()) -> str:
    """`text` with every known secret and the run's token replaced by `***`."""
    token = [request.model.api_key] if request is not None else []
    return redact(text, [*token, *extra])


class Tail:
    """The last bytes a stream wrote, and how many it wrote in all (to take what one trial of a
    long-lived worker wrote)."""

    def __init__(self, keep: int = 4 * TAIL_BYTES) -> None:
        self.keep = keep
        self.total = 0
        self.buf = bytearray()

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self.buf += data
        if len(self.buf) > self.keep:
            del self.buf[: len(self.buf) - self.keep]

    def since(self, mark: int = 0, chars: int = TAIL_BYTES) -> str:
        n = min(self.total - mark, len(self.buf))
        text = bytes(self.buf[len(self.buf) - n:]).decode("utf-8", "replace") if n > 0 else ""
        text = text.strip()
        return text if len(text) <= chars else "..." + text[-chars:]


async def drain(stream: asyncio.StreamReader | None, tail: Tail) -> None:
    """Read `stream` to its end into `tail` (stderr: keep only the end)."""
    if stream is None:
        return
    while chunk := await stream.read(CHUNK):
        tail.add(chunk)


class Oversize(Exception):
    """The process printed more than the cap."""


async def read_capped(stream: asyncio.StreamReader | None, cap: int) -> bytes:
    """The whole stream, raising Oversize as soon as it passes `cap` bytes."""
    out = bytearray()
    await read_into(stream, out, cap)
    return bytes(out)


async def read_into(stream: asyncio.StreamReader | None, out: bytearray, cap: int) -> None:
    """Read `stream` to its end into `out` (what was read so far stays there when the read is
    cancelled: a daemon holding the pipe open cannot hide what the process printed), raising
    Oversize as soon as it passes `cap` bytes."""
    if stream is None:
        return
    while chunk := await stream.read(CHUNK):
        out += chunk
        if len(out) > cap:
            raise Oversize


LIVE_GROUPS: set[int] = set()
"""Process groups `spawn` started and `kill_group` has not ended: what `kill_live` ends when
the process leaves without its clean-up (a second Ctrl-C forces the exit)."""


def kill_live() -> None:
    """SIGKILL every process group still registered (the trials a forced exit abandons: an
    agent that hangs must not outlive the command). Safe to call more than once."""
    for pid in list(LIVE_GROUPS):
        signal_group(pid, signal.SIGKILL)
    LIVE_GROUPS.clear()


atexit.register(kill_live)


def signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the process group `pid` leads; False when no such group is left."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def kill_group(proc: asyncio.subprocess.Process, exited: asyncio.Event,
                     close: bool = True) -> None:
    """SIGTERM to the process's whole group, SIGKILL after KILL_GRACE_S (to whatever of the
    group is left, in any case), then (`close`) its pipes read to their end and the process
    reaped."""
    if not exited.is_set():
        signal_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(exited.wait(), KILL_GRACE_S)
    signal_group(proc.pid, signal.SIGKILL)
    if not exited.is_set():
        # a leader that left its group: os.kill, not proc.kill(), whose Popen.send_signal
        # polls first and so reaps the child behind asyncio's child watcher (which then
        # logs "Unknown child process pid ..., will report returncode 255")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(exited.wait(), KILL_GRACE_S)
    LIVE_GROUPS.discard(proc.pid)
    if close:
        await close_pipes(proc)


async def settle(*tasks: asyncio.Future[Any], timeout: float | None = None) -> None:
    """Wait for `tasks` (at most `timeout` s), cancel those still running and retrieve every
    result or exception, so that none is ever reported as "never retrieved"."""
    if tasks:
        _done, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def close_pipes(proc: asyncio.subprocess.Process, grace: float = 1.0) -> None:
    """Read what is left on the process's stdout and stderr (bounded: the group is gone),
    reap it and close its transport: a pipe still held open after `grace` (by a daemon that
    left the group) is closed, so nothing is left for the garbage collector to close after
    the event loop."""
    sink = Tail(keep=0)
    await settle(asyncio.ensure_future(drain(proc.stdout, sink)),
                 asyncio.ensure_future(drain(proc.stderr, sink)), timeout=grace)
    waiter = asyncio.ensure_future(proc.wait())
    await settle(waiter, timeout=grace)
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


async def spawn(
    argv: list[str], *, cwd: Path, env: dict[str, str], limit: int = 2**16
) -> tuple[asyncio.subprocess.Process, asyncio.Event]:
    """Start `argv` in its own session with piped stdin, stdout and stderr; the process and an
    event set as soon as it exits (`agents.exits.start`)."""
    process, exited = await start(argv, cwd=cwd, env=env, limit=limit)
    LIVE_GROUPS.add(process.pid)
    return process, exited


async def feed(proc: asyncio.subprocess.Process, data: bytes, close: bool = True) -> None:
    """Write `data` to the process's stdin (a process that does not read it is fine)."""
    stdin = proc.stdin
    if stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            stdin.write(data)
            await stdin.drain()
        if close:
            stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await stdin.wait_closed()


__all__ = [
    "BASE_VARS",
    "KILL_GRACE_S",
    "Oversize",
    "Tail",
    "build_env",
    "clean",
    "close_pipes",
    "drain",
    "feed",
    "kill_group",
    "new_scratch",
    "read_capped",
    "read_into",
    "remove_scratch",
    "resolve_argv",
    "settle",
    "signal_group",
    "size_text",
    "spawn",
]
