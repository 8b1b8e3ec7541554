"""The adapters' good paths: command (request on stdin or in a file, result on stdout or in a
file), worker (one process serving many trials, replaced when it dies or hangs), http (a
loopback server), python (module:function), and a Node.js worker."""

from __future__ import annotations

import asyncio
import json
import shutil
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from promptloop.optimizer.adapters.contract import TrialRequest
from promptloop.optimizer.adapters.outcome import AdapterConfigError, AdapterOutcome
from promptloop.optimizer.adapters.runner import AgentRaised, run_adapter_trial
from promptloop.optimizer.adapters.spec import parse_settings
from promptloop.optimizer.adapters.worker import WorkerPool
from tests.optimizer.adapters.fakes import TOKEN, World

ECHO = '''
    ws = Path(req["workspace"])
    (ws / "answer.txt").write_text(req["prompt"]["text"])
    return ok({"prompt": req["prompt"]["text"], "task": req["task"]["id"],
               "index": req["trial"]["index"], "cwd": os.getcwd(), "pid": os.getpid(),
               "home": os.environ["HOME"], "model": os.environ["PROMPTLOOP_MODEL"],
               "repo": os.environ["PROMPTLOOP_REPO"],
               "base_url": os.environ["OPENAI_BASE_URL"]},
              transcript=[{"role": "assistant", "content": "done",
                           "tool_calls": [{"name": "write", "arguments": {"path": "answer.txt"}}]}],
              usage={"input_tokens": 10, "output_tokens": 2})
'''


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World.make(tmp_path)


def workspaces(world: World, n: int) -> list[Path]:
    out = []
    for i in range(n):
        ws = world.tmp / f"trial-{i}" / "workspace"
        ws.mkdir(parents=True)
        out.append(ws)
    return out


@pytest.mark.parametrize(("request_mode", "result_mode"),
                         [("stdin", "stdout"), ("file", "file"), ("file", "stdout")])
async def test_command(world: World, request_mode: str, result_mode: str) -> None:
    spec = world.spec(ECHO, "command", request=request_mode, result=result_mode)
    got = await run_adapter_trial(spec, world.request(index=3), repo_root=world.repo,
                                  agent="fake", context=None, pool=None)
    assert got.status == "ok", got.message
    assert got.message is None and got.result is not None
    out = got.result.outcome
    assert out["prompt"] == "Be brief." and out["task"] == "t1" and out["index"] == 3
    assert Path(out["cwd"]) == world.workspace  # run in the workspace
    assert out["repo"] == str(world.repo) and out["model"] == "scripted:x"
    assert out["base_url"] == "http://127.0.0.1:9/v1"
    assert (world.workspace / "answer.txt").read_text() == "Be brief."
    assert got.result.usage is not None and got.result.usage.input_tokens == 10
    assert got.result.transcript[0].tool_calls[0].name == "write"


async def test_worker_serves_20_trials_with_one_process(world: World) -> None:
    spec = world.spec(ECHO, "worker")
    async with WorkerPool(spec, repo_root=world.repo, agent="fake") as pool:
        outs = []
        for i, ws in enumerate(workspaces(world, 20)):
            got = await run_adapter_trial(spec, world.request(index=i, workspace=ws),
                                          repo_root=world.repo, agent="fake", context=None,
                                          pool=pool)
            assert got.status == "ok", got.message
            assert got.result is not None
            outs.append(got.result.outcome)
        assert pool.starts == 1
    assert len({o["pid"] for o in outs}) == 1
    assert [o["index"] for o in outs] == list(range(20))
    assert Path(outs[0]["cwd"]) == world.repo  # a worker runs from the repository root


