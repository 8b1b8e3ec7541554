"""The `promptloop` command line: a thin typer layer over the Python API.

Exit codes: 0 ok, 1 user/configuration error, 2 infrastructure failure, 130 interrupted.
Every option can also come from a `PROMPTLOOP_*` environment variable.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from optimizer.cli import ui
from optimizer.cli.util import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_USER, guarded, option_errors
from optimizer.core.config import DEFAULT_AGENT_MODEL, ConfigError

app = typer.Typer(
    name="promptloop",
    help="Make prompt changes to LLM agents auditable: evaluate suites, propose minimal prompt "
    "patches on git branches, and keep them only when the statistics say they help.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)


ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "--agent-model",
        envvar="PROMPTLOOP_AGENT_MODEL",
        help="Agent model id: anthropic:<model>, openai:<model>, local:smollm2.",
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        envvar="OPENAI_BASE_URL",
        help="Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp, ...).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            envvar="PROMPTLOOP_CONFIG",
            help="A promptloop.toml with one table of defaults per command "
            "(optimize, eval, nightly...); "
            "default: ./promptloop.toml if present.",
        ),
    ] = None,
) -> None:
    """Load defaults from promptloop.toml; command-line flags and env vars override them."""
    from optimizer.core.config import load_toml

    try:
        data = load_toml(config)
    except ConfigError as err:
        ui.error(str(err))
        raise typer.Exit(EXIT_USER) from None
    ctx.obj = data
    ctx.default_map = {
        cmd: {k.replace("-", "_"): v for k, v in section.items()}
        for cmd, section in data.items()
        if isinstance(section, dict)
    }


@app.command()
def agent(
    agent_name: Annotated[str, typer.Argument(help="card_agent or pkm_agent.")],
    content: Annotated[str, typer.Option("--content", help="The raw user input.")],
    fact_id: Annotated[
        str,
        typer.Option("--fact-id", help="Fact id YYYY/MM/DD.md#ts_N; default: today's date, ts_1."),
    ] = "",
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            help="Workspace folder (Facts/, Cards/, PKM/). Default: a fresh temp one.",
            file_okay=False,
        ),
    ] = None,
    model: ModelOpt = DEFAULT_AGENT_MODEL,
    base_url: BaseUrlOpt = None,
    published: Annotated[
        str | None,
        typer.Option("--published", help="Publish time 'YYYY-MM-DD HH:MM:SS' (default: now)."),
    ] = None,
    max_turns: Annotated[int, typer.Option(help="Turns per run.", min=1)] = 12,
    as_json: JsonOpt = False,
) -> None:
    """Run one agent on one input and show the card / PKM diff and the transcript summary."""
    from optimizer.run.agent_cmd import AgentCommand, run_agent_command

    def body() -> None:
        published_at = (
            datetime.fromisoformat(published)
            if published
            else datetime.now().replace(microsecond=0)
        )
        cmd = AgentCommand(
            agent_name=agent_name,
            content=content,
            fact_id=fact_id,
            workspace=workspace,
            model=model,
            base_url=base_url,
            published_at=published_at,
            max_turns=max_turns,
        )
        if workspace is None:
            with tempfile.TemporaryDirectory(prefix="promptloop-agent-") as tmp:
                result = asyncio.run(run_agent_command(cmd, Path(tmp)))
        else:
            result = asyncio.run(run_agent_command(cmd, workspace))
        _show_agent_result(result, as_json)

    guarded(body)


def _show_agent_result(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        ui.print_json(result)
        return
    ui.out.rule(f"{result['agent']} on {result['fact_id']}")
    if result["agent"] == "card_agent":
        ui.out.print(result["outcome"].get("card_yaml_blob") or "(no card written)", markup=False)
    else:
        ui.out.print(result["pkm_diff"] or "(no change under PKM/)", markup=False)
        if result["outcome"].get("skipped_pkm"):
            ui.out.print(f"skipped: {result['outcome'].get('skip_evidence')}", markup=False)
    ui.out.rule("tool calls")
    for c in result["tool_calls"]:
        mark = "ERR" if c["is_error"] else "ok "
        ui.out.print(
            f"{mark} {c['tool_name']}({c['arguments_short']}) -> {c['result_short']}", markup=False
        )
    ui.out.rule("transcript")
    ui.out.print(result["summary"], markup=False)
    if result.get("workspace"):
        ui.out.print(f"workspace: {result['workspace']}", markup=False)


@app.command()
def suites(
    path: Annotated[
        Path | None,
        typer.Argument(help="A suite folder or a folder of suites; default: the bundled tasks/."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List suites with their tasks and failure buckets."""
    from optimizer.core.suites import TASKS_DIR, load_suite

    def body() -> None:
        root = path or TASKS_DIR
        if not root.exists():
            raise ConfigError(f"{root}: no such folder")
        roots = (
            [root]
            if (root / "suite.json").is_file()
            else sorted(p.parent for p in root.glob("**/suite.json"))
        )
        if not roots:
            raise ConfigError(f"{root}: no suite.json found below this folder")
        listing: list[dict[str, Any]] = []
        for r in roots:
            s = load_suite(r)
            listing.append(
                {
                    "name": s.name,
                    "agent": s.agent_name,
                    "kind": s.config.kind,
                    "path": str(r),
                    "tasks": len(s.tasks),
                    "trials": sum(t.spec.trials_per_run for t in s.tasks),
                    "buckets": {b: [t.id for t in ts] for b, ts in sorted(s.buckets.items())},
                }
            )
        if as_json:
            ui.print_json(listing)
            return
        for s_ in listing:
            ui.table(
                f"{s_['name']} ({s_['agent']}, {s_['kind']}) - {s_['tasks']} tasks, "
                f"{s_['trials']} trials - {s_['path']}",
                ["bucket", "tasks", "task ids"],
                [[b, len(ids), ", ".join(ids)] for b, ids in s_["buckets"].items()],
            )

    guarded(body)


