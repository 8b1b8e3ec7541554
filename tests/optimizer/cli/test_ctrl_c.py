"""Ctrl-C while the proposer works: acknowledged at once, the candidate branch and worktree
removed, the iteration closed as abandoned, and the process gone within 5 s."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

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


def test_ctrl_c_while_the_cli_imports_ends_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C in the first half second (the CLI's imports) printed a 16-frame traceback."""
    import builtins
    import sys

    import promptloop.__main__ as entry

    real = builtins.__import__

    def interrupted(name: str, *args: object, **kw: object) -> object:
        if name == "promptloop.optimizer.cli.app":
            raise KeyboardInterrupt
        return real(name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.delitem(sys.modules, "promptloop.optimizer.cli.app", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(SystemExit) as done:
        entry.run()
    assert done.value.code == 130
    assert capsys.readouterr().err == "Error: interrupted\n"