async def test_workers_run_side_by_side(world: World) -> None:
    spec = world.spec("time.sleep(0.3)\n" + textwrap.dedent(ECHO), "worker")
    spaces = workspaces(world, 9)
    async with WorkerPool(spec, repo_root=world.repo, agent="fake", size=3) as pool:
        warm = await asyncio.gather(*(pool.run(world.request(index=i, workspace=spaces[i]))
                                      for i in range(3)))
        started = time.monotonic()
        got = await asyncio.gather(*(pool.run(world.request(index=i, workspace=spaces[i]))
                                     for i in range(3, 9)))
        took = time.monotonic() - started
        assert pool.starts == 3
    assert all(g.status == "ok" for g in warm + got), [g.message for g in warm + got]
    assert len({g.result.outcome["home"] for g in got if g.result}) == 3  # a HOME per worker
    assert took < 6 * 0.3  # not one after the other


async def test_a_worker_that_dies_or_hangs_is_replaced(world: World) -> None:
    spec = world.spec('''
        if req["trial"]["index"] == 1:
            sys.exit(5)
        if req["trial"]["index"] == 3:
            time.sleep(60)
        return ok({"pid": os.getpid(), "home": os.environ["HOME"]})
    ''', "worker")
    spaces = workspaces(world, 5)
    async with WorkerPool(spec, repo_root=world.repo, agent="fake") as pool:
        got = [await pool.run(world.request(index=i, workspace=spaces[i],
                                            timeout_s=1.5 if i == 3 else 10))
               for i in range(5)]
        assert pool.starts == 4  # trial 1 was retried once on a fresh worker
    assert [g.status for g in got] == ["ok", "errored", "ok", "errored", "ok"]
    assert got[1].message == ("fake task t1 trial 1: the worker exited 5 before answering, "
                              "twice (retried once on a fresh worker)")
    assert got[3].message == "fake task t1 trial 3: exceeded 1.5s; process group killed"
    homes = [g.result.outcome["home"] for g in got if g.result]
    assert len(set(homes)) == 3


async def test_a_worker_that_breaks_the_framing_is_replaced(world: World) -> None:
    # a stray line on stdout: the answer to this trial is garbage, the next trial must not get
    # this trial's late answer
    spec = world.spec('''
        if req["trial"]["index"] == 0:
            print("loading model...", flush=True)
        return ok({"index": req["trial"]["index"]})
    ''', "worker")
    spaces = workspaces(world, 2)
    async with WorkerPool(spec, repo_root=world.repo, agent="fake") as pool:
        first = await pool.run(world.request(index=0, workspace=spaces[0]))
        second = await pool.run(world.request(index=1, workspace=spaces[1]))
        assert pool.starts == 2
    assert first.status == "errored" and "invalid JSON" in (first.message or "")
    assert second.status == "ok" and second.result is not None
    assert second.result.outcome == {"index": 1}


async def test_worker_without_a_pool_runs_alone(world: World) -> None:
    spec = world.spec(ECHO, "worker")
    got = await run_adapter_trial(spec, world.request(), repo_root=world.repo, agent="fake",
                                  context=None, pool=None)
    assert got.status == "ok", got.message


# --- http ------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/fail":
            return self._send(503, b"model overloaded")
        if self.path == "/slow":
            time.sleep(3)
        if self.path == "/big":
            return self._send(200, b"x" * 5000)
        answer = {"contract": "promptloop.trial/1",
                  "outcome": {"task": body["task"]["id"], "key": body["model"]["api_key"]}}
        return self._send(200, json.dumps(answer).encode())

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


async def _http(world: World, url: str, timeout_s: float = 10, **kw: object) -> AdapterOutcome:
    spec = parse_settings({"adapter": "http", "url": url, **kw})
    return await run_adapter_trial(spec, world.request(timeout_s=timeout_s),
                                   repo_root=world.repo, agent="fake", context=None, pool=None)


async def test_http(world: World, server: str) -> None:
    got = await _http(world, server + "/trial")
    assert got.status == "ok", got.message
    assert got.result.outcome == {"task": "t1", "key": "***"}


