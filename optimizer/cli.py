"""The `promptloop` command line: a thin typer layer over the Python API.

Exit codes: 0 ok, 1 user/configuration error, 2 infrastructure failure, 130 interrupted.
Every option can also come from a `PROMPTLOOP_*` environment variable.
"""

from __future__ import annotations

import asyncio
import difflib
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from agents.llm.errors import ModelError
from optimizer import ui
from optimizer.config import DEFAULT_AGENT_MODEL, ConfigError
from optimizer.suite import SuiteError

app = typer.Typer(
    name="promptloop",
    help="Make prompt changes to LLM agents auditable: evaluate suites, propose minimal prompt "
    "patches on git branches, and keep them only when the statistics say they help.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)

T = TypeVar("T")
EXIT_OK, EXIT_USER, EXIT_INFRA, EXIT_INTERRUPTED = 0, 1, 2, 130

ModelOpt = Annotated[
    str,
    typer.Option("--model", "--agent-model", envvar="PROMPTLOOP_AGENT_MODEL",
                 help="Agent model id: anthropic:<model>, openai:<model>, local:smollm2."),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", envvar="OPENAI_BASE_URL",
                 help="Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp, ...)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def guarded(fn: Callable[[], T]) -> T:
    """Run a command body, mapping errors to one `Error:` line and a meaningful exit code."""
    try:
        return fn()
    except (ConfigError, SuiteError, ValueError) as err:
        ui.error(str(err))
        raise typer.Exit(EXIT_USER) from None
    except ModelError as err:
        ui.error(f"{type(err).__name__}: {err}")
        raise typer.Exit(EXIT_INFRA) from None
    except KeyboardInterrupt:
        ui.error("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None


@app.command()
def agent(
    agent_name: Annotated[str, typer.Argument(help="card_agent or pkm_agent.")],
    content: Annotated[str, typer.Option("--content", help="The raw user input.")],
    fact_id: Annotated[str, typer.Option("--fact-id", help="Fact id YYYY/MM/DD.md#ts_N; "
                                         "default: today's date, ts_1.")] = "",
    workspace: Annotated[Path | None, typer.Option(
        "--workspace", help="Workspace folder (Facts/, Cards/, PKM/). Default: a fresh temp one.",
        file_okay=False)] = None,
    model: ModelOpt = DEFAULT_AGENT_MODEL,
    base_url: BaseUrlOpt = None,
    published: Annotated[str | None, typer.Option(
        "--published", help="Publish time 'YYYY-MM-DD HH:MM:SS' (default: now).")] = None,
    max_turns: Annotated[int, typer.Option(help="Turns per run.", min=1)] = 12,
    as_json: JsonOpt = False,
) -> None:
    """Run one agent on one input and show the card / PKM diff and the transcript summary."""
    from optimizer.agent_cmd import AgentCommand, run_agent_command

    def body() -> None:
        published_at = datetime.fromisoformat(published) if published else datetime.now().replace(
            microsecond=0)
        cmd = AgentCommand(agent_name=agent_name, content=content, fact_id=fact_id,
                           workspace=workspace, model=model, base_url=base_url,
                           published_at=published_at, max_turns=max_turns)
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
        ui.out.print(f"{mark} {c['tool_name']}({c['arguments_short']}) -> {c['result_short']}",
                     markup=False)
    ui.out.rule("transcript")
    ui.out.print(result["summary"], markup=False)
    if result.get("workspace"):
        ui.out.print(f"workspace: {result['workspace']}", markup=False)


@app.command()
def suites(
    path: Annotated[Path | None, typer.Argument(help="A suite folder or a folder of suites; "
                                                "default: the bundled tasks/.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List suites with their tasks and failure buckets."""
    from optimizer.suite import TASKS_DIR, load_suite

    def body() -> None:
        root = path or TASKS_DIR
        if not root.exists():
            raise ConfigError(f"{root}: no such folder")
        roots = [root] if (root / "suite.json").is_file() else sorted(
            p.parent for p in root.glob("**/suite.json"))
        if not roots:
            raise ConfigError(f"{root}: no suite.json found below this folder")
        listing = []
        for r in roots:
            s = load_suite(r)
            listing.append({
                "name": s.name, "agent": s.agent_name, "kind": s.config.kind, "path": str(r),
                "tasks": len(s.tasks),
                "trials": sum(t.spec.trials_per_run for t in s.tasks),
                "buckets": {b: [t.id for t in ts] for b, ts in sorted(s.buckets.items())},
            })
        if as_json:
            ui.print_json(listing)
            return
        for s_ in listing:
            ui.table(f"{s_['name']} ({s_['agent']}, {s_['kind']}) - {s_['tasks']} tasks, "
                     f"{s_['trials']} trials - {s_['path']}",
                     ["bucket", "tasks", "task ids"],
                     [[b, len(ids), ", ".join(ids)] for b, ids in s_["buckets"].items()])

    guarded(body)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        ui.error("interrupted")
        sys.exit(EXIT_INTERRUPTED)


def did_you_mean(value: str, options: list[str]) -> str:
    hint = difflib.get_close_matches(value, options, n=1)
    return f" Did you mean '{hint[0]}'?" if hint else ""
