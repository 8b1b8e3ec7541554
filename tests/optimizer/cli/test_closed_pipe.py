"""`promptloop ... | head`: a reader that closes stdout early ends the command quietly with
141 (128 + SIGPIPE, as git and ls end), never rich's or click's exit 1, which reads as a user
error, and never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("args", [["--help"], ["optimize", "--help"], ["suites"],
                                  ["help", "review"]])
def test_a_closed_stdout_ends_the_command_quietly_with_141(
    args: list[str], tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    proc = subprocess.Popen([sys.executable, "-m", "promptloop", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line: every write fails
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "Error" not in err and "Exception" not in err, err
