"""All terminal output (rich). Engine code never prints; it reports through callbacks."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def error(message: str) -> None:
    err.print(f"[bold red]Error:[/] {message}", highlight=False, markup=True)


def warn(message: str) -> None:
    err.print(f"[yellow]Warning:[/] {message}", highlight=False)


def info(message: str) -> None:
    err.print(message, highlight=False)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


@contextmanager
def run_progress(label: str, enabled: bool = True) -> Iterator[Any]:
    """A progress bar for a suite run; yields the callback the runner calls."""
    if not enabled:
        yield lambda _k, _p: None
        return
    progress = Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )
    counts = {"passed": 0, "failed": 0, "errored": 0, "timedOut": 0, "cached": 0}
    task_id = progress.add_task(label, total=None, status="")

    def on_event(kind: str, payload: dict[str, Any]) -> None:
        if kind == "run_start":
            progress.update(task_id, total=payload["total"])
        elif kind == "trial_end":
            counts[payload["status"]] = counts.get(payload["status"], 0) + 1
            if payload.get("cached"):
                counts["cached"] += 1
            status = " ".join(f"{k}={v}" for k, v in counts.items() if v)
            progress.update(task_id, advance=1, status=status)
        elif kind == "warning":
            progress.console.print(f"[yellow]Warning:[/] {payload['message']}")

    with progress:
        yield on_event


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[str(v) for v in r])
    out.print(t)


def show_summary(summary: Any, report_path: str) -> None:
    """The closing per-bucket table of an eval run."""

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.0%}"

    rows = [
        [
            b.bucket,
            b.tasks,
            b.trials,
            pct(b.trial_pass_rate),
            pct(b.task_pass_rate),
            "-" if b.mean_score is None else f"{b.mean_score:.2f}",
            b.errored_trials or "",
        ]
        for b in summary.buckets
    ]
    table(
        f"{summary.suite_name}: task pass {pct(summary.task_pass_rate)}, trial pass "
        f"{pct(summary.trial_pass_rate)} ({summary.passed_trials}/{summary.counted_trials}), "
        f"errored {summary.errored_trials}, cached {summary.cached_trials}",
        ["bucket", "tasks", "trials", "trial pass", "task pass", "mean score", "errored"],
        rows,
    )
    cost = summary.cost.total_usd
    usage = summary.usage
    out.print(
        f"tokens: {usage.total_tokens} (in {usage.input_tokens}, out {usage.output_tokens})"
        f", model calls {usage.model_calls}, retries {usage.retries}; est. cost: "
        f"{'n/a' if cost is None else f'${cost:.4f}'}",
        markup=False,
    )
    out.print(f"report: {report_path}", markup=False)
