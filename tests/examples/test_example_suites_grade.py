"""The example suites grade what they mean to: each task's reference solution passes all its
code graders (json_path, json_schema), and a wrong answer fails at least one of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.transcript import Transcript
from promptloop.graders.base import GradeContext
from promptloop.optimizer.workflows.init import TEMPLATE_DIR

ROOT = Path(__file__).resolve().parents[2]
SUITES = {
    "action_items": ROOT / "examples" / "action-items" / "evals",
    "example": TEMPLATE_DIR / "evals" / "example",
}
CODE_GRADERS = ("json_path", "json_schema")


def cases() -> list[Any]:
    return [pytest.param(agent, path, id=f"{agent}:{path.parent.name}")
            for agent, root in SUITES.items()
            for path in sorted((root / "tasks").rglob("task.json"))]


def wrong_answer(agent: str, expected: dict[str, Any]) -> dict[str, Any]:
    if agent == "example":
        return {"category": "other" if expected["category"] != "other" else "billing",
                "urgency": "normal" if expected["urgency"] != "normal" else "low"}
    if expected["items"]:
        return {"items": [], "summary": "", "n_items": 0}
    invented = {"task": "Follow up on the meeting", "owner": "Someone", "due": "2026-03-13"}
    return {"items": [invented], "summary": "", "n_items": 1}


async def grade(agent: str, task: dict[str, Any], outcome: dict[str, Any]) -> list[bool]:
    from promptloop.graders.registry import run_grader

    ctx = GradeContext(task_id=task["id"], agent_name=agent, fact_id=task["input"]["fact_id"],
                       input_content=task["input"]["content"], outcome=outcome,
                       transcript=Transcript())
    out = []
    for g in task["graders"]:
        if g["name"] in CODE_GRADERS:
            score = await run_grader(g["name"], g["config"], ctx)
            assert score.passed is not None, score.rationale
            out.append(bool(score.passed))
    return out


@pytest.mark.parametrize(("agent", "path"), cases())
async def test_reference_passes_and_a_wrong_answer_fails(agent: str, path: Path) -> None:
    from promptloop.graders.registry import known_graders

    if not set(CODE_GRADERS) <= set(known_graders()):
        pytest.skip("the general graders (graders/general.py) are not registered yet")
    task = json.loads(path.read_text())
    expected = dict(task["reference_solution"]["expected_outcome"])
    if agent == "action_items":
        expected.setdefault("summary", "The meeting was summarised.")
    assert all(await grade(agent, task, expected)), f"{task['id']}: the reference fails"
    assert not all(await grade(agent, task, wrong_answer(agent, expected))), (
        f"{task['id']}: a wrong answer passes every code grader")
