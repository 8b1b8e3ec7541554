"""`promptloop agent`: run one agent on one input in a fresh (or given) workspace."""

from __future__ import annotations

import asyncio
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from agents.runtime import DEFAULT_MAX_TURNS
from optimizer.cli import ui
from optimizer.cli.common import RUN, AgentModelOpt, AgentOpt, BaseUrlOpt, JsonOpt
from optimizer.cli.util import guarded
from optimizer.workflows.context import DEFAULT_AGENT_MODEL, ConfigError

_AGENTS = "an agent promptloop.toml declares (card_agent, pkm_agent in promptloop's own)"


def agent(
    content: Annotated[str, typer.Option("--content", help="The raw user input.")],
    agent_name: Annotated[str | None, typer.Argument(help=f"The agent: {_AGENTS}.")] = None,
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
            help="Workspace folder (Facts/, Cards/, PKM/) to start from; the agent runs on a "
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
    base_url: BaseUrlOpt = None,
    published: Annotated[
        str | None,
        typer.Option("--published", help="Publish time 'YYYY-MM-DD HH:MM:SS' (default: now)."),
    ] = None,
    max_turns: Annotated[int, typer.Option(help="Turns per run.", min=1,
                                           rich_help_panel=RUN)] = DEFAULT_MAX_TURNS,
    as_json: JsonOpt = False,
) -> None:
    """Run one agent on one input and show the card / PKM diff and the transcript summary."""
    from optimizer.run.agent_cmd import AgentCommand, run_agent_command, workspace_copy

    def body() -> None:
        published_at = (
            datetime.fromisoformat(published)
            if published
            else datetime.now().replace(microsecond=0)
        )
        name = agent_opt or agent_name
        if not name:
            raise ConfigError("give the agent: promptloop agent NAME (or --agent NAME)")
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
        where = result["workspace"]
        source = result.get("workspace_source")
        note = (f" (a copy of {source}; --in-place writes to it)"
                if source and source != where else "")
        ui.out.print(f"wrote to workspace: {where}{note}", markup=False)
