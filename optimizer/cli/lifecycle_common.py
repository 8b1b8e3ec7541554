"""What the lifecycle commands (health, graduate, calibrate) share: the state-folder option
and the mapping of errors to one `Error:` line and an exit code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from optimizer.cli import ui
from optimizer.cli.util import EXIT_INFRA, EXIT_INTERRUPTED, EXIT_USER
from optimizer.core.buckets import BucketError
from optimizer.core.config import ConfigError
from optimizer.core.suites import SuiteError
from optimizer.git import GitOpsError
from optimizer.lifecycle.errors import LifecycleError
from optimizer.report.store import ReportError, RunNotFoundError

T = TypeVar("T")

StateOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        envvar="PROMPTLOOP_HOME",
        help="State folder (runs, health, calibration; default: <repo>/.promptloop).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def run_command(fn: Callable[[], T]) -> T:
    """Exit 1 for what the user can fix (unknown names, refused graduations, bad labels, git
    refs), 2 when the state folder cannot be read or written, 130 on Ctrl-C."""
    try:
        return fn()
    except (LifecycleError, BucketError, ConfigError, SuiteError, GitOpsError,
            RunNotFoundError) as err:
        ui.error(str(err))
        raise typer.Exit(EXIT_USER) from None
    except (ReportError, OSError) as err:
        ui.error(f"{type(err).__name__}: {err}")
        raise typer.Exit(EXIT_INFRA) from None
    except KeyboardInterrupt:
        ui.error("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None
