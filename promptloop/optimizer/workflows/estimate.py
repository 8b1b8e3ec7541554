"""Before a command's trials start: how many, how long and (where the price is known) what
they cost, from this agent model's last saved run of each suite.

The figures are per trial of the last run: its agent tokens, and its wall time per trial not
served from the cache (trials run concurrently, so this is what a trial adds to the wait).
Without an earlier run, the embedded model gets a rough figure of its own (it is slow on a
CPU: a silent hour must not surprise anyone) and other models none. Pure reads of the run
store; the command emits the `TrialsEstimated` event and the terminal prints it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from promptloop.agents.llm.types import Usage
from promptloop.optimizer.core.events import TrialsEstimated
from promptloop.optimizer.core.pricing import estimate_cost
from promptloop.optimizer.core.suites import Suite
from promptloop.optimizer.report.store import default_store_dir, list_runs, load_run
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.run.usage import scale_usage

LOCAL_SECONDS_PER_TRIAL = 45.0
"""A trial of a bundled agent on the embedded model (local:smollm2) on an idle 2-core machine,
multi-turn agents included (measured: 3 PKM trials in 145 s; a card trial is faster): the
figure used before any run of the suite was saved."""


def suite_trials(suite: Suite, trials: int | None = None) -> int:
    """Trials one run of `suite` makes (`trials` per task, else each task's own count)."""
    return sum(trials or t.spec.trials_per_run for t in suite.tasks)


def estimate(what: str, agent_model: str, state_dir: Path, suites: Sequence[tuple[Suite, int]],
             *, more: str = "") -> TrialsEstimated:
    """`what`: about N trials (~tokens, ~$ at list prices, ~time), for the (suite, trials)
    pairs given; `more` ends the basis (e.g. "the gate adds trials per iteration")."""
    total = sum(n for _, n in suites)
    store = default_store_dir(state_dir)
    latest: dict[str, str] = {}
    timed: dict[str, str] = {}
    """Suite -> its newest run with a fresh trial (a run served from the trial cache is no
    measure of time: an optimize after an eval must not fall back to the prior)."""
    with contextlib.suppress(Exception):  # an unreadable index just leaves no figure
        for e in list_runs(store):  # oldest first: the last one wins
            if e.agent_model == agent_model and e.num_trials:
                latest[e.suite_name] = e.run_name
                if e.fresh_trials != 0:  # None: indexed before it was kept
                    timed[e.suite_name] = e.run_name
    spend, seconds, measured = Usage(), 0.0, 0
    for suite, n in suites:
        if suite.name not in latest:
            continue
        with contextlib.suppress(Exception):  # an unreadable run just leaves no figure
            run = load_run(store, latest[suite.name])
            u = summarize(run).usage
            used = Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                         cache_read_tokens=u.cache_read_tokens,
                         cache_write_tokens=u.cache_write_tokens)
            spend = spend + scale_usage(used, n / max(1, len(run.trials)))
            fresh = [t for t in run.trials if not t.cached]
            if not fresh and timed.get(suite.name, run.run_name) != run.run_name:
                fresh = [t for t in load_run(store, timed[suite.name]).trials if not t.cached]
            if fresh:
                wall = (max(t.ended_at for t in fresh)
                        - min(t.started_at for t in fresh)).total_seconds()
                seconds += wall / len(fresh) * n
            else:
                seconds += (_prior(agent_model) or 0.0) * n
            measured += 1
    tail = f"; {more}" if more else ""
    if not measured:
        prior = _prior(agent_model)
        if prior:
            return TrialsEstimated(
                what=what, trials=total, usd=0.0, seconds=prior * total,
                basis=f"~{prior:.0f} s a trial on the embedded model with 2 idle cores, less "
                f"for trials in the cache{tail}")
        return TrialsEstimated(what=what, trials=total,
                               basis=f"no earlier run of these suites to time and price them "
                               f"by{tail}")
    tokens = spend.input_tokens + spend.output_tokens
    usd = estimate_cost(agent_model, spend).usd
    return TrialsEstimated(
        what=what, trials=total, tokens=tokens, usd=usd, seconds=seconds or None,
        basis=f"agent tokens and time per trial of the last run of {measured} of "
        f"{len(suites)} suite(s), judges not counted, cached trials take less{tail}")


def _prior(agent_model: str) -> float | None:
    return LOCAL_SECONDS_PER_TRIAL if agent_model.startswith("local:") else None


__all__ = ["LOCAL_SECONDS_PER_TRIAL", "estimate", "suite_trials"]
