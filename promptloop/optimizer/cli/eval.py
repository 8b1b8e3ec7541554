"""`promptloop eval`: run one suite with a progress bar and a closing per-bucket table."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from typing import Annotated

import typer

from promptloop.agents.runtime import DEFAULT_MAX_TURNS
from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import (
    RUN,
    AgentModelOpt,
    AgentOpt,
    BaseUrlOpt,
    BatchOpt,
    ConcurrencyOpt,
    EventsOpt,
    JsonOpt,
    JudgeModelOpt,
    MaxRunsOpt,
    MaxTurnsOpt,
    PromptOpt,
    StateOpt,
    TrialsOpt,
    agent_models,
    listening,
)
from promptloop.optimizer.cli.util import EXIT_INFRA, guarded
from promptloop.optimizer.workflows.context import (
    DEFAULT_AGENT_MODEL,
    ConfigError,
    agent_names,
    split_suite,
)


def split_agent_suite(agent: str | None, suite: str | None) -> tuple[str | None, str | None]:
    """`split_suite`, with an error that says when --agent or --suite came from the
    environment (PROMPTLOOP_AGENT=nosuch is otherwise invisible on the command line)."""
    try:
        return split_suite(agent, suite)
    except ConfigError as err:
        came = _from_env({"agent": "PROMPTLOOP_AGENT", "suite": "PROMPTLOOP_SUITE"})
        raise ConfigError(f"{err}{came}") from None


def warn_unused_base_url(base_url: str | None, *models: str | None) -> None:
    """`--base-url` serves `openai:<model>` ids only (agent, judge and proposer alike): a
    warning when none of the command's models is one (e.g. the embedded local:smollm2). The
    ids are checked first: a malformed one is the error, not a warning about it."""
    from promptloop.agents.llm.registry import parse_model_id

    for m in models:
        if m:
            parse_model_id(m)  # ModelConfigError: exit 1, before any estimate or warning
    if base_url and not any(m and m.startswith("openai:") for m in models):
        used = ", ".join(dict.fromkeys(m for m in models if m))
        ui.warn(f"--base-url {base_url} is not used: it serves openai:<model> ids only, and "
                f"this command calls {used}; give --agent-model openai:<model> to use it")


def _from_env(names: dict[str, str]) -> str:
    """` (--agent came from the environment: PROMPTLOOP_AGENT='x')` for each such option."""
    import os

    from typer._click import core as click_core  # typer vendors click
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    if ctx is None:
        return ""
    said = [f"--{name} came from the environment: {var}={os.environ.get(var, '')!r}"
            for name, var in names.items() if name in ctx.params
            and ctx.get_parameter_source(name) == click_core.ParameterSource.ENVIRONMENT]
    return f" ({'; '.join(said)}; unset it or give the option)" if said else ""


class Mode(StrEnum):
    live = "live"
    record = "record"
    replay = "replay"


SuiteOpt = Annotated[str | None, typer.Option(
    "--suite", envvar="PROMPTLOOP_SUITE", metavar="SUITE",
    help="An agent (its capability suite), one of its suites (card_agent/quickstart, or "
    "--agent card_agent --suite quickstart), or a suite folder (with suite.json) or .jsonl "
    "file.")]
KindOpt = Annotated[str, typer.Option(
    "--kind", envvar="PROMPTLOOP_KIND", metavar="KIND", hidden=True,
    help="Old spelling of the suite's name: --suite AGENT/NAME.")]
BucketsOpt = Annotated[list[str] | None, typer.Option(
    "--bucket", metavar="BUCKET", help="Only this bucket (repeat).")]
TasksOpt = Annotated[list[str] | None, typer.Option(
    "--task", metavar="TASK", help="Only this task id (repeat).")]
ModeOpt = Annotated[Mode, typer.Option(
    "--mode", envvar="PROMPTLOOP_MODE", rich_help_panel=RUN,
    help="Call the models, also record their replies, or replay recorded replies (no model).")]
FreshOpt = Annotated[bool, typer.Option(
    "--fresh", rich_help_panel=RUN, help="Ignore cached trial results.")]
RefOpt = Annotated[str | None, typer.Option(
    "--ref", envvar="PROMPTLOOP_REF", metavar="REF",
    help="Read the prompt and the suite at this git ref (branch, tag, commit); default: the "
    "working tree. Outside a repository, promptloop's bundled copy is used.")]


def eval_(
    suite: SuiteOpt = None,
    agent: AgentOpt = None,
    prompt: PromptOpt = None,
    kind: KindOpt = "capability",
    bucket: BucketsOpt = None,
    task: TasksOpt = None,
    trials: TrialsOpt = None,
    concurrency: ConcurrencyOpt = None,
    max_turns: MaxTurnsOpt = DEFAULT_MAX_TURNS,
    max_runs: MaxRunsOpt = 4,
    agent_model: AgentModelOpt = DEFAULT_AGENT_MODEL,
    judge_model: JudgeModelOpt = None,
    base_url: BaseUrlOpt = None,
    mode: ModeOpt = Mode.live,
    fresh: FreshOpt = False,
    batch: BatchOpt = False,
    ref: RefOpt = None,
    state_dir: StateOpt = None,
    events: EventsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run an evaluation suite and report per-bucket pass rates.

    Exit 0 when the run completed (whatever the pass rate), 1 for a usage/config error, 2 when
    the infrastructure failed (bad key, provider down, every trial errored)."""
    from promptloop.agents.runtime import RuntimeConfig
    from promptloop.optimizer.report.plain import errored_trials
    from promptloop.optimizer.run.models import ModelIds
    from promptloop.optimizer.run.runner import AllTrialsErroredError, RunOptions
    from promptloop.optimizer.workflows.context import state_dir as resolve_state
    from promptloop.optimizer.workflows.evaluate import EvalRequest, evaluate

    def body() -> None:
        agent_name, which = split_agent_suite(agent, suite)  # a bad name: nothing written
        state = resolve_state(state_dir)
        if agent_name is None and which is None:
            raise ConfigError("give --agent NAME or --suite (an agent, AGENT/SUITE or a suite "
                              f"folder); agents: {', '.join(agent_names()) or 'none'}")
        picked = agent_models(agent_name, {"agent_model": agent_model,
                                           "judge_model": judge_model})
        agent_id = picked.get("agent_model", agent_model)
        judge_id = picked.get("judge_model", judge_model)
        warn_unused_base_url(base_url, agent_id, judge_id)
        request = EvalRequest(
            suite=agent_name or which or "",
            kind=(which or kind) if agent_name else kind,
            prompt=prompt,
            buckets=tuple(bucket or ()),
            task_ids=tuple(task or ()),
            ref=ref,
            models=ModelIds(agent=agent_id, judge=judge_id, base_url=base_url),
            options=RunOptions(
                agent_model=agent_id,
                trials=trials,
                concurrency=concurrency,
                mode=mode.value,
                reuse=not fresh,
                batch=batch,
                runtime=RuntimeConfig(max_turns=max_turns, max_runs=max_runs),
            ),
        )
        try:
            with listening(events, quiet=as_json) as emit:
                run, summary, path = asyncio.run(ui.acknowledged(
                    evaluate(request, state, emit),
                    "stopping: trials finished so far stay in the trial cache... (Ctrl-C "
                    "again forces it)"))
        except AllTrialsErroredError as err:
            ui.error(str(err))
            raise typer.Exit(EXIT_INFRA) from None
        errored = [t for t in run.trials if t.status == "errored"]
        stuck = [t for t in run.trials if t.status in ("errored", "timedOut")]
        for line in errored_trials(stuck):  # which trials, and why: not only a count
            ui.warn(line)
        if as_json:
            ui.print_json(
                {
                    "run": run.run_name,
                    "report": str(path),
                    "sources": run.provenance.sources,
                    "summary": summary.model_dump(mode="json"),
                    "errored": [{"task": t.task_id, "trial": t.trial_index,
                                 "error": t.infra_error or t.failure_reason} for t in errored],
                }
            )
            return
        ui.show_summary(summary, str(path))

    guarded(body)
