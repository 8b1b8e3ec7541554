"""Test-only crash points: where the kill-matrix test SIGKILLs a run to check what it leaves.

`kill_point("gate")` does nothing unless the environment variable `PROMPTLOOP_TEST_KILL_AT`
names that phase; then the process sends itself SIGKILL, which no handler, `finally` block or
atexit hook survives (the same as `kill -9` or the OOM killer). `phase@n` kills at the n-th
time the phase is reached in this process (`checkpoint@3`: the third nightly checkpoint).
The variable is for tests (tests/optimizer/workflows/test_kill_matrix.py); nothing else sets
it, and it is read only here.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable

KILL_VAR = "PROMPTLOOP_TEST_KILL_AT"
PHASES = (
    "baseline",
    "package",
    "proposal",
    "guards",
    "worktree",
    "screen",
    "candidate",
    "gate",
    "branch_commit",
    "ledger_write",
    "checkpoint",
    "review",
)
_reached: Counter[str] = Counter()


def kill_point(phase: str, last_words: Callable[[], object] | None = None) -> None:
    """SIGKILL this process here when `$PROMPTLOOP_TEST_KILL_AT` asks for `phase` (test-only).

    `last_words` runs just before the kill (the ledger uses it to leave a torn line)."""
    wanted = os.environ.get(KILL_VAR)
    if not wanted:
        return
    name, _, nth = wanted.partition("@")
    if name != phase:
        return
    _reached[phase] += 1
    if _reached[phase] != (int(nth) if nth.isdigit() else 1):
        return
    if last_words is not None:
        last_words()
    os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["KILL_VAR", "PHASES", "kill_point"]
