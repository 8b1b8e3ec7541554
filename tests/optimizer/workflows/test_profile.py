"""`promptloop profile`: extra baseline trials where the records are least decided, saved as
an ordinary run of the prompt that the next profile (and the gate) reads as lineage history."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from promptloop.optimizer.report.store import default_store_dir, list_runs
from promptloop.optimizer.workflows.profile import ProfileConfig, profile
from tests.cli_json import cli_result
from tests.optimizer.workflows.test_gate_e2e import agent, repo  # noqa: F401 (fixture)


def config(root: Path, state: Path, **kw: object) -> ProfileConfig:
    return ProfileConfig(agent="pkm_agent", agent_model="scripted:world", repo=root,
                         state_dir=state, **kw)  # type: ignore[arg-type]


def test_profile_grows_the_least_decided_records_and_the_next_profile_reads_them(
        repo: Path, state: Path) -> None:  # noqa: F811
    first = asyncio.run(profile(config(repo, state, budget=6), agent=agent()))
    assert first.lineage_runs == 0 and first.trials_run == 6
    assert sum(r.trials for r in first.rows) == 6 and len(first.rows) == 3
    assert all(r.record == 0 and r.record_class == "ambiguous" and r.value_bits == 1.0
               for r in first.rows)
    assert len(first.run_names) >= 1
    saved = list_runs(default_store_dir(state))
    assert {e.run_name for e in saved} == set(first.run_names)
    assert all(e.prompt_hash == first.prompt_hash for e in saved)
    # saved as what they are, at the commit read (a new-team trial saw role '-', commit '?')
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert {(e.role, e.git_commit) for e in saved} == {("profile", head)}
    # the next profile reads them as lineage: the profiled tasks' records now hold 2 trials,
    # so the budget goes to the tasks with none first
    plan = asyncio.run(profile(config(repo, state, budget=6, dry_run=True), agent=agent()))
    assert plan.lineage_runs == len(first.run_names) and plan.trials_run == 0
    done = {r.task_id for r in first.rows}
    assert all(r.task_id not in done for r in plan.rows)
    # a second real round never reuses a trial index (nothing served from the cache)
    again = asyncio.run(profile(config(repo, state, budget=len(plan.rows) * 2 + 20),
                                agent=agent()))
    assert again.trials_run == sum(r.trials for r in again.rows)


def test_profile_cli_dry_run_json(repo: Path, state: Path,  # noqa: F811
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    out = CliRunner().invoke(app, ["profile", "--agent", "pkm_agent", "--budget", "4",
                                   "--dry-run", "--json", "--agent-model", "scripted:world",
                                   "--state-dir", str(state)])
    assert out.exit_code == 0, out.output
    data = cli_result(out.stdout)
    assert data["budget"] == 4 and data["trials_run"] == 0 and data["run_names"] == []
    assert sum(r["trials"] for r in data["rows"]) == 4


def test_a_zero_budget_says_so(repo: Path, state: Path,  # noqa: F811
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A new-team trial: `profile --budget 0` said every record already decides the gate."""
    monkeypatch.chdir(repo)
    out = CliRunner().invoke(app, ["profile", "--agent", "pkm_agent", "--budget", "0",
                                   "--agent-model", "scripted:world", "--state-dir", str(state)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "--budget 0: nothing to run" in text and "already decides" not in text


def test_a_trial_served_again_from_the_cache_counts_once(
        repo: Path, state: Path) -> None:  # noqa: F811
    """profile counted a cached copy (a nightly baseline of an unchanged prompt) as more
    trials of the record, so records looked decided and profile never topped them up."""
    from promptloop.optimizer.report.store import load_run, save_run
    from promptloop.optimizer.workflows.profile import lineage_records
    from promptloop.optimizer.workflows.sources import RepoSource

    first = asyncio.run(profile(config(repo, state, budget=6), agent=agent()))
    store = default_store_dir(state)
    made = load_run(store, first.run_names[0])
    for k in range(3):
        save_run(made.model_copy(update={
            "run_name": f"{made.run_name}-copy{k}",
            "trials": [t.model_copy(update={"cached": True}) for t in made.trials]}), store)
    with RepoSource.find("HEAD", state, repo) as source:
        from promptloop.optimizer.workflows.paired import agent_suites
        suites = agent_suites("pkm_agent", ("capability", "regression"), source)
    found = lineage_records(store, suites, first.prompt_hash, "scripted:world")
    lengths = {k[1]: len(r.history) for k, r in found.records.items() if r.history}
    assert sum(lengths.values()) == first.trials_run, lengths
