"""`promptloop nightly`: the unattended night (baselines, worst buckets, budgeted iterations)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import (
    PUBLISH,
    AgentModelOpt,
    BaseUrlOpt,
    BatchOpt,
    ConcurrencyOpt,
    EventsOpt,
    JsonOpt,
    JudgeModelOpt,
    ProposerModelOpt,
    StateOpt,
    TrialsOpt,
    agent_models,
    listening,
    toml_only,
    use_toml,
)
from promptloop.optimizer.cli.optimize import ProposerFormat
from promptloop.optimizer.cli.util import EXIT_USER, guarded, require_repo
from promptloop.optimizer.report import fmt
from promptloop.optimizer.workflows.context import DEFAULT_AGENT_MODEL, ConfigError

if TYPE_CHECKING:
    from promptloop.optimizer.workflows.nightly.config import NightlyConfig
    from promptloop.optimizer.workflows.nightly.engine import NightResult

EXIT_LOCKED = EXIT_USER
"""Another nightly run holds `<state>/nightly.lock`."""

Opt = typer.Option
BUDGET = "Budget"


def _own_config(ctx: typer.Context, value: Path | None) -> Path | None:
    """`nightly --config FILE`: its [nightly] table replaces the root's as the defaults (read
    before the other options, so flags and env vars still override it)."""
    if value is not None:
        use_toml(ctx, value, "nightly")
    return value


ConfigOpt = Annotated[Path | None, Opt(
    "--config", envvar="PROMPTLOOP_CONFIG", is_eager=True, callback=_own_config, metavar="FILE",
    help="promptloop.toml whose [nightly] table holds the settings (default: "
         "./promptloop.toml if present). Flags and env vars override it.")]
ResumeOpt = Annotated[bool, Opt(
    "--resume", envvar="PROMPTLOOP_NIGHTLY_RESUME",
    help="Continue the latest night if it did not finish (killed, interrupted, failed) "
         "with its original settings; else start a new night.")]
DryRunOpt = Annotated[bool, Opt(
    "--dry-run",
    help="Say what the night would do and cost (agents, models, each baseline's uncached "
         "trials and tokens, iterations at most, buckets whose branch awaits review, "
         "budgets) without calling a model, taking the lock, or writing a checkpoint or a "
         "branch (the base commit is read through the state folder's source cache).")]
PushOpt = Annotated[bool, Opt(
    "--push", envvar="PROMPTLOOP_NIGHTLY_PUSH", rich_help_panel=PUBLISH,
    help="git push origin <branch> for each accepted branch (never forced).")]
OpenPrOpt = Annotated[bool, Opt(
    "--open-pr", envvar="PROMPTLOOP_NIGHTLY_OPEN_PR", rich_help_panel=PUBLISH,
    help="Push and open a PR per accepted branch with gh (if installed and logged in; "
         "otherwise print the commands).")]
SuitesOpt = Annotated[list[str] | None, Opt(
    "--agent", envvar=["PROMPTLOOP_AGENT", "PROMPTLOOP_NIGHTLY_SUITES"], metavar="AGENT",
    help="An agent promptloop.toml declares (repeat; default: all of them).")]
SuiteOpt = Annotated[list[str] | None, Opt(
    "--suite", envvar="PROMPTLOOP_SUITE", metavar="SUITE",
    help="An agent's suites, as --suite names them everywhere (repeat); a night runs all the "
    "suites of an agent together (they form its gate), so AGENT/SUITE is refused.")]
BaseOpt = Annotated[str | None, Opt(
    envvar="PROMPTLOOP_BASE", metavar="REF",
    help="Git ref whose prompts are the baseline. [default: HEAD]")]
IterationsOpt = Annotated[int | None, Opt(
    "--iterations", min=1, envvar=["PROMPTLOOP_ITERATIONS", "PROMPTLOOP_ITERATIONS_PER_BUCKET"],
    help="Proposals per bucket at most, as optimize's --iterations. [default: 2]")]
CandidatesOpt = Annotated[int | None, Opt(
    min=1, max=16, envvar="PROMPTLOOP_CANDIDATES",
    help="Patches asked per iteration, screened on the target; the winner is gated. "
    "[default: 1]")]
ProposerFormatOpt = Annotated[ProposerFormat | None, Opt(
    "--proposer-format", envvar="PROMPTLOOP_PROPOSER_FORMAT",
    help="A unified diff, or JSON edits under a schema (for weak models), as optimize's "
    "--proposer-format. [default: auto: edits for the embedded model]")]
MaxBucketsOpt = Annotated[int | None, Opt(
    min=1, envvar="PROMPTLOOP_MAX_BUCKETS", help="Worst buckets to work on. [default: 3]")]
MaxUsdOpt = Annotated[float | None, Opt(
    min=0, envvar="PROMPTLOOP_MAX_USD", metavar="USD", rich_help_panel=BUDGET,
    help="Budget in estimated dollars (prices: built-in table + [nightly.prices]).")]
MaxTokensOpt = Annotated[int | None, Opt(
    min=0, envvar="PROMPTLOOP_MAX_TOKENS", rich_help_panel=BUDGET,
    help="Budget in tokens, all models.")]
MaxWallOpt = Annotated[float | None, Opt(
    envvar="PROMPTLOOP_MAX_WALL_MINUTES", metavar="MIN", rich_help_panel=BUDGET,
    help="Budget in wall-clock minutes.")]


def nightly(
    ctx: typer.Context,
    config: ConfigOpt = None,
    resume: ResumeOpt = False,
    dry_run: DryRunOpt = False,
    push: PushOpt = False,
    open_pr: OpenPrOpt = False,
    suites: SuitesOpt = None,
    suite: SuiteOpt = None,
    agent_model: AgentModelOpt = DEFAULT_AGENT_MODEL,
    judge_model: JudgeModelOpt = None,
    proposer_model: ProposerModelOpt = None,
    base_url: BaseUrlOpt = None,
    base: BaseOpt = None,
    iterations: IterationsOpt = None,
    candidates: CandidatesOpt = None,
    proposer_format: ProposerFormatOpt = None,
    max_buckets: MaxBucketsOpt = None,
    trials: TrialsOpt = None,
    concurrency: ConcurrencyOpt = None,
    batch: BatchOpt = False,
    max_usd: MaxUsdOpt = None,
    max_tokens: MaxTokensOpt = None,
    max_wall_minutes: MaxWallOpt = None,
    state_dir: StateOpt = None,
    events: EventsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run one unattended night: baselines, then optimize iterations within the budgets.

    Runs the baselines of the agents' suites (cached trials reused), ranks the buckets with
    failing trials (most failing first, then lowest mean score) and runs optimize iterations
    on the worst ones. Each step's cost is estimated first and the night stops cleanly when it
    would not fit. A lock keeps a second run out; a checkpoint after every step lets --resume
    continue a killed night. Writes <state>/nightly/<night>/summary.{md,json,html}.

    Exit codes: 0 the night finished (accepted or not, or stopped by a budget);
    1 configuration error, or another nightly run holds the lock;
    2 infrastructure failure (provider, key, all trials errored, push/PR failed);
    130 stopped by Ctrl-C, 143 by SIGTERM (the candidate's branch removed, the finished
    steps kept for --resume; with --json the envelope is still printed)."""
    # Options and the [nightly] table (already merged by click: flag > env > toml) plus the
    # table's settings that have no option (prices, estimate margin, ...).
    settings = toml_only(ctx) | {
        "suites": suites or None, "agent_model": agent_model, "judge_model": judge_model,
        "proposer_model": proposer_model, "base_url": base_url, "base": base,
        "iterations_per_bucket": iterations, "max_buckets": max_buckets,
        "candidates": candidates,
        "proposer_format": proposer_format.value if proposer_format is not None else None,
        "trials": trials, "concurrency": concurrency, "batch": batch, "max_usd": max_usd,
        "max_tokens": max_tokens, "max_wall_minutes": max_wall_minutes,
    }

    def body() -> int:
        from promptloop.optimizer.workflows.nightly.engine import run_nightly
        from promptloop.optimizer.workflows.nightly.state import (
            LockHeldError,
            checkpoint_path,
            latest_unfinished,
        )

        settings["suites"] = _agents(suites, suite)
        settings.update(agent_models(settings["suites"], settings))  # the agents' tables
        cfg = _config(settings, state_dir)
        from promptloop.optimizer.workflows.context import check_command

        for agent_name in cfg.suites:  # a command that cannot start: before any state is made
            check_command(agent_name)
        if dry_run:
            return _dry_run(cfg, as_json)
        try:
            with listening(events, quiet=as_json) as emit:
                result = asyncio.run(run_nightly(
                    cfg, resume=resume, push=push, open_pr=open_pr, on_event=emit))
        except LockHeldError as err:
            ui.error(str(err))
            return EXIT_LOCKED
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every finished step is checkpointed
            ui.info("stopped: the night's finished steps are kept; `promptloop nightly "
                    "--resume` continues it")
            stopped = latest_unfinished(cfg.state_dir)
            if as_json and stopped is not None:  # which night, for the script that stopped it
                where = checkpoint_path(cfg.state_dir, stopped.night_id)
                written = {ext: where.parent / f"summary.{ext}" for ext in ("json", "md", "html")}
                ui.print_json({"night": stopped.night_id, "status": "stopped",
                               "checkpoint": str(where),
                               "steps_done": [s.id for s in stopped.steps],
                               "paths": {k: str(v) for k, v in written.items() if v.is_file()}})
            raise
        if as_json:
            ui.print_json({"night": result.checkpoint.night_id,
                           "paths": {k: str(v) for k, v in result.paths.items()},
                           "summary": result.summary.model_dump(mode="json")})
        else:
            _show(result)
        if result.exit_code:
            ui.error(_failure(result))  # on stderr, like eval, optimize, review and agent
        return result.exit_code

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def _dry_run(cfg: NightlyConfig, as_json: bool) -> int:
    """The night's plan (workflows/nightly/plan.py); exit 0, or 1 when a dollar budget lacks
    a price (as the night itself would refuse)."""
    from promptloop.optimizer.workflows.nightly.plan import plan_night

    cfg.check_prices()
    plan = plan_night(cfg)
    if as_json:
        ui.print_json(plan.model_dump(mode="json"))
        return 0
    ui.out.rule("nightly --dry-run: nothing is run")

    def say(text: str) -> None:
        ui.out.print(text, markup=False, highlight=False)

    say(f"base {plan.base_commit[:12]}; agents: {', '.join(plan.agents)}")
    say("models: " + ", ".join(f"{k} {v}" for k, v in plan.models.items())
        + f"; proposer format {plan.proposer_format}")
    for b in plan.baselines:
        say(f"baseline {b.agent}: ~{b.tokens} tokens ({b.basis})")
    say(f"then at most {plan.iterations_at_most} optimize iteration(s), each estimated "
        "before it runs")
    for item in plan.awaiting_review:
        say(f"left out: {item} awaits review")
    lim = plan.budgets
    say(f"budgets: tokens {_limit(lim['max_tokens'])}, usd {_limit(lim['max_usd'])}, "
        f"minutes {_limit(lim['max_wall_minutes'])}"
        + ("" if plan.baselines_fit else "; the baselines alone exceed the token budget"))
    return 0


