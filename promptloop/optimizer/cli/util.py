"""Helpers shared by every CLI command: exit codes and error mapping."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import typer
from pydantic import ValidationError

from promptloop.agents.llm.errors import CredentialsError, ModelConfigError, ModelError
from promptloop.optimizer.cli import ui
from promptloop.optimizer.lifecycle.errors import LifecycleError
from promptloop.optimizer.report.store import ReportError, RunNotFoundError
from promptloop.optimizer.run.runner import AllTrialsErroredError
from promptloop.optimizer.workflows.context import (
    CREATED,
    ConfigError,
    GitOpsError,
    SuiteError,
    drop_created_state,
)

T = TypeVar("T")
EXIT_OK, EXIT_USER, EXIT_INFRA, EXIT_INTERRUPTED = 0, 1, 2, 130
TOML_META = "promptloop.toml"
"""`ctx.meta` key of the promptloop.toml the defaults came from (set by common.use_toml; read
by command.py and `_from_toml` to name the file a bad value came from)."""


def guarded(fn: Callable[[], T]) -> T:
    """Run a command body, mapping errors to one `Error:` line and the README's exit code:
    1 for user/configuration errors (unknown names and runs, refused graduations, bad labels,
    git refs, a model key that is not set), 2 for infrastructure failures (models, every
    trial errored, the disk, an unreadable report or index in the state folder), 130 for
    Ctrl-C, 143 for SIGTERM. The one mapping every command uses. A user error removes the
    state folder the command created (unless it holds a run report)."""
    CREATED.clear()
    try:
        return fn()
    except CredentialsError as err:
        # no key set is configuration (set the variable: exit 1); a rejected key is not
        ui.error(str(err))
        raise typer.Exit(EXIT_USER if err.missing else EXIT_INFRA) from None
    except (ConfigError, SuiteError, RunNotFoundError, GitOpsError, LifecycleError,
            ModelConfigError, ValueError) as err:
        # ModelConfigError: a malformed model id, a model package not installed (as doctor
        # says it: configuration, exit 1)
        drop_created_state()
        ui.error(str(err))  # ui.error escapes: a name from a user's file may look like markup
        raise typer.Exit(EXIT_USER) from None
    except BrokenPipeError:
        raise  # the reader of stdout left (`| head`): the group ends quietly (`pipe_closed`)
    except (ModelError, AllTrialsErroredError, ReportError, OSError) as err:
        # the message says what failed; a class name (CredentialsError) is not for the user
        ui.error(str(err) or type(err).__name__)
        raise typer.Exit(EXIT_INFRA) from None
    except KeyboardInterrupt:
        code, message = ui.stopped()
        ui.error(message)
        raise typer.Exit(code) from None


def option_errors(err: ValidationError) -> str:
    """A pydantic error of a command's config as `--option: problem` pairs; a value that came
    from promptloop.toml names the file, table and key."""
    return "; ".join(
        f"--{'.'.join(str(p) for p in e['loc']).replace('_', '-')}: "
        f"{e['msg'].removeprefix('Value error, ')}{_from_toml(e['loc'])}"
        for e in err.errors()
    )


def _from_toml(loc: tuple[int | str, ...]) -> str:
    """` (from promptloop.toml [optimize] key 'x')` when the option's value came from there."""
    from typer._click import core as click_core  # typer vendors click
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    name = str(loc[-1]) if loc else ""
    if ctx is None or name not in ctx.params:
        return ""
    if ctx.get_parameter_source(name) != click_core.ParameterSource.DEFAULT_MAP:
        return ""
    where = ctx.meta.get(TOML_META, "promptloop.toml")
    return f" (from {where} [{ctx.info_name}] key '{name.replace('_', '-')}')"


def require_repo(command: str) -> Path:
    """The git repository holding the current folder; a user error naming `command` outside one."""
    from promptloop.optimizer.workflows.context import repo_root

    root = repo_root()
    if root is None:
        raise ConfigError(f"{command} needs a git repository (run it inside your prompt repo)")
    return root
