"""The nightly lock: one night at a time, the refusal names the holder, and a killed holder's
lock is free (an OS file lock, released by the operating system when its process dies)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.agents.llm.scripted import Request, ScriptedModel
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.workflows.nightly.engine import NightResult, run_nightly
from promptloop.optimizer.workflows.nightly.state import LockHeldError, NightLock
from tests.optimizer.workflows.nightly_support import (
    FAST,
    agent_policy,
    clients,
    make_repo,
    night,
    night_config,
)

ROOT = Path(__file__).resolve().parents[3]
HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from promptloop.optimizer.workflows.nightly.state import NightLock\n"
    "lock = NightLock(Path(sys.argv[1]))\n"
    "lock.acquire()\n"
    "print('held', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def hold_lock(state: Path) -> subprocess.Popen[str]:
    """Another process that takes the nightly lock and keeps it until killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(state / "nightly.lock")],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_second_instance_is_refused_by_the_lock(repo: Path, state: Path) -> None:
    async def scenario() -> tuple[NightResult, str]:
        started, release = asyncio.Event(), asyncio.Event()

        async def slow(req: Request) -> ModelResponse:
            started.set()
            await release.wait()
            return agent_policy(req)

        first = asyncio.create_task(run_nightly(
            night_config(repo, state, suites=["card_agent"], **FAST),
            **clients(ScriptedModel(slow, model_id="scripted:night-agent"))))
        await started.wait()
        with pytest.raises(LockHeldError) as refused:
            await run_nightly(night_config(repo, state, **FAST), **clients())
        release.set()
        return await first, str(refused.value)

    result, message = asyncio.run(scenario())
    assert f"another nightly run (pid {os.getpid()}" in message and "is running" in message
    assert result.checkpoint.status == "finished"
    assert len(list((state / "nightly").iterdir())) == 1  # the refused run left no night


def test_cli_refuses_while_another_process_holds_the_lock(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = hold_lock(state)
    try:
        monkeypatch.chdir(repo)
        out = CliRunner().invoke(app, ["nightly", "--state-dir", str(state)])
        assert out.exit_code == 1, out.output
        assert f"another nightly run (pid {holder.pid}" in out.output
        assert "started 20" in out.output and str(state / "nightly.lock") in out.output
        assert not (state / "nightly").exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holders_lock_is_free(repo: Path, state: Path) -> None:
    holder = hold_lock(state)
    holder.send_signal(signal.SIGKILL)  # no cleanup of any kind
    holder.wait()
    assert (state / "nightly.holder.json").exists()  # its record stayed behind
    result = night(repo, state, suites=["card_agent"], iterations_per_bucket=1)
    assert result.checkpoint.status == "finished"
    assert any(
        f"took over a stale lock of pid {holder.pid}" in n for n in result.checkpoint.notes
    )
    assert not (state / "nightly.holder.json").exists()
    # an unreadable holder record (torn write) of a dead holder counts as stale too
    (state / "nightly.holder.json").write_text("{not json")
    lock = NightLock(state / "nightly.lock")
    assert lock.acquire() is not None and lock.held
    lock.release()
    assert not lock.held and not (state / "nightly.holder.json").exists()