def _agents(agents: list[str] | None, suites: list[str] | None) -> list[str] | None:
    """The agents a night runs: --agent and --suite AGENT together (None: every agent)."""
    picked = list(agents or [])
    for suite in suites or []:
        agent, sep, _ = suite.partition("/")
        if sep:
            raise ConfigError(f"--suite {suite}: a night runs every suite of an agent (they "
                              f"form its gate); give --suite {agent} or --agent {agent}")
        picked.append(agent)
    return list(dict.fromkeys(picked)) or None


def _failure(result: NightResult) -> str:
    """Why a night exits non-zero, in one line (the key rejected, a provider down, ...)."""
    cp = result.checkpoint
    if cp.stop_reason:
        return cp.stop_reason
    if cp.infra_errors:
        return f"infrastructure failure: {cp.infra_errors[0]}"
    pushed = next((p.push_error for p in cp.published if p.push_error), None)
    if pushed:
        return f"publishing failed: {pushed}"
    return f"publishing a pull request failed; see {result.folder}"


def _config(settings: dict[str, Any], state_dir: Path | None) -> NightlyConfig:
    from promptloop.optimizer.workflows.context import state_dir as resolve_state
    from promptloop.optimizer.workflows.nightly.config import NightlyConfig

    root = require_repo("nightly")
    data = {k: v for k, v in settings.items() if v is not None}
    data |= {"state_dir": resolve_state(state_dir), "repo": root}
    try:
        return NightlyConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_message(err)) from None


