"""Defaults from promptloop.toml and PROMPTLOOP_* env vars; judge defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from promptloop.optimizer.core.config import default_judge
from tests.cli_json import cli_result

runner = CliRunner()


def test_default_judge_differs_from_agent_where_possible() -> None:
    assert default_judge("anthropic:claude-haiku-4-5") == "anthropic:claude-sonnet-4-5"
    assert default_judge("anthropic:claude-sonnet-4-5") != "anthropic:claude-sonnet-4-5"
    assert default_judge("openai:gpt-4.1") != "openai:gpt-4.1"
    assert default_judge("local:smollm2") == "local:smollm2"


def test_toml_defaults_apply_and_flags_override(tmp_path: Path) -> None:
    config = tmp_path / "promptloop.toml"
    config.write_text('[eval]\nagent_model = "scripted:card"\ntrials = 1\nkind = "regression"\n')
    state = tmp_path / "state"
    result = runner.invoke(app, ["--config", str(config), "eval", "--suite", "card_agent",
                                 "--out", str(state), "--json"])
    assert result.exit_code == 0, result.output
    summary = cli_result(result.stdout)["summary"]
    assert summary["num_trials"] == 8  # 8 regression tasks x 1 trial from the toml
    result = runner.invoke(app, ["--config", str(config), "eval", "--suite", "card_agent",
                                 "--trials", "2", "--out", str(state), "--json"])
    assert cli_result(result.stdout)["summary"]["num_trials"] == 16


def test_env_var_sets_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTLOOP_AGENT_MODEL", "scripted:card")
    monkeypatch.setenv("PROMPTLOOP_TRIALS", "1")
    result = runner.invoke(app, ["eval", "--suite", "card_agent", "--kind", "regression",
                                 "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert cli_result(result.stdout)["summary"]["num_trials"] == 8


def test_bad_toml_is_a_user_error(tmp_path: Path) -> None:
    config = tmp_path / "promptloop.toml"
    config.write_text("[eval\n")
    result = runner.invoke(app, ["--config", str(config), "suites"])
    assert result.exit_code == 1 and "invalid TOML" in result.output


def test_env_beats_toml_and_flag_beats_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "promptloop.toml"
    config.write_text('[eval]\nagent_model = "scripted:card"\ntrials = 1\nkind = "regression"\n')
    monkeypatch.setenv("PROMPTLOOP_TRIALS", "2")
    args = ["--config", str(config), "eval", "--suite", "card_agent", "--out", str(tmp_path),
            "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert cli_result(result.stdout)["summary"]["num_trials"] == 16  # env 2 over toml 1
    result = runner.invoke(app, [*args, "--trials", "1"])
    assert cli_result(result.stdout)["summary"]["num_trials"] == 8  # flag 1 over env 2


def test_nightly_settings_without_a_flag_are_checked(tmp_path: Path) -> None:
    config = tmp_path / "night.toml"
    config.write_text('[nightly]\nsuites = ["pkm"]\nestimate_margn = 2.0\n')
    result = runner.invoke(app, ["nightly", "--config", str(config), "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "nightly setting 'estimate_margn'" in result.output
    assert "unknown agent 'pkm'" in result.output and "card_agent, pkm_agent" in result.output


def test_one_state_folder_resolver_honours_the_flag_then_promptloop_home(
        tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from promptloop.optimizer.core.config import STATE_FOLDER, state_folder

    monkeypatch.delenv("PROMPTLOOP_HOME", raising=False)
    assert state_folder(tmp_path) == tmp_path / STATE_FOLDER == tmp_path / ".promptloop"
    monkeypatch.setenv("PROMPTLOOP_HOME", str(tmp_path / "home"))
    assert state_folder(tmp_path) == tmp_path / "home"
    assert state_folder(tmp_path, tmp_path / "flag") == tmp_path / "flag"
