"""The process test_ctrl_c.py stops with Ctrl-C: `promptloop ARGS...` (the console script's
entry point) on the scripted models, whose proposer writes $STOP_CHILD_MARKER and then works
for an hour."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel
from promptloop.agents.llm.types import ModelResponse
from tests import policies


async def think(_req: Request) -> ModelResponse:
    Path(os.environ["STOP_CHILD_MARKER"]).write_text("asked")
    await asyncio.sleep(3600)
    raise AssertionError("never answers")


def main() -> None:
    SCRIPTED_MODELS.update({
        "pkm": policies.pkm_model,
        "judge": policies.judge_model,
        "proposer": lambda: ScriptedModel(think, model_id="scripted:proposer"),
    })
    from promptloop.optimizer.cli.app import main as promptloop

    sys.argv = ["promptloop", *sys.argv[1:]]
    promptloop()


if __name__ == "__main__":
    main()
