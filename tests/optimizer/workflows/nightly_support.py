"""Shared setup of the nightly tests (also imported by the child process the kill test starts).

A temp git repo holds the PKM suites of test_loop plus a small Card suite. The scripted agent
answers for both agents; the scripted proposer answers from the package it is sent: for the
PKM bucket first the over-broad rule, then (once that was rejected) the good one; for the Card
bucket a harmless note that cannot change the card policy (rejected, then refused as duplicate).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.core.events import Phase
from promptloop.optimizer.workflows.nightly.engine import NightlyConfig, NightResult, run_nightly
from tests import policies
from tests.optimizer.workflows.test_optimize import (
    BROAD,
    GOOD,
    PROMPT,
    TASKS,
    _git,
    _write_suite,
    commit_base,
)

CARD_PROMPT = """# Card agent

## Templates
Choose the template that fits the input.

## Titles
Write a short title.
"""

CARD_DIFF = (
    "HYPOTHESIS: the agent does not know people deserve their own template.\n\n```diff\n"
    "--- a/prompts/card_agent.md\n+++ b/prompts/card_agent.md\n@@ -3,2 +3,3 @@\n"
    " ## Templates\n+When the input is mainly about a person, consider the person template.\n"
    " Choose the template that fits the input.\n```\n"
)

CARD_TASKS = {
    "people": [("lunch-colleague", "Had lunch with Priya from the design team", ["person"])],
    "links": [("article-link", "Read later https://example.org/essay", ["link"])],
}
CARD_REGRESSION = {"money": [("coffee", "Coffee at the station $4.50", ["transaction"])]}


def write_card_suite(root: Path, kind: str, buckets: dict[str, list[Any]], start: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "suite.json").write_text(
        json.dumps({"name": f"card_agent_{kind}", "agent_name": "card_agent", "kind": kind})
    )
    n = start
    for bucket, tasks in buckets.items():
        for task_id, content, expected in tasks:
            n += 1
            folder = root / "tasks" / bucket / task_id
            folder.mkdir(parents=True)
            (folder / "task.json").write_text(json.dumps({
                "id": task_id,
                "description": f"{bucket}: {task_id}",
                "trials_per_run": 2,
                "metadata": {"failure_bucket": bucket},
                "input": {"fact_id": f"2026/03/14.md#ts_{n}", "content": content},
                "graders": [
                    {"name": "card_completion", "config": {}},
                    {"name": "card_template_choice",
                     "config": {"expected_template_ids": expected}},
                ],
            }))


def make_repo(repo: Path) -> Path:
    """Both agents' prompts and suites in a fresh git repo with one commit."""
    (repo / "prompts").mkdir(parents=True)
    (repo / "prompts" / "pkm_agent.md").write_text(PROMPT)
    (repo / "prompts" / "card_agent.md").write_text(CARD_PROMPT)
    _write_suite(repo / "tasks" / "pkm_agent" / "capability", "capability", TASKS)
    _write_suite(
        repo / "tasks" / "pkm_agent" / "regression",
        "regression",
        {"plain": [("plain-a", "Booked the car service for Tuesday morning", "persist"),
                   ("plain-b", "Ran 5 km along the river in 27 minutes", "persist")]},
    )
    write_card_suite(repo / "tasks" / "card_agent" / "capability", "capability", CARD_TASKS, 40)
    write_card_suite(repo / "tasks" / "card_agent" / "regression", "regression",
                     CARD_REGRESSION, 60)
    return commit_base(repo)


def agent_policy(req: Request) -> ModelResponse:
    """The card policy for the Card Agent's requests, the PKM policy for the others."""
    if any(t.name == "save_timeline_card" for t in req.tools):
        return policies.card_policy(req)
    return policies.pkm_policy(req)


def proposer_policy(req: Request) -> ModelResponse:
    text = "\n".join(m.content for m in req.messages)
    if "prompts/card_agent.md" in text:
        return reply(CARD_DIFF, tokens=(400, 60))
    rejected_broad = policies.BROAD_SKIP_RULE in text
    return reply(GOOD if rejected_broad else BROAD, tokens=(400, 60))


def agent_model() -> ScriptedModel:
    return ScriptedModel(agent_policy, model_id="scripted:night-agent")


def proposer_model() -> ScriptedModel:
    return ScriptedModel(proposer_policy, model_id="scripted:night-proposer")


def night_config(repo: Path, state: Path, **kw: Any) -> NightlyConfig:
    data: dict[str, Any] = {
        "agent_model": "scripted:night-agent",
        "judge_model": "scripted:judge",
        "proposer_model": "scripted:night-proposer",
        "proposer_format": "diff",
        "iterations_per_bucket": 2,
        "max_buckets": 3,
        "assumed_tokens_per_trial": 60,
        "repo": repo,
        "state_dir": state,
    }
    return NightlyConfig.model_validate(data | kw)


def clients(agent: ScriptedModel | None = None) -> dict[str, Any]:
    return {"agent": agent or agent_model(), "judge": policies.judge_model(),
            "proposer": proposer_model()}


FAST = {"trials": 1, "confirm_trials": 1}
PRICES = {"scripted:night-agent": {"input": 1000.0, "output": 1000.0}}


def night(repo: Path, state: Path, *, agent: ScriptedModel | None = None,
          proposer: ScriptedModel | None = None, **kw: Any) -> NightResult:
    events: list[str] = []
    extra = {k: kw.pop(k) for k in ("resume", "push", "open_pr") if k in kw}
    models = clients(agent) | ({"proposer": proposer} if proposer else {})
    result = asyncio.run(run_nightly(
        night_config(repo, state, **(FAST | kw)), **models, **extra,
        on_event=lambda e: events.append(e.message) if isinstance(e, Phase) else None))
    result.checkpoint.notes.extend(f"event: {e}" for e in events)
    return result


def outcomes(result: NightResult) -> list[tuple[str, str]]:
    return [(s.id, s.outcome) for s in result.checkpoint.steps]


def accepted(repo: Path, result: NightResult) -> list[tuple[str, str, str]]:
    """(suite, bucket, prompt text at the branch) of every accepted branch."""
    out = []
    for a in result.summary.accepted:
        text = _git(repo, "show", f"{a.branch}:prompts/{a.suite}.md")
        out.append((a.suite, a.bucket, text))
    return out


