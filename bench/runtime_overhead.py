"""Agent-runtime overhead per turn with a zero-latency scripted model (run by hand, not in CI).

Runs the real Card and PKM agents in temporary workspaces; the scripted model answers instantly,
so everything measured is harness time: message building, tool validation and execution,
transcript recording, completion checks. Target: under 5 ms per turn excluding model time.

    .venv/bin/python bench/runtime_overhead.py [--repeats 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promptloop.agents.base import AgentInput, load_prompt, prepare_workspace
from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.agents.runtime import run_agent
from promptloop.agents.workspace import Workspace
from promptloop.optimizer.run.agents import get_agent

FACT = "2026/03/14.md#ts_1"
PUBLISHED = datetime(2026, 3, 14, 9, 30)


def card_script(_req: Request) -> ModelResponse:
    return reply(
        "",
        call(
            "save_timeline_card",
            fact_id=FACT,
            title="Standup",
            ui_configs=[{"template_id": "event", "data": {"start_time": "2026-03-19T10:30:00"}}],
        ),
    )


def pkm_script(req: Request) -> ModelResponse:
    n = sum(1 for m in req.messages if m.role == "assistant")
    steps = [
        reply("", call("LS", path="/")),
        reply("", call("Read", file_path="/Areas/notes.md")),
        reply(
            "",
            call(
                "Edit",
                file_path="/Areas/notes.md",
                old_string="# Notes",
                new_string=f"# Notes\n\n- standup moved <!-- fact_id: {FACT} -->",
            ),
        ),
        reply(
            "",
            call(
                "update_timeline_card_insight",
                fact_id=FACT,
                insight_text="Standups keep moving to Thursdays.",
            ),
        ),
    ]
    return steps[min(n, len(steps) - 1)]


async def measure(agent: str, repeats: int) -> tuple[float, float, int]:
    per_turn: list[float] = []
    turns_total = 0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            ws = Workspace(Path(tmp))
            (ws.pkm / "Areas").mkdir(parents=True)
            (ws.pkm / "Areas" / "notes.md").write_text("# Notes\n", encoding="utf-8")
            inp = AgentInput(FACT, "Standup with the eval team Thursday 10:30am, Zoom", PUBLISHED)
            prepare_workspace(ws, inp)
            session = get_agent(agent)(ws, inp, load_prompt(agent))
            model = ScriptedModel(card_script if agent == "card_agent" else pkm_script)
            t0 = time.perf_counter()
            t = await run_agent(model, session)
            elapsed = time.perf_counter() - t0 - t.metrics.model_seconds
            assert t.completed, t.missing_requirements
            per_turn.append(elapsed / t.metrics.n_turns)
            turns_total += t.metrics.n_turns
    return statistics.median(per_turn) * 1000, max(per_turn) * 1000, turns_total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    for agent in ("card_agent", "pkm_agent"):
        median, worst, turns = asyncio.run(measure(agent, args.repeats))
        verdict = "OK" if median < 5.0 else "OVER TARGET"
        print(
            f"{agent:10s} turns={turns:5d} overhead/turn median={median:.3f} ms "
            f"max={worst:.3f} ms  target<5 ms: {verdict}"
        )


if __name__ == "__main__":
    main()
