"""What several commands share: options declared once, the promptloop.toml defaults, and the
event stream that reaches the terminal and the `--events` log.

Precedence of every setting is click's and is implemented here once: a flag beats its
`PROMPTLOOP_*` environment variable, which beats the command's table in promptloop.toml, which
beats the default. The toml table becomes the command's click `default_map`, either from the
root `--config` (every command) or from `nightly --config` (an eager option read first).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.command import renamed_keys
from promptloop.optimizer.cli.util import EXIT_USER, TOML_META
from promptloop.optimizer.core.events import (
    Event,
    EventLog,
    EventSink,
    IterationStarted,
    RunStarted,
    RunWarning,
    fan_out,
)
from promptloop.optimizer.workflows.context import (
    ConfigError,
    did_you_mean,
    extra_settings,
    open_project,
)

# --- option panels of --help ---------------------------------------------------------------

MODELS, GATE, RUN, OUTPUT, PUBLISH = "Models", "Gate", "Run", "Output", "Publish"

# --- options shared by several commands -------------------------------------------------------

AgentModelOpt = Annotated[
    str,
    typer.Option(
        "--agent-model",
        envvar="PROMPTLOOP_AGENT_MODEL",
        metavar="MODEL",
        rich_help_panel=MODELS,
        show_default=False,
        help="Agent model id: anthropic:<model>, openai:<model>, local:smollm2 (default: the "
             "agent table's `model` in promptloop.toml, else local:smollm2).",
    ),
]
JudgeModelOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-model",
        envvar="PROMPTLOOP_JUDGE_MODEL",
        metavar="MODEL",
        rich_help_panel=MODELS,
        help="Judge model for LLM-judge graders (default: a stronger model of the same provider).",
    ),
]
ProposerModelOpt = Annotated[
    str | None,
    typer.Option(
        "--proposer-model",
        envvar="PROMPTLOOP_PROPOSER_MODEL",
        metavar="MODEL",
        rich_help_panel=MODELS,
        help="Proposer model (default: the agent model).",
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        envvar="OPENAI_BASE_URL",
        metavar="URL",
        rich_help_panel=MODELS,
        help="Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp, ...).",
    ),
]
TrialsOpt = Annotated[
    int | None,
    typer.Option(
        "--trials",
        min=1,
        envvar="PROMPTLOOP_TRIALS",
        rich_help_panel=RUN,
        help="Trials per task (default: the task's own).",
    ),
]
BatchOpt = Annotated[
    bool,
    typer.Option(
        "--batch",
        envvar="PROMPTLOOP_BATCH",
        rich_help_panel=RUN,
        help="Send the judge calls of each run as one provider batch (Anthropic Message "
        "Batches, OpenAI Batch API) at half the price; slower. Other providers: direct calls.",
    ),
]
ConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        envvar="PROMPTLOOP_CONCURRENCY",
        rich_help_panel=RUN,
        help="Trials at once (default: the agent table's concurrency, else 4; 1 for the "
        "embedded model).",
    ),
]
MinImprovementOpt = Annotated[
    float,
    typer.Option(
        "--min-improvement",
        envvar="PROMPTLOOP_MIN_IMPROVEMENT",
        rich_help_panel=GATE,
        help="Mean-score gain a bucket needs to count as improved.",
    ),
]
RegressionToleranceOpt = Annotated[
    float,
    typer.Option(
        "--regression-tolerance",
        envvar="PROMPTLOOP_REGRESSION_TOLERANCE",
        rich_help_panel=GATE,
        help="The drop in a judge-scored or partial-credit task's mean score that harm "
        "detection must rule out before the task says 'no harm' (its score test's "
        "alternative); review also confirms a bucket that fell this much.",
    ),
]
class HarmSensitivity(StrEnum):
    half = "half"
    narrow = "narrow"


HarmSensitivityOpt = Annotated[
    HarmSensitivity,
    typer.Option(
        "--harm-sensitivity",
        envvar="PROMPTLOOP_HARM_SENSITIVITY",
        rich_help_panel=GATE,
        help="The smallest drop per task harm detection is built to rule out: 'half' (half "
        "of a passing task's pass rate) or 'narrow' (near-total breaks only: 80% of it, far "
        "cheaper); judge-scored tasks under both: --regression-tolerance of their mean score.",
    ),
]
MaxTurnsOpt = Annotated[int, typer.Option(
    "--max-turns", min=1, envvar="PROMPTLOOP_MAX_TURNS", rich_help_panel=RUN,
    help="Agent turns per run.")]
MaxRunsOpt = Annotated[int, typer.Option(
    "--max-runs", min=1, envvar="PROMPTLOOP_MAX_RUNS", rich_help_panel=RUN,
    help="Agent runs per trial.")]
StateOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        envvar="PROMPTLOOP_HOME",
        metavar="DIR",
        rich_help_panel=OUTPUT,
        help="State folder for reports, caches and ledgers (default: <repo>/.promptloop).",
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option("--json", rich_help_panel=OUTPUT, callback=ui.want_json,
                 help="Print one JSON object on stdout: {command, ok, exit_code, result | "
                 "error} (docs/json-envelope.schema.json); progress stays on a terminal's "
                 "stderr."),
]
AllOpt = Annotated[
    bool,
    typer.Option(
        "--all",
        rich_help_panel=OUTPUT,
        help="List every bucket of a comparison (default: the changed ones and a count of the "
        "others).",
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        rich_help_panel=OUTPUT,
        help="Also print every finding and how the gate decided (the statistical method), "
        "and the whole proposed diff.",
    ),
]
EventsOpt = Annotated[
    Path | None,
    typer.Option(
        "--events",
        envvar="PROMPTLOOP_EVENTS",
        dir_okay=False,
        rich_help_panel=OUTPUT,
        help="Append every event (phases, trials, proposals, verdicts...) to this file as one "
        "JSON object per line, with its `event` name and `at` timestamp.",
    ),
]

AgentOpt = Annotated[
    str | None,
    typer.Option(
        "--agent",
        envvar="PROMPTLOOP_AGENT",
        metavar="AGENT",
        help="An agent promptloop.toml declares ([agents.NAME]); default: the one --suite names.",
    ),
]
PromptOpt = Annotated[
    str | None,
    typer.Option(
        "--prompt",
        metavar="NAME",
        help="Which of the agent's prompt targets ([[agents.NAME.prompts]] name); default: its "
        "first.",
    ),
]

def stored_suite_name(suite: str, kind: str = "capability") -> str:
    """The stored name of the suite `--suite` names, in any of its spellings: an agent (its
    `kind` suite, capability by default), AGENT/SUITE (card_agent/quickstart), the suite's
    folder or JSONL file as promptloop.toml declares it, or its stored name
    (card_agent_quickstart, returned as is and checked against the store by the caller)."""
    from promptloop.optimizer.workflows.context import ConfigError, declared_suite_name, split_suite

    agent, which = split_suite(None, suite)
    if agent is None:
        return suite
    try:
        return declared_suite_name(agent, which or kind)
    except ConfigError:
        if which is None or "/" in suite or Path(suite).exists():
            raise
        return suite  # not one of the agent's suites in this checkout: a stored name


def need_agent(agent: str | None, suite: str | None) -> None:
    """A usage error (exit 1, with the --help hint) when neither --agent nor --suite is given."""
    if agent is None and suite is None:
        from typer._click import exceptions as click_exc  # typer vendors click

        from promptloop.optimizer.workflows.context import agent_names

        raise click_exc.UsageError("give --agent NAME (or --suite AGENT); agents declared: "
                                   f"{', '.join(agent_names()) or 'none'}")


def flag_given(param: str, value: Any, default: Any) -> bool:
    """Whether the running command's option `param` was set (on the command line, by its
    variable or by promptloop.toml) rather than left at its default: an explicit
    `--agent-model local:smollm2` beats an agent table's `model` although it equals the
    default. Outside a command (a direct call), a value other than `default` counts."""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    source = ctx.get_parameter_source(param) if ctx is not None else None
    if source is None:
        return value not in (None, default)
    return source is not ParameterSource.DEFAULT


def declared_models() -> list[str]:
    """Every agent's model (its table's `model`, else the default), each once, in table
    order: what `doctor` checks when --agent-model is not given."""
    from promptloop.optimizer.workflows.context import DEFAULT_AGENT_MODEL, active_project

    agents = active_project().agents.values()
    return list(dict.fromkeys(a.model or DEFAULT_AGENT_MODEL for a in agents))


def agent_models(agent: str | Sequence[str] | None, flags: dict[str, Any]) -> dict[str, Any]:
    """The agent table's `model` and `judge` where the flags were not given. With several
    agents (a night's) or none named (review, doctor: every agent), the tables' one model when
    they agree; agents that declare different models need --agent or the flag (a
    `ConfigError` says so)."""
    from promptloop.optimizer.workflows.context import DEFAULT_AGENT_MODEL, active_project

    project = active_project()
    if agent is None:
        names = list(project.agents)
    elif not isinstance(agent, str):
        names = [a for a in agent if a in project.agents]
    elif agent in project.agents:
        names = [agent]
    else:
        return {}
    out: dict[str, Any] = {}
    for key, field, default in (("agent_model", "model", DEFAULT_AGENT_MODEL),
                                ("judge_model", "judge", None)):
        if flag_given(key, flags.get(key), default):
            continue
        declared = {n: getattr(project.agents[n], field) or default for n in names}
        models = set(declared.values()) - {None}  # an agent with no model runs the default
        if len(models) > 1:
            listed = ", ".join(f"{n}: {m}" for n, m in declared.items())
            raise ConfigError(f"the agents declare different {field}s ({listed}) in "
                              f"{project.where}: name one with --agent, or give "
                              f"--{key.replace('_', '-')}")
        if models:
            out[key] = models.pop()
    return out


def models_by_agent(flags: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Each agent's table `model` and `judge` where the flags were not given (review of
    every agent whose prompt changed, when the tables disagree: each runs on its own)."""
    from promptloop.optimizer.workflows.context import DEFAULT_AGENT_MODEL, active_project

    out: dict[str, dict[str, str]] = {}
    for name, table in active_project().agents.items():
        own: dict[str, str] = {}
        for key, field, default in (("agent_model", "model", DEFAULT_AGENT_MODEL),
                                    ("judge_model", "judge", None)):
            value = getattr(table, field) or default
            if value and not flag_given(key, flags.get(key), default):
                own[key] = value
        out[name] = own
    return out


# --- promptloop.toml ----------------------------------------------------------------------------


def command_table(data: dict[str, Any], command: str) -> dict[str, Any]:
    """The `[command]` table of a promptloop.toml, with `max-usd` spelt `max_usd` and renamed
    settings under their new names (`confirm-trials` of [optimize] is `round_trials`)."""
    table = data.get(command, {})
    if not isinstance(table, dict):
        raise ConfigError(f"promptloop.toml: [{command}] must be a table")
    renamed = renamed_keys(command)
    keys = {k: k.replace("-", "_") for k in table}
    return {renamed.get(key, key): table[k] for k, key in keys.items()}


def use_toml(ctx: typer.Context, path: Path | None, command: str | None = None) -> None:
    """Find promptloop.toml (`path`, else the nearest from the current folder upward), make its
    agents the project every command uses, and its command tables the defaults below flags and
    env vars: every command's table (root `--config`), or one command's (that command's own
    `--config`). Unknown tables and keys are errors naming the file, table and key."""
    try:
        project = open_project(path)
        data = dict(project.tables) if project is not None else {}
        where = project.where if project is not None else "promptloop.toml"
        ctx.meta[TOML_META] = where  # a bad value from a table names the file (command.py)
        if command is None:
            _check_tables(ctx, data, where)
            ctx.default_map = {cmd: command_table(data, cmd) for cmd in data}
        else:
            ctx.default_map = command_table(data, command)
    except ConfigError as err:
        ui.error(str(err))
        raise typer.Exit(EXIT_USER) from None


NOT_IN_FILES = frozenset({"json", "as_json", "config", "dry_run", "help", "repo", "resume"})
"""Options a command takes that no promptloop.toml table sets (not offered as keys)."""


def _check_tables(ctx: typer.Context, data: dict[str, Any], where: str) -> None:
    """Every table names a command and every key one of its options (or, for nightly, one of
    its settings): a misspelling is an error with a did-you-mean, never silently ignored."""
    commands = getattr(ctx.command, "commands", {})
    problems: list[str] = []
    for name, table in data.items():
        cmd = commands.get(name)
        if cmd is None:
            known = sorted([*commands, "agents"])
            problems.append(f"{where}: [{name}]: unknown table.{did_you_mean(name, known)} "
                            f"Tables: [agents.<name>] and one per command: {', '.join(known)}")
            continue
        allowed = {p.name for p in cmd.params if p.name} | set(extra_settings(name))
        allowed |= {o.lstrip("-").replace("-", "_") for p in cmd.params
                    for o in getattr(p, "opts", []) if o.startswith("--")}
        renamed = renamed_keys(name)
        for key in table:
            normal = key.replace("-", "_")
            if renamed.get(normal, normal) not in allowed:
                # offered in the spelling the file uses (docs/nightly.md writes snake_case),
                # without the options no file sets (output format, the file itself)
                dash = "-" in key or "_" not in key
                offered = sorted(a for a in allowed if a not in NOT_IN_FILES)
                options = [a.replace("_", "-") if dash else a for a in offered]
                asked = key.replace("_", "-") if dash else normal
                problems.append(f"{where}: [{name}] key '{key}': unknown key."
                                f"{did_you_mean(asked, options)} "
                                f"Keys: {', '.join(options)}")
    if problems:
        raise ConfigError("\n".join(problems))


def toml_only(ctx: typer.Context) -> dict[str, Any]:
    """Settings of the command's toml table that are not options (e.g. nightly's prices)."""
    return {k: v for k, v in (ctx.default_map or {}).items() if k not in ctx.params}


# --- events -------------------------------------------------------------------------------------


class RunLog:
    """The suite runs a command started (run name, label, suite), each under the optimize
    iteration it belongs to (0: before the first), to name them in a comparison command."""

    def __init__(self) -> None:
        self.started: list[tuple[int, RunStarted]] = []
        self._iteration = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, IterationStarted):
            self._iteration = event.iteration
        elif isinstance(event, RunStarted):
            self.started.append((self._iteration, event))

    def runs(self, *labels: str, iteration: int | None = None,
             suites: Collection[str] | None = None) -> list[str]:
        """Names of the runs whose label starts with one of `labels`, optionally of one
        iteration and of some suites, in the order they started."""
        return [e.run for it, e in self.started
                if e.label.startswith(labels) and iteration in (None, it)
                and (suites is None or e.suite in suites)]

    def suites_of(self, names: Collection[str]) -> set[str]:
        return {e.suite for _, e in self.started if e.run in names}


@contextmanager
def listening(events: Path | None, *, quiet: bool,
              runs: RunLog | None = None) -> Iterator[EventSink]:
    """The event sink of one command: progress and phases on stderr (with `quiet`, e.g.
    --json, only when stderr is a terminal: a script reading the JSON gets no log lines), with
    `--events FILE` the JSON-lines log, and `runs` when given."""
    with ExitStack() as stack:
        shown = not quiet or ui.err.is_terminal
        display = stack.enter_context(ui.LoopDisplay(enabled=shown))
        log = stack.enter_context(EventLog(events)) if events is not None else None
        yield fan_out(display.on_event, log, runs, None if shown else _warnings_only)


def _warnings_only(event: Event) -> None:
    """Without the display (--json, stderr not a terminal), warnings still reach stderr, one
    plain line each: a script reads the JSON on stdout, a person the log."""
    if isinstance(event, RunWarning):
        ui.err.print(f"Warning: {event.message}", markup=False, highlight=False,
                     soft_wrap=True)
