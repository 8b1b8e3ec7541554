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
from promptloop.optimizer.core.files import owned_dir
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


SCRATCH_PREFIXES = ("promptloop-adapter-", "promptloop-worker-", "promptloop-slot-")
"""The private folders of agent processes (HOME, TMPDIR, contract files; a worker slot's
folder), named `<prefix><pid>-<random>` like trial folders, so a sweep can tell whose they are."""


def stale_folders() -> list[Path]:
    """Trial workspaces and agent processes' private folders left by promptloop processes that
    died (kill -9, a second Ctrl-C skip every cleanup; on tmpfs they hold memory until
    reboot): the trial root's and the system temp folder's, whose pid no longer runs."""
    bases = {Path(trial_root() or tempfile.gettempdir()), Path(tempfile.gettempdir())}
    found: list[Path] = []
    for base in sorted(bases):
        for prefix in (TRIAL_PREFIX, *SCRATCH_PREFIXES):
            for path in base.glob(f"{prefix}*"):
                pid = path.name[len(prefix):].split("-", 1)[0]
                if pid.isdigit() and not pid_alive(int(pid)) and path.is_dir():
                    found.append(path)
    return found


def sweep_stale_folders() -> list[Path]:
    """Remove `stale_folders()`; the ones removed."""
    gone = []
    for path in stale_folders():
        trees.remove_tree(path)
        if not path.exists():
            gone.append(path)
    return gone


@functools.cache
def sweep_stale_trials() -> int:
    """`sweep_stale_folders` once per process (the first run of a suite); how many went."""
    return len(sweep_stale_folders())


def new_trial_dir() -> Path:
    """A fresh folder for one trial, named after this process so a sweep can tell it is ours."""
    return owned_dir(TRIAL_PREFIX, trial_root())


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
    "SCRATCH_PREFIXES",
    "TRIAL_DIR_VAR",
    "TRIAL_PREFIX",
    "build_workspace",
    "fill_workspace",
    "new_trial_dir",
    "pid_alive",
    "remove_tree",
    "stale_folders",
    "sweep_stale_folders",
    "sweep_stale_trials",
    "trial_root",
]
