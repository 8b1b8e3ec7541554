"""The process the kill matrix (test_kill_matrix.py) kills: one command on the scripted models.

    python -m tests.optimizer.workflows.crash_child cli ARGS...      # the promptloop CLI
    python -m tests.optimizer.workflows.crash_child nightly REPO STATE

`PROMPTLOOP_TEST_KILL_AT=<phase>` in the environment makes the command SIGKILL itself at that
phase (optimizer/core/killpoint.py). The CLI form runs in the current folder, as a user would;
`scripted:proposer` always proposes the good skip rule.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agents.llm.registry import SCRIPTED_MODELS
from agents.llm.scripted import ScriptedModel, reply
from optimizer.workflows.nightly.engine import run_nightly
from tests import policies
from tests.optimizer.workflows.nightly_support import clients, night_config
from tests.optimizer.workflows.test_optimize import GOOD

NIGHT = {"trials": 1, "confirm_trials": 1, "suites": ["pkm_agent"]}
"""The night of the kill matrix: the PKM suites only, one trial per task."""


def main() -> None:
    SCRIPTED_MODELS.update({
        "pkm": policies.pkm_model,
        "judge": policies.judge_model,
        "proposer": lambda: ScriptedModel(lambda _req: reply(GOOD), model_id="scripted:proposer"),
    })
    if sys.argv[1] == "nightly":
        repo, state = Path(sys.argv[2]), Path(sys.argv[3])
        asyncio.run(run_nightly(night_config(repo, state, **NIGHT), **clients()))
        return
    from optimizer.cli.app import app

    app(sys.argv[2:], prog_name="promptloop")


if __name__ == "__main__":
    main()
