"""`promptloop optimize`: propose, guard and evaluate prompt patches for one failure bucket."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from agents.runtime import DEFAULT_MAX_TURNS
from optimizer.cli import ui
from optimizer.cli.common import (
    AgentModelOpt,
    BaseUrlOpt,
    ConcurrencyOpt,
    ConfirmTrialsOpt,
    EventsOpt,
    JsonOpt,
    JudgeModelOpt,
    MinImprovementOpt,
    ProposerModelOpt,
    RegressionToleranceOpt,
    StateOpt,
    TrialsOpt,
    listening,
)
from optimizer.cli.util import guarded, option_errors
from optimizer.core.config import DEFAULT_AGENT_MODEL, ConfigError
from optimizer.core.names import agent_names

if TYPE_CHECKING:
    from optimizer.workflows.optimize import OptimizeConfig

Opt = typer.Option


SuiteOpt = Annotated[
    str, Opt("--suite", envvar="PROMPTLOOP_SUITE", help=f"{' or '.join(agent_names())}.")
]
BucketOpt = Annotated[
    str, Opt("--bucket", envvar="PROMPTLOOP_BUCKET", help="The failure bucket to improve.")
]
IterationsOpt = Annotated[
    int, Opt(min=1, envvar="PROMPTLOOP_ITERATIONS", help="Proposals to try at most.")
]
BaseOpt = Annotated[
    str, Opt(envvar="PROMPTLOOP_BASE", help="Git ref whose prompt is the baseline.")
]
MaxChangedLinesOpt = Annotated[
    int, Opt(min=1, envvar="PROMPTLOOP_MAX_CHANGED_LINES", help="Refuse bigger patches.")
]
KeepRejectedOpt = Annotated[
    bool, Opt(envvar="PROMPTLOOP_KEEP_REJECTED", help="Keep branches of rejected proposals.")
]
ProposerCmdOpt = Annotated[
    str | None,
    Opt(
        envvar="PROMPTLOOP_PROPOSER_CMD",
        help="External coding agent run in the candidate worktree (env PROMPTLOOP_PACKAGE, "
        "PROMPTLOOP_PROMPT_FILE); its git diff is the proposal.",
    ),
]
ProposerFormatOpt = Annotated[
    str,
    Opt(
        envvar="PROMPTLOOP_PROPOSER_FORMAT",
        help="auto | diff | edits (JSON edits under a schema, for weak models).",
    ),
]
SuitesOpt = Annotated[
    str,
    Opt(
        "--suites",
        envvar="PROMPTLOOP_SUITES",
        help="Comma-separated suite folders under tasks/<agent>/ that form the gate.",
    ),
]
MaxTurnsOpt = Annotated[int, Opt(min=1, envvar="PROMPTLOOP_MAX_TURNS", help="Agent turns per run.")]
MaxRunsOpt = Annotated[int, Opt(min=1, envvar="PROMPTLOOP_MAX_RUNS", help="Agent runs per trial.")]
MaxTrialsOpt = Annotated[
    int,
    Opt(
        "--max-trials",
        min=1,
        envvar="PROMPTLOOP_MAX_TRIALS",
        help="Trials per task the sequential gate may reach before it stops undecided.",
    ),
]


def optimize(
    suite: SuiteOpt,
    bucket: BucketOpt,
    iterations: IterationsOpt = 3,
    trials: TrialsOpt = None,
    proposer_model: ProposerModelOpt = None,
    agent_model: AgentModelOpt = DEFAULT_AGENT_MODEL,
    judge_model: JudgeModelOpt = None,
    base_url: BaseUrlOpt = None,
    base: BaseOpt = "HEAD",
    max_changed_lines: MaxChangedLinesOpt = 40,
    keep_rejected: KeepRejectedOpt = False,
    proposer_cmd: ProposerCmdOpt = None,
    proposer_format: ProposerFormatOpt = "auto",
    concurrency: ConcurrencyOpt = None,
    confirm_trials: ConfirmTrialsOpt = 2,
    suites: SuitesOpt = "capability,regression",
    max_turns: MaxTurnsOpt = DEFAULT_MAX_TURNS,
    max_runs: MaxRunsOpt = 4,
    min_improvement: MinImprovementOpt = 0.05,
    regression_tolerance: RegressionToleranceOpt = 0.35,
    max_trials: MaxTrialsOpt = 8,
    out: StateOpt = None,
    events: EventsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Propose, check and evaluate minimal prompt patches for one failure bucket.

    Runs the baseline (reusing cached trials), packages the bucket's failing trials for the
    proposer, refuses unsafe patches before evaluation, evaluates each candidate on its own git
    branch (your checkout is never touched) and keeps it only if the target bucket improves and
    no bucket regresses. Exit 0 when done (accepted or not, or nothing to do)."""
    flags = dict(locals())  # the options by name; most are fields of OptimizeConfig

    def body() -> None:
        from optimizer.workflows.optimize import optimize as run_optimize

        config = _config(flags)
        with listening(events, quiet=as_json) as emit:
            result = asyncio.run(run_optimize(config, on_event=emit))
        if as_json:
            ui.print_json(result.model_dump(mode="json"))
        else:
            ui.show_optimize(result)
            if config.agent_model.startswith("local:"):
                ui.info(ui.LOCAL_HINT)

    guarded(body)


def _config(flags: dict[str, Any]) -> OptimizeConfig:
    from optimizer.gate.compare import GatePolicy
    from optimizer.git import repo_root, state_dir
    from optimizer.workflows.optimize import OptimizeConfig

    root = repo_root()
    if root is None:
        raise ConfigError("optimize needs a git repository (run it inside your prompt repo)")
    fields = {k: v for k, v in flags.items() if k in OptimizeConfig.model_fields}
    try:
        return OptimizeConfig.model_validate(
            fields
            | {
                "kinds": tuple(k.strip() for k in flags["suites"].split(",") if k.strip()),
                "policy": GatePolicy(
                    min_improvement=flags["min_improvement"],
                    regression_tolerance=flags["regression_tolerance"],
                    max_trials=flags["max_trials"],
                    round_trials=max(1, flags["confirm_trials"]),
                ),
                "repo": root,
                "state_dir": state_dir(flags["out"]),
            }
        )
    except ValidationError as err:
        raise ConfigError(option_errors(err)) from None
