"""The likeliest first-day slips get errors that say what to do: `promptloop init` without a
commit, a repository without any commit, no promptloop.toml at all; `doctor` calls the
untracked files a problem, not "ready"."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app

runner = CliRunner()
OPTIMIZE = ["optimize", "--agent", "example", "--bucket", "urgency", "--agent-model",
            "scripted:card", "--proposer-model", "scripted:card"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                   check=True, capture_output=True)


def fresh(path: Path, *, commit: bool) -> Path:
    """A new repository (with one unrelated commit when `commit`) and `promptloop init` run
    in it, nothing of it committed."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    if commit:
        (path / "README.md").write_text("mine\n")
        git(path, "add", "README.md")
        git(path, "commit", "-qm", "first")
    return path


def run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(cwd)
    got = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return got.exit_code, got.stdout + got.stderr


def init(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _ = run(cwd, monkeypatch, "init")
    assert code == 0


def edited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str, *,
           commit: bool = False) -> Path:
    """A fresh repository after `promptloop init`, its promptloop.toml with `old` replaced by
    `new` (everything committed when `commit`)."""
    repo = fresh(tmp_path / "repo", commit=commit)
    init(repo, monkeypatch)
    toml = repo / "promptloop.toml"
    assert old in toml.read_text()
    toml.write_text(toml.read_text().replace(old, new))
    if commit:
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "init")
    return repo


def test_optimize_after_init_without_a_commit_says_commit_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fresh(tmp_path / "repo", commit=True)
    init(repo, monkeypatch)
    code, said = run(repo, monkeypatch, *OPTIMIZE, "--state-dir", str(tmp_path / "s"))
    assert code == 1, said
    assert "commit promptloop.toml first (optimize reads HEAD" in said
    assert "evals/example" in said and "git add -A && git commit" in said
    assert "packaged" not in said and "unknown agent" not in said


def test_a_suite_left_out_of_the_commit_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fresh(tmp_path / "repo", commit=True)
    init(repo, monkeypatch)
    git(repo, "add", "promptloop.toml", "example_agent")
    git(repo, "commit", "-qm", "half")
    code, said = run(repo, monkeypatch, *OPTIMIZE, "--state-dir", str(tmp_path / "s"))
    assert code == 1
    assert "commit evals/example first (optimize reads HEAD, which lacks it)" in said


def test_an_agent_added_to_the_working_tree_only_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fresh(tmp_path / "repo", commit=False)
    init(repo, monkeypatch)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    toml = repo / "promptloop.toml"
    toml.write_text(toml.read_text().replace("[agents.example]", "[agents.triage]"))
    code, said = run(repo, monkeypatch, "optimize", "--agent", "triage", "--bucket", "urgency",
                     "--state-dir", str(tmp_path / "s"))
    assert code == 1
    assert "agent 'triage' is declared in the working tree's promptloop.toml but not in " \
           "HEAD's: commit promptloop.toml first" in said


def test_optimize_in_a_repository_without_a_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fresh(tmp_path / "repo", commit=False)
    init(repo, monkeypatch)
    code, said = run(repo, monkeypatch, *OPTIMIZE, "--state-dir", str(tmp_path / "s"))
    assert code == 1
    assert "has no commit yet" in said and "git add -A && git commit" in said
    assert "unknown git ref" not in said
    # review too (it said "unknown git ref 'HEAD'" though the user gave --base master)
    code, said = run(repo, monkeypatch, "review", "--agent", "example", "--base", "master",
                     "--state-dir", str(tmp_path / "s"))
    assert code == 1 and "has no commit yet" in said and "unknown git ref" not in said, said


@pytest.mark.parametrize("command", [OPTIMIZE, ["eval", "--agent", "example"]])
def test_no_promptloop_toml_anywhere_says_run_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    empty = tmp_path / "nowhere"
    empty.mkdir()
    code, said = run(empty, monkeypatch, *command, "--state-dir", str(tmp_path / "s"))
    assert code == 1
    assert "no promptloop.toml here" in said and "run `promptloop init`" in said
    assert "packaged" not in said


def test_an_agent_from_the_environment_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fresh(tmp_path / "repo", commit=False)
    init(repo, monkeypatch)
    monkeypatch.chdir(repo)
    got = runner.invoke(app, ["eval", "--state-dir", str(tmp_path / "s")],
                        env={"PROMPTLOOP_AGENT": "nosuch", "COLUMNS": "200"})
    assert got.exit_code == 1
    assert "--agent came from the environment: PROMPTLOOP_AGENT='nosuch'" in got.stderr


