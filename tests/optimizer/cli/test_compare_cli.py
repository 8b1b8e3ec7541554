"""After optimize and review: the comparison command they print, and `report --base`, which
pools the runs per suite and pairs them as the gate did."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.optimizer.cli.app import app
from tests.cli_json import cli_result
from tests.optimizer.workflows.test_optimize import GOOD
from tests.optimizer.workflows.test_review import GOOD_LINE, human_branch

runner = CliRunner()


def compare_line(stdout: str) -> list[str]:
    """The printed `promptloop report ...` command as arguments of the app (a long one is
    continued over lines with ` \\`, as a shell reads it)."""
    lines = stdout.splitlines()
    [at] = [i for i, x in enumerate(lines) if x.startswith("  compare: ")]
    command = lines[at]
    while command.endswith(" \\"):
        at += 1
        command = command[:-1] + lines[at].strip()
    args = shlex.split(command.removeprefix("  compare: "))
    assert args[:2] == ["promptloop", "report"] and "--base-run" in args
    return args[1:]


def test_optimize_prints_the_command_that_shows_its_gate_table(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(SCRIPTED_MODELS, "proposer", lambda: ScriptedModel([reply(GOOD)]))
    monkeypatch.chdir(repo)
    out = runner.invoke(app, [
        "optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial", "--iterations", "1",
        "--agent-model", "scripted:pkm", "--proposer-model", "scripted:proposer",
        "--proposer-format", "diff", "--state-dir", str(state), "--verbose"],
        env={"COLUMNS": "80"})  # the table and the compare command come with --verbose
    assert out.exit_code == 0, out.output
    assert "3 unchanged buckets not shown (--all lists them)" in out.stdout
    args = compare_line(out.stdout)
    assert args[-2:] == ["--state-dir", str(state)]

    data = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    statuses = {b["bucket"]: b["status"] for b in data["buckets"]}
    assert statuses == {"long_fact": "unchanged", "short_fact": "unchanged",
                        "skip_trivial": "improved", "regression/plain": "unchanged"}
    skip = next(b for b in data["buckets"] if b["bucket"] == "skip_trivial")
    # the first look decided (Pocock spending): 4 tasks x 2 trials
    assert (skip["n"], skip["fixed"], skip["broken"]) == (8, 8, 0)

    table = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    assert "skip_trivial" in table.stdout and "improved" in table.stdout
    assert "3 unchanged buckets not shown" in table.stdout
    every = runner.invoke(app, [*args, "--all"], env={"COLUMNS": "80"}).stdout
    assert "long_fact" in every and "regression/plain" in every
    markdown = runner.invoke(app, [*args, "--format", "md"]).stdout
    assert "| `skip_trivial` |" in markdown and "`long_fact`" not in markdown


def test_review_prints_the_command_of_each_agent(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    human_branch(repo, "human/skip", GOOD_LINE)
    monkeypatch.chdir(repo)
    out = runner.invoke(app, ["review", "--base", "main", "--head", "human/skip",
                              "--agent-model", "scripted:pkm", "--state-dir", str(state)],
                        env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    args = compare_line(out.stdout)
    data = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert {r.split("-review-")[0] for r in data["runs"]} == {"pkm_agent_capability",
                                                               "pkm_agent_regression"}
    assert all(r.endswith("-head") or "-confirm-head" in r for r in data["runs"])
    assert all(r.endswith("-base") or "-confirm-base" in r for r in data["base"])
    moved = {b["bucket"]: b["status"] for b in data["buckets"] if b["status"] != "unchanged"}
    assert "skip_trivial" in moved


def test_report_base_refuses_what_it_cannot_compare(state: Path) -> None:
    first = runner.invoke(app, ["eval", "--suite", "card_agent", "--kind", "regression",
                                "--agent-model", "scripted:card", "--state-dir", str(state),
                                "--json"])
    other = runner.invoke(app, ["eval", "--suite", "card_agent", "--kind", "quickstart",
                                "--agent-model", "scripted:card", "--state-dir", str(state),
                                "--json"])
    a, b = cli_result(first.stdout)["run"], cli_result(other.stdout)["run"]
    cases = [
        ([a, "--base", b], "share no suite"),
        ([a, b], "several runs are compared with --base"),
        ([a, "--base", a, "--base", a, "--format", "html"], "one base run"),
        ([a, "--base", a, "--base", a], "trial indices"),  # the same trials pooled twice
    ]
    for args, message in cases:
        out = runner.invoke(app, ["report", *args, "--state-dir", str(state)])
        assert out.exit_code == 1 and message in out.stderr, (args, out.output)
    same = runner.invoke(app, ["report", a, "--base", a, "--state-dir", str(state)])
    assert same.exit_code == 0 and "no bucket changed (4 buckets compared" in same.stdout
    alone = runner.invoke(app, ["report", a, "--format", "table", "--state-dir", str(state)],
                          env={"COLUMNS": "80"})
    assert alone.exit_code == 0 and "plain_transaction" in alone.stdout
    assert "trial pass" in alone.stdout and "report:" not in alone.stdout


def test_report_base_says_in_one_line_that_no_bucket_changed(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs of the same prompt: `report X --base Y` says so in one line instead of an
    empty table and an 'unchanged bucket not shown' count (issue 26, point 7)."""
    monkeypatch.chdir(repo)
    names = []
    for extra in ([], ["--fresh"]):
        out = runner.invoke(app, ["eval", "--suite", "pkm_agent", "--kind", "regression",
                                  "--agent-model", "scripted:pkm", "--trials", "1", "--json",
                                  "--state-dir", str(state), *extra])
        assert out.exit_code == 0, out.output
        names.append(cli_result(out.stdout)["run"])
    for fmt in ([], ["--format", "md"]):
        shown = runner.invoke(app, ["report", names[1], "--base", names[0], *fmt,
                                    "--state-dir", str(state)], env={"COLUMNS": "80"})
        assert shown.exit_code == 0, shown.output
        lines = [line for line in shown.stdout.splitlines() if line.strip()]
        assert len(lines) == 1 and "no bucket changed (1 bucket compared" in lines[0], lines
        assert "not shown" not in shown.stdout
    every = runner.invoke(app, ["report", names[1], "--base", names[0], "--all",
                                "--state-dir", str(state)], env={"COLUMNS": "80"})
    assert every.exit_code == 0 and "plain" in every.stdout


