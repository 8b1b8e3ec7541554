"""`promptloop eval / report / suites` end to end on the bundled suites with scripted models."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from tests.cli_json import cli_result

runner = CliRunner()
CARD_REGRESSION = ("--suite", "card_agent", "--kind", "regression", "--agent-model",
                   "scripted:card")
"""The bundled card regression suite on the scripted card model."""


def _eval(state: Path, *args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["eval", "--out", str(state), "--json", *args])
    data = cli_result(result.stdout) if result.exit_code == 0 else {}
    if result.exit_code not in (0, 1, 2):
        raise AssertionError(result.output)
    return result.exit_code, data | {"_output": result.output}


def test_eval_card_regression_then_cached_then_replay(state: Path) -> None:
    code, first = _eval(state, *CARD_REGRESSION, "--mode", "record")
    assert code == 0, first["_output"]
    s1 = first["summary"]
    assert s1["num_trials"] == 16 and s1["errored_trials"] == 0
    assert Path(first["report"]).is_file()
    index = (state / "runs" / "index.jsonl").read_text().splitlines()
    assert json.loads(index[-1])["runName"] == first["run"]

    # second run: every trial comes from the trial cache, same scores
    code, second = _eval(state, *CARD_REGRESSION)
    assert code == 0 and second["summary"]["cached_trials"] == 16
    assert second["summary"]["trial_pass_rate"] == s1["trial_pass_rate"]
    # its closing line does not read as if it made the cached trials' calls now
    plain = runner.invoke(app, ["eval", "--out", str(state), *CARD_REGRESSION])
    said = " ".join(plain.output.split())
    assert "(all recorded by cached trials: no call made now)" in said, said
    assert "spent now $0.0000" in said

    # replay twice with no cache: identical per-bucket scores, no model needed
    scores = []
    for _ in range(2):
        code, rep = _eval(state, *CARD_REGRESSION, "--mode", "replay", "--fresh")
        assert code == 0, rep["_output"]
        assert rep["summary"]["cached_trials"] == 0
        scores.append(
            [(b["bucket"], b["mean_score"], b["trial_pass_rate"])
             for b in rep["summary"]["buckets"]]
        )
    assert scores[0] == scores[1]
    assert scores[0] == [(b["bucket"], b["mean_score"], b["trial_pass_rate"])
                         for b in s1["buckets"]]


def test_eval_pkm_with_judge_and_report(state: Path) -> None:
    code, data = _eval(state, "--suite", "pkm_agent", "--kind", "regression",
                       "--agent-model", "scripted:pkm", "--judge-model", "scripted:judge")
    assert code == 0, data["_output"]
    buckets = {b["bucket"]: b for b in data["summary"]["buckets"]}
    # the scripted policy writes everything: without the skip rule, skip tasks fail
    assert buckets["skip_trivial"]["trial_pass_rate"] == 0.0
    md = runner.invoke(app, ["report", data["run"], "--out", str(state)])
    assert md.exit_code == 0 and "skip_trivial" in md.stdout
    failing = runner.invoke(
        app, ["report", "latest", "--failing", "--bucket", "skip_trivial", "--out", str(state)]
    )
    assert failing.exit_code == 0
    assert "terminal_path" in failing.stdout and "Write" in failing.stdout
    typo = runner.invoke(
        app, ["report", "latest", "--failing", "--bucket", "skip_trivia", "--out", str(state)])
    assert typo.exit_code == 1 and "Did you mean 'skip_trivial'" in typo.output, typo.output
    # --bucket without --failing did nothing (the whole run, exit 0): a slip, said
    alone = runner.invoke(app, ["report", "latest", "--bucket", "skip_trivial", "--out",
                                str(state)])
    assert alone.exit_code == 1 and "add --failing" in alone.output, alone.output
    as_json = runner.invoke(app, ["report", data["run"], "--format", "json", "--out", str(state)])
    report = json.loads(as_json.stdout)
    assert report["suite"]["name"] == "pkm_agent_regression"
    trial = report["trials"][0]
    assert {"trial", "transcript", "outcome", "scores"} <= set(trial)
    assert trial["transcript"]["toolCalls"][0]["toolName"]


def test_replay_without_recording_is_infrastructure_failure(state: Path) -> None:
    code, data = _eval(state, *CARD_REGRESSION, "--mode", "replay", "--fresh")
    assert code == 2
    assert "errored" in data["_output"]


def test_usage_errors_exit_1(state: Path, tmp_path: Path) -> None:
    code, data = _eval(
        state, "--suite", "card_agent", "--bucket", "nope", "--agent-model", "scripted:card"
    )
    assert code == 1 and "unknown bucket" in data["_output"]
    code, data = _eval(state, "--suite", str(tmp_path), "--agent-model", "scripted:card")
    assert code == 1 and "suite.json" in data["_output"]
    code, data = _eval(state, "--suite", "card_agent", "--agent-model", "antropic:x")
    assert code == 1 and "Did you mean 'anthropic'" in data["_output"]


def test_missing_key_fails_before_any_trial(state: Path) -> None:
    code, data = _eval(state, "--suite", "card_agent", "--kind", "regression",
                       "--agent-model", "anthropic:claude-haiku-4-5")
    assert code == 1 and "ANTHROPIC_API_KEY" in data["_output"]  # configuration: exit 1
    assert not (state / "runs").exists()


def test_suites_listing() -> None:
    result = runner.invoke(app, ["suites", "--json"])
    assert result.exit_code == 0
    listing = {s["name"]: s for s in cli_result(result.stdout)}
    assert listing["card_agent_capability"]["tasks"] >= 30
    assert len(listing["pkm_agent_capability"]["buckets"]) >= 15
    assert all(len(b["task_ids"]) >= 2 for s in listing.values() for b in s["buckets"])


def test_html_report_compares_against_a_base_run(state: Path, tmp_path: Path) -> None:
    code, first = _eval(state, *CARD_REGRESSION, "--trials", "1")
    assert code == 0
    code, second = _eval(state, *CARD_REGRESSION, "--trials", "1", "--fresh")
    assert code == 0
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", second["run"], "--format", "html", "--base",
                                 first["run"], "-o", str(out), "--out", str(state)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert first["run"] in html and second["run"] in html and "<svg" in html
    missing = runner.invoke(app, ["report", second["run"], "--format", "html", "--base",
                                  "no-such-run", "--out", str(state)])
    assert missing.exit_code == 1 and "no-such-run" in missing.output


def test_pkm_replay_includes_judge_calls(state: Path) -> None:
    args = ["--suite", "pkm_agent", "--bucket", "novel_character_note", "--agent-model",
            "scripted:pkm", "--judge-model", "scripted:judge", "--trials", "1"]
    code, recorded = _eval(state, *args, "--mode", "record")
    assert code == 0, recorded["_output"]
    code, replayed = _eval(state, *args, "--mode", "replay", "--fresh")
    assert code == 0, replayed["_output"]
    assert replayed["summary"]["errored_trials"] == 0
    judged = [g for g in replayed["summary"]["graders"] if g["grader"] == "pkm_insight_quality"]
    assert judged and judged[0]["decided"] > 0  # the judge's recorded replies were replayed
    assert [(b["bucket"], b["mean_score"]) for b in replayed["summary"]["buckets"]] == [
        (b["bucket"], b["mean_score"]) for b in recorded["summary"]["buckets"]]


def test_a_partial_replay_names_the_trials_it_missed(state: Path) -> None:
    """Replay of trials never recorded (here every task's second trial) errors only those:
    the run still completes, and its output names each missed trial and why, not only a
    count of errored trials."""
    code, recorded = _eval(state, *CARD_REGRESSION, "--trials", "1", "--mode", "record")
    assert code == 0, recorded["_output"]
    code, rep = _eval(state, *CARD_REGRESSION, "--trials", "2", "--mode", "replay", "--fresh")
    assert code == 0, rep["_output"]
    missed = rep["errored"]
    tasks = {t["task"] for t in missed}
    assert len(missed) == rep["summary"]["errored_trials"] == len(tasks) > 0
    assert {t["trial"] for t in missed} == {1}
    assert all("no recording for this request" in t["error"] for t in missed)
    said = " ".join(rep["_output"].split())
    first = sorted(tasks)[0]
    assert f"{len(missed)} trials errored: " in said
    assert f"{first}#1" in said
    plain = runner.invoke(app, ["eval", "--out", str(state), *CARD_REGRESSION, "--trials", "2",
                                "--mode", "replay", "--fresh"])
    assert plain.exit_code == 0 and f"{first}#1" in " ".join(plain.output.split())


def test_a_record_run_records_even_what_the_cache_holds(state: Path) -> None:
    """A team ran live, then `--mode record`: every trial came from the trial cache, nothing
    was recorded, and the replay (server down) missed, telling them to record. A record run
    calls the models: it never takes a trial from the cache."""
    code, live = _eval(state, *CARD_REGRESSION)
    assert code == 0 and live["summary"]["cached_trials"] == 0
    code, rec = _eval(state, *CARD_REGRESSION, "--mode", "record")
    assert code == 0 and rec["summary"]["cached_trials"] == 0, rec["_output"]
    code, rep = _eval(state, *CARD_REGRESSION, "--mode", "replay", "--fresh")
    assert code == 0 and rep["summary"]["errored_trials"] == 0, rep["_output"]
