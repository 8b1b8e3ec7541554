"""SIGTERM (a scheduler ending an unattended night) stops a command as Ctrl-C does: clean-up
runs, exit 143, and `--json` still prints its one envelope on stdout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.optimizer.workflows.test_optimize import _git

ROOT = Path(__file__).resolve().parents[3]


def test_sigterm_during_a_night_exits_143_with_the_envelope(
    repo: Path, state: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "asked"
    env = {**os.environ, "STOP_CHILD_MARKER": str(marker), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.optimizer.cli.stop_child", "nightly", "--agent",
         "pkm_agent", "--iterations", "1", "--max-buckets", "1", "--trials", "1",
         "--agent-model", "scripted:pkm", "--proposer-model", "scripted:proposer",
         "--judge-model", "scripted:judge", "--state-dir", str(state), "--json"],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the proposer was never asked"
            time.sleep(0.05)
        stopped = time.monotonic()
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=30)
        took = time.monotonic() - stopped
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 143, err
    assert took < 10, f"{took:.1f}s"
    doc = json.loads(out)
    assert doc["command"] == "nightly" and doc["ok"] is False and doc["exit_code"] == 143
    assert doc["error"]["kind"] == "interrupted"
    assert "terminated (SIGTERM)" in doc["error"]["message"]
    assert "`promptloop nightly --resume` continues it" in " ".join(err.split())
    assert "Traceback" not in err
    assert _git(repo, "branch", "--list", "promptloop/*").strip() == ""  # cleaned up
    assert _git(repo, "worktree", "list").count("\n") == 1
    [night] = list((state / "nightly").iterdir())
    cp = json.loads((night / "checkpoint.json").read_text())
    assert cp["status"] != "finished" and cp["steps"], cp  # resumable, baselines kept
