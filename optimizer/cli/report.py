"""`promptloop suites` and `promptloop report`: what there is to run, and what a run found."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from optimizer.cli import ui
from optimizer.cli.common import JsonOpt, StateOpt
from optimizer.cli.util import guarded
from optimizer.core.config import ConfigError


def suites(
    path: Annotated[
        Path | None,
        typer.Argument(help="A suite folder or a folder of suites; default: the bundled tasks/."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List suites with their tasks and failure buckets."""
    from optimizer.core.suites import TASKS_DIR, load_suite

    def body() -> None:
        root = path or TASKS_DIR
        if not root.exists():
            raise ConfigError(f"{root}: no such folder")
        roots = (
            [root]
            if (root / "suite.json").is_file()
            else sorted(p.parent for p in root.glob("**/suite.json"))
        )
        if not roots:
            raise ConfigError(f"{root}: no suite.json found below this folder")
        listing: list[dict[str, Any]] = []
        for r in roots:
            s = load_suite(r)
            listing.append(
                {
                    "name": s.name,
                    "agent": s.agent_name,
                    "kind": s.config.kind,
                    "path": str(r),
                    "tasks": len(s.tasks),
                    "trials": sum(t.spec.trials_per_run for t in s.tasks),
                    "buckets": {b: [t.id for t in ts] for b, ts in sorted(s.buckets.items())},
                }
            )
        if as_json:
            ui.print_json(listing)
            return
        for s_ in listing:
            ui.table(
                f"{s_['name']} ({s_['agent']}, {s_['kind']}) - {s_['tasks']} tasks, "
                f"{s_['trials']} trials - {s_['path']}",
                ["bucket", "tasks", "task ids"],
                [[b, len(ids), ", ".join(ids)] for b, ids in s_["buckets"].items()],
            )

    guarded(body)


def report(
    run: Annotated[str, typer.Argument(help="Run name, 'latest', or a report JSON path.")],
    failing: Annotated[
        bool,
        typer.Option(
            "--failing",
            help="Export failing trials (what the proposer reads) instead of the full summary.",
        ),
    ] = False,
    bucket: Annotated[
        list[str] | None, typer.Option("--bucket", help="Bucket(s) for --failing.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="md | json | html")] = "md",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file.")
    ] = None,
    base: Annotated[
        str | None,
        typer.Option("--base", help="With --format html: a base run to compare against."),
    ] = None,
    out: StateOpt = None,
) -> None:
    """Show a saved run as Markdown, JSON or a self-contained HTML page."""
    from optimizer.git import state_dir
    from optimizer.workflows.present import render_report

    def body() -> None:
        if fmt not in ("md", "json", "html"):
            raise ConfigError(f"--format must be md, json or html, not '{fmt}'")
        text = render_report(
            state_dir(out), run, fmt, failing=failing, buckets=bucket or [], base=base
        )
        if output:
            output.write_text(text, encoding="utf-8")
            ui.info(f"wrote {output}")
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")

    guarded(body)
