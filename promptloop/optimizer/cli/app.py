"""The `promptloop` command line: a thin typer layer over the Python API.

Exit codes: 0 ok, 1 user/configuration error, 2 infrastructure failure, 130 interrupted.
Every option can also come from a `PROMPTLOOP_*` environment variable or the command's table in
promptloop.toml (see cli/common.py for the precedence). One module per command.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from promptloop.agents.secrets import keep_from_proc
from promptloop.optimizer.cli import agent, doctor, nightly, optimize, profile, report, review, ui
from promptloop.optimizer.cli import eval as eval_cmd
from promptloop.optimizer.cli import init as init_cmd
from promptloop.optimizer.cli.calibrate import calibrate
from promptloop.optimizer.cli.command import PromptloopCommand, PromptloopGroup, env_vars
from promptloop.optimizer.cli.common import JsonOpt, use_toml
from promptloop.optimizer.cli.graduate import graduate
from promptloop.optimizer.cli.health import health
from promptloop.optimizer.cli.help import page as help_page
from promptloop.optimizer.cli.runs import runs
from promptloop.optimizer.cli.util import EXIT_INTERRUPTED, guarded
from promptloop.optimizer.cli.view import view
from promptloop.optimizer.workflows.context import ConfigError, did_you_mean, isolate_git

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
    ui.tolerate_encoding()
    dropped = isolate_git()
    if dropped:
        ui.info(f"note: {', '.join(dropped)} unset for promptloop: it finds the repository from "
                "the current folder, and never writes your checkout, branch or index")
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
    # asyncio's own warnings ("Loop ... that handles pid ... is closed" when a second Ctrl-C
    # forces the stop with agent processes still exiting) are no news to a user
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    try:
        app()
    except KeyboardInterrupt:
        code, message = ui.stopped()
        ui.error(message)
        sys.exit(code)
    except BrokenPipeError:
        sys.exit(ui.pipe_closed())
    except SystemExit as done:
        if ui.STOPPED or ui.TERMINATED:  # stopped and cleaned up: nothing left to wait for
            ui.exit_now(done.code if isinstance(done.code, int) else EXIT_INTERRUPTED)
        if _embedded_model_abandoned():  # its threads still run: skip the interpreter's exit
            ui.exit_now(done.code if isinstance(done.code, int) else 0 if done.code is None
                        else 1)
        raise
    if _embedded_model_abandoned():
        ui.exit_now(0)


def _embedded_model_abandoned() -> bool:
    """The embedded model's server was abandoned mid-generation (`local.server_abandoned`);
    never imports the provider (a command that did not use it has not imported it)."""
    local = sys.modules.get("promptloop.agents.llm.providers.local")
    return bool(local is not None and local.server_abandoned())
