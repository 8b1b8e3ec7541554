"""`promptloop graduate`: move (or copy) a mature capability bucket into the regression suite
on a new git branch."""

from __future__ import annotations

import posixpath
from typing import Annotated

import typer

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import JsonOpt, StateOpt
from promptloop.optimizer.cli.util import guarded, require_repo


def graduate(
    suite: Annotated[str, typer.Option(
        "--agent", envvar=["PROMPTLOOP_AGENT", "PROMPTLOOP_SUITE"], metavar="AGENT",
        help="The agent: the bucket moves from its capability suite to its regression suite.")],
    bucket: Annotated[str, typer.Option(
        "--bucket", metavar="BUCKET", help="The capability bucket to graduate.")],
    copy: Annotated[bool, typer.Option(
        "--copy", help="Copy the tasks (keep them in the capability suite too).")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Graduate even when the bucket is not mature.")] = False,
    base: Annotated[str, typer.Option(
        "--base", metavar="REF",
        help="Git ref to branch from (its suites and prompt history are used).")
    ] = "HEAD",
    window: Annotated[int, typer.Option(
        "--window", min=1, help="Newest runs of the lineage to judge maturity on.")] = 10,
    model: Annotated[str | None, typer.Option(
        "--agent-model", metavar="MODEL",
        help="Agent model of the lineage (default: the model of the newest run).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Check and show the plan; create no branch.")] = False,
    out: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Graduate a bucket: its tasks leave the capability suite for the regression suite.

    The bucket must have 5 consecutive mature runs (pass rate >= 95%) in the lineage of the
    capability suite at --base, and every task of the bucket must have been tried; otherwise
    the command refuses with the figures (--force overrides). The tasks keep their ids and
    folder paths. The change is one commit on a new branch
    promptloop/graduate/<agent>-<bucket>/<id>, made in a temporary worktree: your checkout
    and current branch are not touched. A PR body citing the mature runs is written to
    <state>/graduations/<id>/PR.md.

    Exit codes: 0 branch created (or --dry-run plan shown), 1 unknown suite or bucket, not
    ready, conflicting files or ids, 2 unreadable state folder."""
    from promptloop.optimizer.lifecycle.graduate_git import GraduateRequest
    from promptloop.optimizer.lifecycle.graduate_git import graduate as run_graduate
    from promptloop.optimizer.workflows.context import state_dir

    def body() -> None:
        root = require_repo("graduate")
        record = run_graduate(GraduateRequest(
            repo=root, state_dir=state_dir(out), agent=suite, bucket=bucket, copy=copy,
            force=force, base=base, window=window, agent_model=model, dry_run=dry_run))
        if as_json:
            ui.print_json(record.model_dump(mode="json"))
            return
        verb = "copy" if record.mode == "copy" else "move"
        head = "Plan (dry run)" if record.dry_run else f"Branch {record.branch}"
        ui.out.print(f"{head}: {verb} {len(record.task_ids)} task(s) of {record.bucket} from "
                     f"{record.source_suite} to {record.target_suite}", highlight=False)
        for line in record.reasons:
            ui.out.print(f"  {line}", highlight=False)
        if record.forced:
            ui.warn("the bucket was not ready; graduated because of --force")
        # paths under their common folders (the title names them): two full paths a row ran
        # past 80 columns
        src = _common([f.source for f in record.files])
        dst = _common([f.destination for f in record.files])
        ui.table(f"Files (from {src or '.'}/ to {dst or '.'}/)", ["From", "To"],
                 [[_under(f.source, src), _under(f.destination, dst)] for f in record.files])
        if record.commit:
            ui.info(f"Commit {record.commit[:12]}; PR body: {record.pr_body_path}")

    guarded(body)


def _common(paths: list[str]) -> str:
    """The folder every path is under ('' for none or one path)."""
    if len(paths) < 2:
        return posixpath.dirname(paths[0]) if paths else ""
    return posixpath.commonpath(paths)


def _under(path: str, folder: str) -> str:
    return posixpath.relpath(path, folder) if folder else path
