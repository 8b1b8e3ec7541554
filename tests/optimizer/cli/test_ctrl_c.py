"""Ctrl-C while the proposer works: acknowledged at once, the candidate branch and worktree
removed, the iteration closed as abandoned, and the process gone within 5 s."""

from __future__ import annotations

import signal
from pathlib import Path

from promptloop.optimizer.core.ledger import Ledger
from tests.optimizer.cli.stopping import start_until_asked, stop
from tests.optimizer.workflows.test_optimize import _git


def test_ctrl_c_while_the_proposer_works_stops_within_5_s(
    repo: Path, state: Path, tmp_path: Path
) -> None:
    child = start_until_asked(
        repo, tmp_path / "asked",
        ["optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial", "--iterations", "1",
         "--agent-model", "scripted:pkm", "--proposer-model", "scripted:proposer",
         "--proposer-format", "diff", "--state-dir", str(state)],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert _git(repo, "branch", "--list", "promptloop/*").strip()  # the candidate's
    _, err, took = stop(child, signal.SIGINT)
    assert child.returncode == 130, err
    assert took < 5, f"{took:.1f}s"
    lines = err.splitlines()
    assert ("stopping: cleaning up (a candidate's branch and worktree, if any)... (Ctrl-C "
            "again forces it)") in lines
    assert lines.index(next(x for x in lines if x.startswith("stopping: "))) < \
        lines.index("Error: interrupted")
    assert "Error" not in err.replace("Error: interrupted", "")  # no class name, no traceback
    assert _git(repo, "branch", "--list", "promptloop/*").strip() == ""
    assert _git(repo, "worktree", "list").count("\n") == 1
    [entry] = Ledger(state / "ledger.jsonl").entries()
    assert entry.outcome == "abandoned"
    assert entry.reasons == ["interrupted (Ctrl-C or a stop signal)"]
