"""The viewer's lifecycle pages: suite health, graduations, judge calibration and labeling,
over files the lifecycle itself saved (lifecycle_builders.py); the viewer never writes one."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest

from promptloop.optimizer.lifecycle.calibration import load_calibration
from promptloop.optimizer.lifecycle.health_io import load_health
from promptloop.optimizer.lifecycle.labels import join_labels, read_labels
from promptloop.optimizer.report.store import default_store_dir, load_run, save_run
from promptloop.optimizer.view.app import ViewApp
from tests.optimizer.report.test_report import mk_run, tr
from tests.optimizer.view.builders import ViewState
from tests.optimizer.view.lifecycle_builders import (
    JUDGE,
    JUDGE_DIMS,
    JUDGED_NEWEST,
    JUDGED_SUITE,
)
from tests.optimizer.view.test_pages import page, rows


@pytest.fixture(scope="module")
def app(view_state: ViewState) -> ViewApp:
    return ViewApp(view_state.root)


def test_health_list_shows_saved_figures_and_how_to_save_the_missing(
    app: ViewApp, tmp_path: Path,
) -> None:
    listed = rows(page(app, "/health"), "health-table")
    judged = next(r for r in listed if f">{JUDGED_SUITE}<" in r)
    assert "plain" in judged and "3/4 (75%)" in judged
    # a suite with runs and no saved health: the command, and nothing written by the viewer
    state = tmp_path / "state"
    save_run(mk_run([tr("a", 0, "passed")], name="only-run"), default_store_dir(state))
    bare = ViewApp(state)
    text = page(bare, "/health")
    assert "none saved: <code class=\"command\">promptloop health --suite demo</code>" in text
    one = page(bare, "/health/demo")
    assert 'id="no-health"' in one and "promptloop health --suite demo" in one
    assert not (state / "health").exists()
    page(bare, "/health/no_such_suite", 404)


def test_health_page_buckets_trend_flags_graduation_and_evidence(
    app: ViewApp, view_state: ViewState,
) -> None:
    saved = load_health(view_state.root, JUDGED_SUITE)
    assert saved is not None
    text = page(app, f"/health/{JUDGED_SUITE}")
    buckets = rows(text, "bucket-table")
    plain = next(r for r in buckets if 'data-bucket="plain"' in r)
    insight = next(r for r in buckets if 'data-bucket="insight"' in r)
    assert "<b>100.0%</b>" in plain and "6/5" in plain and ">mature<" in plain
    assert "promptloop graduate --agent pkm_agent --bucket plain" in plain
    assert "not ready" in insight and "graduate --agent" not in insight
    trend = next(b.trend for b in saved.buckets if b.bucket == "insight")
    assert trend.slope_per_run is not None and trend.low is not None and trend.high is not None
    shown = (f"{trend.slope_per_run * 100:+.1f} pp/run "
             f"[{trend.low * 100:+.1f}, {trend.high * 100:+.1f}]")
    assert shown in insight
    assert insight.count("<circle class=\"dot\"") == 6 and "<polyline" in insight
    # the flaky task with its disagreeing trials, each linked to its transcript page
    flaky = text.split('data-task="insight-b"', 1)[1].split("</table>", 1)[0]
    links = re.findall(r'href="(/trial\?[^"]+)"', flaky)
    assert len(links) == 12 and "flaky trials" in flaky
    trial = page(app, html.unescape(links[0]))
    assert "insight-b" in trial and "Met Ana about the insight-b launch" in trial
    assert "Ready to graduate: <b class=\"mono\">plain</b>" in text


def test_graduations_list_the_saved_records(app: ViewApp) -> None:
    text = page(app, "/graduations")
    listed = rows(text, "graduations-table")
    assert "promptloop/graduate/pkm_agent-plain/20260307" in listed[0]
    assert "5 mature run(s)" in listed[0] and "eeeeeeeeeeee" in listed[0]
    assert "## promptloop: graduate `plain` of pkm_agent" in html.unescape(text)


def test_calibration_pages_show_agreement_confusion_and_state(
    app: ViewApp, view_state: ViewState,
) -> None:
    report = load_calibration(view_state.root, JUDGE)
    assert report is not None
    listed = rows(page(app, "/calibration"), "calibration-table")
    mine = next(r for r in listed if f'data-grader="{JUDGE}"' in r)
    assert "b-cal-insufficient" in mine and ">too few labels<" in mine
    other = next(r for r in listed if 'data-grader="pkm_append_coherence"' in r)
    assert "b-cal-uncalibrated" in other and "never" in other
    text = page(app, f"/calibration/{JUDGE}")
    table = rows(text, "agreement-table")
    assert [re.search(r'data-dimension="([^"]+)"', r).group(1) for r in table] == [  # type: ignore[union-attr]
        "all dimensions", *JUDGE_DIMS]
    g = next(d for d in report.dimensions if d.name == "groundedness")
    ground = table[1]
    assert f">{g.n}<" in ground and f">{g.mean_absolute_error:.3f}<" in ground
    assert f">{g.cohen_kappa_quadratic:.3f}<" in ground
    confusion = text.split('<table class="confusion" data-dimension="groundedness">', 1)[1]
    cells = re.findall(r'<td class="num">(\d+)</td>', confusion.split("</table>", 1)[0])
    c = g.confusion
    assert cells == [str(v) for v in (c.both_pass, c.human_only_pass, c.judge_only_pass,
                                      c.both_fail)]
    assert "only 3 labelled trials (needs 20)" in text
    uncal = page(app, "/calibration/pkm_append_coherence")
    assert "never calibrated" in uncal and "labels-pkm_append_coherence.jsonl" in uncal
    page(app, "/calibration/card_completion", 404)  # a code grader has no calibration


def test_calibration_pages_parse_each_calibration_once(
    app: ViewApp, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from promptloop.optimizer.lifecycle.calibration import CalibrationReport
    from promptloop.optimizer.view import saved

    parsed: list[str] = []
    real = saved._parse

    def counted(state: object, path: Path, model: type) -> object:
        if model is CalibrationReport:
            parsed.append(path.name)
        return real(state, path, model)  # type: ignore[arg-type]

    monkeypatch.setattr(saved, "_parse", counted)
    listed = page(app, "/calibration")
    assert "b-cal-insufficient" in listed
    assert sorted(parsed) == sorted(set(parsed)), parsed  # each file once for the list
    parsed.clear()
    one = page(app, f"/calibration/{JUDGE}")
    assert "only 3 labelled trials (needs 20)" in one
    assert f"{JUDGE}.json" in parsed and sorted(parsed) == sorted(set(parsed)), parsed


def test_run_and_compare_pages_badge_the_judges(app: ViewApp) -> None:
    run = page(app, f"/run/{JUDGED_NEWEST}")
    graders = run.split("<h2>Graders</h2>", 1)[1].split("</table>", 1)[0]
    assert "<th>Calibration</th>" in graders
    judge_row = next(r for r in re.findall(r"<tr>.*?</tr>", graders, re.S) if JUDGE in r)
    assert "too few labels" in judge_row
    assert f'href="/calibration/{JUDGE}"' in run and "b-cal-insufficient" in run
    assert "/label?" + urlencode({"grader": JUDGE, "run": JUDGED_NEWEST}) in \
        html.unescape(run)
    compare = page(app, "/compare?" + urlencode({"base": f"{JUDGED_SUITE}-day4",
                                                 "cand": JUDGED_NEWEST}))
    assert "judge calibration:" in compare and "b-cal-insufficient" in compare


def test_labeling_page_embeds_the_trials_and_dimensions_calibrate_reads(
    app: ViewApp, view_state: ViewState, tmp_path: Path,
) -> None:
    text = page(app, "/label?" + urlencode({"grader": JUDGE, "run": JUDGED_NEWEST}))
    raw = text.split('<script type="application/json" id="label-data">', 1)[1]
    data = json.loads(raw.split("</script>", 1)[0])
    ids = [f"{JUDGED_NEWEST}/{t}#{i}" for t, i in (("insight-a", 0), ("insight-b", 0),
                                                     ("insight-b", 1))]
    assert data == {"grader": JUDGE, "run": JUDGED_NEWEST, "dimensions": list(JUDGE_DIMS),
                    "trials": ids}
    assert text.count('class="grade"') == len(ids) * len(JUDGE_DIMS)
    assert "Met Ana about the insight-a launch" in text and "Filed under Projects" in text
    assert f"promptloop calibrate --grader {JUDGE} --labels labels-{JUDGE}.jsonl" in text
    # a file as the page's script writes it (one line per trial with a grade) joins
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"trial_id": i, "grader": data["grader"],
                                          "scores": dict.fromkeys(data["dimensions"], 0.5)})
                              + "\n" for i in data["trials"]))
    parsed = read_labels(labels, JUDGE)
    store = default_store_dir(view_state.root)
    items = join_labels(parsed, JUDGE, 0.6, lambda n: load_run(store, n))
    assert [i.trial_id for i in items] == ids
    assert all(set(i.human) == set(JUDGE_DIMS) for i in items)
    picker = page(app, "/label")
    assert f'<option value="{JUDGE}"' in picker and "Pick a judge grader" in picker
    none = page(app, "/label?" + urlencode({"grader": JUDGE, "run": view_state.base}))
    assert "has a <span class=\"mono\">pkm_insight_quality</span> score" in none


def test_the_calibration_list_names_only_judges_the_project_can_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team with one agent of its own saw the bundled PKM agent's four judges listed as
    "uncalibrated" beside its own rubric_judge."""
    from promptloop.optimizer.core.project import parse_project
    from promptloop.optimizer.view.judges import registered_judges

    own = parse_project('[agents.bot]\nprompt = "p.md"\nsuites = ["evals"]\n'
                        'adapter = "command"\ncommand = ["python3", "bot.py"]\n',
                        tmp_path / "promptloop.toml")
    monkeypatch.setattr("promptloop.optimizer.core.project._ACTIVE", [own])
    assert registered_judges() == ["rubric_judge"]
    monkeypatch.setattr("promptloop.optimizer.core.project._ACTIVE", [])
    monkeypatch.chdir(tmp_path)  # no promptloop.toml: the bundled agents and their judges
    assert "pkm_insight_quality" in registered_judges()
