"""Judge calibration: the labels file, the join to stored scores, agreement, status, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.calibrate import calibrate as calibrate_command
from promptloop.optimizer.lifecycle.calibration import (
    calibration_path,
    calibration_status,
    load_calibration,
    run_calibration,
)
from promptloop.optimizer.lifecycle.errors import LabelsError, LifecycleError, UnknownNameError
from promptloop.optimizer.lifecycle.health_io import build_health
from tests.cli_json import cli_result
from tests.optimizer.lifecycle.helpers import T0, app_with, judge_score, run, save_all, trial

GRADER = "pkm_insight_quality"
DIMS = ("groundedness", "non_redundancy", "expression_quality")
JUDGE = {  # task -> the judge's three dimension scores
    "ins-a": (0.8, 0.8, 0.8), "ins-b": (0.4, 0.2, 0.3), "ins-c": (0.1, 0.1, 0.1),
    "ins-d": (1.0, 0.8, 0.9),
}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    trials = [trial(task, "insight", 0, sum(v) / 3 >= 0.6, T0,
                    scores=[judge_score(dict(zip(DIMS, v, strict=True)))])
              for task, v in JUDGE.items()]
    save_all(tmp_path, [run("pkm-1", {}, trials=trials, suite="pkm_agent_capability",
                            agent="pkm_agent")])
    return tmp_path


def write_labels(path: Path, lines: list[object]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def label(task: str, scores: tuple[float | str | None, ...], **extra: object) -> dict:
    return {"trial_id": f"pkm-1/{task}#0", "scores": dict(zip(DIMS, scores, strict=True)),
            **extra}


def test_perfect_agreement(state: Path, tmp_path: Path) -> None:
    labels = write_labels(tmp_path / "l.jsonl", [label(t, v) for t, v in JUDGE.items()])
    report, path = run_calibration(state, GRADER, labels)
    assert path == calibration_path(state, GRADER)
    o = report.overall
    assert o.n == 4 and o.krippendorff_alpha_interval == pytest.approx(1.0)
    assert o.cohen_kappa_quadratic == pytest.approx(1.0) and o.mean_absolute_error == 0
    assert (o.confusion.both_pass, o.confusion.both_fail) == (2, 2)
    assert [d.name for d in report.dimensions] == list(DIMS)
    assert report.judge_models == ["scripted:judge"] and report.threshold == 0.6
    saved = json.loads(path.read_text())
    assert saved["format"] == "promptloop.calibration/1"
    assert len(list((state / "calibration" / "history").glob("*.json"))) == 1


def test_disagreement_figures_and_averaged_labelers(state: Path, tmp_path: Path) -> None:
    labels = write_labels(tmp_path / "l.jsonl", [
        label("ins-a", (0.9, 0.9, 0.9), labeler="ana"),       # judge 0.8: both pass
        label("ins-b", (0.8, 0.8, 0.8), labeler="ana"),       # judge 0.3: judge fails it
        label("ins-b", (1.0, 1.0, "unknown"), labeler="bo"),  # averaged with ana's
        label("ins-c", (0.2, 0.2, 0.2)),                      # judge 0.1: both fail
        label("ins-d", (0.2, 0.3, None)),                     # judge 0.9: judge passes it
        {"trial_id": "pkm-1/ins-a#0", "grader": "pkm_append_coherence",
         "scores": {"coherence": 1}},
    ])
    report, _ = run_calibration(state, GRADER, labels)
    by_task = {i.task_id: i for i in report.items}
    assert by_task["ins-b"].human["groundedness"] == pytest.approx(0.9)
    assert by_task["ins-b"].human["expression_quality"] == pytest.approx(0.8)
    assert by_task["ins-b"].labelers == ["ana", "bo"] and by_task["ins-b"].lines == [2, 3]
    assert by_task["ins-d"].human_value == pytest.approx(0.25)
    c = report.overall.confusion
    assert (c.both_pass, c.judge_only_pass, c.human_only_pass, c.both_fail) == (1, 1, 1, 1)
    assert c.agreement == pytest.approx(0.5)
    human = [0.9, (0.9 + 0.9 + 0.8) / 3, 0.2, 0.25]
    judge = [0.8, 0.3, 0.1, 0.9]
    mae = sum(abs(h - j) for h, j in zip(human, judge, strict=True)) / 4
    assert report.overall.mean_absolute_error == pytest.approx(mae)
    assert report.other_grader_lines == 1
    expr = next(d for d in report.dimensions if d.name == "expression_quality")
    assert expr.n == 3  # ins-d's human expression_quality is unknown
    ambiguous = build_health(state, "pkm_agent_capability").ambiguous
    assert sorted(a.task_id for a in ambiguous if a.kind == "human_disagreement") == \
        ["ins-b", "ins-d"]


@pytest.mark.parametrize(("line", "field", "problem"), [
    ('{"trial_id": "pkm-1/ins-a#0", "scores": ', "(line)", "invalid JSON"),
    ({"scores": {"groundedness": 1}}, "trial_id", "required"),
    ({"trial_id": "ins-a", "scores": {"groundedness": 1}}, "trial_id", "is not <runName>"),
    ({"trial_id": "pkm-1/ins-a#0"}, "scores", "required"),
    ({"trial_id": "pkm-1/ins-a#0", "scores": {"groundedness": 1.5}}, "scores.groundedness",
     "must be in [0, 1]"),
    ({"trial_id": "pkm-1/ins-a#0", "scores": {"groundedness": "high"}},
     "scores.groundedness", "must be a number"),
    ({"trial_id": "pkm-1/ins-a#0", "scores": {"tone": 0.5}}, "scores.tone",
     "no such dimension"),
    ({"trial_id": "pkm-2/ins-a#0", "scores": {"groundedness": 1}}, "trial_id",
     "Did you mean 'pkm-1'"),
    ({"trial_id": "pkm-1/ins-z#0", "scores": {"groundedness": 1}}, "trial_id",
     "has no trial ins-z#0"),
    ({"trial_id": "../x/ins-a#0", "scores": {"groundedness": 1}}, "trial_id",
     "cannot be a run name"),
])
def test_bad_label_lines_name_file_line_and_field(state: Path, tmp_path: Path, line: object,
                                                  field: str, problem: str) -> None:
    labels = write_labels(tmp_path / "bad.jsonl", [label("ins-b", (1, 1, 1)), line])
    with pytest.raises(LabelsError) as err:
        run_calibration(state, GRADER, labels)
    assert err.value.path == str(labels) and err.value.line == 2 and err.value.field == field
    assert problem in str(err.value)
    assert f"{labels}: line 2: field '{field}'" in str(err.value)


def test_file_level_problems(state: Path, tmp_path: Path) -> None:
    with pytest.raises(LabelsError) as missing:
        run_calibration(state, GRADER, tmp_path / "missing.jsonl")
    # the file as a whole: no "line 0: field '(file)'" (a team read it as a line of the file)
    assert str(missing.value).endswith("missing.jsonl: no such labels file (--labels)")
    dup = write_labels(tmp_path / "dup.jsonl", [label("ins-a", (1, 1, 1)),
                                                label("ins-a", (0, 0, 0))])
    with pytest.raises(LabelsError, match="line 2: field 'trial_id': trial already labelled"):
        run_calibration(state, GRADER, dup)
    other = write_labels(tmp_path / "other.jsonl", [{"trial_id": "pkm-1/ins-a#0",
                                                     "grader": "x", "scores": {"a": 1}}])
    with pytest.raises(LabelsError, match="no labels for grader"):
        run_calibration(state, GRADER, other)
    with pytest.raises(UnknownNameError, match="Did you mean 'pkm_insight_quality'"):
        run_calibration(state, "pkm_insight_qualty", dup)
    with pytest.raises(LifecycleError, match="card_completion is a code grader"):
        run_calibration(state, "card_completion", dup)


def test_status_states(state: Path, tmp_path: Path) -> None:
    assert calibration_status(state, GRADER).state == "uncalibrated"
    assert calibration_status(state, "card_completion").state == "not_a_judge"
    labels = write_labels(tmp_path / "l.jsonl", [label(t, v) for t, v in JUDGE.items()])
    run_calibration(state, GRADER, labels)
    s = calibration_status(state, GRADER)
    assert s.state == "insufficient" and not s.calibrated and s.items == 4
    s = calibration_status(state, GRADER, min_items=4)
    assert s.state == "calibrated" and s.calibrated and s.agreement == pytest.approx(1.0)
    s = calibration_status(state, GRADER, min_items=4, judge_model="openai:o3")
    assert s.state == "other_judge_model" and "scripted:judge" in s.message
    worse = write_labels(tmp_path / "w.jsonl", [label(t, tuple(1 - x for x in v))
                                                for t, v in JUDGE.items()])
    run_calibration(state, GRADER, worse)
    s = calibration_status(state, GRADER, min_items=4)
    assert s.state == "below_threshold" and s.agreement is not None and s.agreement < 0
    assert load_calibration(state, GRADER) is not None


def test_calibrate_command(state: Path, tmp_path: Path) -> None:
    app = app_with(("calibrate", calibrate_command))
    labels = write_labels(tmp_path / "l.jsonl", [label(t, v) for t, v in JUDGE.items()])
    runner = CliRunner()
    ok = runner.invoke(app, ["calibrate", "--grader", GRADER, "--labels", str(labels),
                             "--state-dir", str(state), "--json"])
    assert ok.exit_code == 0, ok.output
    data = cli_result(ok.stdout)
    assert data["overall"]["krippendorff_alpha_interval"] == pytest.approx(1.0)
    assert data["status"]["state"] == "insufficient"
    text = runner.invoke(app, ["calibrate", "--grader", GRADER, "--labels", str(labels),
                               "--state-dir", str(state)])
    assert text.exit_code == 0 and "Alpha" in text.stdout and "all dimensions" in text.stdout
    bad = write_labels(tmp_path / "bad.jsonl", ["{oops"])
    res = runner.invoke(app, ["calibrate", "--grader", GRADER, "--labels", str(bad),
                              "--state-dir", str(state)])
    assert res.exit_code == 1 and "line 1: field '(line)'" in res.stderr
    res = runner.invoke(app, ["calibrate", "--grader", "insight", "--labels", str(labels),
                              "--state-dir", str(state)])
    assert res.exit_code == 1 and "unknown judge grader 'insight'" in res.stderr
    assert "--labels" in runner.invoke(app, ["calibrate", "--help"]).stdout


def test_a_calibration_recorded_under_the_providers_bare_name_matches_its_id() -> None:
    """Labels joined before judge ids were recorded with their provider carried the name the
    provider answered (`fake-judge`); a run naming `openai:fake-judge` is that judge, while
    another provider's model of another name is not."""
    from promptloop.optimizer.lifecycle.calibration import same_model
    assert same_model("openai:fake-judge", "fake-judge")
    assert same_model("openai:fake-judge", "openai:fake-judge")
    assert not same_model("openai:fake-judge", "anthropic:fake-judge")
    assert not same_model("openai:other", "fake-judge")
