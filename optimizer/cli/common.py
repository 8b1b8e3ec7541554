"""What several commands share: options declared once, the promptloop.toml defaults, and the
event stream that reaches the terminal and the `--events` log.

Precedence of every setting is click's and is implemented here once: a flag beats its
`PROMPTLOOP_*` environment variable, which beats the command's table in promptloop.toml, which
beats the default. The toml table becomes the command's click `default_map`, either from the
root `--config` (every command) or from `nightly --config` (an eager option read first).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from optimizer.cli import ui
from optimizer.cli.util import EXIT_USER
from optimizer.core.config import ConfigError, load_toml
from optimizer.core.events import EventLog, EventSink, fan_out

# --- options shared by several commands -------------------------------------------------------

AgentModelOpt = Annotated[
    str,
    typer.Option(
        "--agent-model",
        envvar="PROMPTLOOP_AGENT_MODEL",
        help="Agent model id: anthropic:<model>, openai:<model>, local:smollm2.",
    ),
]
JudgeModelOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-model",
        envvar="PROMPTLOOP_JUDGE_MODEL",
        help="Judge model for LLM-judge graders (default: a stronger model of the same provider).",
    ),
]
ProposerModelOpt = Annotated[
    str | None,
    typer.Option(
        "--proposer-model",
        envvar="PROMPTLOOP_PROPOSER_MODEL",
        help="Proposer model (default: the agent model).",
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
TrialsOpt = Annotated[
    int | None,
    typer.Option(
        "--trials", min=1, envvar="PROMPTLOOP_TRIALS", help="Trials per task (default: task's own)."
    ),
]
ConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        envvar="PROMPTLOOP_CONCURRENCY",
        help="Trials at once (default: card 6, PKM 4; 1 for the embedded model).",
    ),
]
ConfirmTrialsOpt = Annotated[
    int,
    typer.Option(
        "--confirm-trials",
        min=0,
        envvar="PROMPTLOOP_CONFIRM_TRIALS",
        help="Extra trials per task to confirm a suspected regression.",
    ),
]
MinImprovementOpt = Annotated[
    float,
    typer.Option(
        "--min-improvement",
        envvar="PROMPTLOOP_MIN_IMPROVEMENT",
        help="Mean-score gain a bucket needs to count as improved.",
    ),
]
RegressionToleranceOpt = Annotated[
    float,
    typer.Option(
        "--regression-tolerance",
        envvar="PROMPTLOOP_REGRESSION_TOLERANCE",
        help="Practical margin: a bucket whose mean score drops this much is confirmed with "
        "more trials and rejects if the drop survives.",
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
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
EventsOpt = Annotated[
    Path | None,
    typer.Option(
        "--events",
        envvar="PROMPTLOOP_EVENTS",
        dir_okay=False,
        help="Append every event (phases, trials, proposals, verdicts...) to this file as one "
        "JSON object per line, with its `event` name and `at` timestamp.",
    ),
]

# --- promptloop.toml ----------------------------------------------------------------------------


def command_table(data: dict[str, Any], command: str) -> dict[str, Any]:
    """The `[command]` table of a promptloop.toml, with `max-usd` spelt `max_usd`."""
    table = data.get(command, {})
    if not isinstance(table, dict):
        raise ConfigError(f"promptloop.toml: [{command}] must be a table")
    return {k.replace("-", "_"): v for k, v in table.items()}


def use_toml(ctx: typer.Context, path: Path | None, command: str | None = None) -> None:
    """Make promptloop.toml the defaults below flags and env vars: every command's table
    (root `--config`), or one command's (that command's own `--config`)."""
    try:
        data = load_toml(path)
        if command is None:
            tables = [cmd for cmd, table in data.items() if isinstance(table, dict)]
            ctx.default_map = {cmd: command_table(data, cmd) for cmd in tables}
        else:
            ctx.default_map = command_table(data, command)
    except ConfigError as err:
        ui.error(str(err))
        raise typer.Exit(EXIT_USER) from None


def toml_only(ctx: typer.Context) -> dict[str, Any]:
    """Settings of the command's toml table that are not options (e.g. nightly's prices)."""
    return {k: v for k, v in (ctx.default_map or {}).items() if k not in ctx.params}


# --- events -------------------------------------------------------------------------------------


@contextmanager
def listening(events: Path | None, *, quiet: bool) -> Iterator[EventSink]:
    """The event sink of one command: progress and phases on the terminal (unless `quiet`,
    e.g. with --json) and, with `--events FILE`, the JSON-lines log."""
    with ExitStack() as stack:
        display = stack.enter_context(ui.LoopDisplay(enabled=not quiet))
        log = stack.enter_context(EventLog(events)) if events is not None else None
        yield fan_out(display.on_event, log)

