"""Fake agents for the adapter tests: small Python scripts written by the tests, run with this
interpreter, each speaking the trial contract as a `command` (one request) or a `worker` (one
request per line) with a behaviour given as the body of `handle(req)`, which returns the text
to print (or does something worse)."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from promptloop.optimizer.adapters.contract import (
    ModelEndpoint,
    PromptInfo,
    TrialInfo,
    TrialRequest,
)
from promptloop.optimizer.adapters.spec import AnyAdapterSettings, parse_settings

TOKEN = "plt-run-token-0123456789abcdef"

_HARNESS = '''\
import json, os, subprocess, sys, time
from pathlib import Path


def ok(outcome=None, **more):
    return json.dumps({{"contract": "promptloop.trial/1", "outcome": outcome or {{}}, **more}})


def handle(req):
{body}


if "--worker" in sys.argv:
    for line in sys.stdin:
        out = handle(json.loads(line))
        sys.stdout.write(out.replace("\\n", " ") + "\\n")
        sys.stdout.flush()
else:
    path = os.environ.get("PROMPTLOOP_REQUEST")
    req = json.loads(Path(path).read_text() if path else sys.stdin.read())
    out = handle(req)
    result = os.environ.get("PROMPTLOOP_RESULT")
    if result:
        Path(result).write_text(out)
    else:
        sys.stdout.write(out)
'''


@dataclass
class World:
    """A repository root and a trial folder holding a fresh workspace, in a test's tmp_path."""

    tmp: Path
    repo: Path
    trial: Path
    workspace: Path

    @classmethod
    def make(cls, tmp: Path) -> World:
        repo, trial = tmp / "repo", tmp / "trial"
        workspace = trial / "workspace"
        workspace.mkdir(parents=True)
        repo.mkdir()
        (repo / "README.md").write_text("a repository\n")
        return cls(tmp, repo, trial, workspace)

    def script(self, body: str, name: str = "agent.py") -> Path:
        path = self.repo / name
        path.write_text(_HARNESS.format(body=textwrap.indent(textwrap.dedent(body), "    ")))
        return path

    def spec(self, body: str, kind: str = "command", **kw: object) -> AnyAdapterSettings:
        script = self.script(body)
        argv = [sys.executable, str(script.relative_to(self.repo))]
        if kind == "worker":
            argv.append("--worker")
        return parse_settings({"adapter": kind, "command": argv, **kw})

    def request(self, index: int = 0, timeout_s: float = 20.0, task_id: str = "t1",
                workspace: Path | None = None) -> TrialRequest:
        return TrialRequest(
            agent="fake",
            task={"id": task_id, "description": "say hi", "input": {"content": "hello"}},
            prompt=PromptInfo(name="system", text="Be brief.", path="agent/prompt.js",
                              ref="working tree"),
            workspace=str(workspace or self.workspace),
            model=ModelEndpoint(base_url="http://127.0.0.1:9/v1", model="scripted:x",
                                api_key=TOKEN),
            trial=TrialInfo(index=index, seed=1234 + index),
            published_at="2026-03-14T09:30:00",
            timeout_s=timeout_s,
        )


def files_containing(root: Path, *needles: str) -> list[Path]:
    """Every file under `root` whose bytes contain one of `needles`."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(n.encode() in data for n in needles):
                found.append(path)
    return found
