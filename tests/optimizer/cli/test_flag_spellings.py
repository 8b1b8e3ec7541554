"""Issue 10: every change of CLI flags keeps the old spelling working or fails with the new one
named. `PUBLISHED` freezes every option spelling the CLI has shipped (from git history); a
rename must add a `RENAMED` entry, or this test fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer._click.core import Context
from typer.testing import CliRunner

from promptloop.optimizer.cli import command as cmd_mod
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.cli.command import RENAMED, Renamed, respell
from promptloop.optimizer.cli.common import command_table

runner = CliRunner()
GROUP = typer.main.get_command(app)

PUBLISHED: dict[str, set[str]] = {
    "agent": {"--agent-model", "--base-url", "--content", "--fact-id", "--json", "--max-turns",
              "--model", "--published", "--workspace"},
    "doctor": {"--agent-model", "--base-url", "--check-local", "--json", "--judge-model",
               "--tasks"},
    "eval": {"--agent-model", "--base-url", "--bucket", "--concurrency", "--events", "--fresh",
             "--json", "--judge-model", "--kind", "--mode", "--out", "--state-dir", "--suite",
             "--task", "--trials"},
    "nightly": {"--agent-model", "--base", "--base-url", "--concurrency", "--config", "--events",
                "--iterations-per-bucket", "--json", "--judge-model", "--max-buckets",
                "--max-tokens", "--max-usd", "--max-wall-minutes", "--open-pr", "--out",
                "--proposer-model", "--push", "--resume", "--state-dir", "--suite", "--trials"},
    "optimize": {"--agent-model", "--base", "--base-url", "--bucket", "--concurrency",
                 "--confirm-trials", "--events", "--iterations", "--json", "--judge-model",
                 "--keep-rejected", "--max-changed-lines", "--max-runs", "--max-trials",
                 "--max-turns", "--min-improvement", "--no-keep-rejected", "--out",
                 "--proposer-cmd", "--proposer-format", "--proposer-model",
                 "--regression-tolerance", "--state-dir", "--suite", "--suites", "--trials"},
    "report": {"--base", "--bucket", "--failing", "--format", "--out", "--output",
               "--state-dir", "-o"},
    "review": {"--agent-model", "--base", "--base-url", "--concurrency", "--confirm-trials",
               "--events", "--fail-on-regression", "--head", "--json", "--judge-model",
               "--min-improvement", "--no-fail-on-regression", "--out", "--output", "--post",
               "--pr", "--regression-tolerance", "--state-dir", "--suite", "--trials", "-o"},
    "suites": {"--json"},
}
REQUIRED: dict[str, list[str]] = {
    "agent": ["card_agent", "--content", "hi"],
    "optimize": ["--suite", "pkm_agent", "--bucket", "skip_trivial"],
    "review": ["--base", "main"],
    "report": ["latest"],
    "eval": ["--suite", "card_agent"],
    "health": ["--suite", "card_agent"],
    "graduate": ["--agent", "card_agent", "--bucket", "template_event"],
    "calibrate": ["--grader", "pkm_insight_quality", "--labels", "labels.jsonl"],
}
VALUES = {"--out": "/tmp/state", "--confirm-trials": "3", "--model": "scripted:card",
          "--suite": "card_agent", "--base": "a-run", "--iterations-per-bucket": "3",
          "--round-trials": "3", "--tasks": "tasks"}


def spellings(command: str) -> set[str]:
    params = GROUP.commands[command].params  # type: ignore[attr-defined]
    return {o for p in params for o in (*p.opts, *getattr(p, "secondary_opts", []))}


def parse(command: str, args: list[str]) -> dict[str, Any]:
    cmd = GROUP.commands[command]  # type: ignore[attr-defined]
    with cmd.make_context(command, [*REQUIRED.get(command, []), *args]) as ctx:
        return dict(ctx.params)


@pytest.mark.parametrize("command", sorted(PUBLISHED))
def test_every_published_spelling_parses_or_is_renamed(command: str) -> None:
    renamed = {r.old for r in RENAMED if command in r.commands}
    lost = PUBLISHED[command] - spellings(command) - renamed
    assert not lost, f"{command}: flags dropped without a RENAMED entry: {sorted(lost)}"


@pytest.mark.parametrize(
    ("command", "entry"),
    [(c, r) for r in RENAMED for c in r.commands],
    ids=lambda x: x if isinstance(x, str) else x.old,
)
def test_old_spelling_means_the_new_one(command: str, entry: Renamed) -> None:
    assert entry.works, "a retired spelling is tested below"
    assert entry.old not in spellings(command), "the old spelling is not an option any more"
    assert entry.new in spellings(command)
    value = VALUES[entry.old]
    new = parse(command, [entry.new, value])
    assert parse(command, [entry.old, value]) == new
    assert parse(command, [f"{entry.old}={value}"]) == new
    # the old spelling stays out of --help, the new one is there
    shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "120"}).stdout
    assert entry.new in shown and f"{entry.old} " not in shown and f"{entry.old}," not in shown
    # a promptloop.toml table written with the old key still sets the option
    old_key = entry.old.removeprefix("--")
    assert command_table({command: {old_key: value}}, command) == {entry.new_key: value}


def test_a_retired_spelling_fails_naming_the_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    retired = Renamed(("optimize",), "--rounds", "--round-trials", works=False)
    monkeypatch.setattr(cmd_mod, "RENAMED", (*RENAMED, retired))
    out = runner.invoke(app, ["optimize", *REQUIRED["optimize"], "--rounds", "2"])
    assert out.exit_code == 1
    assert "Error: --rounds was renamed to --round-trials" in out.stderr
    assert "Try '" in out.stderr and "optimize --help" in out.stderr


def test_respelling_leaves_values_and_positional_arguments_alone() -> None:
    takes_value = {"--content", "--state-dir"}
    args = ["--content", "--out", "--out", "x", "--", "--out"]
    assert respell("eval", args, takes_value) == ["--content", "--out", "--state-dir", "x",
                                                  "--", "--out"]
    assert respell("agent", ["--model=local:smollm2"], set()) == ["--agent-model=local:smollm2"]
    assert respell("review", ["--round-trials", "1"], set()) == ["--confirm-trials", "1"]
    assert respell("eval", ["--confirm-trials", "1"], set()) == ["--confirm-trials", "1"]


def test_old_environment_variable_of_a_renamed_option_still_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parse("optimize", [])["round_trials"] == 2
    monkeypatch.setenv("PROMPTLOOP_CONFIRM_TRIALS", "5")
    assert parse("optimize", [])["round_trials"] == 5
    assert parse("optimize", ["--round-trials", "3"])["round_trials"] == 3
    monkeypatch.setenv("PROMPTLOOP_ROUND_TRIALS", "4")  # the new name wins over the old one
    assert parse("optimize", [])["round_trials"] == 4


def test_choices_come_from_promptloop_toml_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "promptloop.toml"
    config.write_text('[optimize]\nproposer-format = "edits"\nconfirm-trials = 4\n'
                      '[report]\nformat = "json"\n')
    cmd = GROUP.commands["optimize"]  # type: ignore[attr-defined]
    table = command_table({"optimize": {"proposer-format": "edits", "confirm-trials": 4}},
                          "optimize")
    with cmd.make_context("optimize", REQUIRED["optimize"], default_map=table) as ctx:
        assert ctx.params["proposer_format"].value == "edits"
        assert ctx.params["round_trials"] == 4
    monkeypatch.setenv("PROMPTLOOP_PROPOSER_FORMAT", "diff")
    assert parse("optimize", [])["proposer_format"].value == "diff"
    bad = runner.invoke(app, ["--config", str(config), "report", "latest", "--format", "pdf",
                              "--state-dir", str(tmp_path)])
    assert bad.exit_code == 1 and "'pdf' is not one of" in bad.stderr
    missing = runner.invoke(app, ["--config", str(config), "report", "latest",
                                  "--state-dir", str(tmp_path)])
    assert missing.exit_code == 1 and "no saved runs" in missing.stderr


METAVAR_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("review", "--suite"): "review's --suite names an agent (its capability and regression "
                           "suites run together)",
}


def test_an_option_shows_one_value_name_in_every_command() -> None:
    """`--ref`, `--base`, `--agent-model`... read the same kind of value wherever they appear,
    so every command's --help names it alike (REF, not TEXT in one command and REF in another)."""
    seen: dict[str, dict[str, set[str]]] = {}
    for name, command in GROUP.commands.items():  # type: ignore[attr-defined]
        ctx = Context(command)
        for param in command.params:
            if param.param_type_name != "option" or param.is_flag:  # type: ignore[attr-defined]
                continue
            if (name, param.opts[0]) in METAVAR_EXCEPTIONS:
                continue
            record = param.get_help_record(ctx)
            if record is None:  # hidden
                continue
            shown = record[0].split()[-1]  # "--ref REF" -> REF
            seen.setdefault(param.opts[0], {}).setdefault(shown, set()).add(name)
    mixed = {opt: names for opt, names in seen.items() if len(names) > 1}
    assert mixed == {}
