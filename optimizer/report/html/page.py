"""`promptloop report RUN --format html`: one self-contained page to browse a run.

Header (suite, models, provenance, rates, errors, tokens, cost), a per-bucket bar chart
(optionally base vs candidate with deltas), grader and pass@k tables, and a trial browser with
filters whose rows expand into the full trial (see html_trials.py). Trial detail is rendered
server-side; a small inline script adds filtering, sorting and expand/collapse, reading its
index from a `<script type="application/json">` block.

`page` and `bucket_chart_svg` are re-exported for other pages (the nightly summary).
"""

from __future__ import annotations

from typing import Any

from optimizer.core.results import RunResult, TrialResult
from optimizer.report.html.assets import REPORT_CSS, REPORT_JS
from optimizer.report.html.kit import (
    ChartRow,
    bucket_chart_svg,
    delta_class,
    delta_pp,
    esc,
    num,
    page,
    pct,
    script_json,
    short,
)
from optimizer.report.html.trials import TRIAL_CSS, PromptPool, badge, render_trial_detail
from optimizer.report.summary import BucketSummary, RunSummary, task_order

__all__ = ["ChartRow", "bucket_chart_rows", "bucket_chart_svg", "page", "render_html"]

STATUSES = ("passed", "failed", "timedOut", "errored", "skipped")


def _stat(label: str, value: str, sub: str = "", *, alert: bool = False) -> str:
    return (
        f'<div class="card stat{" alert" if alert else ""}"><div class="label">{esc(label)}</div>'
        f'<div class="value">{esc(value)}</div><div class="small muted">{sub}</div></div>'
    )


def _delta_score(base: float | None, cand: float | None) -> str:
    return "" if base is None or cand is None else f"{cand - base:+.3f}"


def _vs(base: float | None, cand: float | None, has_base: bool, *, rate: bool = True) -> str:
    """`base 50.0% · +12.5 pp` (or `base 0.613 · +0.195`) for a stat card, when comparing."""
    if not has_base:
        return ""
    d = delta_pp(base, cand) if rate else _delta_score(base, cand)
    return (f"<br>base {esc(pct(base) if rate else num(base))}"
            + (f' · <span class="nowrap {delta_class(base, cand)}">{esc(d)}</span>' if d else ""))


def _provenance(run: RunResult, base: RunResult | None) -> str:
    """Models, commit, hashes and timing; full hashes in the tooltip."""
    p = run.provenance
    secs = (run.ended_at - run.started_at).total_seconds()
    prov = [
        ("agent", run.agent_name), ("kind", run.suite_kind), ("agent model", p.agent_model or "?"),
        ("judge model", p.judge_model or "none"), ("mode", p.mode),
        ("commit", (p.git_commit or "unknown")[:12]
         + (" (dirty)" if p.git_dirty else "" if p.git_dirty is False else " (dirty: unknown)")),
        *((f"prompt {name}", h[:12]) for name, h in sorted(p.prompt_hashes.items())),
        ("suite hash", p.suite_hash[:12] or "?"),
        ("started", f"{run.started_at:%Y-%m-%d %H:%M:%S} UTC"), ("duration", f"{secs:.1f}s"),
    ]
    if base is not None:
        prov.append(("base run", base.run_name))
    full = {f"prompt {k}": v for k, v in p.prompt_hashes.items()}
    full |= {"suite hash": p.suite_hash, "commit": p.git_commit or "unknown"}
    prov_html = "".join(
        f'<span>{esc(k)}: <b class="mono" title="{esc(full.get(k, v))}">{esc(v)}</b></span>'
        for k, v in prov
    )
    return f'<div class="prov card">{prov_html}</div>'


