"""The click classes behind every `promptloop` command: help that fits 80 columns, old flag
spellings, and usage errors that exit 1 with one `Error:` line.

- Help: docstrings are re-flowed (one paragraph per blank line), options sit in panels
  (`rich_help_panel`), and environment variables are listed once in an epilogue instead of in
  every option's help.
- Renamed flags (issue 10: a change of CLI flags keeps the old spelling working or fails with
  the new one named): `RENAMED` maps an old spelling to the new one; the command line is
  respelled before click parses it, so old spellings work without showing in `--help`, and
  old keys of a promptloop.toml table are read under their new names.
- Exit codes: a usage error (unknown option, bad or missing value, bad choice) exits 1, like
  every user error; exit 2 stays for infrastructure failures (see cli/util.py).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import typer
from typer._click import core as click_core  # typer vendors click; no public name for these
from typer._click import exceptions as click_exc
from typer._click import utils as click_utils
from typer.core import TyperCommand, TyperGroup, TyperOption

from promptloop.optimizer.cli import help as help_text
from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.util import EXIT_INTERRUPTED, EXIT_OK, EXIT_USER, TOML_META


@dataclass(frozen=True)
class Renamed:
    """A flag spelling that changed. `works`: the old spelling is a hidden alias of the new
    one; otherwise it fails with a message naming the new spelling."""

    commands: tuple[str, ...]
    old: str
    new: str
    works: bool = True

    @property
    def old_key(self) -> str:
        """The old spelling as a promptloop.toml key / parameter name."""
        return self.old.removeprefix("--").replace("-", "_")

    @property
    def new_key(self) -> str:
        return self.new.removeprefix("--").replace("-", "_")


RENAMED: tuple[Renamed, ...] = (
    # the state folder had two names; one shows, the other still works
    Renamed(("eval", "optimize", "review", "report", "nightly", "doctor", "runs", "view",
             "health", "graduate", "calibrate"), "--out", "--state-dir"),
    # optimize's confirmation trials became the sequential gate's trials per round
    Renamed(("optimize",), "--confirm-trials", "--round-trials"),
    # `agent` spells its model like every other command
    Renamed(("agent", "health", "graduate"), "--model", "--agent-model"),
    # the suite folder had three names: eval --kind, optimize --suites; now --suite AGENT/SUITE
    # (--kind and --suites stay as hidden options, since they take a different value)
    # review's extra trials confirm a suspected regression once; optimize's --round-trials are
    # the trials of each round of its sequential gate: two ideas, two names
    Renamed(("review",), "--round-trials", "--confirm-trials"),
    # graduate and profile name an agent (all its suites), as --agent does everywhere
    Renamed(("graduate", "profile"), "--suite", "--agent"),
    # doctor's folder of suites is a --suite like every command's (an agent, AGENT/SUITE, or
    # a folder)
    Renamed(("doctor",), "--tasks", "--suite"),
    # --base is a git ref everywhere; report's base is a run
    Renamed(("report",), "--base", "--base-run"),
    # one name for the proposals per bucket (optimize works on one bucket)
    Renamed(("nightly",), "--iterations-per-bucket", "--iterations"),
)


def renamed_for(command: str) -> dict[str, Renamed]:
    return {r.old: r for r in RENAMED if command in r.commands}


def renamed_keys(command: str) -> dict[str, str]:
    """Old promptloop.toml keys of a command's table -> their new names."""
    return {r.old_key: r.new_key for r in RENAMED if command in r.commands and r.works}


def respell(command: str, args: Sequence[str], takes_value: set[str]) -> list[str]:
    """`args` with old flag spellings replaced by the new ones (`--old VALUE` and `--old=VALUE`);
    values of options (`takes_value`) and everything after `--` are left alone. A spelling
    that no longer works raises a usage error naming the new one."""
    renamed = renamed_for(command)
    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            out += [arg, *rest]
            break
        name, eq, value = arg.partition("=")
        entry = renamed.get(name)
        if entry is not None:
            if not entry.works:
                raise click_exc.UsageError(f"{entry.old} was renamed to {entry.new}")
            name = entry.new
        out.append(name + eq + value)
        if name in takes_value and not eq:
            following = next(rest, None)
            if following is not None:
                out.append(following)
    return out


