"""All terminal output (rich). Engine code never prints; it reports typed events
(optimizer/core/events.py) that `LoopDisplay` draws."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from optimizer.core.events import (
    BaselineReady,
    BudgetStopped,
    CandidateEvaluating,
    CandidateStopped,
    ConfirmStarted,
    Event,
    GateStage,
    IterationAbandoned,
    Phase,
    ProposalRefused,
    ProposalRequested,
    RunFinished,
    RunStarted,
    RunWarning,
    ScreeningRound,
    StepEstimated,
    TrialFinished,
    VerdictReached,
)
from optimizer.gate.compare import BucketComparison
from optimizer.report import fmt
from optimizer.report.summary import RunSummary, failed_text
from optimizer.report.table import Table as TableView
from optimizer.report.table import bucket_table, comparison_table, gate_table

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def error(message: str) -> None:
    err.print(f"[bold red]Error:[/] {escape(message)}", highlight=False, markup=True)


def warn(message: str) -> None:
    err.print(f"[yellow]Warning:[/] {escape(message)}", highlight=False)


def info(message: str) -> None:
    err.print(message, highlight=False, markup=False)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


_TONE_STYLE = {"": "", "up": "green", "down": "red", "same": "dim", "alert": "magenta"}


def _style(tone: str, strong: bool) -> str:
    return f"{_TONE_STYLE[tone]} bold".strip() if strong else _TONE_STYLE[tone]


@dataclass(frozen=True)
class Layout:
    """How much of a table view-model a terminal shows, from the roomiest to the tightest."""

    boxed: bool
    brief: bool
    """Abbreviated column titles."""
    details: bool
    """Detail columns (supporting evidence) shown."""


LAYOUTS = (Layout(True, False, True), Layout(False, False, True), Layout(False, True, True),
           Layout(False, True, False))


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def _rich_table(view: TableView, title: str, layout: Layout, widths: list[int]) -> Table:
    # unboxed: no vertical rules and no padding (columns stay one space apart)
    t = _frame_table(layout, title)
    keep = [i for i, c in enumerate(view.columns) if layout.details or not c.detail]
    for n, i in enumerate(keep):
        c = view.columns[i]
        t.add_column(c.brief if layout.brief else c.title, width=widths[n],
                     justify="right" if c.numeric else "left")
    for row in view.rows:
        t.add_row(*[Text(row[i].text, style=_style(row[i].tone, row[i].strong)) for i in keep])
    return t


def column_widths(view: TableView, layout: Layout) -> tuple[list[int], list[int]]:
    """(narrowest, natural) width of each shown column: the narrowest never breaks a word
    (identifiers such as bucket names are one word), the natural one breaks no line."""
    keep = [i for i, c in enumerate(view.columns) if layout.details or not c.detail]
    lows, highs = [], []
    for i in keep:
        title = view.columns[i].brief if layout.brief else view.columns[i].title
        texts = [title, *(row[i].text for row in view.rows)]
        highs.append(max(cell_len(t) for t in texts) or 1)
        cells = [row[i].text for row in view.rows] if view.columns[i].nowrap else []
        lows.append(max([_longest_word(t) for t in texts] + [cell_len(t) for t in cells]) or 1)
    return lows, highs


def fit_widths(lows: list[int], highs: list[int], room: int) -> list[int] | None:
    """Column widths within `room`, taking space from the columns that can wrap the most (at
    word boundaries); None when even the narrowest widths do not fit."""
    if sum(lows) > room:
        return None
    widths = list(highs)
    while sum(widths) > room:
        i = max(range(len(widths)), key=lambda k: widths[k] - lows[k])
        widths[i] -= 1
    return widths


def _frame_table(layout: Layout, title: str = "") -> Table:
    return Table(title=title or None, title_justify="left", box=box.HEAVY_HEAD if layout.boxed
                 else box.SIMPLE_HEAD, show_edge=layout.boxed, pad_edge=layout.boxed,
                 padding=(0, 1) if layout.boxed else 0)


def _frame(layout: Layout, columns: int) -> int:
    """Width a layout adds to the cells: rules, edges and padding."""
    probe = _frame_table(layout)
    for _ in range(columns):
        probe.add_column(width=1)
    return Measurement.get(out, out.options.update_width(10_000), probe).maximum - columns


def table_renderable(view: TableView, title: str, width: int) -> tuple[Table, int]:
    """The table and the width to print it at: the roomiest layout whose natural widths fit
    `width`; else the tightest layout with its cells wrapped at word boundaries; else (a very
    narrow terminal) the tightest at its narrowest widths, wider than the terminal rather than
    splitting an identifier."""
    for layout in LAYOUTS:
        lows, highs = column_widths(view, layout)
        if sum(highs) + _frame(layout, len(highs)) <= width:
            return _rich_table(view, title, layout, highs), width
    tight = LAYOUTS[-1]
    lows, highs = column_widths(view, tight)
    frame = _frame(tight, len(lows))
    widths = fit_widths(lows, highs, width - frame)
    if widths is None:
        wide = _rich_table(view, title, tight, lows)
        wide.width = sum(lows) + frame
        return wide, wide.width
    return _rich_table(view, title, tight, widths), width


def show_table(view: TableView, title: str = "", *, every_row: bool = True,
               unit: str = "bucket") -> None:
    """Lay out a table view-model (see optimizer/report/table.py) to fit the terminal. Unless
    `every_row`, quiet rows (unchanged buckets) are left out and counted below the table."""
    shown = view if every_row else view.changed()
    hidden = len(view.rows) - len(shown.rows)
    if shown.rows:
        renderable, width = table_renderable(shown, title, out.width)
        out.print(renderable, crop=width <= out.width)
    elif title:
        out.print(title, markup=False, highlight=False)
    if hidden:
        out.print(f"{hidden} unchanged {unit}{'s' if hidden > 1 else ''} not shown "
                  "(--all lists them)", markup=False, highlight=False)


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    show_table(TableView.of(columns, rows), title)


def show_summary(summary: RunSummary, report_path: str | None = None) -> None:
    """The closing per-bucket table of an eval run."""
    s, u = summary, summary.usage
    show_table(
        bucket_table(s),
        f"{s.suite_name}: task pass {fmt.pct(s.task_pass_rate)}, trial pass "
        f"{fmt.pct(s.trial_pass_rate)} ({s.original.passed_trials}/{s.num_trials}); errored "
        f"excluded {fmt.pct(s.counted_task_pass_rate)} / {fmt.pct(s.counted_trial_pass_rate)}; "
        f"{failed_text(s)}, errored {s.errored_trials}, cached {s.cached_trials}",
    )
    out.print(
        f"tokens: {fmt.tokens(u.total_tokens)} (in {fmt.tokens(u.input_tokens)}, out "
        f"{fmt.tokens(u.output_tokens)}), model calls {u.model_calls}, retries {u.retries}; "
        f"est. cost: {fmt.usd(s.cost.total_usd)}",
        markup=False,
    )
    if report_path:
        out.print(f"report: {report_path}", markup=False)


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items()))


class LoopDisplay:
    """Phase messages and, per suite run, a progress bar on a terminal or one line when the
    run starts and one when it ends elsewhere (CI logs: plain lines, in order, no escape
    codes), drawn from the engine's events."""

    def __init__(self, enabled: bool = True, console: Console | None = None) -> None:
        self.console = console or err
        self.enabled = enabled
        self.live = enabled and self.console.is_terminal
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
            disable=not self.live,
        )
        self._runs: dict[str, tuple[str, TaskID, dict[str, int]]] = {}

    def __enter__(self) -> LoopDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def message(self, text: str) -> None:
        if self.enabled:
            self.progress.console.print(text, highlight=False)

    def _run_started(self, event: RunStarted) -> None:
        label = event.label or event.suite
        task_id = self.progress.add_task(label, total=event.total, status="")
        self._runs[event.run] = (label, task_id, {})
        if not self.live:
            self.message(f"run started: {escape(label)} ({event.total} trials)")

    def _run_finished(self, event: RunFinished) -> None:
        run = self._runs.get(event.run)
        if run is not None and not self.live:
            label, _, counts = run
            self.message(f"run finished: {escape(label)}: {_counts(counts) or 'no trials'}")

    def _trial_done(self, event: TrialFinished) -> None:
        run = self._runs.get(event.run)
        if run is None:
            return
        _, task_id, counts = run
        key = "cached" if event.cached else event.status
        counts[key] = counts.get(key, 0) + 1
        self.progress.update(task_id, advance=1, status=_counts(counts))

    def on_event(self, event: Event) -> None:
        step = "[bold cyan]»[/]"
        match event:
            case RunStarted():
                self._run_started(event)
            case RunFinished():
                self._run_finished(event)
            case TrialFinished():
                self._trial_done(event)
            case RunWarning():
                self.message(f"[yellow]Warning:[/] {escape(event.message)}")
            case Phase():
                self.message(f"{step} {escape(event.message)}")
            case BaselineReady():
                self.message(
                    f"{step} baseline: {event.total} trials, {event.cached} reused from cache"
                )
            case ProposalRequested():
                self.message(
                    f"{step} iteration {event.iteration}: asking the proposer "
                    f"(~{event.tokens} tokens; package {escape(event.package)})"
                )
            case ProposalRefused():
                self.message("[yellow]  refused before evaluation:[/] "
                             + escape("; ".join(event.reasons)))
            case CandidateEvaluating():
                self.message(f"{step} evaluating the candidate on {escape(event.branch)}")
            case ConfirmStarted():
                self.message(
                    f"[yellow]  suspected regression in {escape(', '.join(event.buckets))}: "
                    f"re-running {event.tasks} task(s) with more trials[/]"
                )
            case GateStage():
                self.message(f"[cyan]  gate {escape(event.stage)}[/] ({event.trials} trials): "
                             f"{escape(event.reason)}")
            case VerdictReached():
                self.message(f"[bold]  verdict: {event.decision}[/] "
                             + escape(" ".join(event.reasons)))
            case IterationAbandoned():
                self.message("[yellow]  cleaned up after a killed run:[/] "
                             + escape(event.describe()))
            case ScreeningRound():
                self.message(f"[cyan]  screening round {event.round}[/] ({event.trials} "
                             f"trials): {escape(', '.join(event.candidates))}")
            case CandidateStopped():
                self.message(f"[yellow]  candidate {escape(event.name)} out:[/] "
                             + escape(event.reason))
            case StepEstimated():
                self.message(
                    f"{step} {escape(event.step)}: estimated ~{event.tokens} tokens "
                    f"({escape(event.basis)})"
                )
            case BudgetStopped():
                self.message(
                    f"{step} stopped: budget {event.budget} before {escape(event.step)} "
                    f"({escape(event.detail)})"
                )