def _stat_cards(s: RunSummary, bs: RunSummary | None) -> str:
    has_base = bs is not None
    u, ju, c = s.usage, s.judge_usage, s.cost
    cost = "unknown" if c.total_usd is None else f"${c.total_usd:.4f}"
    cost_sub = ("spent now " + ("unknown" if c.spent_usd is None else f"${c.spent_usd:.4f}")
                + "".join(f"<br>{esc(n)}" for n in c.notes))
    cards = [
        _stat("Task pass rate", pct(s.task_pass_rate),
              f"{s.passed_tasks}/{s.decided_tasks} tasks"
              + (f", threshold {s.task_pass_threshold:g}" if s.task_pass_threshold < 1 else "")
              + _vs(bs.task_pass_rate if bs else None, s.task_pass_rate, has_base)),
        _stat("Trial pass rate", pct(s.trial_pass_rate),
              f"{s.passed_trials}/{s.counted_trials} counted trials"
              + _vs(bs.trial_pass_rate if bs else None, s.trial_pass_rate, has_base)),
        _stat("Mean score", num(s.mean_score),
              f"{s.failed_trials} failed, {s.timed_out_trials} timed out"
              + _vs(bs.mean_score if bs else None, s.mean_score, has_base, rate=False)),
        _stat("Errored trials", str(s.errored_trials),
              "infrastructure errors, not counted in rates" if s.errored_trials
              else "no infrastructure errors", alert=s.errored_trials > 0),
        _stat("Trials", str(s.num_trials),
              f"{s.cached_trials} from cache" + (f", {s.skipped_trials} skipped"
                                                 if s.skipped_trials else "")),
        _stat("Tokens", f"{u.total_tokens:,}",
              f"in {u.input_tokens:,} · out {u.output_tokens:,}"
              + (f"<br>cache read {u.cache_read_tokens:,}" if u.cache_read_tokens else "")
              + f"<br>{u.model_calls} model calls, {u.tool_calls} tool calls"
              + (f"<br>judge {ju.total_tokens:,} tokens" if ju.model_calls else "")),
        _stat("Estimated cost", cost, cost_sub),
    ]
    return f'<div class="cards">{"".join(cards)}</div>'


def _header(run: RunResult, s: RunSummary, base: RunResult | None,
            bs: RunSummary | None, title: str) -> str:
    banners = []
    if s.all_errored:
        banners.append("Every trial errored: this run measured nothing about the prompt.")
    if s.infra_errors:
        items = "".join(f"<li>{n}× {esc(short(m, 300))}</li>" for m, n in s.infra_errors.items())
        banners.append(f"{s.errored_trials} trial(s) hit infrastructure errors:<ul>{items}</ul>")
    return (
        f"<header><h1>{esc(title)}</h1>"
        f'<div class="muted">suite <b>{esc(run.suite_name)}</b> · run '
        f'<b class="mono">{esc(run.run_name)}</b></div>'
        + "".join(f'<div class="banner">{b}</div>' for b in banners)
        + _stat_cards(s, bs) + _provenance(run, base) + "</header>"
    )


def _bucket_section(s: RunSummary, bs: RunSummary | None) -> str:
    mine = {b.bucket: b for b in s.buckets}
    theirs = {b.bucket: b for b in bs.buckets} if bs else {}
    names = sorted(set(mine) | set(theirs))

    def rows(attr: str) -> list[ChartRow]:
        return bucket_chart_rows(s, bs, attr)

    charts = (
        '<div class="chart-toggle small"><label><input type="radio" name="metric" '
        'value="pass" checked> trial pass rate</label> <label><input type="radio" '
        'name="metric" value="score"> mean score</label></div>'
        f'<div class="chart" data-metric="pass">{bucket_chart_svg(rows("trial_pass_rate"))}</div>'
        f'<div class="chart" data-metric="score" hidden>'
        f'{bucket_chart_svg(rows("mean_score"), metric="mean score")}</div>'
    )
    head = ("<th>bucket</th><th class=\"num\">tasks passed</th><th class=\"num\">trials passed"
            "</th><th class=\"num\">trial pass rate</th><th class=\"num\">mean score</th>"
            "<th class=\"num\">errored</th>")
    if bs:
        head += ('<th class="num">base pass rate</th><th class="num">Δ pass</th>'
                 '<th class="num">base score</th><th class="num">Δ score</th>')
    body = []
    for n in names:
        b, o = mine.get(n), theirs.get(n)
        cells = _bucket_cells(b)
        if bs:
            cand, old = (b.trial_pass_rate if b else None), (o.trial_pass_rate if o else None)
            cells += (f'<td class="num">{esc(pct(old))}</td><td class="num '
                      f'{delta_class(old, cand)}">{esc(delta_pp(old, cand))}</td>')
            cand, old = (b.mean_score if b else None), (o.mean_score if o else None)
            cells += (f'<td class="num">{esc(num(old))}</td><td class="num '
                      f'{delta_class(old, cand)}">{esc(_delta_score(old, cand))}</td>')
        body.append(
            f'<tr><td><a href="#trials" data-show-bucket="{esc(n)}">{esc(n)}</a></td>{cells}</tr>'
        )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<section><h2>Buckets</h2><div class="card">{charts}</div>{table}</section>'