def unwrap(text: str) -> str:
    """A docstring's paragraphs, each on one line (the terminal wraps them to its width)."""
    paragraphs = [" ".join(line.strip() for line in p.splitlines() if line.strip())
                  for p in text.strip().split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def env_vars(params: Sequence[Any]) -> list[tuple[str, str]]:
    """(environment variable, option) of a command's visible options: the first variable of
    each (any after it is an old spelling that still works, not shown)."""
    pairs: list[tuple[str, str]] = []
    for p in params:
        if getattr(p, "hidden", False) or not p.opts:
            continue
        names = [p.envvar] if isinstance(p.envvar, str) else list(p.envvar or [])
        pairs += [(name, p.opts[0]) for name in names[:1]]
    return pairs


class PromptloopCommand(TyperCommand):
    """A command whose help fits the terminal and whose old flag spellings still parse."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = unwrap(self.help or "")
        for p in self.params:
            if isinstance(p, TyperOption):
                p.show_envvar = False  # listed once, after the options
        self.env = env_vars(self.params)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        ui.show_help(help_text.page(self, ctx, self.env))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        takes_value = {o for p in self.params if isinstance(p, TyperOption) and not p.is_flag
                       for o in p.opts}
        try:
            args = respell(self.name or "", args, takes_value)
        except click_exc.UsageError as err:
            err.ctx, err.cmd = ctx, self
            raise
        return super().parse_args(ctx, args)


def _usage_message(err: Any) -> str:
    """Click's message, saying so when the bad value came from an environment variable or
    a promptloop.toml table (naming the file, table and key)."""
    message = err.format_message()
    param, ctx = getattr(err, "param", None), err.ctx
    if param is not None and ctx is not None and param.name:
        source = ctx.get_parameter_source(param.name)
        if source == click_core.ParameterSource.ENVIRONMENT and param.envvar:
            names = [param.envvar] if isinstance(param.envvar, str) else param.envvar
            message += f" (from {' or '.join(names)})"
        elif source == click_core.ParameterSource.DEFAULT_MAP:
            where = ctx.meta.get(TOML_META, "promptloop.toml")
            key = param.name.replace("_", "-")
            message += f" (from {where} [{ctx.info_name}] key '{key}')"
    return message


def usage_error(err: Any) -> int:
    """One `Error:` line and a pointer to --help; the usage exit code."""
    ui.error(_usage_message(err))
    if err.ctx is not None:
        ui.info(f"Try '{err.ctx.command_path} --help' for help.")
    return EXIT_USER


def command_of(argv: Sequence[str], commands: Sequence[str]) -> str:
    """The command a command line runs (`promptloop --config f.toml eval ...` -> `eval`);
    `promptloop` when it names none."""
    rest = iter(argv)
    for arg in rest:
        if arg == "--config":
            next(rest, None)
        elif arg in commands:
            return arg
        elif not arg.startswith("-"):
            break
    return "promptloop"


class PromptloopGroup(TyperGroup):
    """The `promptloop` group: click's own error handling replaced by the exit codes of the
    README (a usage error is a user error, exit 1), its help laid out as every command's
    (commands in the order they are added: `init` first), and with `--json` one envelope on stdout
    (`{"command", "ok", "exit_code", "result" | "error"}`, docs/json-envelope.schema.json)
    for success and failure alike: a command only hands its result (`ui.print_json`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = unwrap(self.help or "")

    def format_help(self, ctx: Any, formatter: Any) -> None:
        ui.show_help(help_text.page(self, ctx, env_vars(self.params)))

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        run = super().main
        if not standalone_mode:
            return run(args, prog_name, complete_var, False, windows_expand_args, **extra)
        argv = list(args) if args is not None else sys.argv[1:]
        ui.ERRORS.clear()
        ui.JSON.reset()
        ui.stop_on_sigterm()
        try:
            code = run(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except click_exc.NoArgsIsHelpError:
            code = EXIT_OK  # the help was printed
        except click_exc.UsageError as err:
            code = usage_error(err)
        except click_exc.ClickException as err:
            ui.error(err.format_message())
            code = EXIT_USER
        except typer.Abort:
            ui.error("aborted")
            code = EXIT_INTERRUPTED
        except KeyboardInterrupt:
            code, message = ui.stopped()
            ui.error(message)
        except BrokenPipeError:
            sys.exit(ui.pipe_closed())  # nobody reads stdout: no envelope either
        except SystemExit:
            if isinstance(sys.stdout, click_utils.PacifyFlushWrapper):
                sys.exit(ui.pipe_closed())  # click's own EPIPE exit (1) while printing help
            raise
        code = code if isinstance(code, int) else EXIT_OK
        options = argv[:argv.index("--")] if "--" in argv else argv
        helped = {"-h", "--help"} & set(options)
        if (ui.JSON.wanted or "--json" in options) and not helped:
            # --json promised JSON on stdout: success or failure, one envelope, never nothing
            ui.write_envelope(command_of(options, list(self.commands)), code)
        sys.exit(code)
