"""`nightly --push / --open-pr`: push accepted branches (never forced) and open PRs with gh, or
say what to run when gh is missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.workflows.nightly.engine import NightResult
from promptloop.optimizer.workflows.nightly.publish import publish_accepted
from promptloop.optimizer.workflows.nightly.state import Checkpoint
from tests.cli_json import cli_result
from tests.optimizer.workflows.nightly_support import agent_model, make_repo, proposer_model
from tests.optimizer.workflows.test_optimize import _git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def _published_copy(reference: tuple[Path, Path, NightResult]) -> tuple[Path, Checkpoint]:
    repo, _, result = reference
    return repo, result.checkpoint.model_copy(update={"published": []}, deep=True)


def _origin(repo: Path, tmp_path: Path) -> Path:
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    remotes = _git(repo, "remote").split()
    _git(repo, "remote", "set-url" if "origin" in remotes else "add", "origin", str(bare))
    return bare


def test_push_to_origin_and_never_force(
    tmp_path: Path, reference: tuple[Path, Path, NightResult]
) -> None:
    repo, cp = _published_copy(reference)
    bare = _origin(repo, tmp_path)
    [rec] = publish_accepted(cp, repo, open_pr=False, say=lambda _m: None)
    branch = rec.branch
    assert rec.pushed and rec.push_error is None and rec.pr == "not_requested"
    tip = _git(repo, "rev-parse", branch).strip()
    assert _git(bare, "rev-parse", branch).strip() == tip
    # a rewritten local branch is not forced over the remote one
    _git(repo, "branch", "-f", branch, "main")
    cp.published = []
    [again] = publish_accepted(cp, repo, open_pr=False, say=lambda _m: None)
    assert not again.pushed and again.push_error and "rejected" in again.push_error
    assert again.commands == [f"git push origin {branch}"]
    assert _git(bare, "rev-parse", branch).strip() == tip
    _git(repo, "branch", "-f", branch, tip)


def _path_with(tmp_path: Path, tools: dict[str, str]) -> str:
    """A PATH holding only git plus the given scripts."""
    folder = tmp_path / "bin"
    folder.mkdir()
    git = shutil.which("git")
    assert git
    (folder / "git").symlink_to(git)
    for name, text in tools.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return str(folder)


def test_open_pr_without_gh_says_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: tuple[Path, Path, NightResult]
) -> None:
    repo, cp = _published_copy(reference)
    _origin(repo, tmp_path)
    monkeypatch.setenv("PATH", _path_with(tmp_path, {}))
    said: list[str] = []
    [rec] = publish_accepted(cp, repo, open_pr=True, say=said.append)
    body = reference[2].summary.accepted[0].pr_body_path
    assert rec.pushed and rec.pr == "manual" and "not installed" in (rec.pr_error or "")
    assert len(rec.commands) == 1 and rec.commands[0].startswith(
        f"gh pr create --head {rec.branch} --title ")
    assert rec.commands[0].endswith(f"--body-file {body}")
    assert any(rec.commands[0] in m for m in said)


def test_open_pr_with_a_gh_on_path(
    repo: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the CLI: config file, --open-pr, a fake gh that records its arguments."""
    log = tmp_path / "gh.log"
    gh = (f'#!/bin/sh\necho "$@" >> {log}\n'
          'if [ "$1" = pr ]; then echo https://example.invalid/pull/7; fi\nexit 0\n')
    bare = _origin(repo, tmp_path)
    monkeypatch.setenv("PATH", _path_with(tmp_path, {"gh": gh}))
    monkeypatch.setitem(SCRIPTED_MODELS, "night-agent", agent_model)
    monkeypatch.setitem(SCRIPTED_MODELS, "night-proposer", proposer_model)
    (repo / "night.toml").write_text(
        '[nightly]\nsuites = ["pkm_agent"]\nagent_model = "scripted:night-agent"\n'
        'judge_model = "scripted:judge"\nproposer_model = "scripted:night-proposer"\n'
        'proposer_format = "diff"\ntrials = 1\nconfirm_trials = 1\nmax_usd = 50.0\n'
        "assumed_tokens_per_trial = 60\n"
        '[nightly.prices."scripted:night-agent"]\ninput = 1000.0\noutput = 1000.0\n')
    monkeypatch.chdir(repo)
    out = CliRunner().invoke(app, ["nightly", "--config", "night.toml", "--open-pr", "--json",
                                   "--state-dir", str(state), "--max-buckets", "1"])
    assert out.exit_code == 0, out.output
    data = cli_result(out.stdout)
    [acc] = data["summary"]["accepted"]
    assert acc["published"]["pr"] == "opened"
    assert acc["published"]["pr_url"] == "https://example.invalid/pull/7"
    assert data["summary"]["budget"]["max_usd"] == 50.0
    assert 0 < data["summary"]["budget"]["used_usd"] <= 50.0
    lines = log.read_text().splitlines()
    assert lines[0] == "auth status"
    assert lines[1].startswith(f"pr create --head {acc['branch']} --title promptloop(")
    assert lines[1].endswith(f"--body-file {acc['pr_body_path']}")
    assert _git(bare, "branch", "--list").strip() == acc["branch"]


def test_a_night_whose_push_failed_is_resumed_and_pushes(
    repo: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's night exited 2 on a failed push (docs: "the night can be resumed"), but it was
    recorded finished: `--resume` started a new night, and the accepted branch was never
    pushed (a later night saw it "awaiting review"). The night is failed and resumable now,
    its summary names the failure, and the resumed night pushes the branch."""
    monkeypatch.setitem(SCRIPTED_MODELS, "night-agent", agent_model)
    monkeypatch.setitem(SCRIPTED_MODELS, "night-proposer", proposer_model)
    (repo / "night.toml").write_text(
        '[nightly]\nsuites = ["pkm_agent"]\nagent_model = "scripted:night-agent"\n'
        'judge_model = "scripted:judge"\nproposer_model = "scripted:night-proposer"\n'
        'proposer_format = "diff"\ntrials = 1\nconfirm_trials = 1\n')
    _git(repo, "remote", "add", "origin", str(tmp_path / "missing.git"))
    monkeypatch.chdir(repo)
    args = ["nightly", "--config", "night.toml", "--push", "--json", "--state-dir", str(state),
            "--max-buckets", "1"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 2, first.output
    night = cli_result(first.stdout)["summary"]
    [acc] = night["accepted"]
    assert night["status"] == "failed" and "publishing" in (night["stop_reason"] or "")
    assert any("push of" in e for e in night["infra_errors"]), night["infra_errors"]
    md = (state / "nightly" / night["night_id"] / "summary.md").read_text()
    assert "**Push failed:**" in md and "To publish by hand:" in md
    bare = _origin(repo, tmp_path)
    second = CliRunner().invoke(app, [*args, "--resume"])
    assert second.exit_code == 0, second.output
    again = cli_result(second.stdout)["summary"]
    assert again["night_id"] == night["night_id"] and again["status"] == "finished"
    assert _git(bare, "rev-parse", acc["branch"]).strip() == acc["commit"]
    md = (state / "nightly" / night["night_id"] / "summary.md").read_text()
    assert "Push failed" not in md and "To publish by hand:" not in md