def bucket_chart_rows(summary: RunSummary, base_summary: RunSummary | None = None,
                      attr: str = "trial_pass_rate") -> list[ChartRow]:
    """Chart rows per bucket (union of both runs) for `attr` of `BucketSummary`
    (`trial_pass_rate`, `task_pass_rate` or `mean_score`); reused by the nightly page."""
    mine = {b.bucket: b for b in summary.buckets}
    theirs = {b.bucket: b for b in base_summary.buckets} if base_summary else {}
    out = []
    for n in sorted(set(mine) | set(theirs)):
        b, o = mine.get(n), theirs.get(n)
        note = f"{b.passed_trials}/{b.trials} trials" if b else "not in this run"
        out.append(ChartRow(label=n, value=getattr(b, attr) if b else None,
                            base=getattr(o, attr) if o else None, note=note))
    return out


def _bucket_cells(b: BucketSummary | None) -> str:
    if b is None:
        return '<td class="num" colspan="5">not in this run</td>'
    err = f'<span class="badge b-errored">{b.errored_trials}</span>' if b.errored_trials else "0"
    return (f'<td class="num">{b.passed_tasks}/{b.decided_tasks}</td>'
            f'<td class="num">{b.passed_trials}/{b.trials}</td>'
            f'<td class="num">{esc(pct(b.trial_pass_rate))}</td>'
            f'<td class="num">{esc(num(b.mean_score))}</td><td class="num">{err}</td>')


def _graders_section(s: RunSummary) -> str:
    g_rows = "".join(
        f'<tr><td class="mono">{esc(g.grader)}</td><td class="num">{g.decided}/{g.scores}</td>'
        f'<td class="num">{esc(num(g.mean))}</td><td class="num">{esc(pct(g.pass_rate))}</td></tr>'
        for g in s.graders
    )
    k_rows = "".join(
        f'<tr><td class="num">{k.k}</td><td class="num">{esc(num(k.pass_at_k))}</td>'
        f'<td class="num">{esc(num(k.pass_hat_k))}</td></tr>'
        for k in s.pass_at_k
    )
    return (
        '<section class="two"><div><h2>Graders</h2><table><thead><tr><th>grader</th>'
        '<th class="num">decided</th><th class="num">mean</th><th class="num">pass rate</th>'
        f"</tr></thead><tbody>{g_rows}</tbody></table></div>"
        '<div><h2>pass@k</h2><table><thead><tr><th class="num">k</th><th class="num">pass@k'
        f'</th><th class="num">pass^k</th></tr></thead><tbody>{k_rows}</tbody></table></div>'
        "</section>"
    )


def _ordered_trials(run: RunResult) -> list[TrialResult]:
    out: list[TrialResult] = []
    for task_id in task_order(run):
        out.extend(run.trials_of(task_id))
    return out


def _trial_group(i: int, t: TrialResult, base_t: TrialResult | None, has_base: bool,
                 prompts: PromptPool) -> str:
    secs = (t.ended_at - t.started_at).total_seconds()
    tokens = t.transcript.metrics.usage.total_tokens
    changed = base_t is not None and base_t.status != t.status
    attrs = (f'id="trial-{i}" data-order="{i}" data-task="{esc(t.task_id)}" '
             f'data-bucket="{esc(t.bucket)}" data-status="{esc(t.status)}" '
             f'data-score="{t.score:.4f}" data-tokens="{tokens}" data-secs="{secs:.3f}" '
             f'data-index="{t.trial_index}" data-changed="{"1" if changed else "0"}"')
    base_cell = ""
    if has_base:
        shown = (f'{badge(base_t.status)} <span class="mono">{base_t.score:.2f}</span>'
                 if base_t else '<span class="muted">none</span>')
        base_cell = f'<td class="nowrap">{shown}</td>'
    reason = t.infra_error or t.failure_reason or ""
    head = (
        f'<tr class="head"><td><button class="exp" type="button" aria-expanded="false" '
        f'aria-controls="detail-{i}" title="show trial">▸</button></td>'
        f'<td class="mono">{esc(t.task_id)}</td><td>{esc(t.bucket)}</td>'
        f'<td class="num">{t.trial_index}</td><td>{badge(t.status)}'
        + (' <span class="small muted">cached</span>' if t.cached else "")
        + f'</td><td class="num">{t.score:.2f}</td>{base_cell}'
        f'<td class="num">{len(t.transcript.tool_calls)}</td><td class="num">{tokens:,}</td>'
        f'<td class="num">{secs:.1f}s</td><td class="small">{esc(short(reason, 140))}</td></tr>'
    )
    cols = 11 if has_base else 10
    detail = (f'<tr class="detail" id="detail-{i}" hidden><td colspan="{cols}">'
              f'<div class="detail-body">{render_trial_detail(t, prompts)}</div></td></tr>')
    return f'<tbody class="trial" {attrs}>{head}{detail}</tbody>'