def _message(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "nightly"
        if loc.split(".")[0] == "suites":  # what the command line calls it
            loc = "--agent"
        parts.append(f"nightly setting '{loc}': {e['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def _show(result: Any) -> None:
    s = result.summary
    ui.out.rule(f"nightly {s.night_id}")
    ui.out.print(f"status: {s.status}" + (f" ({s.stop_reason})" if s.stop_reason else ""),
                 markup=False)
    b = s.budget
    ui.out.print(f"spent: {fmt.tokens(b.used_tokens)} tokens, est. {fmt.usd(b.used_usd)}, "
                 f"{b.used_wall_minutes:.1f} min "
                 f"(limits: tokens {_limit(b.max_tokens)}, usd "
                 f"{'none' if b.max_usd is None else fmt.usd(b.max_usd)}, minutes "
                 f"{_limit(b.max_wall_minutes)})", markup=False)
    if s.ranking:
        ui.table("buckets with failing trials", ["suite", "bucket", "failing", "mean score"],
                 [[r.suite, r.bucket, r.failing, fmt.num(r.mean_score, 2)] for r in s.ranking])
    for a in s.accepted:
        ui.out.print(f"accepted: {a.branch} - {a.hypothesis}", markup=False)
        ui.out.print(f"  PR body: {a.pr_body_path}", markup=False)
        pub = a.published
        if pub is not None and pub.pr_url:
            ui.out.print(f"  PR: {pub.pr_url}", markup=False)
        for cmd in (pub.commands if pub is not None else []):
            ui.out.print(f"  run: {cmd}", markup=False)
    if not s.accepted:
        ui.out.print("no proposal was accepted tonight; the base prompts stay", markup=False)
    for r in s.rejected:
        ui.out.print(f"{r.outcome}: {r.suite}/{r.bucket} #{r.iteration} - "
                     f"{'; '.join(r.reasons)[:300]}", markup=False)
    for e in s.infra_errors:
        ui.out.print(f"infrastructure error: {e}", markup=False)
    ui.out.print("summary: " + ", ".join(str(p) for p in result.paths.values()), markup=False)


def _limit(value: object) -> str:
    """A budget's limit as set: "none" only when there is none (0 is a limit, and enforced)."""
    return "none" if value is None else str(value)
