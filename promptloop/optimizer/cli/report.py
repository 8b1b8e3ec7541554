"""`promptloop suites` and `promptloop report`: what there is to run, what a run found, and
how runs compare."""

from __future__ import annotations

import json
import shlex
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import OUTPUT, AllOpt, JsonOpt, StateOpt
from promptloop.optimizer.cli.util import guarded
from promptloop.optimizer.report.fmt import json_text as fmt_json
from promptloop.optimizer.workflows.context import ConfigError

if TYPE_CHECKING:
    from promptloop.optimizer.core.results import RunResult
    from promptloop.optimizer.gate.compare import BucketComparison


def suites(
    path: Annotated[
        Path | None,
        typer.Argument(help="A suite folder, a .jsonl suite file or a folder of suites; "
                       "default: the suites of this repository's agents (promptloop.toml's "
                       "'suites')."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List suites with their tasks and failure buckets."""
    from promptloop.optimizer.workflows.context import SuiteError, load_suite
    from promptloop.optimizer.workflows.sources import project_suites

    def body() -> None:
        roots: list[tuple[Path, str | None]]
        if path is None:
            declared, where = project_suites()
            roots = list(declared)
            if not as_json:
                ui.info(f"suites of {where}")
        else:
            if not path.exists():
                raise ConfigError(f"{path}: no such folder")
            roots = [
                (r, None) for r in
                ([path] if (path / "suite.json").is_file() or path.is_file()  # folder, .jsonl
                 else sorted(p.parent for p in path.glob("**/suite.json")))
            ]
            if not roots:
                raise ConfigError(f"{path}: no suite.json found below this folder")
        listing: list[dict[str, Any]] = []
        broken: list[str] = []
        for r, agent in roots:
            try:
                s = load_suite(r, agent)
            except (SuiteError, ConfigError) as err:  # every broken suite, not just the first
                broken.append(str(err))
                continue
            listing.append(
                {
                    "name": s.name,
                    "agent": s.agent_name,
                    "kind": s.config.kind,
                    "path": str(r),
                    "tasks": len(s.tasks),
                    "trials": sum(t.spec.trials_per_run for t in s.tasks),
                    "buckets": [{"name": b, "task_ids": [t.id for t in ts]}
                                for b, ts in sorted(s.buckets.items())],
                }
            )
        if broken:
            raise SuiteError(f"{len(broken)} of {len(roots)} suites cannot be loaded:\n"
                             + "\n".join(f"- {b}" for b in broken))
        if as_json:
            ui.print_json(listing)
            return
        for s_ in listing:
            ui.table(
                f"{s_['name']} ({s_['agent']}, {s_['kind']}) - {s_['tasks']} tasks, "
                f"{s_['trials']} trials - {s_['path']}",
                ["bucket", "tasks", "task ids"],
                [[b["name"], len(b["task_ids"]), ", ".join(b["task_ids"])]
                 for b in s_["buckets"]],
            )

    guarded(body)


class ReportFormat(StrEnum):
    md = "md"
    json = "json"
    html = "html"
    table = "table"


RunsArg = Annotated[list[str] | None, typer.Argument(
    metavar="RUN",
    help="Run name, 'latest', or a report JSON path. With --base-run, several runs (e.g. "
    "the stages of a candidate) are pooled per suite.")]
BaseRunOpt = Annotated[list[str] | None, typer.Option(
    "--base-run", metavar="RUN",
    help="Compare with this base run (repeat to pool several): trials are paired like the "
    "gate pairs them. With --format html, one base run and the unpaired page.")]
FormatOpt = Annotated[ReportFormat | None, typer.Option(
    "--format", help="Markdown, a self-contained HTML page, the terminal table, or the "
    "original harness's report document as JSON (a file format; --json gives the envelope) "
    "(default: md, or table with --base-run).")]
FailingOpt = Annotated[bool, typer.Option(
    "--failing",
    help="Export failing trials (what the proposer reads) instead of the full summary.")]
FailingBucketOpt = Annotated[list[str] | None, typer.Option(
    "--bucket", metavar="BUCKET", help="Bucket(s) for --failing.")]
OutputOpt = Annotated[Path | None, typer.Option(
    "--output", "-o", metavar="FILE", rich_help_panel=OUTPUT, help="Write to this file.")]


def report(
    runs: RunsArg = None,
    base: BaseRunOpt = None,
    fmt: FormatOpt = None,
    failing: FailingOpt = False,
    bucket: FailingBucketOpt = None,
    output: OutputOpt = None,
    state_dir: StateOpt = None,
    every_bucket: AllOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a saved run, or compare runs with base runs (--base-run).

    One run shows as Markdown, JSON, a self-contained HTML page or the terminal table of its
    buckets. With --base-run, the runs and the base runs are pooled per suite and paired trial by
    trial as the gate pairs them: the gate's per-bucket table (only the changed buckets unless
    --all), as a terminal table, Markdown or JSON; --format html keeps the unpaired page of
    one run against one base run. optimize and review print this command for their
    comparisons."""
    from promptloop.optimizer.workflows.context import state_dir as resolve_state

    if not runs:  # a usage error that names the shortcut a first report wants
        from typer._click import exceptions as click_exc  # typer vendors click

        raise click_exc.UsageError("give a run: its name, 'latest' (the last run saved) or a "
                                   "report JSON path; `promptloop runs` lists the runs")

    def body() -> None:
        if bucket and not failing:  # a flag that would do nothing is a slip, said
            raise ConfigError("--bucket chooses the buckets of --failing: add --failing, or "
                              "leave --bucket out for the whole run")
        state = resolve_state(state_dir, write=False)
        if as_json:
            ui.print_json(_result(state, runs, base, failing, bucket or []))
            return
        chosen = fmt or (ReportFormat.table if base else ReportFormat.md)
        if base and chosen is not ReportFormat.html:
            text = _compare(state, runs, base, chosen, every_bucket)
        else:
            text = _single(state, runs, base, chosen, failing, bucket or [])
        if text is None:
            return
        if output:
            output.write_text(text, encoding="utf-8")
            ui.info(f"wrote {output}")
        else:
            if chosen is ReportFormat.json and not ui.utf8_stream(sys.stdout):
                # a terminal that cannot show every character: JSON escapes, not '?'
                text = json.dumps(json.loads(text), indent=2, ensure_ascii=True)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")

    guarded(body)


def _result(state: Path, runs: list[str], base: list[str] | None, failing: bool,
            buckets: list[str]) -> dict[str, Any]:
    """`report --json`'s result (snake_case keys): one run's summary, its failing trials
    (--failing), or the paired comparison with base runs (--base-run)."""
    from promptloop.optimizer.report.store import default_store_dir, load_run, report_path
    from promptloop.optimizer.report.summary import summarize
    from promptloop.optimizer.report.table import gate_rows

    if base:
        suites, comparisons = paired_comparison(state, runs, base)
        return {"runs": runs, "base_runs": base, "suites": suites,
                "buckets": [r.model_dump(mode="json") for r in gate_rows(comparisons)]}
    if len(runs) > 1:
        raise ConfigError(f"{len(runs)} runs given: several runs are compared with --base-run")
    store = default_store_dir(state)
    run = load_run(store, runs[0])
    if failing:
        from promptloop.optimizer.propose.package import export_failing

        targets = buckets or sorted({t.bucket for t in run.trials
                                     if t.status in ("failed", "timedOut")})
        return {"run": run.run_name,
                "failing": [export_failing(run, b).model_dump(mode="json") for b in targets]}
    return {"run": run.run_name, "report": str(report_path(store, run.run_name)),
            "summary": summarize(run).model_dump(mode="json")}


def _single(state: Path, runs: list[str], base: list[str] | None, fmt: ReportFormat,
            failing: bool, buckets: list[str]) -> str | None:
    """One run (against one base run for the HTML page); None when printed as a table."""
    from promptloop.optimizer.workflows.present import render_report

    if len(runs) > 1:
        raise ConfigError(f"{len(runs)} runs given: several runs are compared with --base-run")
    if base and len(base) > 1:
        raise ConfigError("--format html compares with one base run; the paired table "
                          "(--format table or md) pools several")
    if fmt is ReportFormat.table:
        from promptloop.optimizer.report.store import default_store_dir, load_run
        from promptloop.optimizer.report.summary import summarize

        ui.show_summary(summarize(load_run(default_store_dir(state), runs[0])))
        return None
    return render_report(state, runs[0], fmt.value, failing=failing, buckets=buckets,
                         base=base[0] if base else None)


def _compare(state: Path, runs: list[str], base: list[str], fmt: ReportFormat,
             every_bucket: bool) -> str | None:
    """The paired comparison of `runs` with `base`, pooled per suite; None when printed as a
    table."""
    from promptloop.optimizer.report.markdown import table_lines
    from promptloop.optimizer.report.table import comparison_table, gate_rows

    suites, comparisons = paired_comparison(state, runs, base)
    if comparisons and not any(c.n_pairs for c in comparisons):
        # a team compared a candidate's third harm run (trial index 2) with an eval (index 0):
        # every bucket read "inconclusive", with no word of why
        raise ConfigError(f"{', '.join(runs)} and {', '.join(base)} share no trial pair (the "
                          "same task at the same trial index): nothing to compare. Compare "
                          "runs of the same trials, e.g. a candidate's runs with the "
                          "baseline's and the gate's base runs (optimize prints the command)")
    if fmt is ReportFormat.json:
        return fmt_json({"runs": runs, "base": base, "suites": suites,
                         "buckets": [r.model_dump() for r in gate_rows(comparisons)]})
    view = comparison_table(comparisons)
    title = f"{', '.join(suites)}: runs vs base, trials paired"
    if not every_bucket and not view.changed().rows:  # one line, never an empty table
        n = len(view.rows)
        return (f"{title}: no bucket changed ({n} bucket{'s' if n != 1 else ''} compared, "
                "none moved beyond the thresholds; --all lists them)")
    if fmt is ReportFormat.table:
        ui.show_table(view, title, every_row=every_bucket)
        return None
    shown = view if every_bucket else view.changed()
    hidden = len(view.rows) - len(shown.rows)
    lines = [f"**{title}**", "", *table_lines(shown)]
    if hidden:
        lines += ["", f"{hidden} unchanged bucket(s) not shown (--all lists them)."]
    return "\n".join(lines)


def paired_comparison(state: Path, runs: list[str], base: list[str]
                      ) -> tuple[list[str], list[BucketComparison]]:
    """(suites, per-bucket comparisons) of the runs against the base runs: each side's runs
    pooled per suite (new trial indices add up, as the gate's rounds do), then paired."""
    from promptloop.optimizer.gate.compare import GatePolicy
    from promptloop.optimizer.report.store import default_store_dir, load_run
    from promptloop.optimizer.workflows.paired import compare_suite_runs

    store = default_store_dir(state)
    loaded = [load_run(store, name) for name in runs]
    loaded_base = [load_run(store, name) for name in base]
    cand, before = _pool(loaded), _pool(loaded_base)
    suites = [s for s in cand if s in before]
    if not suites:
        raise ConfigError(f"the runs ({', '.join(sorted(cand))}) and the base runs "
                          f"({', '.join(sorted(before))}) share no suite")
    for suite in suites:  # the tasks changed between the sides: say so, before the table
        hashes = [{r.provenance.suite_hash for r in side if r.suite_name == suite} - {""}
                  for side in (loaded_base, loaded)]
        if hashes[0] and hashes[1] and hashes[0] != hashes[1]:
            ui.warn(f"suite {suite} differs between the base runs and the runs (its tasks or "
                    "graders changed): a bucket that moved may have moved for that, not for "
                    "the prompt")
    return suites, compare_suite_runs([before[s] for s in suites], [cand[s] for s in suites],
                                      GatePolicy())


def _pool(runs: list[RunResult]) -> dict[str, RunResult]:
    from promptloop.optimizer.gate.pairing import merge_runs

    pooled: dict[str, RunResult] = {}
    for run in runs:
        have = pooled.get(run.suite_name)
        pooled[run.suite_name] = run if have is None else merge_runs(have, run)
    return pooled


def compare_command(runs: list[str], base: list[str], state: Path | None) -> str:
    """The `promptloop report` command line that shows a comparison."""
    args = ["promptloop", "report", *runs]
    for name in base:
        args += ["--base-run", name]
    if state is not None:
        args += ["--state-dir", str(state)]
    return shlex.join(args)
