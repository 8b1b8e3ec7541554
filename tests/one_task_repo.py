"""A git repository holding one agent with a one-task suite (bucket `b`, task `t1`, graded by
json_schema): the smallest project a CLI test can run an agent of its own in."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def one_task_repo(repo: Path, agent: str, table: str) -> Path:
    """`repo` with promptloop.toml's `[agents.<agent>]` holding `table` (the adapter's keys;
    `prompt = "p.md"` and `suites = ["evals"]` are written here) and the suite."""
    task = repo / "evals" / "tasks" / "b" / "t1"
    task.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "p.md").write_text("Be brief.\n")
    (repo / "evals" / "suite.json").write_text(json.dumps(
        {"name": agent, "agent_name": agent, "kind": "capability"}))
    (task / "task.json").write_text(json.dumps({
        "id": "t1", "trials_per_run": 1, "metadata": {"failure_bucket": "b"},
        "input": {"content": "hi"},
        "graders": [{"name": "json_schema", "config": {"schema": {"type": "object"}}}]}))
    (repo / "promptloop.toml").write_text(
        f'[agents.{agent}]\nprompt = "p.md"\nsuites = ["evals"]\n{table}')
    return repo
