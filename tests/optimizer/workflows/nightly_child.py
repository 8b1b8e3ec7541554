"""A night run in a child process that SIGKILLs itself mid-iteration (for the resume test).

Usage: python -m tests.optimizer.workflows.nightly_child REPO STATE MARKER [baseline]. The
agent kills the process (kill -9, no cleanup of any kind) the first time it is asked to act
under a candidate prompt holding the good rule, i.e. in the middle of evaluating the second PKM
iteration; with `baseline`, at its first call (the first suite's baseline).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from promptloop.agents.llm.scripted import Request, ScriptedModel
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.workflows.nightly.engine import run_nightly
from tests import policies
from tests.optimizer.workflows.nightly_support import agent_policy, clients, night_config


def main() -> None:
    repo, state, marker = (Path(a) for a in sys.argv[1:4])
    at_baseline = sys.argv[4:5] == ["baseline"]

    def killing(req: Request) -> ModelResponse:
        due = at_baseline or policies.GOOD_SKIP_RULE in req.messages[0].content.lower()
        if due and not marker.exists():
            marker.write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)
        return agent_policy(req)

    agent = ScriptedModel(killing, model_id="scripted:night-agent")
    config = night_config(repo, state, trials=1, confirm_trials=1)
    asyncio.run(run_nightly(config, **clients(agent)))


if __name__ == "__main__":
    main()
