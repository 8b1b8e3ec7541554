"""The scripted action-items model gives an optimizer real signal on the example suite: with the
agent's own prompt it fails the relative due dates and the notes without tasks, the right
sentence fixes each bucket without breaking another, and the over-broad rule breaks buckets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.scripted import Request
from promptloop.agents.llm.types import Message
from promptloop.agents.transcript import Transcript
from promptloop.graders.base import GradeContext
from tests.examples.action_items_policy import (
    DATE_RULE,
    HARMFUL_RULE,
    NONE_RULE,
    action_items_policy,
    rubric_judge_policy,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "action-items"
CODE_GRADERS = ("json_path", "json_schema")
BASE_PROMPT = (EXAMPLE / "agent" / "prompt.js").read_text().split("`")[1]
DATE_SENTENCE = ("Resolve relative dates such as 'by Friday' or 'tomorrow' against the meeting "
                 "date and write them as YYYY-MM-DD.")
NONE_SENTENCE = "When nobody has anything to do, return an empty list of items."
HARM_SENTENCE = "Only @mentions are action items."


def tasks() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((EXAMPLE / "evals").rglob("task.json"))]


def outcome(system: str, task: dict[str, Any]) -> dict[str, Any]:
    """What the Node agent would return for the scripted model's answer."""
    user = f"Meeting date: 2026-03-10 (Tuesday)\n\nMeeting notes:\n{task['input']['content']}"
    req = Request([Message.system(system), Message.user(user)], [], None)
    data = json.loads(action_items_policy(req).text)
    return {**data, "n_items": len(data["items"])}


async def passed(task: dict[str, Any], out: dict[str, Any]) -> bool:
    from promptloop.graders.registry import run_grader

    ctx = GradeContext(task_id=task["id"], agent_name="action_items",
                       fact_id=task["input"]["fact_id"], input_content=task["input"]["content"],
                       outcome=out, transcript=Transcript())
    for g in task["graders"]:
        if g["name"] in CODE_GRADERS:
            score = await run_grader(g["name"], g["config"], ctx)
            if not score.passed:
                return False
    return True


async def failing(system: str) -> dict[str, set[str]]:
    """bucket -> ids of the tasks whose code graders fail under `system`."""
    from promptloop.graders.registry import known_graders

    if not set(CODE_GRADERS) <= set(known_graders()):
        pytest.skip("the general graders (graders/general.py) are not registered yet")
    out: dict[str, set[str]] = {}
    for task in tasks():
        bucket = out.setdefault(task["metadata"]["failure_bucket"], set())
        if not await passed(task, outcome(system, task)):
            bucket.add(task["id"])
    return out


def test_the_base_prompt_has_none_of_the_rules() -> None:
    lower = BASE_PROMPT.lower()
    assert DATE_RULE not in lower and NONE_RULE not in lower and HARMFUL_RULE not in lower
    assert DATE_RULE in DATE_SENTENCE.lower() and NONE_RULE in NONE_SENTENCE.lower()
    assert HARMFUL_RULE in HARM_SENTENCE.lower()


async def test_the_base_prompt_fails_two_buckets() -> None:
    got = await failing(BASE_PROMPT)
    assert got["owner_extraction"] == set() and got["multiple_items"] == set()
    assert got["due_dates"] == {"ai-due-friday", "ai-due-tomorrow", "ai-due-next-monday",
                                "ai-due-end-of-month"}
    assert got["no_action_items"] == {"ai-none-status", "ai-none-decisions", "ai-none-done",
                                      "ai-none-social"}


async def test_each_rule_fixes_its_bucket_and_breaks_nothing() -> None:
    dates = await failing(f"{BASE_PROMPT}\n{DATE_SENTENCE}")
    assert dates["due_dates"] == set()
    assert dates["no_action_items"] == (await failing(BASE_PROMPT))["no_action_items"]
    empty = await failing(f"{BASE_PROMPT}\n{NONE_SENTENCE}")
    assert empty["no_action_items"] == set() and empty["owner_extraction"] == set()
    both = await failing(f"{BASE_PROMPT}\n{DATE_SENTENCE}\n{NONE_SENTENCE}")
    assert all(not ids for ids in both.values()), both


async def test_the_over_broad_rule_breaks_other_buckets() -> None:
    got = await failing(f"{BASE_PROMPT}\n{NONE_SENTENCE}\n{HARM_SENTENCE}")
    assert got["no_action_items"] == set()
    assert got["owner_extraction"] - {"ai-owner-mention"} and got["multiple_items"]


def test_the_scripted_judge_grades_every_listed_dimension() -> None:
    prompt = "## Dimensions\n- `completeness`\n- `faithfulness`\n\n## Answer format\n..."
    req = Request([Message.user(prompt)], [], None)
    assert json.loads(rubric_judge_policy(req).text) == {
        "completeness": 4, "faithfulness": 4, "rationale": "scripted judge"}
