"""SIGTERM (a scheduler ending an unattended night) stops a command as Ctrl-C does: clean-up
runs, exit 143, and `--json` still prints its one envelope on stdout."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.optimizer.cli.stopping import start_until_asked, stop
from tests.optimizer.workflows.test_optimize import _git


def test_sigterm_during_a_night_exits_143_with_the_envelope(
    repo: Path, state: Path, tmp_path: Path
) -> None:
    child = start_until_asked(
        repo, tmp_path / "asked",
        ["nightly", "--agent", "pkm_agent", "--iterations", "1", "--max-buckets", "1",
         "--trials", "1", "--agent-model", "scripted:pkm", "--proposer-model",
         "scripted:proposer", "--judge-model", "scripted:judge", "--state-dir", str(state),
         "--json"])
    out, err, took = stop(child, signal.SIGTERM)
    assert child.returncode == 143, err
    assert took < 10, f"{took:.1f}s"
    doc = json.loads(out)
    assert doc["command"] == "nightly" and doc["ok"] is False and doc["exit_code"] == 143
    assert doc["error"]["kind"] == "interrupted"
    assert "terminated (SIGTERM)" in doc["error"]["message"]
    stopped = doc["result"]  # which night, and where its checkpoint is
    assert stopped["status"] == "stopped" and stopped["steps_done"]
    assert Path(stopped["checkpoint"]).is_file()
    assert "`promptloop nightly --resume` continues it" in " ".join(err.split())
    assert "Traceback" not in err
    assert _git(repo, "branch", "--list", "promptloop/*").strip() == ""  # cleaned up
    assert _git(repo, "worktree", "list").count("\n") == 1
    [night] = list((state / "nightly").iterdir())
    cp = json.loads((night / "checkpoint.json").read_text())
    assert cp["status"] == "stopped" and cp["steps"], cp  # resumable, baselines kept
    # the summary is written on a stop too (docs/nightly.md), and the envelope names it
    summary = json.loads((night / "summary.json").read_text())
    assert summary["status"] == "stopped" and "--resume" in summary["stop_reason"]
    assert set(stopped["paths"]) == {"json", "md", "html"}
    assert "**Status: stopped**" in (night / "summary.md").read_text()
    # stopped, not killed: what the interrupted iteration spent was metered, so a resume
    # charges that rather than the step's worst-case estimate
    assert cp["pending"]["metered"] is not None, cp["pending"]
