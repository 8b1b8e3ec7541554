"""`promptloop optimize`: propose, guard and evaluate prompt patches for one failure bucket."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from promptloop.agents.runtime import DEFAULT_MAX_TURNS
from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import (
    GATE,
    AgentModelOpt,
    AllOpt,
    BaseUrlOpt,
    ConcurrencyOpt,
    EventsOpt,
    HarmSensitivity,
    HarmSensitivityOpt,
    JsonOpt,
    JudgeModelOpt,
    MaxRunsOpt,
    MaxTurnsOpt,
    MinImprovementOpt,
    PromptOpt,
    ProposerModelOpt,
    RegressionToleranceOpt,
    RunLog,
    StateOpt,
    TrialsOpt,
    VerboseOpt,
    agent_models,
    listening,
    need_agent,
)
from promptloop.optimizer.cli.common import AgentOpt as AgentNameOpt
from promptloop.optimizer.cli.eval import split_agent_suite, warn_unused_base_url
from promptloop.optimizer.cli.report import compare_command
from promptloop.optimizer.cli.util import EXIT_INFRA, guarded, option_errors, require_repo
from promptloop.optimizer.gate.policy import GatePolicy
from promptloop.optimizer.workflows.context import (
    DEFAULT_AGENT_MODEL,
    ConfigError,
    agent_names,
)

if TYPE_CHECKING:
    from promptloop.optimizer.workflows.optimize import OptimizeConfig, OptimizeResult

Opt = typer.Option
PROPOSER = "Proposer"

POLICY = GatePolicy()
"""Every gate default of the options below (`tests` check they equal GatePolicy's)."""
SENSITIVITY = HarmSensitivity(POLICY.harm_sensitivity)


class ProposerFormat(StrEnum):
    auto = "auto"
    diff = "diff"
    edits = "edits"


SuiteOpt = Annotated[str | None, Opt(
    "--suite", envvar="PROMPTLOOP_SUITE", metavar="SUITE",
    help="The agent whose prompt to improve (all its suites form the gate), or one of its "
    "suites (pkm_agent/quickstart).")]
BucketOpt = Annotated[str, Opt(
    "--bucket", envvar="PROMPTLOOP_BUCKET", metavar="BUCKET",
    help="The failure bucket to improve (regression/<name> for a regression suite's).")]
BaseOpt = Annotated[str, Opt(
    envvar="PROMPTLOOP_BASE", metavar="REF", help="Git ref whose prompt is the baseline.")]
IterationsOpt = Annotated[int, Opt(
    min=1, envvar="PROMPTLOOP_ITERATIONS", help="Proposals to try at most.")]
CandidatesOpt = Annotated[int, Opt(
    min=1, max=16, envvar="PROMPTLOOP_CANDIDATES", rich_help_panel=PROPOSER,
    help="Patches asked per iteration; with more than one they are screened on the visible "
    "target tasks (successive halving) and only the winner goes to the gate, on fresh "
    "trials.")]
ProposerCmdOpt = Annotated[str | None, Opt(
    envvar="PROMPTLOOP_PROPOSER_CMD", metavar="CMD", rich_help_panel=PROPOSER,
    help="External coding agent run in a sandboxed copy of the repository (env "
    "PROMPTLOOP_PACKAGE, PROMPTLOOP_PROMPT_FILE); the prompt file it leaves is the proposal.")]
ProposerEnvOpt = Annotated[list[str] | None, Opt(
    "--proposer-env", envvar="PROMPTLOOP_PROPOSER_ENV", metavar="NAME", rich_help_panel=PROPOSER,
    help="Pass this environment variable to --proposer-cmd (repeatable; e.g. the provider key "
    "the agent needs). By default it gets only PATH and the locale, in a throwaway copy.")]
ProposerFormatOpt = Annotated[ProposerFormat, Opt(
    envvar="PROMPTLOOP_PROPOSER_FORMAT", rich_help_panel=PROPOSER,
    help="A unified diff, or JSON edits under a schema (for weak models); auto picks edits "
    "for the embedded model.")]
MaxChangedLinesOpt = Annotated[int, Opt(
    min=1, envvar="PROMPTLOOP_MAX_CHANGED_LINES", rich_help_panel=PROPOSER,
    help="Refuse bigger patches.")]
KeepRejectedOpt = Annotated[bool, Opt(
    envvar="PROMPTLOOP_KEEP_REJECTED", rich_help_panel=PROPOSER,
    help="Keep branches of rejected proposals.")]
SuitesOpt = Annotated[str, Opt(
    "--suites", envvar="PROMPTLOOP_SUITES", metavar="KINDS", rich_help_panel=GATE, hidden=True,
    help="Comma-separated suite folders under tasks/<agent>/ that form the gate.")]
RoundTrialsOpt = Annotated[int, Opt(
    "--round-trials", min=1, envvar=["PROMPTLOOP_ROUND_TRIALS", "PROMPTLOOP_CONFIRM_TRIALS"],
    rich_help_panel=GATE,
    help="Trials added per task and side in each round of the sequential gate (the target "
    "while undecided, suspected regressions until confirmed).")]
MaxTrialsOpt = Annotated[int, Opt(
    "--max-trials", min=1, envvar="PROMPTLOOP_MAX_TRIALS", rich_help_panel=GATE,
    help="Trials per task the sequential gate may reach before it stops undecided.")]


CONFIG_OPTIONS = ("bucket", "prompt", "base", "iterations", "candidates", "agent_model",
                  "proposer_model", "judge_model", "base_url", "proposer_cmd",
                  "max_changed_lines", "keep_rejected", "trials", "concurrency", "max_turns",
                  "max_runs")
"""Options passed to OptimizeConfig's field of the same name (tests/optimizer/cli checks each
is a field and that every other option is read by name below)."""


def optimize(
    bucket: BucketOpt,
    suite: SuiteOpt = None,
    agent: AgentNameOpt = None,
    prompt: PromptOpt = None,
    base: BaseOpt = "HEAD",
    iterations: IterationsOpt = 3,
    candidates: CandidatesOpt = 1,
    agent_model: AgentModelOpt = DEFAULT_AGENT_MODEL,
    proposer_model: ProposerModelOpt = None,
    judge_model: JudgeModelOpt = None,
    base_url: BaseUrlOpt = None,
    proposer_cmd: ProposerCmdOpt = None,
    proposer_env: ProposerEnvOpt = None,
    proposer_format: ProposerFormatOpt = ProposerFormat.auto,
    max_changed_lines: MaxChangedLinesOpt = 40,
    keep_rejected: KeepRejectedOpt = False,
    suites: SuitesOpt = "capability,regression",
    min_improvement: MinImprovementOpt = POLICY.min_improvement,
    regression_tolerance: RegressionToleranceOpt = POLICY.regression_tolerance,
    harm_sensitivity: HarmSensitivityOpt = SENSITIVITY,
    round_trials: RoundTrialsOpt = POLICY.round_trials,
    max_trials: MaxTrialsOpt = POLICY.max_trials,
    trials: TrialsOpt = None,
    concurrency: ConcurrencyOpt = None,
    max_turns: MaxTurnsOpt = DEFAULT_MAX_TURNS,
    max_runs: MaxRunsOpt = 4,
    state_dir: StateOpt = None,
    events: EventsOpt = None,
    as_json: JsonOpt = False,
    every_bucket: AllOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Propose, check and evaluate minimal prompt patches for one failure bucket.

    Runs the baseline (reusing cached trials), packages the bucket's failing trials for the
    proposer, refuses unsafe patches before evaluation, evaluates each candidate on its own git
    branch (your checkout is never touched) and keeps it only if the target bucket improves and
    no bucket regresses. Exit 0 when done (accepted or not, or nothing to do); 2 when an
    iteration ended in error (the proposer, its command or a model failed)."""
    flags: dict[str, Any] = {  # every option by name (a test checks none is left out)
        "bucket": bucket, "suite": suite, "agent": agent, "prompt": prompt, "base": base,
        "iterations": iterations, "candidates": candidates, "agent_model": agent_model,
        "proposer_model": proposer_model, "judge_model": judge_model, "base_url": base_url,
        "proposer_cmd": proposer_cmd, "proposer_env": proposer_env,
        "proposer_format": proposer_format, "max_changed_lines": max_changed_lines,
        "keep_rejected": keep_rejected, "suites": suites, "min_improvement": min_improvement,
        "regression_tolerance": regression_tolerance, "harm_sensitivity": harm_sensitivity,
        "round_trials": round_trials, "max_trials": max_trials, "trials": trials,
        "concurrency": concurrency, "max_turns": max_turns, "max_runs": max_runs,
        "state_dir": state_dir, "events": events, "as_json": as_json,
        "every_bucket": every_bucket, "verbose": verbose,
    }
    need_agent(agent, suite)

    def body() -> None:
        from promptloop.optimizer.workflows.optimize import optimize as run_optimize

        config = _config(flags)
        warn_unused_base_url(config.base_url, config.agent_model, config.proposer_model,
                             config.judge_model)
        runs = RunLog()
        with listening(events, quiet=as_json, runs=runs) as emit:
            result = asyncio.run(ui.acknowledged(
                run_optimize(config, on_event=emit),
                "stopping: cleaning up (a candidate's branch and worktree, if any)... "
                "(Ctrl-C again forces it)"))
        if as_json:
            ui.print_json(result.model_dump(mode="json"))
        else:
            compare = compare_commands(result, runs, state_dir)
            ui.show_optimize(result, every_row=every_bucket, compare=compare, verbose=verbose)
            if config.agent_model.startswith("local:"):
                ui.info(ui.LOCAL_HINT)
        failed = [it for it in result.iterations if it.outcome == "error"]
        if failed:  # something broke (not a verdict): the infrastructure exit code
            for it in failed:  # the cause, also as the --json envelope's error message
                why = next((r for r in it.reasons if r), "see above")
                ui.error(f"iteration {it.iteration} ended in error: {why}")
            raise typer.Exit(EXIT_INFRA)

    guarded(body)


def compare_commands(result: OptimizeResult, runs: RunLog, state: Path | None) -> dict[int, str]:
    """Per iteration that evaluated a candidate: the `promptloop report` command comparing its
    candidate runs with the baseline (and the gate's extra base trials), trials paired."""
    out: dict[int, str] = {}
    for it in result.iterations:
        cand = runs.runs("candidate", iteration=it.iteration)
        if cand:
            base = [*result.baseline_runs, *runs.runs("gate base", iteration=it.iteration)]
            out[it.iteration] = compare_command(cand, base, state)
    return out


def repo_root_or_none() -> Path | None:
    from promptloop.optimizer.workflows.context import repo_root

    return repo_root()


def _config(flags: dict[str, Any]) -> OptimizeConfig:
    from promptloop.optimizer.gate.compare import GatePolicy
    from promptloop.optimizer.workflows.context import (
        active_project,
        check_command,
        no_project_here,
        require_committed,
    )
    from promptloop.optimizer.workflows.context import state_dir as resolve_state
    from promptloop.optimizer.workflows.optimize import OptimizeConfig

    named, which = split_agent_suite(flags["agent"], flags["suite"])
    if active_project().path is None and repo_root_or_none() is None:
        raise no_project_here()  # outside any repository, no promptloop.toml either
    root = require_repo("optimize")
    if named is None and which is None:
        raise ConfigError("give --agent NAME (or --suite AGENT); agents: "
                          f"{', '.join(agent_names()) or 'none'}")
    require_committed(root, flags["base"], "optimize", named)  # the first-day slips
    if named is not None:
        check_command(named)
    fields = {k: flags[k] for k in CONFIG_OPTIONS}
    fields["suite"] = named or which
    kinds = tuple(k.strip() for k in flags["suites"].split(",") if k.strip())
    if named is not None and which is not None:
        kinds = (which,)
    fields |= agent_models(fields["suite"], flags)
    try:
        return OptimizeConfig.model_validate(
            fields
            | {
                "kinds": kinds,
                "proposer_format": flags["proposer_format"].value,
                "proposer_env": tuple(flags["proposer_env"] or ()),
                "confirm_trials": flags["round_trials"],
                "policy": GatePolicy(
                    min_improvement=flags["min_improvement"],
                    regression_tolerance=flags["regression_tolerance"],
                    harm_sensitivity=flags["harm_sensitivity"].value,
                    max_trials=flags["max_trials"],
                    round_trials=flags["round_trials"],
                ),
                "repo": root,
                "state_dir": resolve_state(flags["state_dir"]),
            }
        )
    except ValidationError as err:
        raise ConfigError(option_errors(err)) from None
