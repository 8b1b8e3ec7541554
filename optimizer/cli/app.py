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
from optimizer.cli.command import PromptloopCommand, PromptloopGroup, env_vars
from optimizer.cli.common import JsonOpt, use_toml
from optimizer.cli.graduate import graduate
from optimizer.cli.health import health
from optimizer.cli.help import page as help_page
from optimizer.cli.runs import runs
from optimizer.cli.util import EXIT_INTERRUPTED, guarded
from optimizer.cli.view import view
from optimizer.workflows.context import ConfigError, did_you_mean

app = typer.Typer(
    name="promptloop",
    cls=PromptloopGroup,
    help="Make prompt changes to LLM agents auditable: evaluate suites, propose minimal prompt "
    "patches on git branches, and keep them only when the statistics say they help.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command inherits it
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
            help="The project file: [agents.<name>] tables and one table of defaults per "
            "command ([optimize], [eval]...); default: the nearest promptloop.toml from the "
            "current folder up to the repository's top.",
        ),
    ] = None,
) -> None:
    """Load defaults from promptloop.toml; command-line flags and env vars override them."""
    use_toml(ctx, config)


def help_(
    ctx: typer.Context,
    command: Annotated[str | None, typer.Argument(
        metavar="COMMAND", help="The command to explain (default: promptloop itself).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the help of a command: `promptloop help optimize` is `promptloop optimize --help`."""
    group, root = ctx.parent.command if ctx.parent else ctx.command, ctx.parent or ctx

    def body() -> None:
        target, target_ctx = group, root
        if command is not None:
            names = group.list_commands(root)  # type: ignore[attr-defined]
            found = group.get_command(root, command)  # type: ignore[attr-defined]
            if found is None:
                raise ConfigError(f"no command '{command}'.{did_you_mean(command, names)} "
                                  f"Commands: {', '.join(names)}")
            target = found
            target_ctx = found.make_context(command, [], parent=root, resilient_parsing=True)
        env = getattr(target, "env", None) or env_vars(target.params)
        page = help_page(target, target_ctx, env)
        if as_json:
            ui.print_json({"command": command or "promptloop", "usage": page.usage,
                           "text": ui.help_text(page)})
        else:
            ui.show_help(page)

    guarded(body)


COMMANDS = (("init", init_cmd.init), ("doctor", doctor.doctor), ("agent", agent.agent),
            ("suites", report.suites), ("eval", eval_cmd.eval_), ("report", report.report),
            ("runs", runs), ("optimize", optimize.optimize), ("review", review.review),
            ("nightly", nightly.nightly), ("profile", profile.profile), ("health", health),
            ("graduate", graduate), ("calibrate", calibrate), ("view", view), ("help", help_))
"""Every command, in the order the root help lists them: the first day's first (init,
doctor), then evaluating, optimizing, the suite's life, and the viewer."""

for _name, _fn in COMMANDS:
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
