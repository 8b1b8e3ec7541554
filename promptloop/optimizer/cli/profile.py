"""`promptloop profile`: extra baseline trials where the gate's records are too short or too
ambiguous to decide, ranked by how much they would change future decisions."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from pydantic import ValidationError

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import (
    AgentModelOpt,
    BaseUrlOpt,
    ConcurrencyOpt,
    EventsOpt,
    JsonOpt,
    JudgeModelOpt,
    StateOpt,
    agent_models,
    listening,
)
from promptloop.optimizer.cli.util import guarded, option_errors, require_repo
from promptloop.optimizer.workflows.context import DEFAULT_AGENT_MODEL, ConfigError


def profile(
    agent: Annotated[str, typer.Option(
        "--agent", envvar=["PROMPTLOOP_AGENT", "PROMPTLOOP_SUITE"], metavar="AGENT",
        help="The agent whose suites' records to grow (an [agents.<name>] of promptloop.toml).")],
    budget: Annotated[int, typer.Option(
        "--budget", min=0, help="Extra baseline trials to spend over all its suites.")] = 40,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Rank the tasks and show the plan; run nothing.")] = False,
    ref: Annotated[str, typer.Option(
        "--ref", metavar="REF", help="Git ref whose prompt and suites to profile.")] = "HEAD",
    agent_model: AgentModelOpt = DEFAULT_AGENT_MODEL,
    judge_model: JudgeModelOpt = None,
    base_url: BaseUrlOpt = None,
    concurrency: ConcurrencyOpt = None,
    state_dir: StateOpt = None,
    events: EventsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Grow the records the gate judges each task against, where it pays most.

    Reads every earlier run of the agent's suites with this prompt and agent model (the
    lineage the gate reads as each task's record), ranks the tasks by how undecided their
    record leaves the gate's question "can this task lose the drop?" (in bits; a record under
    10 trials counts as a full bit) and runs --budget baseline trials on the top ones, saved
    as an ordinary run that the next optimize, nightly or review reads as history.

    Exit codes: 0 done (also: nothing worth profiling), 1 usage or configuration error,
    2 infrastructure failure."""
    flags = dict(locals())

    def body() -> None:
        from promptloop.optimizer.workflows.context import check_command
        from promptloop.optimizer.workflows.context import state_dir as resolve_state
        from promptloop.optimizer.workflows.profile import ProfileConfig
        from promptloop.optimizer.workflows.profile import profile as run_profile

        if flags["agent"]:
            check_command(flags["agent"])  # a command that cannot start, before any trial
        picked = agent_models(flags["agent"], flags)  # the agent table's model and judge
        try:
            config = ProfileConfig.model_validate({
                "agent": flags["agent"], "budget": flags["budget"],
                "dry_run": flags["dry_run"], "ref": flags["ref"],
                "agent_model": picked.get("agent_model", flags["agent_model"]),
                "judge_model": picked.get("judge_model", flags["judge_model"]),
                "base_url": flags["base_url"], "concurrency": flags["concurrency"],
                "repo": require_repo("profile"), "state_dir": resolve_state(flags["state_dir"]),
            })
        except ValidationError as err:
            raise ConfigError(option_errors(err)) from None
        with listening(events, quiet=as_json) as emit:
            result = asyncio.run(run_profile(config, emit))
        if as_json:
            ui.print_json(result.model_dump(mode="json"))
            return
        ui.table(f"Profile of {result.agent} ({result.lineage_runs} lineage run(s), "
                 f"budget {result.budget})",
                 ["suite", "bucket", "task", "record", "class", "bits", "trials"],
                 [[r.suite, r.bucket, r.task_id, r.record, r.record_class, f"{r.value_bits:.2f}",
                   r.trials] for r in result.rows])
        if result.run_names:
            ui.info(f"Ran {result.trials_run} baseline trial(s): {', '.join(result.run_names)}")
        elif not result.rows and result.budget == 0:
            ui.info("--budget 0: nothing to run (give the trials to spend, e.g. --budget 40).")
        elif not result.rows:
            ui.info("Every task's record already decides the gate's question: nothing to run.")

    guarded(body)
