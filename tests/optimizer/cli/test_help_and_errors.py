"""`--help` read at 80 and 120 columns, and usage errors: exit 1, one `Error:` line, a hint."""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from promptloop.optimizer.cli.command import env_vars

runner = CliRunner()
GROUP = typer.main.get_command(app)
COMMANDS = ("optimize", "review", "nightly", "eval")


def help_text(command: str, width: int) -> str:
    out = runner.invoke(app, [command, "--help"], env={"COLUMNS": str(width)})
    assert out.exit_code == 0, out.output
    return out.stdout


def visible_options(command: str) -> list[str]:
    params = GROUP.commands[command].params  # type: ignore[attr-defined]
    return [o for p in params if not getattr(p, "hidden", False)
            for o in p.opts if o.startswith("--")]


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("command", COMMANDS)
def test_help_fits_and_shows_every_option_name_whole(command: str, width: int) -> None:
    text = help_text(command, width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in text  # nothing cut with an ellipsis
    words = {w for line in lines for w in re.findall(r"--[a-z][a-z\[\]-]*", line)}
    for option in visible_options(command):
        negative = "--[no-]" + option[2:]
        assert option in words or negative in words, f"{option} not whole in {command} --help"
    # the option names and their help share a line: the names column is never squeezed
    name_lines = [line for line in lines if re.match(r"^ *│ --", line)]
    assert len(name_lines) >= len(visible_options(command)) - 1


@pytest.mark.parametrize("command", COMMANDS)
def test_environment_variables_are_listed_once_after_the_options(command: str) -> None:
    text = help_text(command, 80)
    options, _, epilogue = text.partition("Environment variables")
    assert epilogue, "no list of environment variables"
    pairs = env_vars(GROUP.commands[command].params)  # type: ignore[attr-defined]
    assert pairs
    for env, option in pairs:
        assert env not in options, f"{env} shown among the options of {command}"
        assert re.search(rf"{env} +{re.escape(option)}\b", epilogue)
    assert "[env var:" not in text


def test_optimize_help_groups_options_in_panels_and_shows_choices() -> None:
    text = help_text("optimize", 80)
    panels = re.findall(r"╭─ (\w+) ─", text)
    assert panels == ["Options", "Models", "Proposer", "Gate", "Run", "Output"]
    gate = text[text.index("╭─ Gate"):text.index("╭─ Run")]
    for option in ("--round-trials", "--max-trials", "--regression-tolerance",
                   "--min-improvement"):
        assert option in gate
    assert "--suites" not in text  # the old spelling of --suite AGENT/SUITE stays hidden
    assert "--proposer-format [auto|diff|edits]" in text
    assert "--[no-]keep-rejected" in text and "--state-dir DIR" in text
    # docstring paragraphs are re-flowed, not broken where the source lines end
    assert "failing trials for the proposer" in " ".join(text.split())


ERRORS = [
    (["optimize", "--suite", "pkm_agent", "--bucket", "b", "--trials", "0"],
     "Invalid value for '--trials'"),
    (["optimize", "--suite", "pkm_agent", "--bucket", "b", "--tirals", "3"],
     "No such option: --tirals"),
    (["optimize", "--bucket", "b"], "give --agent NAME (or --suite AGENT)"),
    (["optimize", "--suite", "pkm_agent", "--bucket", "b", "--proposer-format", "patch"],
     "'patch' is not one of 'auto', 'diff', 'edits'"),
    (["report", "latest", "--format", "pdf"], "'pdf' is not one of"),
    (["eval", "--suite", "card_agent", "--mode", "rewind"], "'rewind' is not one of"),
    (["nightly", "--max-usd", "-1"], "Invalid value for '--max-usd'"),
    (["evaluate"], "No such command 'evaluate'"),
]


@pytest.mark.parametrize(("args", "message"), ERRORS, ids=[m[:24] for _, m in ERRORS])
def test_usage_errors_exit_1_with_one_error_line(args: list[str], message: str) -> None:
    out = runner.invoke(app, args)
    assert out.exit_code == 1, out.output
    errors = [line for line in out.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0], out.stderr
    assert "--help' for help." in out.stderr
    assert len(out.stderr.strip().splitlines()) == 2  # no usage block, no boxed panel
    assert out.stdout == ""


def test_a_bad_value_from_the_environment_names_the_variable() -> None:
    out = runner.invoke(app, ["eval", "--suite", "card_agent"], env={"PROMPTLOOP_TRIALS": "0"})
    assert out.exit_code == 1
    assert "(from PROMPTLOOP_TRIALS)" in out.stderr


def test_bare_command_prints_help_and_exits_0() -> None:
    out = runner.invoke(app, [])
    assert out.exit_code == 0
    assert "Commands" in out.stdout and "optimize" in out.stdout


def test_error_lines_name_no_class_or_validator_prefix(tmp_path) -> None:  # type: ignore[no-untyped-def]
    state = str(tmp_path / "state")
    bad = runner.invoke(app, ["optimize", "--suite", "pkm", "--bucket", "x", "--state-dir", state])
    assert bad.exit_code == 1
    assert "Error: --suite: unknown agent 'pkm'" in bad.stderr and "Value error" not in bad.stderr
    key = runner.invoke(app, ["eval", "--suite", "card_agent", "--agent-model",
                              "anthropic:claude-haiku-4-5", "--state-dir", state],
                        env={"ANTHROPIC_API_KEY": ""})
    assert key.exit_code == 1  # a key not set is configuration (issue 26)
    assert "Error: no Anthropic API key" in key.stderr and "CredentialsError" not in key.stderr


def test_every_command_has_an_example_and_the_group_a_version() -> None:
    """Issue 26: an example in every help screen (cli/help.EXAMPLES, one home); --version."""
    from promptloop.optimizer.cli.help import EXAMPLES

    commands = sorted(GROUP.commands)  # type: ignore[attr-defined]
    assert not [c for c in commands if not EXAMPLES.get(c)], "commands without an example"
    for command in commands:
        shown = help_text(command, 80)
        assert "Examples:" in shown and EXAMPLES[command][0][:40] in shown.replace("\n", " ")
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("promptloop ")


# --- issue 32 item 7: the ecosystem's habits ---------------------------------------------------


def test_dash_h_is_help_on_the_group_and_every_command() -> None:
    root = runner.invoke(app, ["-h"], env={"COLUMNS": "80"})
    assert root.exit_code == 0 and "Usage:" in root.stdout and "Commands" in root.stdout
    for name in GROUP.commands:  # type: ignore[attr-defined]
        out = runner.invoke(app, [name, "-h"], env={"COLUMNS": "80"})
        assert out.exit_code == 0, (name, out.output)
        assert f"{name} [OPTIONS]" in out.stdout and "-h" in out.stdout


def test_help_command_shows_a_commands_help_and_suggests_on_a_typo() -> None:
    shown = runner.invoke(app, ["help", "optimize"], env={"COLUMNS": "80"})
    direct = runner.invoke(app, ["optimize", "--help"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0 and shown.stdout.rstrip() == direct.stdout.rstrip()
    root = runner.invoke(app, ["help"], env={"COLUMNS": "80"})
    assert root.exit_code == 0 and "Commands" in root.stdout
    typo = runner.invoke(app, ["help", "optimise"])
    assert typo.exit_code == 1 and "Did you mean 'optimize'?" in typo.output


def test_root_help_lists_init_first_and_version_as_a_flag() -> None:
    text = runner.invoke(app, ["--help"], env={"COLUMNS": "80"}).stdout
    assert "<bool>" not in text and re.search(r"--version +Print", text)
    listed = re.findall(r"^ *│ ([a-z]+) ", text[text.index("Commands"):], re.MULTILINE)
    assert listed[0] == "init" and listed[1] == "doctor"
    assert set(listed) == set(GROUP.commands)  # type: ignore[attr-defined]
    assert max(len(line) for line in text.splitlines()) <= 80
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("promptloop ")


def test_python_dash_m_promptloop_is_the_same_command_line() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "promptloop", "--version"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("promptloop "), done.stderr
    bad = subprocess.run([sys.executable, "-m", "promptloop", "optimise"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 1 and "Did you mean 'optimize'?" in bad.stderr + bad.stdout


def test_an_abandoned_embedded_model_skips_the_interpreters_exit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A command whose embedded-model calls were cut short leaves llama.cpp's threads running;
    the interpreter's shutdown beside them crashed (exit 139, a new-team trial): main ends
    such a process by ui.exit_now with the command's own exit code."""
    import sys

    from promptloop.agents.llm.providers import local
    from promptloop.optimizer.cli import app as app_module
    from promptloop.optimizer.cli import ui

    ended: list[int] = []

    class Ended(Exception):
        pass

    def exit_now(code: int) -> None:
        ended.append(code)
        raise Ended

    monkeypatch.setattr(ui, "exit_now", exit_now)
    monkeypatch.setattr(sys, "argv", ["promptloop", "--version"])
    monkeypatch.setattr(local, "_abandoned", False)
    with pytest.raises(SystemExit):
        app_module.main()  # nothing abandoned: the ordinary exit
    assert ended == []
    monkeypatch.setattr(local, "_abandoned", True)
    with pytest.raises(Ended):
        app_module.main()
    monkeypatch.setattr(sys, "argv", ["promptloop", "optimise"])
    with pytest.raises(Ended):
        app_module.main()
    assert ended == [0, 1]


def test_one_variable_per_option_across_commands() -> None:
    """docs/commands.md: one name per idea, in every command and its variable. A new-team
    trial found review's --base listed as PROMPTLOOP_REVIEW_BASE while the docs (and optimize,
    nightly, graduate) say PROMPTLOOP_BASE; the old name still works, unlisted."""
    from promptloop.optimizer.cli.command import env_vars

    seen: dict[str, set[str]] = {}
    for command in GROUP.commands.values():  # type: ignore[attr-defined]
        for variable, option in env_vars(command.params):
            seen.setdefault(option, set()).add(variable)
    assert seen["--base"] == {"PROMPTLOOP_BASE"}, seen["--base"]
    review = GROUP.commands["review"]  # type: ignore[attr-defined]
    base = next(p for p in review.params if "--base" in p.opts)
    assert "PROMPTLOOP_REVIEW_BASE" in base.envvar  # the old spelling still parses


def test_view_exits_130_on_ctrl_c(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from promptloop.optimizer.view.server import ViewServer

    def ctrl_c(self: ViewServer, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ViewServer, "serve_forever", ctrl_c)
    out = runner.invoke(app, ["view", "--port", "0", "--state-dir", str(tmp_path)])
    assert out.exit_code == 130, out.output
    assert "stopped" in out.output
