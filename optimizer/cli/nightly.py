"""`promptloop nightly`: the unattended night (baselines, worst buckets, budgeted iterations)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from optimizer.cli import ui
from optimizer.cli.util import EXIT_USER, guarded
from optimizer.core.config import ConfigError

EXIT_LOCKED = EXIT_USER
"""Another nightly run holds `<state>/nightly.lock`."""

Opt = typer.Option


def nightly(
    ctx: typer.Context,
    config: Annotated[Path | None, Opt(
        "--config", envvar="PROMPTLOOP_CONFIG",
        help="promptloop.toml whose \\[nightly] table holds the settings (default: "
             "./promptloop.toml if present). Flags and env vars override it.")] = None,
    resume: Annotated[bool, Opt(
        "--resume", envvar="PROMPTLOOP_NIGHTLY_RESUME",
        help="Continue the latest night if it did not finish (killed, interrupted, failed) "
             "with its original settings; else start a new night.")] = False,
    push: Annotated[bool, Opt(
        "--push", envvar="PROMPTLOOP_NIGHTLY_PUSH",
        help="git push origin <branch> for each accepted branch (never forced).")] = False,
    open_pr: Annotated[bool, Opt(
        "--open-pr", envvar="PROMPTLOOP_NIGHTLY_OPEN_PR",
        help="Push and open a PR per accepted branch with gh (if installed and logged in; "
             "otherwise print the commands).")] = False,
    suites: Annotated[list[str] | None, Opt(
        "--suite", envvar="PROMPTLOOP_NIGHTLY_SUITES",
        help="card_agent / pkm_agent (repeat; default both).")] = None,
    agent_model: Annotated[str | None, Opt(
        envvar="PROMPTLOOP_AGENT_MODEL", help="Agent model id.")] = None,
    judge_model: Annotated[str | None, Opt(
        envvar="PROMPTLOOP_JUDGE_MODEL", help="Judge model for LLM-judge graders.")] = None,
    proposer_model: Annotated[str | None, Opt(
        envvar="PROMPTLOOP_PROPOSER_MODEL", help="Proposer model (default: the agent).")] = None,
    base_url: Annotated[str | None, Opt(
        envvar="OPENAI_BASE_URL", help="Base URL of an OpenAI-compatible server.")] = None,
    base: Annotated[str | None, Opt(
        envvar="PROMPTLOOP_BASE", help="Git ref whose prompts are the baseline (HEAD).")] = None,
    iterations_per_bucket: Annotated[int | None, Opt(
        min=1, envvar="PROMPTLOOP_ITERATIONS_PER_BUCKET",
        help="Proposals per bucket at most (2).")] = None,
    max_buckets: Annotated[int | None, Opt(
        min=1, envvar="PROMPTLOOP_MAX_BUCKETS", help="Worst buckets to work on (3).")] = None,
    trials: Annotated[int | None, Opt(
        min=1, envvar="PROMPTLOOP_TRIALS", help="Trials per task (default: task's own).")] = None,
    concurrency: Annotated[int | None, Opt(
        min=1, envvar="PROMPTLOOP_CONCURRENCY", help="Trials at once.")] = None,
    max_usd: Annotated[float | None, Opt(
        min=0, envvar="PROMPTLOOP_MAX_USD",
        help="Budget in estimated dollars (prices: built-in table + \\[nightly.prices]).")] = None,
    max_tokens: Annotated[int | None, Opt(
        min=0, envvar="PROMPTLOOP_MAX_TOKENS", help="Budget in tokens, all models.")] = None,
    max_wall_minutes: Annotated[float | None, Opt(
        envvar="PROMPTLOOP_MAX_WALL_MINUTES", help="Budget in wall-clock minutes.")] = None,
    state_dir: Annotated[Path | None, Opt(
        "--state-dir", "--out", envvar="PROMPTLOOP_HOME",
        help="State folder (default: <repo>/.promptloop).")] = None,
    as_json: Annotated[bool, Opt("--json", help="Print the night's summary as JSON.")] = False,
) -> None:
    """Run one unattended night: both suites' baselines (cached trials reused), rank the
    buckets with failing trials (most failing first, then lowest mean score), and run optimize
    iterations on the worst ones within the budgets. Each step's cost is estimated first and
    the night stops cleanly when it would not fit. A lock keeps a second run out; a checkpoint
    after every step lets --resume continue a killed night. Writes
    <state>/nightly/<night>/summary.{md,json,html}.

    Exit codes: 0 the night finished (accepted or not, or stopped by a budget);
    1 configuration error, or another nightly run holds the lock;
    2 infrastructure failure (provider, key, all trials errored, push/PR failed)."""
    from optimizer.core.config import load_toml, repo_root
    from optimizer.core.config import state_dir as resolve_state
    from optimizer.workflows.nightly.engine import NightlyConfig, run_nightly
    from optimizer.workflows.nightly.state import LockHeldError

    flags: dict[str, Any] = {
        "suites": suites or None, "agent_model": agent_model, "judge_model": judge_model,
        "proposer_model": proposer_model, "base_url": base_url, "base": base,
        "iterations_per_bucket": iterations_per_bucket, "max_buckets": max_buckets,
        "trials": trials, "concurrency": concurrency, "max_usd": max_usd,
        "max_tokens": max_tokens, "max_wall_minutes": max_wall_minutes,
    }

    def body() -> int:
        root = repo_root()
        if root is None:
            raise ConfigError("nightly needs a git repository (run it inside your prompt repo)")
        table = _table(load_toml(config) if config else (ctx.obj or {}))
        explicit = {k: v for k, v in flags.items() if v is not None and _given(ctx, k)}
        data = table | explicit
        data["state_dir"] = resolve_state(state_dir or _path(table.get("state_dir")))
        data["repo"] = root
        try:
            cfg = NightlyConfig.model_validate(data)
        except ValidationError as err:
            raise ConfigError(_message(err)) from None
        try:
            with ui.LoopDisplay(enabled=not as_json) as display:
                result = asyncio.run(run_nightly(
                    cfg, resume=resume, push=push, open_pr=open_pr,
                    on_event=display.on_event, progress=display.progress_for))
        except LockHeldError as err:
            ui.error(str(err))
            return EXIT_LOCKED
        if as_json:
            ui.print_json({"night": result.checkpoint.night_id, "exit_code": result.exit_code,
                           "paths": {k: str(v) for k, v in result.paths.items()},
                           "summary": result.summary.model_dump(mode="json")})
        else:
            _show(result)
        return result.exit_code

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def _table(data: dict[str, Any]) -> dict[str, Any]:
    table = data.get("nightly", {})
    if not isinstance(table, dict):
        raise ConfigError("promptloop.toml: [nightly] must be a table")
    return {k.replace("-", "_"): v for k, v in table.items()}


def _path(value: Any) -> Path | None:
    return Path(value) if isinstance(value, str) and value else None


def _given(ctx: typer.Context, name: str) -> bool:
    """A value typed on the command line or set in the environment (not a default-map one)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def _message(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "nightly"
        parts.append(f"nightly setting '{loc}': {e['msg']}")
    return "; ".join(parts)


def _show(result: Any) -> None:
    s = result.summary
    ui.out.rule(f"nightly {s.night_id}")
    ui.out.print(f"status: {s.status}" + (f" ({s.stop_reason})" if s.stop_reason else ""),
                 markup=False)
    b = s.budget
    usd = "n/a" if b.used_usd is None else f"${b.used_usd:.4f}"
    ui.out.print(f"spent: {b.used_tokens} tokens, est. {usd}, {b.used_wall_minutes:.1f} min "
                 f"(limits: tokens {b.max_tokens}, usd {b.max_usd}, minutes "
                 f"{b.max_wall_minutes})", markup=False)
    if s.ranking:
        ui.table("buckets with failing trials", ["suite", "bucket", "failing", "mean score"],
                 [[r.suite, r.bucket, r.failing, f"{r.mean_score or 0:.2f}"] for r in s.ranking])
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


def register(app: typer.Typer) -> None:
    app.command("nightly")(nightly)
