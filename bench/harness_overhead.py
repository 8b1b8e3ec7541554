"""Harness overhead: wall time / ideal time of a full suite run (run by hand, not in CI).

Runs a bundled suite with the prompt-sensitive scripted policies of tests/policies.py, each
model call (agent and judge) sleeping a fixed latency, at several concurrency levels. Each
trial's critical path is its sequential agent calls plus one judge round (judge graders of a
trial run concurrently), in model seconds. Two ideals:

- ideal (schedule): the makespan of the same trials started in suite order on `concurrency`
  slots with zero harness cost (what a perfect harness with this semaphore achieves);
- bound: max(total model time / concurrency, longest trial), a lower bound no scheduler beats.

Target: wall / ideal(schedule) <= 1.10 at concurrency 16.

    .venv/bin/python bench/harness_overhead.py [--latency 0.05] [--concurrency 1 4 16]
        [--suite card_agent/capability --suite pkm_agent/capability] [--profile 16]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import cProfile
import heapq
import pstats
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promptloop.agents.llm.scripted import Request, ScriptedModel
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.core.suites import TASKS_DIR, Suite, load_suite
from promptloop.optimizer.run.runner import RunOptions, run_suite
from tests import policies

_TRIAL: contextvars.ContextVar[int | None] = contextvars.ContextVar("trial", default=None)


@dataclass
class CallLog:
    """Model calls per trial (a trial = one runner task; its context carries the trial id)."""

    latency: float
    agent: Counter[int] = field(default_factory=Counter)
    judge: Counter[int] = field(default_factory=Counter)
    order: list[int] = field(default_factory=list)
    _next: int = 0

    def agent_model(self, policy: Callable[[Request], ModelResponse]) -> ScriptedModel:
        async def answer(req: Request) -> ModelResponse:
            trial = _TRIAL.get()
            if trial is None:  # first call of this trial: tag the trial's context
                self._next += 1
                trial = self._next
                _TRIAL.set(trial)
                self.order.append(trial)
            self.agent[trial] += 1
            await asyncio.sleep(self.latency)
            return policy(req)

        return ScriptedModel(answer)

    def judge_model(self) -> ScriptedModel:
        async def answer(req: Request) -> ModelResponse:
            trial = _TRIAL.get()
            assert trial is not None, "judge called outside a trial"
            self.judge[trial] += 1
            await asyncio.sleep(self.latency)
            return policies.judge_policy(req)

        return ScriptedModel(answer)

    def chains(self) -> list[float]:
        """Critical path of each trial in start order (model seconds)."""
        return [(self.agent[t] + (1 if self.judge[t] else 0)) * self.latency for t in self.order]


def schedule_makespan(chains: list[float], slots: int) -> float:
    """Greedy list scheduling in order: each trial starts on the first free slot."""
    free = [0.0] * slots
    end = 0.0
    for c in chains:
        start = heapq.heappop(free)
        heapq.heappush(free, start + c)
        end = max(end, start + c)
    return end


async def one_run(
    suite: Suite, latency: float, concurrency: int, state: Path
) -> tuple[float, CallLog]:
    log = CallLog(latency)
    policy = policies.card_policy if suite.agent_name == "card_agent" else policies.pkm_policy
    options = RunOptions(
        agent_model=f"scripted:{suite.agent_name}",
        judge_model="scripted:judge",
        concurrency=concurrency,
        state_dir=state,
        reuse=False,
    )
    t0 = time.perf_counter()
    run = await run_suite(suite, options, log.agent_model(policy), log.judge_model())
    wall = time.perf_counter() - t0
    assert not any(t.status == "errored" for t in run.trials), "a trial errored"
    return wall, log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--suite", action="append", help="tasks/<agent>/<kind> (repeat)")
    parser.add_argument("--profile", type=int, metavar="C", help="cProfile the run at C")
    args = parser.parse_args()
    suites = [
        load_suite(TASKS_DIR / s)
        for s in args.suite or ["card_agent/capability", "pkm_agent/capability"]
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="promptloop-bench-") as tmp:
        for suite in suites:
            for c in args.concurrency:
                state = Path(tmp) / f"{suite.name}-{c}"
                profiler = cProfile.Profile() if args.profile == c else None
                if profiler:
                    profiler.enable()
                wall, log = asyncio.run(one_run(suite, args.latency, c, state))
                if profiler:
                    profiler.disable()
                    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
                chains = log.chains()
                ideal = schedule_makespan(chains, c)
                bound = max(sum(chains) / c, max(chains))
                calls = sum(log.agent.values()) + sum(log.judge.values())
                rows.append((suite.name, c, len(chains), calls, wall, ideal, bound))
    print(f"harness overhead, latency {args.latency * 1000:.0f} ms per model call")
    print(
        f"{'suite':24s} {'conc':>4s} {'trials':>6s} {'calls':>5s} {'wall s':>7s} "
        f"{'ideal s':>7s} {'bound s':>7s} {'wall/ideal':>10s} {'wall/bound':>10s}"
    )
    for name, c, n, calls, wall, ideal, bound in rows:
        flag = "  (target <= 1.10)" if c == 16 else ""
        print(
            f"{name:24s} {c:4d} {n:6d} {calls:5d} {wall:7.2f} {ideal:7.2f} {bound:7.2f} "
            f"{wall / ideal:10.3f} {wall / bound:10.3f}{flag}"
        )


if __name__ == "__main__":
    main()
