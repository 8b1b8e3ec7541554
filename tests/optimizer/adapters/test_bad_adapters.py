"""Issue 24, must hold: bad adapters never crash promptloop and never count as agent failures
unless the agent caused them. One test per case, through the `command` and the `worker`
adapter: each gives an errored (or, agent-caused, failed) outcome whose message names the agent,
the task, the trial and the field or cause; nothing is left half-written; no key in any file."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from promptloop.optimizer.adapters.outcome import AdapterOutcome
from promptloop.optimizer.adapters.runner import run_adapter_trial
from promptloop.optimizer.adapters.spec import AnyAdapterSettings, parse_settings
from promptloop.optimizer.adapters.worker import WorkerPool
from tests.optimizer.adapters.fakes import TOKEN, World, files_containing

KINDS = ["command", "worker"]
PREFIX = "fake task t1 trial 0: "


async def run(world: World, spec: AnyAdapterSettings, timeout_s: float = 20.0) -> AdapterOutcome:
    request = world.request(timeout_s=timeout_s)
    if spec.adapter == "worker":
        async with WorkerPool(spec, repo_root=world.repo, agent="fake") as pool:
            return await run_adapter_trial(spec, request, repo_root=world.repo, agent="fake",
                                           context=None, pool=pool)
    return await run_adapter_trial(spec, request, repo_root=world.repo, agent="fake",
                                   context=None, pool=None)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World.make(tmp_path)


@pytest.fixture(autouse=True)
def _unboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These cases are those of issue 24, without a sandbox (the fallback of issue 30; the
    sandboxed cases are in test_box.py)."""
    monkeypatch.setenv("PROMPTLOOP_SANDBOX", "off")


@pytest.mark.parametrize("kind", KINDS)
async def test_exit_non_zero(world: World, kind: str) -> None:
    spec = world.spec('sys.stderr.write("boom: no model\\n"); sys.exit(3)', kind)
    got = await run(world, spec)
    assert got.status == "errored" and got.result is None
    assert got.message is not None and got.message.startswith(PREFIX)
    assert "exited 3" in got.message and "boom: no model" in got.message
    assert "boom: no model" in got.stderr_tail


@pytest.mark.parametrize("kind", KINDS)
async def test_hang_past_limit_kills_the_process_group(world: World, kind: str) -> None:
    # the agent starts a child (same process group) and both hang; both must be killed
    spec = world.spec('''
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        Path(req["workspace"], "child.pid").write_text(str(child.pid))
        time.sleep(120)
    ''', kind)
    started = time.monotonic()
    got = await run(world, spec, timeout_s=3.0)
    assert time.monotonic() - started < 12
    assert got.status == "errored" and got.timed_out
    assert got.message == PREFIX + "exceeded 3s; process group killed"
    child = int((world.workspace / "child.pid").read_text())
    assert not _alive(child), "the agent's child survived the timeout"


@pytest.mark.parametrize("kind", KINDS)
async def test_prints_nothing(world: World, kind: str) -> None:
    got = await run(world, world.spec('return ""', kind))
    assert got.status == "errored"
    assert got.message == PREFIX + "printed nothing (no result)"


@pytest.mark.parametrize("kind", KINDS)
async def test_prints_invalid_json(world: World, kind: str) -> None:
    got = await run(world, world.spec('return "{outcome: yes}"', kind))
    assert got.status == "errored" and got.message is not None
    assert got.message.startswith(PREFIX + "printed invalid JSON: ")
    assert "line 1 column 2 (character 1)" in got.message
    assert got.message.endswith("it printed: '{outcome: yes}'")  # the text, to see the cause


@pytest.mark.parametrize("kind", KINDS)
async def test_a_log_line_on_stdout_says_where_logs_go(world: World, kind: str) -> None:
    got = await run(world, world.spec('return "starting up"', kind))
    assert got.status == "errored" and got.message is not None
    assert "it printed: 'starting up'" in got.message
    assert got.message.endswith("stdout carries only the result document: write logs to stderr")


def test_a_long_non_json_output_is_quoted_capped() -> None:
    from promptloop.optimizer.adapters.outcome import QUOTE_CHARS, _quote

    said = _quote("hello " * 100)
    assert said.startswith("'hello hello") and said.endswith("... (599 characters)")
    assert len(said) < QUOTE_CHARS + 40


@pytest.mark.parametrize("kind", KINDS)
async def test_result_missing_a_required_field(world: World, kind: str) -> None:
    got = await run(world, world.spec(
        'return json.dumps({"contract": "promptloop.trial/1", "transcript": []})', kind))
    assert got.status == "errored"
    assert got.message == PREFIX + "result is missing the required field `outcome`"


