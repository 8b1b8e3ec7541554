"""Start `promptloop ARGS` (stop_child.py: scripted models whose proposer hangs) and wait until
the proposer was asked, for the tests that stop it there (Ctrl-C, SIGTERM)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def start_until_asked(repo: Path, marker: Path, args: Sequence[str],
                      **popen: Any) -> subprocess.Popen[str]:
    """The child, once its proposer is working (`marker` written); killed if it never gets
    there."""
    env = {**os.environ, "STOP_CHILD_MARKER": str(marker), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-m", "tests.optimizer.cli.stop_child", *args],
                             cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, **popen)
    deadline = time.monotonic() + 120
    try:
        while not marker.exists():
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the proposer was never asked"
            time.sleep(0.05)
    except BaseException:
        if child.poll() is None:
            child.kill()
        raise
    return child


def stop(child: subprocess.Popen[str], signum: int) -> tuple[str, str, float]:
    """Send `signum`; (stdout, stderr, seconds until it ended). Killed if it outlives 30 s."""
    try:
        sent = time.monotonic()
        child.send_signal(signum)
        out, err = child.communicate(timeout=30)
        return out, err, time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
