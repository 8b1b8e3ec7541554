"""Hand-built outcomes, transcripts and grading contexts for grader tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from promptloop.agents.llm.types import ModelClient
from promptloop.agents.transcript import ToolCallRecord, Transcript
from promptloop.agents.workspace import WorkspaceDiff
from promptloop.graders.base import GradeContext

FACT = "2026/03/14.md#ts_2"
_T0 = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def rec(tool: str, result: str = "ok", *, error: bool = False, **arguments: Any) -> ToolCallRecord:
    """One recorded tool call."""
    return ToolCallRecord(
        call_id=f"c_{tool}_{id(arguments)}",
        tool_name=tool,
        arguments=arguments,
        result=result,
        is_error=error,
        started_at=_T0,
        ended_at=_T0,
    )


def card_outcome(**overrides: Any) -> dict[str, Any]:
    """A complete, successfully saved card outcome; override keys to break it."""
    card = {
        "fact_id": FACT,
        "timestamp": 1773478800,
        "status": "completed",
        "tags": [{"name": "Health", "icon": "heart"}],
        "ui_configs": [
            {"template_id": "metric", "data": {"items": [{"title": "Sleep", "value": 6.5}]}},
            {"template_id": "snippet", "data": {"text": "Slept badly after late coffee"}},
        ],
        "title": "Short night",
        "address": "Lisbon",
    }
    outcome: dict[str, Any] = {
        "is_complete": True,
        "card_save_tool_called": True,
        "card_path": "Cards/2026/03/14_ts_2.yaml",
        "persisted_fact_id": FACT,
        "status": "completed",
        "has_title": True,
        "has_ui_configs": True,
        "missing_requirements": [],
        "failure_reason": None,
        "template_ids": ["metric", "snippet"],
        "card_tags": ["Health"],
        "card_yaml_blob": (
            f"fact_id: {FACT}\ntimestamp: 1773478800\nstatus: completed\n"
            "tags:\n- name: Health\n  icon: heart\nui_configs:\n- template_id: metric\n"
            "  data:\n    items:\n    - title: Sleep\n      value: 6.5\n"
            "- template_id: snippet\n  data:\n    text: Slept badly after late coffee\n"
            "title: Short night\naddress: Lisbon\n"
        ),
        "card": card,
    }
    outcome.update(overrides)
    return outcome


def pkm_outcome(
    *,
    before: dict[str, str] | None = None,
    after: dict[str, str] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """A persisted PKM outcome whose diff is computed from `before`/`after` file texts."""
    before = dict(before or {})
    after = dict(after if after is not None else before)
    diff = WorkspaceDiff(
        created=sorted(p for p in after if p not in before),
        modified=sorted(p for p in after if p in before and after[p] != before[p]),
        deleted=sorted(p for p in before if p not in after),
    )
    outcome: dict[str, Any] = {
        "is_complete": True,
        "wrote_para": True,
        "updated_insight": True,
        "skipped_pkm": False,
        "successful_pkm_mutation": True,
        "missing_requirements": [],
        "skip_evidence": None,
        "file_contents": after,
        "file_contents_before": before,
        "workspace_diff": diff,
        "insight": None,
    }
    outcome.update(overrides)
    return outcome


def skipped_outcome(**overrides: Any) -> dict[str, Any]:
    base = pkm_outcome(
        before={"Areas/Health/sleep.md": "# Sleep\n"},
        wrote_para=False,
        updated_insight=False,
        skipped_pkm=True,
        successful_pkm_mutation=False,
        skip_evidence="just a greeting",
    )
    base.update(overrides)
    return base


def ctx(
    outcome: dict[str, Any],
    calls: list[ToolCallRecord] | None = None,
    *,
    agent: str = "pkm_agent",
    judge: ModelClient | None = None,
    expected_outcome: dict[str, Any] | None = None,
    content: str = "Slept 6.5 hours, coffee after 4pm again.",
) -> GradeContext:
    return GradeContext(
        task_id="t1",
        agent_name=agent,
        fact_id=FACT,
        input_content=content,
        outcome=outcome,
        transcript=Transcript(tool_calls=list(calls or [])),
        expected_outcome=expected_outcome,
        judge=judge,
    )