@pytest.mark.parametrize("kind", KINDS)
async def test_result_of_another_contract_version(world: World, kind: str) -> None:
    got = await run(world, world.spec(
        'return json.dumps({"contract": "promptloop.trial/9", "outcome": {}})', kind))
    assert got.status == "errored" and got.message is not None
    assert got.message.startswith(PREFIX + "result field `contract` is 'promptloop.trial/9'")


@pytest.mark.parametrize("kind", KINDS)
async def test_result_whose_outcome_is_not_an_object(world: World, kind: str) -> None:
    got = await run(world, world.spec('return json.dumps({"outcome": [1, 2]})', kind))
    assert got.status == "errored" and got.message is not None
    assert got.message.startswith(PREFIX + "result field `outcome`: ")


@pytest.mark.parametrize("kind", KINDS)
async def test_prints_100_mb(world: World, kind: str) -> None:
    spec = world.spec('''
        chunk = "x" * (1 << 20)
        for _ in range(100):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        return ok()
    ''', kind)
    started = time.monotonic()
    got = await run(world, spec)
    assert time.monotonic() - started < 15
    assert got.status == "errored"
    assert got.message == PREFIX + "printed more than 10 MB"


@pytest.mark.parametrize("kind", KINDS)
async def test_writes_outside_its_workspace(world: World, kind: str) -> None:
    spec = world.spec('''
        Path(req["workspace"], "inside.txt").write_text("fine")
        Path(req["workspace"]).parent.joinpath("stray.txt").write_text("not here")
        return ok({"done": True})
    ''', kind)
    got = await run(world, spec)
    # errored by that cause (no evidence about the prompt; the gate rejects such a
    # candidate), never passed
    assert got.status == "errored"
    assert got.message == PREFIX + f"wrote outside its workspace: {world.trial / 'stray.txt'}"
    assert not (world.trial / "stray.txt").exists(), "the stray in the trial folder stays"
    assert (world.workspace / "inside.txt").exists()


@pytest.mark.parametrize("kind", KINDS)
async def test_writes_into_the_repository_root(world: World, kind: str) -> None:
    spec = world.spec('''
        Path(os.environ["PROMPTLOOP_REPO"], "marker.txt").write_text("pwned")
        return ok()
    ''', kind)
    got = await run(world, spec)
    assert got.status == "errored"
    assert got.message == PREFIX + f"wrote outside its workspace: {world.repo / 'marker.txt'}"


@pytest.mark.parametrize(("kind", "request_mode"),
                         [("command", "stdin"), ("command", "file"), ("worker", "stdin")])