def test_runs_that_share_no_trial_pair_are_refused_saying_why(tmp_path: Path) -> None:
    """A team compared a candidate's third harm run (trial index 2) with an eval (index 0):
    every bucket read "inconclusive", with no word of why."""
    from promptloop.optimizer.report.store import save_run
    from tests.optimizer.report.test_report import mk_run, tr

    state = tmp_path / "state"
    save_run(mk_run([tr("a", 0, "passed"), tr("b", 0, "failed")], name="eval-run"),
             state / "runs")
    save_run(mk_run([tr("a", 2, "passed"), tr("b", 2, "passed")], name="harm-run"),
             state / "runs")
    out = runner.invoke(app, ["report", "harm-run", "--base-run", "eval-run", "--state-dir",
                              str(state)])
    assert out.exit_code == 1 and "share no trial pair" in out.output, out.output


def test_a_comparison_across_a_changed_suite_says_so(tmp_path: Path) -> None:
    """A team compared two runs between which a task's grader changed: a pass -> fail flip
    read as the prompt's doing. The suites' hashes differ, and the comparison says so."""
    from promptloop.optimizer.report.store import save_run
    from tests.optimizer.report.test_report import mk_run, tr

    state = tmp_path / "state"
    for name, digest, status in (("before", "aaaa", "passed"), ("after", "bbbb", "failed")):
        run = mk_run([tr("a", 0, status)], name=name)
        run = run.model_copy(update={"provenance": run.provenance.model_copy(
            update={"suite_hash": digest})})
        save_run(run, state / "runs")
    out = runner.invoke(app, ["report", "after", "--base-run", "before", "--state-dir",
                              str(state), "--all"])
    assert out.exit_code == 0, out.output
    assert "suite demo differs between the base runs and the runs" in " ".join(
        out.output.split())
