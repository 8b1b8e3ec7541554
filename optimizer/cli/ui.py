"""All terminal output (rich). Engine code never prints; it reports typed events
(optimizer/core/events.py) that `LoopDisplay` draws."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
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

from optimizer.core.events import (
    BaselineReady,
    BudgetStopped,
    CandidateEvaluating,
    ConfirmStarted,
    Event,
    Phase,
    ProposalRefused,
    ProposalRequested,
    RunStarted,
    RunWarning,
    StepEstimated,
    TrialFinished,
    VerdictReached,
)

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


class LoopDisplay:
    """Progress bars (one per suite run) and phase messages, drawn from the engine's events."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=err,
            transient=False,
            disable=not enabled,
        )
        self._bars: dict[str, tuple[TaskID, dict[str, int]]] = {}

    def __enter__(self) -> LoopDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def message(self, text: str) -> None:
        if self.enabled:
            self.progress.console.print(text, highlight=False)

    def _trial_done(self, event: TrialFinished) -> None:
        bar = self._bars.get(event.run)
        if bar is None:
            return
        task_id, counts = bar
        key = "cached" if event.cached else event.status
        counts[key] = counts.get(key, 0) + 1
        status = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        self.progress.update(task_id, advance=1, status=status)

    def on_event(self, event: Event) -> None:
        step = "[bold cyan]»[/]"
        match event:
            case RunStarted():
                task_id = self.progress.add_task(
                    event.label or event.suite, total=event.total, status=""
                )
                self._bars[event.run] = (task_id, {})
            case TrialFinished():
                self._trial_done(event)
            case RunWarning():
                self.message(f"[yellow]Warning:[/] {event.message}")
            case Phase():
                self.message(f"{step} {event.message}")
            case BaselineReady():
                self.message(
                    f"{step} baseline: {event.total} trials, {event.cached} reused from cache"
                )
            case ProposalRequested():
                self.message(
                    f"{step} iteration {event.iteration}: asking the proposer "
                    f"(~{event.tokens} tokens; package {event.package})"
                )
            case ProposalRefused():
                self.message("[yellow]  refused before evaluation:[/] " + "; ".join(event.reasons))
            case CandidateEvaluating():
                self.message(f"{step} evaluating the candidate on {event.branch}")
            case ConfirmStarted():
                self.message(
                    f"[yellow]  suspected regression in {', '.join(event.buckets)}: "
                    f"re-running {event.tasks} task(s) with more trials[/]"
                )
            case VerdictReached():
                self.message(f"[bold]  verdict: {event.decision}[/] " + " ".join(event.reasons))
            case StepEstimated():
                self.message(
                    f"{step} {event.step}: estimated ~{event.tokens} tokens ({event.basis})"
                )
            case BudgetStopped():
                self.message(
                    f"{step} stopped: budget {event.budget} before {event.step} ({event.detail})"
                )


def show_optimize(result: Any) -> None:
    out.rule(f"optimize {result.suite} / {result.bucket}")
    out.print(
        f"base commit {result.base_commit[:12]}; baseline {result.baseline_trials} trials "
        f"({result.baseline_cached_trials} reused from cache)",
        markup=False,
    )
    for it in result.iterations:
        out.print(
            f"\niteration {it.iteration}: [bold]{it.outcome}[/]  {it.hypothesis}", highlight=False
        )
        for r in it.reasons:
            out.print(f"  - {r}", markup=False)
        if it.verdict_table:
            verdict_rows(it.verdict_table)
        if it.branch:
            out.print(f"  branch: {it.branch}", markup=False)
        if it.pr_body_path:
            out.print(f"  PR body: {it.pr_body_path}", markup=False)
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


def _num(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def verdict_rows(rows: list[dict[str, Any]]) -> None:
    """The per-bucket gate table: every bucket, candidate vs base on paired trials."""
    body = []
    for r in rows:
        ci = ("-" if r.get("ci_low") is None
              else f"[{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]")
        body.append([
            ("* " if r.get("target") else "") + str(r["bucket"]), r.get("n", 0),
            f"{_num(r.get('base_mean'))} -> {_num(r.get('cand_mean'))}",
            _num(r.get("delta"), "{:+.2f}"), ci,
            f"{_num(r.get('base_pass_rate'), '{:.0%}')} -> "
            f"{_num(r.get('cand_pass_rate'), '{:.0%}')}",
            f"{r.get('fixed', 0)}/{r.get('broken', 0)}", _num(r.get("p_value"), "{:.3f}"),
            r.get("status", ""),
        ])
    table("per-bucket gate (* = target)",
          ["bucket", "pairs", "mean score", "delta", "95% CI", "pass rate", "fixed/broken", "p",
           "status"], body)