@pytest.mark.parametrize("commit", [False, True])
def test_doctor_calls_uncommitted_files_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commit: bool
) -> None:
    repo = fresh(tmp_path / "repo", commit=commit)
    init(repo, monkeypatch)
    code, said = run(repo, monkeypatch, "doctor", "--agent-model", "scripted:card", "--json")
    assert code == 1
    data = json.loads(said[: said.rindex("}") + 1])
    data = data.get("result", data)  # the --json envelope
    problems = " ".join(p["what"] for p in data["problems"])
    if commit:
        assert "not committed" in problems and "promptloop.toml" in problems
        assert "evals/example" in problems
    else:
        assert "has no commit yet" in problems
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    code, said = run(repo, monkeypatch, "doctor", "--agent-model", "scripted:card")
    assert code == 0, said
    assert "not committed" not in said and "ready" in said


# --- errors that point to the fix ---------------------------------------------------------


def scripted(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(repo)
    got = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return got.exit_code, got.stdout, got.stderr


def test_a_bare_model_name_hints_its_provider(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = scripted(repo, monkeypatch, "eval", "--suite", "pkm_agent", "--agent-model",
                            "smollm2", "--state-dir", str(state))
    assert code == 1 and "Did you mean 'local:smollm2'?" in err
    code, _, err = scripted(repo, monkeypatch, "eval", "--suite", "pkm_agent", "--agent-model",
                            "gpt-4o", "--state-dir", str(state))
    assert code == 1 and "e.g. 'openai:gpt-4o'" in err


def test_an_agents_model_id_is_checked_when_the_file_loads(tmp_path: Path) -> None:
    """A team wrote model = "fake-1": `suites` said nothing and eval failed at its first trial
    naming neither the file nor the key."""
    from promptloop.optimizer.core.config import ConfigError
    from promptloop.optimizer.core.project import parse_project

    text = ('[agents.x]\nprompt = "p.md"\nsuites = ["evals/x"]\nadapter = "command"\n'
            'command = ["python3", "a.py"]\nmodel = "fake-1"\njudge = "openai:gpt-4o-mini"\n')
    with pytest.raises(ConfigError) as err:
        parse_project(text, tmp_path / "promptloop.toml")
    message = str(err.value)
    assert "promptloop.toml: [agents.x] key 'model': unknown model provider 'fake-1'" in message
    assert "Value error" not in message and "'openai:fake-1'" in message
    assert "key 'judge'" not in message


def test_a_mistyped_task_or_bucket_gets_a_did_you_mean_worded_one_way(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["--suite", "pkm_agent", "--agent-model", "scripted:pkm", "--state-dir", str(state)]
    code, _, err = scripted(repo, monkeypatch, "eval", *base, "--task", "greet-hii")
    assert code == 1 and "unknown task 'greet-hii'. Did you mean 'greet-hi'?" in err
    code, _, eval_err = scripted(repo, monkeypatch, "eval", *base, "--bucket", "skip_trivail")
    code2, _, opt_err = scripted(repo, monkeypatch, "optimize", *base, "--bucket",
                                 "skip_trivail", "--proposer-model", "scripted:pkm")
    assert code == code2 == 1
    for said in (eval_err, opt_err):
        assert "unknown bucket 'skip_trivail'. Did you mean 'skip_trivial'? Known buckets:" in said


def test_a_server_that_does_not_answer_is_named(unused_port: int) -> None:
    import asyncio

    from promptloop.agents.llm.errors import ProviderError
    from promptloop.agents.llm.options import ModelOptions
    from promptloop.agents.llm.registry import create_client

    client = create_client("openai:x", ModelOptions(
        base_url=f"http://127.0.0.1:{unused_port}/v1", max_retries=0, timeout_s=5))
    with pytest.raises(ProviderError) as err:
        asyncio.run(client.preflight())
    assert f"http://127.0.0.1:{unused_port}/v1" in str(err.value)


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_a_wrong_command_path_is_named_by_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fresh(tmp_path / "repo", commit=False)
    init(repo, monkeypatch)
    toml = repo / "promptloop.toml"
    toml.write_text(toml.read_text().replace("example_agent/agent.py", "example_agent/agnt.py"))
    code, _, err = scripted(repo, monkeypatch, "eval", "--agent", "example", "--state-dir",
                            str(tmp_path / "s"))
    assert code == 1
    assert "[agents.example] key 'command': 'example_agent/agnt.py' does not exist" in err
    assert "/dev/shm" not in err and "promptloop-trial" not in err


def test_report_without_a_run_mentions_latest(
    state: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, _, err = scripted(tmp_path, monkeypatch, "report", "--state-dir", str(state))
    assert code != 0 and "'latest'" in err and "Missing argument" not in err


def test_a_base_url_no_model_uses_is_a_warning(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = scripted(repo, monkeypatch, "eval", "--suite", "pkm_agent", "--agent-model",
                            "scripted:pkm", "--base-url", "http://localhost:8000/v1",
                            "--state-dir", str(state))
    assert code == 0
    assert "Warning: --base-url http://localhost:8000/v1 is not used" in err


def test_init_prints_its_summary_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = fresh(tmp_path / "repo", commit=False)
    code, out, err = scripted(repo, monkeypatch, "init")
    assert code == 0 and err == ""
    assert "wrote 10 files into" in out and "  promptloop eval --agent example" in out
    assert out.index("git add -A && git commit") < out.index("promptloop optimize")


def test_an_events_file_in_a_missing_folder_is_an_error(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    where = tmp_path / "no" / "such" / "events.jsonl"
    code, _, err = scripted(repo, monkeypatch, "eval", "--suite", "pkm_agent", "--agent-model",
                            "scripted:pkm", "--events", str(where), "--state-dir", str(state))
    assert code == 1 and f"the folder {where.parent} does not exist" in err
    assert not (tmp_path / "no").exists()


def test_a_command_refused_for_a_bad_name_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eval --agent x` with no promptloop.toml created .promptloop/ and added it to
    .git/info/exclude before saying there is no project."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    exclude = repo / ".git" / "info" / "exclude"
    before = exclude.read_text() if exclude.exists() else ""
    code, said = run(repo, monkeypatch, "eval", "--agent", "x")
    assert code == 1 and "no promptloop.toml here" in said
    assert not (repo / ".promptloop").exists()
    assert (exclude.read_text() if exclude.exists() else "") == before


@pytest.mark.parametrize("args", [
    ["health", "--agent", "card_agent"],
    ["calibrate", "--grader", "pkm_insight_quality", "--labels", "missing.jsonl"],
])
def test_a_read_command_that_fails_leaves_no_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """`health` and `calibrate` outside a project, with nothing to read, left an empty
    .promptloop/ behind (a team found it in a folder that is no repository)."""
    folder = tmp_path / "norepo"
    folder.mkdir()
    code, _ = run(folder, monkeypatch, *args)
    assert code == 1
    assert not (folder / ".promptloop").exists()


@pytest.mark.parametrize("path", ["../elsewhere/prompt.md", "/etc/prompt.md"])
def test_a_prompt_path_outside_the_repository_is_named_by_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """The short form `prompt = ...` is checked as a [[prompts]] table's path: exit 1 naming
    the key, one --json envelope; it was a traceback from every command, --help included."""
    repo = edited(tmp_path, monkeypatch, '"example_agent/prompt.md"', json.dumps(path))
    code, out, err = scripted(repo, monkeypatch, "suites", "--json")
    assert code == 1, err
    envelope = json.loads(out)
    assert envelope["ok"] is False
    assert "[agents.example] key 'prompt'" in envelope["error"]["message"]
    assert "inside it" in envelope["error"]["message"]
    assert "Traceback" not in err


@pytest.mark.parametrize(("command", "said"), [
    ('["example_agent/agent.py"]', "is not executable"),
    ('["pythonn3", "example_agent/agent.py"]', "is not found on PATH"),
    ('["./example_agent"]', "is a folder"),
])
def test_a_command_that_cannot_start_is_named_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, said: str
) -> None:
    repo = fresh(tmp_path / "repo", commit=False)
    init(repo, monkeypatch)
    (repo / "example_agent" / "agent.py").chmod(0o644)
    toml = repo / "promptloop.toml"
    text = toml.read_text()
    start = text.index("command = [")
    end = text.index("]", start) + 1
    toml.write_text(text[:start] + "command = " + command + text[end:])
    code, _, err = scripted(repo, monkeypatch, "eval", "--agent", "example", "--state-dir",
                            str(tmp_path / "s"))
    assert code == 1, err
    assert "[agents.example] key 'command'" in err and said in err
    assert not (tmp_path / "s" / "runs").exists()


def test_a_prompt_path_that_is_a_folder_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = edited(tmp_path, monkeypatch, '"example_agent/prompt.md"', '"example_agent"')
    code, _, err = scripted(repo, monkeypatch, "eval", "--agent", "example", "--state-dir",
                            str(tmp_path / "s"))
    assert code == 1 and "example_agent is a folder" in err, err


def test_a_project_outside_any_git_repository_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its agents were looked up in promptloop's bundled copy, with messages saying files
    that are there do not exist."""
    repo = fresh(tmp_path / "repo", commit=False)
    init(repo, monkeypatch)
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    state = ["--state-dir", str(tmp_path / "s")]
    for args in (["eval", "--agent", "example", *state],
                 ["eval", "--suite", "evals/example", *state], ["suites"]):
        code, _, err = scripted(repo, monkeypatch, *args)
        assert code == 1, (args, err)
        assert "is not in a git repository" in err and "git init" in err, (args, err)


@pytest.mark.parametrize("args", [
    ["eval", "--agent", "example", "--bucket", "nosuch"],
    ["eval", "--agent", "example", "--task", "nosuch"],
    ["eval", "--agent", "example", "--agent-model", "openai"],
    ["optimize", "--agent", "example", "--bucket", "nosuch", "--agent-model", "scripted:pkm"],
    ["nightly", "--agent", "example", "--agent-model", "openai"],
])
def test_an_eval_refused_for_a_user_error_leaves_no_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """A mistyped bucket or task created an empty .promptloop/ before the refusal (a team
    trying configuration mistakes one at a time)."""
    repo = edited(tmp_path, monkeypatch, "[agents.example]", "[agents.example]", commit=True)
    code, said = run(repo, monkeypatch, *args)
    assert code == 1, said
    assert not (repo / ".promptloop").exists()


def test_a_malformed_model_id_is_the_error_not_a_warning_about_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = edited(tmp_path, monkeypatch, "[agents.example]", "[agents.example]", commit=True)
    code, said = run(repo, monkeypatch, "eval", "--agent", "example", "--agent-model", "openai",
                     "--base-url", "http://127.0.0.1:9/v1")
    assert code == 1 and "has no model name" in said, said
    assert "Warning" not in said and "about" not in said.split("Error")[0], said


@pytest.mark.parametrize("args", [
    ["agent", "example", "--content", "my invoice is wrong"],
    ["profile", "--agent", "example", "--budget", "2"],
    ["nightly", "--agent", "example"],
    ["doctor", "--agent-model", "scripted:x"],
])
def test_every_command_names_a_command_that_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """eval and optimize named `command = ["pythonn3", ...]` by its key; agent, profile and
    nightly ran it (exit 2, state written) and doctor said ready."""
    repo = edited(tmp_path, monkeypatch, 'command = ["python3"', 'command = ["pythonn3"',
                  commit=True)
    code, said = run(repo, monkeypatch, *args)
    assert code == 1, said
    assert "[agents.example] key 'command'" in said and "not found on PATH" in said, said
    if args[0] != "doctor":
        assert not (repo / ".promptloop").exists() or not any((repo / ".promptloop").iterdir())


def test_a_committed_prompt_folder_says_so_at_the_ref(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """optimize reads the prompt at HEAD: a folder there was 'does not exist at HEAD'."""
    repo = edited(tmp_path, monkeypatch, '"example_agent/prompt.md"', '"example_agent"',
                  commit=True)
    code, said = run(repo, monkeypatch, "optimize", "--agent", "example", "--bucket", "urgency",
                     "--agent-model", "scripted:pkm", "--state-dir", str(tmp_path / "s"))
    assert code == 1, said
    assert "example_agent is a folder at" in said, said


def test_a_state_folder_inside_the_checkout_is_excluded_however_it_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review workflow sets PROMPTLOOP_HOME=$GITHUB_WORKSPACE/.promptloop: git status then
    showed `?? .promptloop/` (only the default folder was added to .git/info/exclude)."""
    from promptloop.optimizer.workflows.context import state_dir

    repo = fresh(tmp_path / "repo", commit=True)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("PROMPTLOOP_HOME", str(repo / "ci-state"))
    folder = state_dir()
    (folder / "x.json").write_text("{}")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                            capture_output=True, text=True, check=True).stdout
    assert status == "", status
