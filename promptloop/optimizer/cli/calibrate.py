"""`promptloop calibrate`: agreement of a judge grader with human labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import JsonOpt, StateOpt
from promptloop.optimizer.cli.util import guarded
from promptloop.optimizer.report import fmt


def calibrate(
    grader: Annotated[str, typer.Option(
        "--grader", help="The judge grader, e.g. pkm_insight_quality.")],
    labels: Annotated[Path, typer.Option(
        "--labels", help="JSONL of human labels: {trial_id, scores{dimension: 0..1}} per line.")],
    levels: Annotated[int, typer.Option(
        "--levels", min=2, help="Ordinal grades for Cohen's kappa (5: 0, .25, .5, .75, 1).")
    ] = 5,
    out: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare a judge grader's stored scores with human labels of the same trials.

    Each label line names a stored trial as <runName>/<taskId>#<trialIndex> and gives the
    human's score per judge dimension (0..1 or "unknown"). Per dimension and overall: Cohen's
    kappa (quadratic weights on --levels grades), Krippendorff's alpha (interval), mean absolute
    error and the pass/fail confusion matrix at the grader's threshold. Saved as
    <state>/calibration/<grader>.json (format promptloop.calibration/1); reports and the gate
    read the grader's status from it.

    Exit codes: 0 ok, 1 unknown grader, bad labels file (file, line and field named) or a
    label naming an unknown trial, 2 unreadable state folder."""
    from promptloop.optimizer.lifecycle.calibration import run_calibration, status_of
    from promptloop.optimizer.workflows.context import state_dir

    def body() -> None:
        # read first (labels, runs); saving the calibration creates the folders it needs
        report, path = run_calibration(state_dir(out, write=False), grader, labels, levels)
        status = status_of(report, grader)
        if as_json:
            ui.print_json({**report.model_dump(mode="json"), "path": str(path),
                           "status": status.model_dump(mode="json")})
            return
        for warning in report.warnings:
            ui.warn(warning)
        rows = []
        for d in [report.overall, *report.dimensions]:
            c = d.confusion
            rows.append([d.name, d.n, fmt.num(d.cohen_kappa_quadratic),
                         fmt.num(d.krippendorff_alpha_interval), fmt.num(d.mean_absolute_error),
                         f"{c.both_pass}/{c.judge_only_pass}/{c.human_only_pass}/{c.both_fail}",
                         fmt.num(c.kappa)])
        ui.table(f"{grader} against {report.labelled_trials} labelled trial(s); pass at "
                 f"{report.threshold}",
                 ["Dimension", "N", "Kappa (quadratic)", "Alpha (interval)", "MAE",
                  "Pass: both/judge only/human only/neither", "Pass kappa"], rows)
        (ui.info if status.calibrated else ui.warn)(status.message)
        ui.info(f"Saved {path}")

    guarded(body)
