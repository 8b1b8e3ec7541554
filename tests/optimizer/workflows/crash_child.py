"""The process the kill matrix (test_kill_matrix.py) kills: one command on the scripted models.

    python -m tests.optimizer.workflows.crash_child cli ARGS...      # the promptloop CLI
    python -m tests.optimizer.workflows.crash_child nightly REPO STATE

`PROMPTLOOP_TEST_KILL_AT=<phase>` in the environment makes the command SIGKILL itself at that
phase (optimizer/core/killpoint.py). The CLI form runs in the current folder, as a user would;
`scripted:proposer` always proposes the good skip rule (and a reworded twin when asked for
several patches).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.workflows.nightly.engine import run_nightly
from tests import policies
from tests.optimizer.workflows.nightly_support import clients, night_config
from tests.optimizer.workflows.test_optimize import GOOD, diff_adding

GOOD_TWIN = diff_adding("Treat an input that is only a greeting, filler or emoji as nothing to "
                        "save: call skip_pkm_organization.")

NIGHT = {"trials": 1, "confirm_trials": 1, "suites": ["pkm_agent"]}
"""The night of the kill matrix: the PKM suites only, one trial per task."""


def propose(req: Request) -> ModelResponse:
    """The good rule; asked for several patches (`--candidates 2`), it and a reworded twin."""
    if "## Patch 2" in req.messages[-1].content:
        return reply(f"## Patch 1\n{GOOD}\n## Patch 2\n{GOOD_TWIN}")
    return reply(GOOD)


def main() -> None:
    SCRIPTED_MODELS.update({
        "pkm": policies.pkm_model,
        "judge": policies.judge_model,
        "proposer": lambda: ScriptedModel(propose, model_id="scripted:proposer"),
    })
    if sys.argv[1] == "nightly":
        repo, state = Path(sys.argv[2]), Path(sys.argv[3])
        asyncio.run(run_nightly(night_config(repo, state, **NIGHT), **clients()))
        return
    from promptloop.optimizer.cli.app import app

    app(sys.argv[2:], prog_name="promptloop")


if __name__ == "__main__":
    main()