def _trials_section(run: RunResult, base: RunResult | None,
                    prompts: PromptPool) -> tuple[str, dict[str, Any]]:
    trials = _ordered_trials(run)
    base_by = {(t.task_id, t.trial_index): t for t in base.trials} if base else {}
    has_base = base is not None
    groups = "".join(
        _trial_group(i, t, base_by.get((t.task_id, t.trial_index)), has_base, prompts)
        for i, t in enumerate(trials, 1)
    )
    heads = [("", ""), ("task", "task"), ("bucket", "bucket"), ("trial", "index"),
             ("status", "status"), ("score", "score")]
    if has_base:
        heads.append(("base", ""))
    heads += [("tools", ""), ("tokens", "tokens"), ("time", "secs"), ("failure reason", "")]
    th = "".join(
        "<th" + (f' data-sort="{k}"' if k else "") + (' class="num"' if k in NUMERIC else "")
        + f">{esc(label)}</th>"
        for label, k in heads
    )
    controls = (
        '<div class="filters card"><label>Bucket <select id="f-bucket">'
        '<option value="">all buckets</option></select></label>'
        '<span id="f-status" class="statuses"></span>'
        + ('<label><input type="checkbox" id="f-changed"> changed vs base</label>'
           if has_base else "")
        + '<label>Task <input id="f-search" type="search" placeholder="filter task id"></label>'
        '<button type="button" id="b-failures">failures only</button>'
        '<button type="button" id="b-reset">reset</button>'
        '<button type="button" id="b-expand">expand shown</button>'
        '<button type="button" id="b-collapse">collapse all</button>'
        '<span id="f-count" class="muted small"></span></div>'
    )
    html = (
        f'<section><h2 id="trials">Trials</h2>{controls}<table id="trial-table">'
        f"<thead><tr>{th}</tr></thead>{groups}</table></section>"
    )
    present = sorted({t.status for t in trials}, key=lambda st: STATUSES.index(st))
    index = {
        "run": run.run_name,
        "buckets": sorted({t.bucket for t in trials}),
        "statuses": present,
        "trials": [
            {"n": i, "task": t.task_id, "bucket": t.bucket, "index": t.trial_index,
             "status": t.status, "score": round(t.score, 4)}
            for i, t in enumerate(trials, 1)
        ],
    }
    return html, index


NUMERIC = ("index", "score", "tokens", "secs")


def render_html(
    run: RunResult,
    summary: RunSummary,
    *,
    base: RunResult | None = None,
    base_summary: RunSummary | None = None,
    title: str | None = None,
) -> str:
    """The whole report as one self-contained HTML document.

    With `base` (and its summary; computed when omitted) the header, bucket chart and trial
    table compare the base run with this one, pairing trials by task and trial index.
    """
    if base is not None and base_summary is None:
        from optimizer.report.summary import summarize

        base_summary = summarize(base)
    heading = title or f"{run.suite_name} · {run.run_name}"
    prompts = PromptPool()
    trials_html, index = _trials_section(run, base, prompts)
    body = "".join([
        _header(run, summary, base, base_summary, heading),
        _bucket_section(summary, base_summary),
        _graders_section(summary),
        trials_html,
        prompts.render(),
        '<footer class="small muted">Generated by promptloop from run '
        f'<span class="mono">{esc(run.run_name)}</span>. Self-contained: no network needed.'
        "</footer>",
        f'<script type="application/json" id="report-data">{script_json(index)}</script>',
    ])
    return page(heading, body, extra_css=TRIAL_CSS + REPORT_CSS, script=REPORT_JS)