def show_optimize(result: Any, *, every_row: bool = False,
                  compare: Mapping[int, str] | None = None) -> None:
    """The session: each iteration's outcome, gate table (changed buckets unless `every_row`)
    and the command that shows its comparison (`compare`, by iteration)."""
    out.rule(f"optimize {result.suite} / {result.bucket}")
    out.print(
        f"base commit {result.base_commit[:12]}; baseline {result.baseline_trials} trials "
        f"({result.baseline_cached_trials} reused from cache)",
        markup=False,
    )
    for it in result.iterations:
        out.print(f"\niteration {it.iteration}: [bold]{escape(it.outcome)}[/]  "
                  f"{escape(it.hypothesis)}", highlight=False)
        for r in it.reasons:
            out.print(f"  - {r}", markup=False)
        for line in [*it.movement, *it.harm]:
            out.print(f"  {line}", markup=False)
        if it.verdict_table:
            verdict_rows(it.verdict_table, every_row=every_row)
        if it.branch:
            out.print(f"  branch: {it.branch}", markup=False)
        if it.pr_body_path:
            out.print(f"  PR body: {it.pr_body_path}", markup=False)
        if compare and it.iteration in compare:
            out.print(f"  compare: {compare[it.iteration]}", markup=False, highlight=False)
    for w in result.warnings:
        warn(w)
    out.print(f"\n{result.message}", markup=False)
    runs = Path(result.ledger_path).parent / "runs"
    out.print(f"ledger:  {result.ledger_path}\nreports: {runs} (baseline runs: "
              f"{', '.join(result.baseline_runs)})\nsession: {result.session_dir} (proposal "
              "packages, model replies, PR bodies)", markup=False)


LOCAL_HINT = (
    "Note: local:smollm2 is a 135M-parameter model that runs on your CPU; it shows the loop "
    "working, not good prompts. Point the same command at a real model with one flag:\n"
    "  --agent-model anthropic:claude-haiku-4-5 --proposer-model anthropic:claude-sonnet-4-5  "
    "(ANTHROPIC_API_KEY)\n"
    "  --agent-model openai:gpt-4.1-mini --proposer-model openai:gpt-4.1  (OPENAI_API_KEY)\n"
    "  --agent-model openai:<model> --base-url http://localhost:8000/v1  (vLLM, Ollama, "
    "llama.cpp, LM Studio)"
)


def verdict_rows(rows: list[dict[str, Any]], *, every_row: bool = True) -> None:
    """The per-bucket gate table (stored rows of an iteration): candidate vs base, paired."""
    show_table(gate_table(rows), "per-bucket gate", every_row=every_row)


def comparison_rows(title: str, comparisons: list[BucketComparison], cand: str = "Cand", *,
                    every_row: bool = True) -> None:
    """The per-bucket gate table straight from the gate's comparisons."""
    show_table(comparison_table(comparisons, cand=cand), title, every_row=every_row)