async def test_echoes_its_environment(world: World, kind: str, request_mode: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    keys = {"OPENAI_API_KEY": "sk-fake-openai-0123456789abcdef",
            "ANTHROPIC_API_KEY": "sk-ant-fake-0123456789abcdef",
            "AGENT_SERVICE_TOKEN": "svc-token-0123456789abcdef"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    spec = world.spec('''
        env = dict(os.environ)
        sys.stderr.write(json.dumps(env) + "\\n")
        copy = os.environ.get("PROMPTLOOP_REQUEST")
        if copy:
            Path(req["workspace"], "request-copy.json").write_text(Path(copy).read_text())
        Path(req["workspace"], "env.json").write_text(json.dumps(env))
        return ok({"env": env, "token_seen": os.environ.get("AGENT_SERVICE_TOKEN")})
    ''', kind, env=["AGENT_SERVICE_TOKEN"],
        **({"request": request_mode} if kind == "command" else {}))
    got = await run(world, spec)
    assert got.status == "ok", got.message
    assert got.result is not None
    env = got.result.outcome["env"]
    assert env["OPENAI_API_KEY"] == "***"  # the run's token, itself never reported
    assert "ANTHROPIC_API_KEY" not in env
    # the passed-through variable reached the agent, and its value never comes back
    assert got.result.outcome["token_seen"] == "***"
    assert set(env) <= {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "AGENT_SERVICE_TOKEN",
                        "OPENAI_BASE_URL", "OPENAI_API_KEY", "PROMPTLOOP_MODEL",
                        "PROMPTLOOP_REPO", "PROMPTLOOP_REQUEST", "PROMPTLOOP_RESULT",
                        "LC_CTYPE", "PWD"}
    assert env["HOME"] != os.environ.get("HOME") and env["TMPDIR"] != os.environ.get("TMPDIR")
    everything = json.dumps(got.result.model_dump()) + (got.message or "") + got.stderr_tail
    for value in keys.values():
        assert value not in everything
    real = [keys["OPENAI_API_KEY"], keys["ANTHROPIC_API_KEY"]]
    assert files_containing(world.tmp, *real) == [], "a key reached a file"
    if request_mode == "file":
        assert (world.workspace / "request-copy.json").exists()
        copied = json.loads((world.workspace / "request-copy.json").read_text())
        assert copied["model"]["api_key"] == TOKEN  # the per-run token, not a key


@pytest.mark.parametrize("kind", KINDS)
async def test_agent_caused_error_fails_and_infrastructure_errors(world: World,
                                                                  kind: str) -> None:
    agent = await run(world, world.spec(
        'return ok({"x": 1}, error={"cause": "agent", "message": "gave up"})', kind))
    assert agent.status == "failed" and agent.result is not None
    assert agent.message == PREFIX + "the agent reported an error: gave up"
    infra = await run(world, world.spec(
        'return ok(error={"cause": "infrastructure", "message": "model down"})', kind))
    assert infra.status == "errored"
    assert infra.message == PREFIX + "the agent reported an infrastructure error: model down"


async def test_a_command_that_cannot_start(world: World) -> None:
    spec = parse_settings({"adapter": "command", "command": ["/no/such/agent-binary"]})
    got = await run(world, spec)
    assert got.status == "errored" and got.message is not None
    assert got.message.startswith(PREFIX + "could not start '/no/such/agent-binary'")


async def test_a_result_file_never_written(world: World) -> None:
    spec = world.spec('sys.exit(0)', "command", result="file")
    got = await run(world, spec)
    assert got.status == "errored"
    assert got.message == PREFIX + "wrote no result file ($PROMPTLOOP_RESULT)"


async def test_an_oversize_result_file(world: World) -> None:
    spec = world.spec('return ok({"big": "x" * 3000})', "command", result="file",
                      max_output_bytes=1000)
    got = await run(world, spec)
    assert got.status == "errored"
    assert got.message == PREFIX + "wrote more than 1000 bytes in its result file"


async def test_a_non_zero_exit_with_a_result_that_says_why(world: World) -> None:
    spec = world.spec('''
        print(ok(error={"cause": "agent", "message": "bad input"}))
        sys.exit(1)
    ''', "command")
    got = await run(world, spec)
    assert got.status == "failed"
    assert got.message == PREFIX + "the agent reported an error: bad input"


async def test_a_command_that_leaves_a_child_running(world: World) -> None:
    # the command answers and exits, a background child keeps its stdout open: promptloop
    # neither waits for the time limit nor leaves the child running
    spec = world.spec('''
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        Path(req["workspace"], "child.pid").write_text(str(child.pid))
        return ok()
    ''')
    started = time.monotonic()
    got = await run(world, spec, timeout_s=30)
    assert got.status == "ok", got.message
    assert time.monotonic() - started < 10
    child = int((world.workspace / "child.pid").read_text())
    assert not _alive(child)


def _alive(pid: int) -> bool:
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        try:  # a zombie waiting for its (dead) parent's init to reap it is dead enough
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            return False
        if state == "Z":
            return False
        time.sleep(0.1)
    return True


async def test_a_shared_parent_is_not_checked_and_nothing_in_it_is_removed(
        world: World) -> None:
    # a workspace whose parent holds other trials' folders: a new entry there cannot be
    # attributed, and must never be deleted
    shared = world.tmp / "shared"
    (shared / "other-trial").mkdir(parents=True)
    workspace = shared / "mine"
    workspace.mkdir()
    spec = world.spec('''
        Path(req["workspace"]).parent.joinpath("sibling-output").write_text("theirs")
        return ok()
    ''')
    request = world.request(workspace=workspace)
    got = await run_adapter_trial(spec, request, repo_root=world.repo, agent="fake",
                                  context=None, pool=None)
    assert got.status == "ok", got.message
    assert (shared / "sibling-output").exists() and (shared / "other-trial").exists()


async def test_a_missing_workspace_is_the_callers_bug(world: World) -> None:
    spec = world.spec("return ok()")
    with pytest.raises(FileNotFoundError, match="workspace"):
        await run_adapter_trial(spec, world.request(workspace=world.tmp / "nope"),
                                repo_root=world.repo, agent="fake", context=None, pool=None)


async def test_a_result_file_that_is_a_link_is_not_followed(world: World) -> None:
    spec = world.spec('''
        os.symlink("/dev/zero", os.environ["PROMPTLOOP_RESULT"])
        sys.exit(0)
    ''', "command", result="file")
    got = await run(world, spec)
    assert got.status == "errored" and got.message is not None
    assert got.message.startswith(PREFIX + "result file ($PROMPTLOOP_RESULT) unreadable")
