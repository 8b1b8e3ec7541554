"""The table view-model and every output that renders it: terminal, Markdown, HTML, PR body
and review comment."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from promptloop.optimizer.cli import ui
from promptloop.optimizer.gate.compare import BucketComparison
from promptloop.optimizer.gate.verdict import Verdict
from promptloop.optimizer.report.html.kit import macro
from promptloop.optimizer.report.markdown import table_lines, verdict_markdown
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.report.table import (
    Table,
    bucket_table,
    comparison_table,
    gate_rows,
    gate_table,
    verdict_table,
)
from promptloop.optimizer.workflows.pr import pr_body
from promptloop.optimizer.workflows.review_comment import bucket_table as comment_table
from tests.optimizer.report.test_report import mk_run, tr


def comp(bucket: str, n: int, base: float, cand: float, fixed: int, broken: int,
         ci: tuple[float, float], p: float, status: str) -> BucketComparison:
    return BucketComparison(
        bucket=bucket, n_pairs=n, base_mean=base, cand_mean=cand, delta=cand - base,
        ci_low=ci[0], ci_high=ci[1], base_pass_rate=base, cand_pass_rate=cand,
        pass_delta=cand - base, fixed=fixed, broken=broken, p_value=p, status=status,  # type: ignore[arg-type]
    )


COMPS = [
    comp("insight", 12, 1.0, 1.0, 0, 0, (0.0, 0.0), 1.0, "unchanged"),
    comp("routing", 16, 0.25, 0.75, 8, 0, (0.25, 0.75), 0.0078125, "improved"),
    comp("skip", 12, 1.0, 2 / 3, 0, 4, (-0.583, -0.083), 0.125, "regressed"),
]
REJECT = Verdict(decision="reject", target_bucket="routing", suspected_regressions=["skip"],
                 reasons=["bucket 'skip' regressed: delta -0.333"], target=COMPS[1])


def test_table_and_markdown_list_every_bucket() -> None:
    rows = verdict_table(COMPS, "routing")
    assert [r["bucket"] for r in rows] == ["insight", "routing", "skip"]
    assert [r["target"] for r in rows] == [False, True, False]
    assert rows[2]["status"] == "regressed" and rows[2]["broken"] == 4

    text = verdict_markdown(REJECT, COMPS)
    assert text.startswith("**Verdict: REJECT** (target bucket `routing`)")
    table = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(table) == 3
    assert "| `routing` | yes | 16 |" in text
    # one column order for every gate table: pass rates first, then mean scores
    assert "| `skip` |  | 12 | 100% | 67% | 1.000 | 0.667 | -0.333 |" in text
    assert "**regressed**" in text and "95% CI" in text
    assert "suspected regressions: `skip`" in text


def test_table_adds_a_row_for_a_missing_target() -> None:
    comps = [comp("skip", 4, 1.0, 1.0, 0, 0, (0.0, 0.0), 1.0, "unchanged")]
    rows = verdict_table(comps, "routing")
    assert [(r["bucket"], r["status"]) for r in rows] == [("skip", "unchanged"),
                                                          ("routing", "missing")]
    verdict = Verdict(decision="inconclusive", target_bucket="routing")
    assert "| `routing` | yes | 0 | n/a |" in verdict_markdown(verdict, comps)


def test_stored_rows_render_like_the_comparisons() -> None:
    """The ledger keeps `verdict_table` dicts (as JSON); they give back the same table."""
    stored = json.loads(json.dumps(verdict_table(COMPS, "routing")))
    assert gate_table(stored) == comparison_table(COMPS, "routing")
    assert gate_table(gate_rows(COMPS)).titles[:3] == ["Bucket", "n", "Base pass"]
    head = comparison_table(COMPS, cand="Head")
    assert "Head pass" in head.titles and "Target" not in head.titles
    status = {row[0].text: row[-1] for row in head.rows}
    assert (status["skip"].tone, status["skip"].strong) == ("down", True)
    assert (status["routing"].tone, status["insight"].tone) == ("up", "")


def test_bucket_table_compares_with_a_base_run() -> None:
    base = mk_run([tr("a", 0, "failed"), tr("a", 1, "failed"),
                   tr("gone", 0, "passed", bucket="old")])
    cand = mk_run([tr("a", 0, "passed"), tr("a", 1, "failed"),
                   tr("e", 0, "errored", bucket="beta")])
    table = bucket_table(summarize(cand), summarize(base))
    assert table.titles[-4:] == ["Base pass", "Δ pass", "Base score", "Δ score"]
    rows = {row[0].text: [c.text for c in row] for row in table.rows}
    assert rows["alpha"][3] == "50.0%" and rows["alpha"][8] == "+50.0 pp"
    assert rows["old"][1] == "not in this run" and rows["beta"][6] == "1"
    alpha = next(row for row in table.rows if row[0].text == "alpha")
    assert alpha[8].tone == "up" and alpha[0].code
    errored = next(row for row in table.rows if row[0].text == "beta")
    assert errored[6].tone == "alert"


def _cells(table: Table) -> list[str]:
    return [c.text for row in table.rows for c in row if c.text]


def test_every_output_renders_the_same_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    table = comparison_table(COMPS, "routing")
    console = Console(width=240, record=True)
    monkeypatch.setattr(ui, "out", console)
    ui.verdict_rows(verdict_table(COMPS, "routing"))
    terminal = console.export_text()
    markdown = "\n".join(table_lines(table))
    html = str(macro("macros.html.j2", "table")(table))
    body = pr_body(suite="pkm_agent", bucket="routing", branch="b", hypothesis="h", diff="",
                   verdict=REJECT, comparisons=COMPS, changes=[], tokens=1, cost_usd=None,
                   base_commit="0" * 40)
    comment = comment_table(COMPS)
    for text in _cells(table):
        assert text in terminal and text in markdown and text in body, text
        assert f">{text}<" in html, text
    for text in _cells(comparison_table(COMPS, cand="Head")):
        assert text in comment, text
    for title in table.titles:
        assert title in terminal and f"| {title} " in markdown and f">{title}</th>" in html


def test_a_review_row_left_inconclusive_says_what_harm_detection_decided() -> None:
    """Two new-team trials read a review table whose row said "inconclusive" under a verdict
    "neutral": the fixed-sample test had too few pairs, harm detection's added trials had
    ruled the drop out. The review's table names such a row by the harm statement."""
    rows = [comp("items", 4, 0.25, 0.125, 0, 0, (-0.375, 0.0), 1.0, "inconclusive"),
            comp("owner", 4, 0.5, 0.25, 0, 1, (-0.5, 0.0), 0.5, "inconclusive"),
            comp("other", 0, 0.0, 0.0, 0, 0, (0.0, 0.0), 1.0, "inconclusive")]
    text = comment_table(rows, {"items": "no harm", "owner": "harm not ruled out",
                                "other": "regressed"})
    lines = {line.split("|")[1].strip(" `"): line for line in text.splitlines()
             if line.startswith("| `")}
    assert lines["items"].rstrip(" |").endswith("no harm"), lines["items"]
    assert lines["owner"].rstrip(" |").endswith("harm not ruled out")
    # a decision the verdict rests on names the row whatever the fixed-sample test said (a
    # team read "inconclusive" beside a harm verdict of "regressed", and "no harm" for the
    # bucket review's efficacy looks had found improved)
    assert lines["other"].rstrip(" |").endswith("**regressed**"), lines["other"]
    improved = comment_table(rows, {"items": "no harm", "owner": "improved"})
    assert "**improved**" in next(x for x in improved.splitlines() if "`owner`" in x)
    assert comment_table(rows).count("inconclusive") == 3  # without harm: as before


