"""A candidate's run shows the candidate's commit (the viewer's runs list and run page, the
Markdown report), as `promptloop runs` does, and says it is a candidate's: they showed the
base commit, and eval, baseline and candidate rows looked the same (a team's first hour)."""

from __future__ import annotations

from pathlib import Path

from promptloop.optimizer.report.markdown import render_markdown
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.view.server import running
from tests.optimizer.lifecycle.helpers import run, save_all
from tests.optimizer.view.http import get

BASE, CAND = "b" * 40, "c" * 40


def _candidate() -> object:
    made = run("cand-1", {"event-a": [True, False]})
    return made.model_copy(update={"provenance": made.provenance.model_copy(update={
        "git_commit": BASE, "role": "candidate", "branch": "promptloop/card/event/abc",
        "candidate_commit": CAND})})


def test_the_report_names_the_candidate_commit_on_its_base() -> None:
    cand = _candidate()
    md = render_markdown(cand, summarize(cand))  # type: ignore[arg-type]
    line = next(x for x in md.splitlines() if x.startswith("- Git commit:"))
    assert CAND[:12] in line and f"on base {BASE[:12]}" in line and "role: candidate" in line


def test_the_viewer_shows_the_candidate_commit_and_role(tmp_path: Path) -> None:
    save_all(tmp_path, [run("eval-1", {"event-a": [True, True]}), _candidate()])  # type: ignore[list-item]
    with running(tmp_path) as server:
        runs = get(server, "/").text
        page = get(server, "/run/cand-1").text
    row = next(x for x in runs.split("<tr") if "cand-1" in x and "radio" in x)
    assert f">{CAND[:12]}</td>" in row and f">{BASE[:12]}</td>" not in row
    assert ">candidate</span>" in row
    assert "candidate commit" in page and CAND[:12] in page and "base commit" in page
