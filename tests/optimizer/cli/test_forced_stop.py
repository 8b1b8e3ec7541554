"""A second Ctrl-C forces the stop (no clean-up waits): the trials it abandons must not outlive
the command. A team's worker hung in `sleep 600`; after Ctrl-C twice, the agent, its child and
(boxed) the sandbox's `unshare` stayed with ppid 1 until SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.one_task_repo import one_task_repo

ROOT = Path(__file__).resolve().parents[3]
AGENT = """import json, os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the clean-up's SIGTERM is not enough: it waits
json.load(sys.stdin)
child = subprocess.Popen(["sleep", "300"])
with open(os.environ["HANG_PIDS"], "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_twice_leaves_no_trial_process(tmp_path: Path) -> None:
    repo = one_task_repo(tmp_path / "repo", "hang", 'adapter = "command"\n'
                         'command = ["python3", "agent.py"]\nenv = ["HANG_PIDS"]\n'
                         'timeout = 300\nmodel = "local:smollm2"\n')
    (repo / "agent.py").write_text(AGENT)
    pids = tmp_path / "pids.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HANG_PIDS": str(pids),
           "PROMPTLOOP_SANDBOX": "off", "PROMPTLOOP_HOME": str(tmp_path / "state")}
    child = subprocess.Popen([sys.executable, "-m", "promptloop", "eval", "--agent", "hang",
                              "--fresh"], cwd=repo, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not pids.exists() or not pids.read_text().strip():
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the trial never started"
            time.sleep(0.05)
        agent, sleeper = map(int, pids.read_text().split())
        child.send_signal(signal.SIGINT)
        time.sleep(0.2)
        child.send_signal(signal.SIGINT)  # "Ctrl-C again forces it"
        child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130
    deadline = time.monotonic() + 5
    while (_alive(agent) or _alive(sleeper)) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not _alive(agent) and not _alive(sleeper)
    finally:
        for pid in (agent, sleeper):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
