"""The `promptloop` command line: a thin typer layer over the Python API.

Exit codes: 0 ok, 1 user/configuration error, 2 infrastructure failure, 130 interrupted.
Every option can also come from a `PROMPTLOOP_*` environment variable or the command's table in
promptloop.toml (see cli/common.py for the precedence). One module per command.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from agents.secrets import keep_from_proc
from optimizer.cli import agent, doctor, nightly, optimize, profile, report, review, ui
from optimizer.cli import eval as eval_cmd
from optimizer.cli import init as init_cmd
from optimizer.cli.calibrate import calibrate
from optimizer.cli.command import PromptloopCommand, PromptloopGroup
from optimizer.cli.common import use_toml
from optimizer.cli.graduate import graduate
from optimizer.cli.health import health
from optimizer.cli.runs import runs
from optimizer.cli.util import EXIT_INTERRUPTED
from optimizer.cli.view import view

app = typer.Typer(
    name="promptloop",
    cls=PromptloopGroup,
    help="Make prompt changes to LLM agents auditable: evaluate suites, propose minimal prompt "
    "patches on git branches, and keep them only when the statistics say they help.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("promptloop")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        typer.echo(f"promptloop {number}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    show_version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_version,
                     help="Print promptloop's version and exit."),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            envvar="PROMPTLOOP_CONFIG",
            help="The project file: \\[agents.<name>] tables and one table of defaults per "
            "command (\\[optimize], \\[eval]...); default: the nearest promptloop.toml from the "
            "current folder up to the repository's top.",
        ),
    ] = None,
) -> None:
    """Load defaults from promptloop.toml; command-line flags and env vars override them."""
    use_toml(ctx, config)


for _name, _fn in (("agent", agent.agent), ("suites", report.suites), ("eval", eval_cmd.eval_),
                   ("report", report.report), ("optimize", optimize.optimize),
                   ("nightly", nightly.nightly), ("review", review.review),
                   ("doctor", doctor.doctor), ("runs", runs), ("view", view),
                   ("health", health), ("graduate", graduate), ("calibrate", calibrate),
                   ("init", init_cmd.init), ("profile", profile.profile)):
    app.command(_name, cls=PromptloopCommand)(_fn)


def main() -> None:
    """Console-script entry point."""
    keep_from_proc()  # a same-user process cannot read our keys from /proc (issue 30)
    try:
        app()
    except KeyboardInterrupt:
        ui.error("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit as done:
        if ui.STOPPED:  # stopped by Ctrl-C and cleaned up: nothing left to wait for
            ui.exit_now(done.code if isinstance(done.code, int) else EXIT_INTERRUPTED)
        raise
