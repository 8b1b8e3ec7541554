"""`promptloop nightly` with scripted models in temp git repos: budgets, lock, resume, summaries,
push and PRs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agents.llm.registry import SCRIPTED_MODELS
from agents.llm.scripted import Request, ScriptedModel
from agents.llm.types import ModelResponse
from optimizer.cli.app import app
from optimizer.core.config import ConfigError
from optimizer.workflows.nightly.engine import NightlyEngine, NightResult, run_nightly
from optimizer.workflows.nightly.publish import publish_accepted
from optimizer.workflows.nightly.state import (
    Checkpoint,
    LockHeldError,
    NightLock,
    latest_unfinished,
    load_checkpoint,
)
from tests import policies
from tests.optimizer.workflows.nightly_support import (
    agent_model,
    agent_policy,
    clients,
    make_repo,
    night_config,
    proposer_model,
)
from tests.optimizer.workflows.test_optimize import _git

FAST = {"trials": 1, "confirm_trials": 1}
PRICES = {"scripted:night-agent": {"input": 1000.0, "output": 1000.0}}
ROOT = Path(__file__).resolve().parents[3]


def night(repo: Path, state: Path, *, agent: ScriptedModel | None = None,
          proposer: ScriptedModel | None = None, **kw: Any) -> NightResult:
    events: list[str] = []
    extra = {k: kw.pop(k) for k in ("resume", "push", "open_pr") if k in kw}
    models = clients(agent) | ({"proposer": proposer} if proposer else {})
    result = asyncio.run(run_nightly(
        night_config(repo, state, **(FAST | kw)), **models, **extra,
        on_event=lambda k, p: events.append(p.get("message", "")) if k == "phase" else None))
    result.checkpoint.notes.extend(f"event: {e}" for e in events)
    return result


def outcomes(result: NightResult) -> list[tuple[str, str]]:
    return [(s.id, s.outcome) for s in result.checkpoint.steps]


def accepted(repo: Path, result: NightResult) -> list[tuple[str, str, str]]:
    """(suite, bucket, prompt text at the branch) of every accepted branch."""
    out = []
    for a in result.summary.accepted:
        text = _git(repo, "show", f"{a.branch}:prompts/{a.suite}.md")
        out.append((a.suite, a.bucket, text))
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, NightResult]:
    """One uninterrupted night; the other tests compare against it."""
    base = tmp_path_factory.mktemp("reference")
    repo = make_repo(base / "repo")
    return repo, base / "state", night(repo, base / "state")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_uninterrupted_night_ranks_optimizes_and_summarizes(
    reference: tuple[Path, Path, NightResult],
) -> None:
    repo, state, result = reference
    cp = result.checkpoint
    assert cp.status == "finished" and cp.stop_reason is None and result.exit_code == 0
    assert [(r.suite, r.bucket, r.failing) for r in cp.ranking or []] == [
        ("pkm_agent", "skip_trivial", 2), ("card_agent", "people", 1)]
    assert outcomes(result) == [
        ("baseline:card_agent", "1 failing, 0 errored of 3"),
        ("baseline:pkm_agent", "2 failing, 0 errored of 8"),
        ("iterate:pkm_agent/skip_trivial/1", "rejected"),
        ("iterate:pkm_agent/skip_trivial/2", "accepted"),
        ("iterate:card_agent/people/1", "rejected"),
        ("iterate:card_agent/people/2", "refused"),
    ]
    # every step was estimated before it ran and metered after
    assert all(s.estimate_tokens > 0 and s.spend.tokens > 0 for s in cp.steps)
    assert cp.spend.tokens == sum(s.spend.tokens for s in cp.steps)
    [(suite, bucket, text)] = accepted(repo, result)
    assert (suite, bucket) == ("pkm_agent", "skip_trivial") and policies.GOOD_SKIP_RULE in text
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert not (state / "nightly.lock").exists()

    paths = result.paths
    assert {p.name for p in paths.values()} == {"summary.json", "summary.md", "summary.html"}
    assert all(p.parent == state / "nightly" / cp.night_id for p in paths.values())
    data = json.loads(paths["json"].read_text())
    branch = data["accepted"][0]["branch"]
    assert "```diff" in data["accepted"][0]["pr_body"]
    assert {(r["bucket"], r["outcome"]) for r in data["rejected"]} == {
        ("skip_trivial", "rejected"), ("people", "rejected"), ("people", "refused")}
    assert data["budget"]["used_tokens"] == cp.spend.tokens
    md = paths["md"].read_text()
    assert branch in md and "## Rejected proposals (3)" in md
    assert "all other buckets together regressed" in md and "already evaluated" in md
    assert "'short_fact' (-0.500)" in md  # among the buckets that fell
    assert f"git push origin {branch}" in md and "gh pr create --head" in md
    page = paths["html"].read_text()
    assert branch in page and "<script src" not in page and "http-equiv" not in page
    assert "&#39;short_fact&#39; (-0.500)" in page  # escaped (markupsafe writes ' as &#39;)
    saved = load_checkpoint(state / "nightly" / cp.night_id / "checkpoint.json")
    assert saved.status == "finished" and [s.id for s in saved.steps] == [s.id for s in cp.steps]


def test_tight_token_budget_stops_before_exceeding(repo: Path, state: Path) -> None:
    proposer = proposer_model()
    result = night(repo, state, proposer=proposer, max_tokens=1000)
    cp = result.checkpoint
    assert cp.status == "finished" and result.exit_code == 0
    assert cp.stop_reason and cp.stop_reason.startswith(
        "stopped: budget tokens before iterate:pkm_agent/skip_trivial/1")
    assert 0 < cp.spend.tokens <= 1000
    assert [s.id for s in cp.steps] == ["baseline:card_agent", "baseline:pkm_agent"]
    assert not proposer.calls  # the proposal was never asked for
    assert cp.stop_reason in result.paths["md"].read_text()


def test_dollar_budget_uses_price_overrides_and_stops_before_exceeding(
    repo: Path, state: Path, reference: tuple[Path, Path, NightResult]
) -> None:
    from optimizer.core.pricing import ModelPrice

    ref = reference[2].checkpoint
    prices = {k: ModelPrice.model_validate(v) for k, v in PRICES.items()}
    models = {"agent": "scripted:night-agent", "proposer": "scripted:night-proposer"}
    full = ref.spend.usd(models, prices)
    assert full is not None and full > 0
    budget = round(full * 0.9, 4)
    result = night(repo, state, max_usd=budget, prices=PRICES)
    cp = result.checkpoint
    assert cp.stop_reason and cp.stop_reason.startswith("stopped: budget usd")
    spent = result.summary.budget.used_usd
    assert spent is not None and 0 < spent <= budget
    assert len(cp.steps) < len(ref.steps)


def test_unknown_price_with_dollar_budget_is_a_config_error(repo: Path, state: Path) -> None:
    with pytest.raises(ConfigError, match="no price is known for openai:gpt-unheard-of"):
        night(repo, state, max_usd=1.0, agent_model="openai:gpt-unheard-of")
    assert not (state / "nightly").exists() and not (state / "nightly.lock").exists()


def test_wall_budget_stops_before_the_first_step(repo: Path, state: Path) -> None:
    result = night(repo, state, max_wall_minutes=1e-9)
    cp = result.checkpoint
    assert cp.stop_reason and cp.stop_reason.startswith(
        "stopped: budget wall before baseline:card_agent")
    assert cp.steps == [] and cp.spend.tokens == 0


def test_second_instance_is_refused_by_the_lock(repo: Path, state: Path) -> None:
    async def scenario() -> tuple[NightResult, str]:
        started, release = asyncio.Event(), asyncio.Event()

        async def slow(req: Request) -> ModelResponse:
            started.set()
            await release.wait()
            return agent_policy(req)

        first = asyncio.create_task(run_nightly(
            night_config(repo, state, suites=["card_agent"], **FAST),
            **clients(ScriptedModel(slow, model_id="scripted:night-agent"))))
        await started.wait()
        with pytest.raises(LockHeldError) as refused:
            await run_nightly(night_config(repo, state, **FAST), **clients())
        release.set()
        return await first, str(refused.value)

    result, message = asyncio.run(scenario())
    assert f"another nightly run (pid {os.getpid()}" in message and "is running" in message
    assert result.checkpoint.status == "finished"
    assert len(list((state / "nightly").iterdir())) == 1  # the refused run left no night


def test_cli_refuses_while_a_live_process_holds_the_lock(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = subprocess.Popen(["sleep", "30"])
    try:
        lock = {"pid": holder.pid, "host": socket.gethostname(), "started_at": "earlier"}
        (state / "nightly.lock").write_text(json.dumps(lock))
        monkeypatch.chdir(repo)
        out = CliRunner().invoke(app, ["nightly", "--state-dir", str(state)])
        assert out.exit_code == 1, out.output
        assert f"another nightly run (pid {holder.pid}" in out.output
        assert json.loads((state / "nightly.lock").read_text())["pid"] == holder.pid
        assert not (state / "nightly").exists()
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_of_a_dead_process_is_taken_over(repo: Path, state: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock = {"pid": dead.pid, "host": socket.gethostname(), "started_at": "last night"}
    (state / "nightly.lock").write_text(json.dumps(lock))
    result = night(repo, state, suites=["card_agent"], iterations_per_bucket=1)
    assert result.checkpoint.status == "finished"
    assert any(f"took over a stale lock of pid {dead.pid}" in n for n in result.checkpoint.notes)
    assert not (state / "nightly.lock").exists()
    # an unreadable lock file (torn write) counts as stale too
    (state / "nightly.lock").write_text("{not json")
    lock_ = NightLock(state / "nightly.lock")
    assert lock_.acquire() is not None and lock_.held
    lock_.release()


def test_killed_mid_iteration_and_resumed_matches_uninterrupted(
    repo: Path, state: Path, tmp_path: Path, reference: tuple[Path, Path, NightResult]
) -> None:
    marker = tmp_path / "killed"
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "-m", "tests.optimizer.workflows.nightly_child", str(repo), str(state),
         str(marker)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == -9, child.stderr[-2000:]
    assert marker.exists()
    crashed = latest_unfinished(state)
    assert crashed is not None and crashed.status == "running"
    assert crashed.pending is not None
    assert crashed.pending.step == "iterate:pkm_agent/skip_trivial/2"
    half_made = crashed.pending.branch
    assert half_made and half_made in _git(repo, "branch", "--list", "promptloop/*")
    assert (state / "nightly.lock").exists()  # kill -9 left its lock behind

    proposer = proposer_model()
    result = night(repo, state, proposer=proposer, resume=True)
    cp = result.checkpoint
    assert cp.night_id == crashed.night_id and cp.attempts == 2 and cp.status == "finished"
    assert outcomes(result) == outcomes(reference[2])
    assert accepted(repo, result) == accepted(reference[0], reference[2])
    # finished steps were not redone: only the interrupted PKM iteration asked again
    asked = ["pkm_agent.md" in c.messages[1].content for c in proposer.calls]
    assert asked.count(True) == 1
    assert any("was interrupted and runs again" in n and half_made in n for n in cp.notes)
    assert any("took over a stale lock" in n for n in cp.notes)
    branches = _git(repo, "branch", "--list", "promptloop/*").split()
    assert branches == [a.branch for a in result.summary.accepted]
    assert _git(repo, "worktree", "list").count("\n") == 1
    assert latest_unfinished(state) is None


def test_crash_after_accept_resumes_without_losing_the_branch(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch,
    reference: tuple[Path, Path, NightResult],
) -> None:
    original = NightlyEngine.finish_iteration

    def crash_on_accept(self: NightlyEngine, it: Any) -> None:
        if it.outcome == "accepted":
            raise RuntimeError("simulated crash before the checkpoint")
        original(self, it)

    monkeypatch.setattr(NightlyEngine, "finish_iteration", crash_on_accept)
    with pytest.raises(RuntimeError, match="simulated crash"):
        night(repo, state, suites=["pkm_agent"])
    monkeypatch.setattr(NightlyEngine, "finish_iteration", original)
    crashed = latest_unfinished(state)
    assert crashed is not None and crashed.pending is not None
    [branch] = _git(repo, "branch", "--list", "promptloop/*").split()

    proposer = proposer_model()
    result = night(repo, state, proposer=proposer, resume=True)
    pkm_only = [o for o in outcomes(reference[2]) if "card_agent" not in o[0]]
    assert outcomes(result) == pkm_only
    assert [a.branch for a in result.summary.accepted] == [branch]
    assert accepted(repo, result) == accepted(reference[0], reference[2])
    assert not proposer.calls  # nothing was left to ask: the accepted iteration was adopted
    assert any("recovered it from the ledger" in n for n in result.checkpoint.notes)


def test_infrastructure_failure_exits_2_and_stays_resumable(repo: Path, state: Path) -> None:
    from agents.llm.errors import ProviderError

    def down(_req: Request) -> ModelResponse:
        raise ProviderError("503 from the provider after 4 retries", status=503)

    result = night(repo, state, agent=ScriptedModel(down, model_id="scripted:night-agent"),
                   suites=["card_agent"])
    cp = result.checkpoint
    assert cp.status == "failed" and result.exit_code == 2
    assert cp.stop_reason and cp.stop_reason.startswith("infrastructure failure: AllTrialsErrored")
    assert "503 from the provider" in cp.infra_errors[0]
    assert "503 from the provider" in result.paths["md"].read_text()
    assert "Infrastructure errors" in result.paths["html"].read_text()
    unfinished = latest_unfinished(state)
    assert unfinished is not None and unfinished.night_id == cp.night_id
    again = night(repo, state, suites=["card_agent"], resume=True)
    assert again.checkpoint.night_id == cp.night_id and again.exit_code == 0
    assert again.checkpoint.status == "finished" and not again.checkpoint.infra_errors


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
    data = json.loads(out.stdout)
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
