"""Trial workspaces: where they are made, how they are filled, and sweeping the ones that
processes killed mid-trial left behind."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import tempfile
from pathlib import Path

from promptloop.agents import trees
from promptloop.agents.workspace import Workspace
from promptloop.optimizer.core.suites import LoadedTask

TRIAL_DIR_VAR = "PROMPTLOOP_TRIAL_DIR"
TRIAL_PREFIX = "promptloop-trial-"
_SHM = Path("/dev/shm")
_SHM_MIN_FREE = 4 << 30


@functools.cache
def trial_root() -> str | None:
    """Where trial workspaces are made: $PROMPTLOOP_TRIAL_DIR, else /dev/shm when it is a large
    enough tmpfs (a trial's file work is mostly metadata syscalls, several times cheaper in
    memory than on a virtual disk), else the system temp folder."""
    explicit = os.environ.get(TRIAL_DIR_VAR, "").strip()
    if explicit:
        return explicit
    try:
        if (
            _SHM.is_dir()
            and os.access(_SHM, os.W_OK)
            and shutil.disk_usage(_SHM).free >= _SHM_MIN_FREE
        ):
            return str(_SHM)
    except OSError:
        pass
    return None


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@functools.cache
def sweep_stale_trials() -> int:
    """Remove trial workspaces left by processes that died (kill -9 skips every cleanup;
    on tmpfs they would hold memory until reboot). Returns how many were removed."""
    base = Path(trial_root() or tempfile.gettempdir())
    removed = 0
    for path in base.glob(f"{TRIAL_PREFIX}*"):
        pid = path.name[len(TRIAL_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or pid_alive(int(pid)):
            continue
        trees.remove_tree(path)
        removed += 1
    return removed


def new_trial_dir() -> Path:
    """A fresh folder for one trial, named after this process so a sweep can tell it is ours."""
    return Path(tempfile.mkdtemp(prefix=f"{TRIAL_PREFIX}{os.getpid()}-", dir=trial_root()))


def fill_workspace(task: LoadedTask, dest: Path) -> Path:
    """A trial's workspace for any agent: the task's fixtures (the base, then its own folder)
    copied into `dest`, nothing else (the bundled agents add their Facts/, Cards/ and PKM/
    themselves: `promptloop.agents.base.prepare_workspace`)."""
    dest.mkdir(parents=True, exist_ok=True)
    for src in (task.base_fixture, task.fixture_dir):
        if src is not None:
            trees.copy_tree(src, dest)
    return dest


def build_workspace(task: LoadedTask, dest: Path) -> Workspace:
    """The workspace of an in-process (bundled) agent's trial, filled from the task's
    fixtures."""
    return Workspace(fill_workspace(task, dest), durable=False)


async def remove_tree(path: Path) -> None:
    """Delete a trial workspace off the event loop (many small deletes are slow I/O)."""
    try:
        await asyncio.to_thread(trees.remove_tree, path)
    except asyncio.CancelledError:
        trees.remove_tree(path)
        raise


__all__ = [
    "TRIAL_DIR_VAR",
    "TRIAL_PREFIX",
    "build_workspace",
    "fill_workspace",
    "new_trial_dir",
    "pid_alive",
    "remove_tree",
    "sweep_stale_trials",
    "trial_root",
]
