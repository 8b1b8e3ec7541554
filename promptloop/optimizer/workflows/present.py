"""Rendering a saved run for `promptloop report` (Markdown, JSON, failing export)."""

from __future__ import annotations

import json
from pathlib import Path

from promptloop.agents.names import did_you_mean
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.propose.package import export_failing, render_failing_markdown
from promptloop.optimizer.report.markdown import render_markdown
from promptloop.optimizer.report.store import build_report, default_store_dir, load_run
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.workflows.judges import judge_notes, judge_statuses


def render_report(
    state: Path,
    run_name: str,
    fmt: str,
    *,
    failing: bool = False,
    buckets: list[str] | None = None,
    base: str | None = None,
) -> str:
    run = load_run(default_store_dir(state), run_name)
    if failing:
        known = sorted({t.bucket for t in run.trials} | set(run.task_buckets.values()))
        for b in buckets or ():
            if b not in known:  # an empty export would read "no failing trials"
                raise ConfigError(f"--bucket {b!r}: run {run_name} has no such bucket."
                                  f"{did_you_mean(b, known)} Buckets: {', '.join(known)}")
        targets = buckets or sorted(
            {t.bucket for t in run.trials if t.status in ("failed", "timedOut")}
        )
        exports = [export_failing(run, b) for b in targets]
        if fmt == "json":
            return json.dumps(
                [e.model_dump(mode="json") for e in exports], indent=2, ensure_ascii=False
            )
        return "\n\n".join(render_failing_markdown(e) for e in exports) or "No failing trials."
    summary = summarize(run)
    if fmt == "json":
        return json.dumps(build_report(run, summary), indent=2, ensure_ascii=False, default=str)
    if fmt == "html":
        from promptloop.optimizer.report.html.page import render_html

        base_run = load_run(default_store_dir(state), base) if base else None
        return render_html(run, summary, base=base_run)
    notes = judge_notes(judge_statuses(state, [run]))
    text = render_markdown(run, summary)
    if notes:
        text = text.rstrip("\n") + "\n\n## Judge calibration\n\n" + "\n".join(
            f"- {n}" for n in notes) + "\n"
    return text