def test_the_status_column_agrees_with_harm_detection() -> None:
    """An accepted verdict's table said "inconclusive" for a bucket its findings called "no
    harm" (the fixed-sample label of a few paired trials); a harmed bucket reads regressed."""
    from promptloop.optimizer.gate.verdict import BucketVerdict, Verdict
    from promptloop.optimizer.report.plain import LEGEND, agree_with_harm

    verdict = Verdict(decision="accept", target_bucket="t", reasons=[], test="", buckets=[
        BucketVerdict(bucket="tone", state="no harm", statement=""),
        BucketVerdict(bucket="urgency", state="regressed", statement=""),
        BucketVerdict(bucket="links", state="no harm", statement="")])
    rows = agree_with_harm([{"bucket": "tone", "status": "inconclusive"},
                            {"bucket": "urgency", "status": "unchanged"},
                            {"bucket": "links", "status": "unchanged"},
                            {"bucket": "t", "status": "improved"}], verdict)
    assert [r["status"] for r in rows] == ["no harm", "regressed", "unchanged", "improved"]
    assert "uncorrected" in LEGEND["status"] and "gate's call" not in LEGEND["status"]


def test_a_pr_body_carries_the_notes_a_reviewer_must_weigh() -> None:
    """A judge that drove the accept decision with 6 labelled trials (20 needed) was named in
    the terminal and the ledger, not in the PR body a reviewer reads (commands.md: verdicts
    say when an uncalibrated judge drives a decision)."""
    note = "judge rubric_judge: only 6 labelled trials (needs 20)"
    body = pr_body(suite="pkm_agent", bucket="routing", branch="b", hypothesis="h", diff="",
                   verdict=REJECT, comparisons=COMPS, changes=[], tokens=1, cost_usd=None,
                   base_commit="0" * 40, notes=[note])
    assert f"- **Note:** {note}" in body
    assert body.index("**Note:**") < body.index("### Diff")
