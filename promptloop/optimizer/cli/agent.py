"""`promptloop agent`: run one agent on one task of its suites (or one input) and show what
came of it: any agent through the same trial road as `eval`; a bundled agent given only
--content in a workspace of its own, with its card or PKM diff."""

from __future__ import annotations

import asyncio
import json
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from promptloop.agents.runtime import DEFAULT_MAX_TURNS
from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import (
    RUN,
    AgentModelOpt,
    AgentOpt,
    BaseUrlOpt,
    JsonOpt,
    JudgeModelOpt,
    StateOpt,
    agent_models,
    listening,
)
from promptloop.optimizer.cli.util import EXIT_INFRA, guarded
from promptloop.optimizer.workflows.context import DEFAULT_AGENT_MODEL, ConfigError

_AGENTS = "an agent promptloop.toml declares (card_agent, pkm_agent in promptloop's own)"


def agent(
    agent_name: Annotated[str | None, typer.Argument(help=f"The agent: {_AGENTS}.")] = None,
    content: Annotated[str | None, typer.Option(
        "--content", help="Run this input (a task's input.content) instead of a task.")] = None,
    task: Annotated[str | None, typer.Option(
        "--task", metavar="TASK", help="The task to run (default: the first of the suite).")
    ] = None,
    suite: Annotated[str | None, typer.Option(
        "--suite", metavar="SUITE", help="One of the agent's suites, or a suite folder or "
        ".jsonl file (default: its first).")] = None,
    agent_opt: AgentOpt = None,
    fact_id: Annotated[
        str,
        typer.Option("--fact-id", help="Fact id YYYY/MM/DD.md#ts_N; default: today's date, ts_1."),
    ] = "",
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            metavar="DIR",
            help="A bundled agent's workspace (Facts/, Cards/, PKM/) to start from; it runs on a "
            "copy of it (printed) unless --in-place. Default: a fresh temp one.",
            file_okay=False,
        ),
    ] = None,
    in_place: Annotated[
        bool,
        typer.Option("--in-place", help="Run in the --workspace folder itself: its files may "
                     "be rewritten (e.g. another fact's card)."),
    ] = False,
    agent_model: AgentModelOpt = DEFAULT_AGENT_MODEL,
    judge_model: JudgeModelOpt = None,
    base_url: BaseUrlOpt = None,
    published: Annotated[
        str | None,
        typer.Option("--published", help="Publish time 'YYYY-MM-DD HH:MM:SS' (default: now "
                     "for --content, else the task's).")
    ] = None,
    max_turns: Annotated[int, typer.Option(help="Turns per run.", min=1,
                                           rich_help_panel=RUN)] = DEFAULT_MAX_TURNS,
    state_dir: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run one agent on one task (or one input) and show its result and conversation.

    Any agent promptloop.toml declares runs one trial of a task of its suites (--task,
    --suite; default: the first task of its first suite), or of --content, through its
    adapter exactly as `eval` runs it: the outcome, each grader's score and the whole
    conversation are shown; nothing is stored as a run. A bundled agent (card_agent,
    pkm_agent) given only --content runs in a workspace of its own (--workspace) and shows
    what it wrote there (its card or PKM diff)."""
    from promptloop.optimizer.run.agent_cmd import AgentCommand, run_agent_command, workspace_copy
    from promptloop.optimizer.workflows.agent_trial import is_in_process

    def body() -> None:
        name = agent_opt or agent_name
        if not name:
            raise ConfigError("give the agent: promptloop agent NAME (or --agent NAME)")
        if task is not None or suite is not None or content is None or not is_in_process(name):
            _trial(name)
            return
        published_at = (
            datetime.fromisoformat(published)
            if published
            else datetime.now().replace(microsecond=0)
        )
        cmd = AgentCommand(
            agent_name=name,
            content=content,
            fact_id=fact_id,
            workspace=workspace,
            model=agent_model,
            base_url=base_url,
            published_at=published_at,
            max_turns=max_turns,
        )
        if workspace is None:
            with tempfile.TemporaryDirectory(prefix="promptloop-agent-") as tmp:
                result = asyncio.run(run_agent_command(cmd, Path(tmp)))
        else:
            target = workspace if in_place else workspace_copy(workspace)
            result = asyncio.run(run_agent_command(cmd, target))
            result["workspace_source"] = str(workspace)
        _show_agent_result(result, as_json)

    def _trial(name: str) -> None:
        from promptloop.optimizer.run.models import ModelIds
        from promptloop.optimizer.workflows.agent_trial import AgentTrialRequest, run_agent_trial
        from promptloop.optimizer.workflows.context import check_command
        from promptloop.optimizer.workflows.context import state_dir as resolve_state

        check_command(name)  # a command that cannot start is the key's error, before the trial
        picked = agent_models(name, {"agent_model": agent_model, "judge_model": judge_model})
        request = AgentTrialRequest(
            agent=name, state_dir=resolve_state(state_dir), task_id=task, suite=suite,
            content=content, published_at=published, max_turns=max_turns,
            models=ModelIds(agent=picked.get("agent_model", agent_model),
                            judge=picked.get("judge_model", judge_model), base_url=base_url))
        with listening(None, quiet=as_json) as emit:
            result = asyncio.run(run_agent_trial(request, emit))
        _show_trial(result.model_dump(mode="json"), as_json)
        if result.status == "errored":  # infrastructure: the trial says nothing of the agent
            ui.error(f"the trial errored: {result.failure_reason or 'no reason recorded'}")
            raise typer.Exit(EXIT_INFRA)

    guarded(body)


def _show_trial(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        ui.print_json(result)
        return
    ui.out.rule(f"{result['agent']} on task {result['task_id']} ({result['suite']})")
    reason = f": {result['failure_reason']}" if result.get("failure_reason") else ""
    ui.out.print(f"status: {result['status']}{reason}", markup=False, highlight=False)
    ui.out.rule("input")
    ui.out.print(json.dumps(result["input"], indent=2, ensure_ascii=False), markup=False)
    ui.out.rule("outcome")
    ui.out.print(json.dumps(result["outcome"], indent=2, ensure_ascii=False), markup=False)
    ui.out.rule("grades")
    for s in result["scores"]:
        mark = {True: "pass", False: "FAIL", None: "n/a "}[s["passed"]]
        ui.out.print(f"{mark} {s['grader']}: {s['rationale']}", markup=False, highlight=False)
    if not result["scores"]:
        why = result.get("failure_reason") or result["status"]
        ui.out.print(f"(not graded: {why})", markup=False, highlight=False)
    ui.out.rule("conversation")
    for m in result["messages"]:
        ui.out.print(f"[{m['role']}] {m['content']}", markup=False, highlight=False)
        for c in m["tool_calls"]:
            ui.out.print(f"  -> {c['name']}({json.dumps(c['arguments'], ensure_ascii=False)})",
                         markup=False, highlight=False)
    if not result["messages"]:
        ui.out.print("(no message recorded)", markup=False)
    for e in result["events"]:  # "timing: 1.086s" is the trial's wall time
        kind, _, what = str(e).partition(": ")
        ui.out.print(f"trial wall time: {what}" if kind == "timing" else f"event {e}",
                     markup=False, highlight=False)
    ui.out.print(result["summary"], markup=False, highlight=False)


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
        where = result["workspace"]
        source = result.get("workspace_source")
        note = (f" (a copy of {source}; --in-place writes to it)"
                if source and source != where else "")
        ui.out.print(f"wrote to workspace: {where}{note}", markup=False)
