"""Both example agents through promptloop's own adapters, as their promptloop.toml declares
them (the Node.js agent as a `worker`, init's Python agent as a `command`), against a loopback
fake model: a good reply is ok, a reply that is not JSON fails the trial (the agent's fault),
an HTTP 500 errors it (not the agent's), and the key appears in no message."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from promptloop.optimizer.adapters.contract import TrialRequest
from promptloop.optimizer.adapters.runner import run_adapter_trial
from promptloop.optimizer.adapters.spec import AnyAdapterSettings
from promptloop.optimizer.adapters.worker import WorkerPool
from promptloop.optimizer.core.project import load_project
from promptloop.optimizer.workflows.init import TEMPLATE_DIR
from tests.examples.fake_chat import FakeChat

NODE_ROOT = Path(__file__).resolve().parents[2] / "examples" / "action-items"
KEY = "pl-run-token-adapter-0b5e"
ITEMS = '{"items": [{"task": "Send the budget", "owner": "Priya", "due": "2026-03-13"}], ' \
        '"summary": "Budget."}'
REPLIES = {"items": ITEMS, "triage": '{"category": "billing", "urgency": "high"}',
           "bad": "I think Priya should do it."}


def spec_of(root: Path, agent: str) -> AnyAdapterSettings:
    return load_project(root / "promptloop.toml").agent(agent).config.spec


def trial_request(base_url: str, workspace: Path, model: str, agent: str,
                  index: int) -> TrialRequest:
    workspace.mkdir(parents=True, exist_ok=True)
    return TrialRequest.model_validate({
        "agent": agent,
        "task": {"id": f"t{index}", "description": "d",
                 "input": {"content": "Priya will send the budget by Friday."}},
        "prompt": {"name": "system", "text": "Answer in JSON.", "path": "p",
                   "ref": "working tree"},
        "workspace": str(workspace),
        "model": {"base_url": base_url, "model": model, "api_key": KEY},
        "trial": {"index": index, "seed": index},
        "published_at": "2026-03-10T10:00:00",
        "timeout_s": 30,
    })


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_node_agent_through_the_worker_adapter(tmp_path: Path) -> None:
    spec = spec_of(NODE_ROOT, "action_items")
    assert spec.adapter == "worker"
    with FakeChat(REPLIES) as fake:
        async with WorkerPool(spec, repo_root=NODE_ROOT, agent="action_items", size=1) as pool:
            got = [await pool.run(trial_request(fake.base_url, tmp_path / f"w{i}", model,
                                                "action_items", i))
                   for i, model in enumerate(["reply:items", "reply:bad", "status:500",
                                              "reply:items"])]
    assert [g.status for g in got] == ["ok", "failed", "errored", "ok"]
    assert got[0].result is not None and got[0].result.outcome["n_items"] == 1
    assert (tmp_path / "w0" / "actions.json").is_file()
    for g in got:
        assert KEY not in (g.message or "") and KEY not in g.stderr_tail
    assert "action_items task t2 trial 2" in (got[2].message or "")


async def test_init_example_agent_through_the_command_adapter(tmp_path: Path) -> None:
    spec = spec_of(TEMPLATE_DIR, "example")
    assert spec.adapter == "command"
    with FakeChat(REPLIES) as fake:
        got = [await run_adapter_trial(spec, trial_request(fake.base_url, tmp_path / f"w{i}",
                                                           model, "example", i),
                                       repo_root=TEMPLATE_DIR, agent="example")
               for i, model in enumerate(["reply:triage", "reply:bad", "status:500"])]
    assert [g.status for g in got] == ["ok", "failed", "errored"]
    assert got[0].result is not None
    assert got[0].result.outcome == {"category": "billing", "urgency": "high"}
    assert (tmp_path / "w0" / "triage.json").is_file()
    for g in got:
        assert KEY not in (g.message or "") and KEY not in g.stderr_tail