SuiteArg = Annotated[
    str,
    typer.Option(
        "--suite",
        envvar="PROMPTLOOP_SUITE",
        help="card_agent, pkm_agent, or the path of a suite folder (with suite.json).",
    ),
]
KindOpt = Annotated[
    str,
    typer.Option(
        "--kind",
        envvar="PROMPTLOOP_KIND",
        help="Suite kind for a named suite: capability|regression.",
    ),
]
JudgeOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-model",
        envvar="PROMPTLOOP_JUDGE_MODEL",
        help="Judge model for LLM-judge graders (default: a stronger model of the same provider).",
    ),
]
StateOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "--state-dir",
        envvar="PROMPTLOOP_HOME",
        help="State folder for reports, caches and ledgers (default: <repo>/.promptloop).",
    ),
]


@app.command("eval")
def eval_(
    suite: SuiteArg,
    kind: KindOpt = "capability",
    bucket: Annotated[
        list[str] | None, typer.Option("--bucket", help="Only this bucket (repeat).")
    ] = None,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Only this task id (repeat).")
    ] = None,
    trials: Annotated[
        int | None,
        typer.Option(
            "--trials",
            min=1,
            envvar="PROMPTLOOP_TRIALS",
            help="Trials per task (default: the task's own).",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            min=1,
            envvar="PROMPTLOOP_CONCURRENCY",
            help="Trials at once (default: card 6, PKM 4).",
        ),
    ] = None,
    agent_model: Annotated[
        str, typer.Option("--agent-model", envvar="PROMPTLOOP_AGENT_MODEL", help="Agent model id.")
    ] = DEFAULT_AGENT_MODEL,
    judge_model: JudgeOpt = None,
    base_url: BaseUrlOpt = None,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            envvar="PROMPTLOOP_MODE",
            help="live | record | replay (replay needs no model).",
        ),
    ] = "live",
    fresh: Annotated[bool, typer.Option("--fresh", help="Ignore cached trial results.")] = False,
    out: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run an evaluation suite and report per-bucket pass rates.

    Exit 0 when the run completed (whatever the pass rate), 1 for a usage/config error, 2 when
    the infrastructure failed (bad key, provider down, every trial errored)."""
    from optimizer.core.config import state_dir
    from optimizer.run.runner import AllTrialsErroredError, RunOptions
    from optimizer.workflows.evaluate import EvalRequest, Models, evaluate

    def body() -> None:
        if mode not in ("live", "record", "replay"):
            raise ConfigError(f"--mode must be live, record or replay, not '{mode}'")
        state = state_dir(out)
        models = Models(agent=agent_model, judge=judge_model, base_url=base_url)
        options = RunOptions(
            agent_model=agent_model,
            trials=trials,
            concurrency=concurrency,
            mode=mode,  # type: ignore[arg-type]
            reuse=not fresh,
        )
        request = EvalRequest(
            suite=suite,
            kind=kind,
            buckets=tuple(bucket or ()),
            task_ids=tuple(task or ()),
            models=models,
            options=options,
        )
        try:
            with ui.run_progress(f"eval {suite}", enabled=not as_json) as progress:
                run, summary, path = asyncio.run(evaluate(request, state, progress))
        except AllTrialsErroredError as err:
            ui.error(str(err))
            raise typer.Exit(EXIT_INFRA) from None
        if as_json:
            ui.print_json(
                {
                    "run": run.run_name,
                    "report": str(path),
                    "summary": summary.model_dump(mode="json", by_alias=True),
                }
            )
            return
        ui.show_summary(summary, str(path))

    guarded(body)


@app.command()
def report(
    run: Annotated[str, typer.Argument(help="Run name, 'latest', or a report JSON path.")],
    failing: Annotated[
        bool,
        typer.Option(
            "--failing",
            help="Export failing trials (what the proposer reads) instead of the full summary.",
        ),
    ] = False,
    bucket: Annotated[
        list[str] | None, typer.Option("--bucket", help="Bucket(s) for --failing.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="md | json | html")] = "md",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file.")
    ] = None,
    base: Annotated[
        str | None,
        typer.Option("--base", help="With --format html: a base run to compare against."),
    ] = None,
    out: StateOpt = None,
) -> None:
    """Show a saved run as Markdown, JSON or a self-contained HTML page."""
    from optimizer.core.config import state_dir
    from optimizer.workflows.present import render_report

    def body() -> None:
        if fmt not in ("md", "json", "html"):
            raise ConfigError(f"--format must be md, json or html, not '{fmt}'")
        text = render_report(
            state_dir(out), run, fmt, failing=failing, buckets=bucket or [], base=base
        )
        if output:
            output.write_text(text, encoding="utf-8")
            ui.info(f"wrote {output}")
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")

    guarded(body)


@app.command()
def optimize(
    suite: Annotated[
        str, typer.Option("--suite", envvar="PROMPTLOOP_SUITE", help="card_agent or pkm_agent.")
    ],
    bucket: Annotated[
        str,
        typer.Option("--bucket", envvar="PROMPTLOOP_BUCKET", help="The failure bucket to improve."),
    ],
    iterations: Annotated[
        int, typer.Option(min=1, envvar="PROMPTLOOP_ITERATIONS", help="Proposals to try at most.")
    ] = 3,
    trials: Annotated[
        int | None,
        typer.Option(
            min=1, envvar="PROMPTLOOP_TRIALS", help="Trials per task (default: task's own)."
        ),
    ] = None,
    proposer_model: Annotated[
        str | None,
        typer.Option(
            envvar="PROMPTLOOP_PROPOSER_MODEL", help="Proposer model (default: the agent model)."
        ),
    ] = None,
    agent_model: Annotated[
        str, typer.Option(envvar="PROMPTLOOP_AGENT_MODEL", help="Agent model id.")
    ] = DEFAULT_AGENT_MODEL,
    judge_model: JudgeOpt = None,
    base_url: BaseUrlOpt = None,
    base: Annotated[
        str, typer.Option(envvar="PROMPTLOOP_BASE", help="Git ref whose prompt is the baseline.")
    ] = "HEAD",
    max_changed_lines: Annotated[
        int,
        typer.Option(min=1, envvar="PROMPTLOOP_MAX_CHANGED_LINES", help="Refuse bigger patches."),
    ] = 40,
    keep_rejected: Annotated[
        bool,
        typer.Option(
            envvar="PROMPTLOOP_KEEP_REJECTED", help="Keep branches of rejected proposals."
        ),
    ] = False,
    proposer_cmd: Annotated[
        str | None,
        typer.Option(
            envvar="PROMPTLOOP_PROPOSER_CMD",
            help="External coding agent run in the candidate worktree (env PROMPTLOOP_PACKAGE, "
            "PROMPTLOOP_PROMPT_FILE); its git diff is the proposal.",
        ),
    ] = None,
    proposer_format: Annotated[
        str,
        typer.Option(
            envvar="PROMPTLOOP_PROPOSER_FORMAT",
            help="auto | diff | edits (JSON edits under a schema, for weak models).",
        ),
    ] = "auto",
    concurrency: Annotated[
        int | None, typer.Option(min=1, envvar="PROMPTLOOP_CONCURRENCY", help="Trials at once.")
    ] = None,
    confirm_trials: Annotated[
        int,
        typer.Option(
            min=0,
            envvar="PROMPTLOOP_CONFIRM_TRIALS",
            help="Extra trials per task to confirm a suspected regression.",
        ),
    ] = 2,
    suites: Annotated[
        str,
        typer.Option(
            "--suites",
            envvar="PROMPTLOOP_SUITES",
            help="Comma-separated suite folders under tasks/<agent>/ that form the gate.",
        ),
    ] = "capability,regression",
    max_turns: Annotated[
        int, typer.Option(min=1, envvar="PROMPTLOOP_MAX_TURNS", help="Agent turns per run.")
    ] = 12,
    max_runs: Annotated[
        int,
        typer.Option(min=1, envvar="PROMPTLOOP_MAX_RUNS", help="Agent runs per trial."),
    ] = 4,
    min_improvement: Annotated[
        float, typer.Option(envvar="PROMPTLOOP_MIN_IMPROVEMENT", help="Target bucket gain needed.")
    ] = 0.05,
    regression_tolerance: Annotated[
        float,
        typer.Option(
            envvar="PROMPTLOOP_REGRESSION_TOLERANCE",
            help="Practical margin: a bucket whose mean score drops this much is confirmed with "
            "more trials and rejects if the drop survives.",
        ),
    ] = 0.35,
    max_trials: Annotated[
        int,
        typer.Option(
            min=1, envvar="PROMPTLOOP_MAX_TRIALS",
            help="Trials per task the sequential gate may reach before it stops undecided.",
        ),
    ] = 8,
    out: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Propose, check and evaluate minimal prompt patches for one failure bucket.

    Runs the baseline (reusing cached trials), packages the bucket's failing trials for the
    proposer, refuses unsafe patches before evaluation, evaluates each candidate on its own git
    branch (your checkout is never touched) and keeps it only if the target bucket improves and
    no bucket regresses. Exit 0 when done (accepted or not, or nothing to do)."""
    from optimizer.core.config import repo_root, state_dir
    from optimizer.gate.compare import GatePolicy
    from optimizer.workflows.optimize import OptimizeConfig
    from optimizer.workflows.optimize import optimize as run_optimize

    def body() -> None:
        root = repo_root()
        if root is None:
            raise ConfigError("optimize needs a git repository (run it inside your prompt repo)")
        try:
            config = OptimizeConfig.model_validate(
                {
                    "suite": suite,
                    "bucket": bucket,
                    "iterations": iterations,
                    "trials": trials,
                    "agent_model": agent_model,
                    "judge_model": judge_model,
                    "proposer_model": proposer_model,
                    "base_url": base_url,
                    "base": base,
                    "max_changed_lines": max_changed_lines,
                    "keep_rejected": keep_rejected,
                    "proposer_cmd": proposer_cmd,
                    "proposer_format": proposer_format,
                    "concurrency": concurrency,
                    "confirm_trials": confirm_trials,
                    "kinds": tuple(k.strip() for k in suites.split(",") if k.strip()),
                    "max_turns": max_turns,
                    "max_runs": max_runs,
                    "policy": GatePolicy(
                        min_improvement=min_improvement,
                        regression_tolerance=regression_tolerance,
                        max_trials=max_trials,
                        round_trials=max(1, confirm_trials),
                    ),
                    "repo": root,
                    "state_dir": state_dir(out),
                }
            )
        except ValidationError as err:
            raise ConfigError(option_errors(err)) from None
        with ui.LoopDisplay(enabled=not as_json) as display:
            result = asyncio.run(
                run_optimize(config, on_event=display.on_event, progress=display.progress_for)
            )
        if as_json:
            ui.print_json(result.model_dump(mode="json"))
        else:
            ui.show_optimize(result)
            if config.agent_model.startswith("local:"):
                ui.info(ui.LOCAL_HINT)

    guarded(body)


def _register_commands() -> None:
    from optimizer.cli.commands import register_all

    register_all(app)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        ui.error("interrupted")
        sys.exit(EXIT_INTERRUPTED)
