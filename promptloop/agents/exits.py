"""Starting a process whose own exit can be awaited, apart from its pipes.

asyncio's `Process.wait()` returns only once the process has exited *and* its pipes have
closed; a child it left running (a daemon, a `sleep` a grading script started) holds them
open, so `wait()` never returns while the child lives. `start` returns the process with an
event set as soon as the process itself exits (agent trials: `optimizer/adapters/process.py`;
grading commands: `graders/general.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path


class ExitProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a subprocess, telling when the process itself exited."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


async def start(argv: Sequence[str], *, cwd: Path, env: dict[str, str], limit: int = 2**16
                ) -> tuple[asyncio.subprocess.Process, asyncio.Event]:
    """`argv` in its own session (its own process group) with piped stdin, stdout and stderr:
    the process, and an event set as soon as it exits."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: ExitProtocol(limit, loop), *argv, cwd=cwd, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    return asyncio.subprocess.Process(transport, protocol, loop), protocol.exited


__all__ = ["ExitProtocol", "start"]
