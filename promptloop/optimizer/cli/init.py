"""`promptloop init`: a runnable project in your repository, then the next commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import JsonOpt
from promptloop.optimizer.cli.util import guarded
from promptloop.optimizer.workflows.context import ConfigError


def init(
    folder: Annotated[Path, typer.Argument(
        help="Where to write the project: the top folder of a git repository.",
        file_okay=False)] = Path("."),
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite the template's files where they already exist.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a commented promptloop.toml with one runnable example agent, a suite of 6 tasks
    in 2 buckets, and print the next commands.

    The example agent (example_agent/agent.py, standard library only) speaks promptloop's trial
    contract (docs/agents.md) and calls the configured model: the embedded one by default, so
    `promptloop eval --agent example` runs at once, with no key. Nothing is written when any of
    the files exists (--force overwrites).

    Exit codes: 0 written, 1 not the top of a git repository, or files in the way."""
    from promptloop.optimizer.workflows.init import InitError, init_project

    def body() -> None:
        try:
            result = init_project(folder, force=force)
        except InitError as err:
            raise ConfigError(str(err)) from None
        if as_json:
            ui.print_json({"root": str(result.root),
                           "files": [p.as_posix() for p in result.files],
                           "overwritten": [p.as_posix() for p in result.overwritten],
                           "next": list(result.next_commands)})
            return
        # the summary is the command's output: stdout (stderr is for progress and errors)
        ui.say(f"wrote {len(result.files)} files into {result.root}:")
        for path in result.files:
            ui.say(f"  {path.as_posix()}")
        ui.say("next: commit them (optimize and review read commits; eval runs the working "
               "tree at once), then run:")
        ui.say("  git add -A && git commit -m 'promptloop init'")
        for command in result.next_commands:
            # review compares the checked-out branch with the base: nothing to see on it yet
            when = ("   (on a branch where you changed the prompt, committed)"
                    if command.startswith("promptloop review") else "")
            ui.say(f"  {command}{when}")

    guarded(body)