async def test_http_failures(world: World, server: str) -> None:
    bad = await _http(world, server + "/fail")
    assert bad.message == (
        f"fake task t1 trial 0: {server}/fail answered HTTP 503: model overloaded")
    big = await _http(world, server + "/big", max_output_bytes=1000)
    assert big.message == (
        f"fake task t1 trial 0: {server}/big answered more than 1000 bytes")
    slow = await _http(world, server + "/slow", timeout_s=0.5)
    assert slow.status == "errored" and slow.timed_out
    assert "did not answer within 0.5s" in slow.message
    gone = await _http(world, "http://127.0.0.1:9/trial")
    assert gone.status == "errored"
    assert "could not reach http://127.0.0.1:9/trial" in gone.message


# --- python ----------------------------------------------------------------------------------


async def _py(world: World, fn: str, timeout_s: float = 10) -> AdapterOutcome:
    spec = parse_settings({"adapter": "python",
                            "entry": f"tests.optimizer.adapters.pyagents:{fn}"})
    return await run_adapter_trial(spec, world.request(timeout_s=timeout_s),
                                   repo_root=world.repo, agent="fake", context=None, pool=None)


async def test_python(world: World) -> None:
    got = await _py(world, "echo")
    assert got.status == "ok"
    assert got.result.outcome == {
        "prompt": "Be brief.", "task": "t1", "has_context": False}
    sync = await _py(world, "echo_sync")
    assert sync.result.outcome == {"seed": 1234}
    assert sync.result.usage.input_tokens == 3
    bad = await _py(world, "forgets_outcome")
    assert bad.message == (
        "fake task t1 trial 0: result is missing the required field `outcome`")


async def test_python_exceptions_and_timeouts_reach_the_caller(world: World) -> None:
    """The function's own exception reaches the caller as AgentRaised (the trial fails), told
    apart from promptloop's own errors; the time limit stays a TimeoutError."""
    with pytest.raises(AgentRaised, match=r"ValueError: .*the agent's own bug"):
        await _py(world, "raises")
    with pytest.raises(TimeoutError):
        await _py(world, "sleeps", timeout_s=0.2)


@pytest.mark.parametrize(("entry", "says"), [
    ("tests.optimizer.adapters.no_such_module:run", "cannot import"),
    ("tests.optimizer.adapters.pyagents:missing", "has no 'missing'"),
    ("tests.optimizer.adapters.pyagents:NOT_CALLABLE", "is not callable"),
])
async def test_python_entry_that_does_not_load(world: World, entry: str, says: str) -> None:
    spec = parse_settings({"adapter": "python", "entry": entry})
    with pytest.raises(AdapterConfigError, match=says) as err:
        await run_adapter_trial(spec, world.request(), repo_root=world.repo, agent="fake",
                                context=None, pool=None)
    assert entry in str(err.value)


# --- node ------------------------------------------------------------------------------------

NODE_WORKER = r"""
const readline = require("node:readline");
const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const req = JSON.parse(line);
  const outcome = { task: req.task.id, prompt: req.prompt.text, pid: process.pid,
                    base_url: process.env.OPENAI_BASE_URL };
  process.stdout.write(JSON.stringify({ contract: "promptloop.trial/1", outcome }) + "\n");
});
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_node_worker(world: World) -> None:
    (world.repo / "agent").mkdir()
    (world.repo / "agent" / "agent.js").write_text(NODE_WORKER)
    spec = parse_settings({"adapter": "worker",
                           "command": ["node", "agent/agent.js", "--worker"]})
    requests: list[TrialRequest] = [world.request(index=i, workspace=ws)
                                    for i, ws in enumerate(workspaces(world, 3))]
    async with WorkerPool(spec, repo_root=world.repo, agent="fake") as pool:
        got = [await pool.run(r) for r in requests]
        assert pool.starts == 1
    assert all(g.status == "ok" for g in got), [g.message for g in got]
    assert got[0].result is not None
    assert got[0].result.outcome["prompt"] == "Be brief."
    assert TOKEN not in json.dumps([g.result.model_dump() for g in got if g.result])
