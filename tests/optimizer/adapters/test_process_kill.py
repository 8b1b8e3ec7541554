"""Killing an agent's process group: the child is reaped by asyncio alone (issue 30's
sandbox put this on every replaced worker: `Popen.kill()` polls, and so reaps the child
behind asyncio's child watcher, which then logs "Unknown child process pid ..., will report
returncode 255" on the user's console and loses the real exit status)."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import pytest

from promptloop.optimizer.adapters import process
from promptloop.optimizer.adapters.process import kill_group

STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('up', flush=True); time.sleep(60)")


async def test_a_leader_that_ignores_sigterm_is_killed_and_reaped_once(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "KILL_GRACE_S", 0.05)
    for _ in range(40):  # a race: the old code lost it in about one kill of twenty
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", STUBBORN, stdout=asyncio.subprocess.PIPE,
            start_new_session=True)
        assert proc.stdout is not None
        assert await proc.stdout.readline() == b"up\n"
        exited = asyncio.Event()
        waiter = asyncio.ensure_future(proc.wait())
        waiter.add_done_callback(lambda _f, e=exited: e.set())
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            await kill_group(proc, exited)
        await waiter
        assert proc.returncode == -signal.SIGKILL
    unknown = [r.getMessage() for r in caplog.records if "Unknown child" in r.getMessage()]
    assert unknown == []
