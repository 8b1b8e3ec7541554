"""Build small suites on disk for runner and loader tests (original framework layout)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CARD_GRADERS: list[dict[str, Any]] = [
    {"name": "card_completion", "config": {}},
    {"name": "card_template_choice", "config": {"expected_template_ids": ["transaction"]}},
]


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def task(
    task_id: str,
    content: str,
    n: int,
    *,
    bucket: str = "basics",
    graders: list[dict[str, Any]] | None = None,
    trials: int = 2,
    **extra: Any,
) -> dict[str, Any]:
    """A task.json body; `n` makes the fact id unique (ts_<n>)."""
    data: dict[str, Any] = {
        "id": task_id,
        "description": f"{bucket}: {task_id}",
        "trials_per_run": trials,
        "metadata": {"failure_bucket": bucket},
        "input": {"fact_id": f"2026/03/14.md#ts_{n}", "content": content},
        "graders": graders if graders is not None else CARD_GRADERS,
    }
    for key, value in extra.items():
        if key == "input":
            data["input"].update(value)
        else:
            data[key] = value
    return data


def suite(
    root: Path,
    tasks: list[dict[str, Any]],
    *,
    agent: str = "card_agent",
    kind: str = "capability",
    category: str = "cases",
    **config: Any,
) -> Path:
    """suite.json + tasks/<category>/<task id>/task.json; returns the suite root."""
    write_json(
        root / "suite.json", {"name": root.name, "agent_name": agent, "kind": kind, **config}
    )
    for t in tasks:
        write_json(root / "tasks" / category / str(t.get("id", "x")) / "task.json", t)
    return root


def card_tasks(count: int, trials: int = 2) -> list[dict[str, Any]]:
    items = [
        ("Coffee at Bean Bar $4.20", "coffee"),
        ("Bought boots for €89", "finance"),
        ("Notes from https://example.com/talk", "links"),
        ("Walked the dog by the canal", "plain"),
    ]
    out = []
    for i in range(count):
        content, bucket = items[i % len(items)]
        out.append(task(f"t{i:02d}", f"{content} #{i}", i + 1, bucket=bucket, trials=trials))
    return out
