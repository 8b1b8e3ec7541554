"""Read the original harness's report shapes back into a `RunResult` (the inverse of shapes.py).

With our extras document the result equals the run that was saved. Without it (a report the
original harness wrote) every field the original has is read, and the rest takes its default:
buckets and task descriptions come from the trace's trial_start lines when given, completion
from the outcome, and token counts are unknown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic.alias_generators import to_snake

from promptloop.optimizer.core.results import RunResult, TaskInfo
from promptloop.optimizer.report.summary import UNBUCKETED

Doc = Mapping[str, Any]


class ShapeError(ValueError):
    """A document does not have the original's report shape; the message says where."""


def snake_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of shapes.camel_keys (one level)."""
    return {to_snake(k): v for k, v in data.items()}


def _texts(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))


def _arguments(value: Any) -> tuple[dict[str, Any], str | None]:
    """(parsed arguments, raw text when they were a string that is not a JSON object)."""
    if isinstance(value, Mapping):
        return dict(value), None
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return {}, value
        return (parsed, None) if isinstance(parsed, dict) else ({}, value)
    return {}, None


def messages_from_docs(docs: Sequence[Doc], unparsed: Sequence[Doc] = ()) -> list[dict[str, Any]]:
    """Our messages (as dicts) from the original's; a tool message with several results
    becomes one message per result. `unparsed` restores calls whose arguments did not parse."""
    out: list[dict[str, Any]] = []
    for d in docs:
        role = d.get("role")
        if role == "tool":
            for r in d.get("results") or []:
                out.append({"role": "tool", "content": _texts(r.get("content")),
                            "tool_call_id": r.get("id") or None,
                            "tool_name": r.get("name") or None,
                            "is_error": bool(r.get("isError"))})
            continue
        if role not in ("system", "user", "assistant"):
            raise ShapeError(f"message of unknown role {role!r}")
        content = d.get("content")
        text = content if isinstance(content, str) else _texts(d.get("contents"))
        calls = []
        for c in d.get("functionCalls") or []:
            args, raw = _arguments(c.get("arguments"))
            calls.append({"id": str(c.get("id", "")), "name": str(c.get("name", "")),
                          "arguments": args, "raw_arguments": raw})
        out.append({"role": role, "content": text, "tool_calls": calls})
    for u in unparsed:
        call = out[int(u["message"])]["tool_calls"][int(u["call"])]
        call.update(raw_arguments=u.get("rawArguments"), parse_error=u.get("parseError"))
    return out


def _result_text(doc: Doc) -> str:
    if doc.get("isError") and isinstance(doc.get("errorMessage"), str):
        return str(doc["errorMessage"])
    result = doc.get("result")
    if result is None:
        return str(doc.get("errorMessage") or "")
    if isinstance(result, Mapping) and set(result) == {"text"} and isinstance(result["text"], str):
        return result["text"]
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def transcript_from_doc(doc: Doc, extras: Doc, outcome: Doc) -> dict[str, Any]:
    raw = extras.get("rawArguments") or {}
    calls = []
    for i, c in enumerate(doc.get("toolCalls") or []):
        args, unparsed = _arguments(c.get("arguments"))
        calls.append({"call_id": c.get("callId", ""), "tool_name": c.get("toolName", ""),
                      "arguments": args, "raw_arguments": raw.get(str(i), unparsed),
                      "result": _result_text(c), "is_error": bool(c.get("isError")),
                      "started_at": c.get("startedAt"), "ended_at": c.get("endedAt")})
    metrics = doc.get("metrics") or {}
    ours = extras.get("metrics") or {}
    missing = extras.get("missingRequirements", outcome.get("missing_requirements") or [])
    return {
        "messages": messages_from_docs(doc.get("messages") or [], extras.get("unparsedCalls", ())),
        "tool_calls": calls,
        "events": [{"kind": e.get("kind", ""), "at": e.get("at"), "detail": e.get("message", ""),
                    "data": e.get("details") or {}} for e in doc.get("events") or []],
        "metrics": {
            "n_turns": metrics.get("nTurns", 0),
            "n_tool_calls": metrics.get("nToolCalls", 0),
            "n_model_calls": ours.get("nModelCalls", 0),
            "n_retries": ours.get("nRetries", 0),
            "n_runs": ours.get("nRuns", 0),
            "usage": snake_keys(ours.get("usage") or {}),
            "model_seconds": ours.get("modelSeconds", 0.0),
            "tool_seconds": ours.get("toolSeconds", 0.0),
        },
        "completed": extras.get("completed", bool(outcome.get("is_complete"))),
        "missing_requirements": list(missing),
    }


def outcome_from_doc(doc: Doc) -> dict[str, Any]:
    state = dict(doc.get("environmentState") or {})
    diff = doc.get("workspaceDiff")
    if isinstance(diff, Mapping):
        state["workspace_diff"] = {
            "created": list(diff.get("created") or []),
            "modified": list(diff.get("modified") or []),
            "deleted": list(diff.get("deleted") or []),
            "snippets": dict(diff.get("contentSnippets") or {}),
        }
    return state


def score_from_doc(doc: Doc, typed: Doc) -> dict[str, Any]:
    assertions = []
    for i, a in enumerate(doc.get("assertions") or []):
        values = typed.get(str(i), {})
        assertions.append({
            "description": a.get("description", ""),
            "passed": bool(a.get("passed")),
            "actual": values.get("actual", a.get("actual")),
            "expected": values.get("expected", a.get("expected")),
        })
    value, passed = doc.get("value"), doc.get("passed")
    metadata = dict(doc.get("metadata") or {})
    if value is None:
        passed = None
    elif passed is None:  # the original may omit it; decide as a code grader would
        passed = value + 1e-9 >= float(metadata.get("threshold", 1.0))
    return {"grader": doc.get("graderName", ""), "value": value, "passed": passed,
            "assertions": assertions, "rationale": doc.get("rationale") or "",
            "metadata": metadata}


def _trial_extras(extras: Doc) -> dict[tuple[str, int], Doc]:
    return {(str(x.get("taskId")), int(x.get("trialIndex", -1))): x
            for x in extras.get("trials") or []}


def trial_from_doc(doc: Doc, extras: Doc, buckets: Mapping[str, str]) -> dict[str, Any]:
    head = doc.get("trial")
    if not isinstance(head, Mapping):
        raise ShapeError("a trial has no 'trial' object")
    outcome = outcome_from_doc(doc.get("outcome") or {})
    typed = extras.get("assertionValues") or {}
    task_id = str(head.get("taskId", ""))
    return {
        "task_id": task_id,
        "bucket": extras.get("bucket", buckets.get(task_id, UNBUCKETED)),
        "trial_index": head.get("trialIndex", 0),
        "status": head.get("status"),
        "started_at": head.get("startedAt"),
        "ended_at": head.get("endedAt"),
        "failure_reason": head.get("failureReason"),
        "infra_error": extras.get("infraError"),
        "agent_error": extras.get("agentError"),
        "seed": extras.get("seed"),
        "transcript": transcript_from_doc(
            doc.get("transcript") or {}, extras.get("transcript") or {}, outcome
        ),
        "outcome": outcome,
        "scores": [score_from_doc(s, typed.get(str(i), {}))
                   for i, s in enumerate(doc.get("scores") or [])],
        "cached": bool(extras.get("cached", False)),
    }


def run_from_docs(
    report: Doc, extras: Doc | None = None, tasks: Mapping[str, TaskInfo] | None = None
) -> RunResult:
    """The run of an original-shaped report, with our extras when there are (else `tasks`,
    the descriptions and metadata from the run's trace, give the buckets)."""
    suite = report.get("suite")
    if not isinstance(suite, Mapping) or not isinstance(report.get("trials"), list):
        raise ShapeError("not a report of the original's shape (no 'suite' or 'trials')")
    extras = extras or {}
    info = {k: TaskInfo.model_validate(v) for k, v in (extras.get("taskInfo") or {}).items()}
    info = info or dict(tasks or {})
    buckets = extras.get("taskBuckets") or {
        k: v.metadata.get("failure_bucket", UNBUCKETED) for k, v in info.items()
    }
    by_key = _trial_extras(extras)
    trials = []
    for doc in report["trials"]:
        head = doc.get("trial") if isinstance(doc, Mapping) else None
        if not isinstance(head, Mapping):
            raise ShapeError("a trial has no 'trial' object")
        key = (str(head.get("taskId")), int(head.get("trialIndex", -1)))
        trials.append(trial_from_doc(doc, by_key.get(key, {}), buckets))
    return RunResult.model_validate({
        "version": extras.get("resultsVersion", 1),
        "run_name": report.get("runName", ""),
        "suite_name": suite.get("name", ""),
        "suite_kind": suite.get("kind", "mixed"),
        "agent_name": extras.get("agentName", ""),
        "suite_root": extras.get("suiteRoot", ""),
        "task_ids": list(suite.get("taskIds") or []),
        "task_buckets": buckets,
        "task_info": info,
        "task_pass_threshold": suite.get("taskPassThreshold", 1.0),
        "require_reference_solution": suite.get("requireReferenceSolution", False),
        "trials_per_task": extras.get("trialsPerTask") or {},
        "started_at": report.get("startedAt"),
        "ended_at": report.get("endedAt"),
        "provenance": snake_keys(extras.get("provenance") or {}),
        "concurrency": snake_keys(extras["concurrency"]) if extras.get("concurrency") else None,
        "trials": trials,
    })


def tasks_from_trace(lines: Sequence[Doc]) -> dict[str, TaskInfo]:
    """Task descriptions and metadata from a trace's trial_start lines."""
    out: dict[str, TaskInfo] = {}
    for line in lines:
        task = line.get("task")
        if line.get("kind") == "trial_start" and isinstance(task, Mapping) and "id" in task:
            out[str(task["id"])] = TaskInfo.of(
                str(task.get("description", "")), task.get("metadata") or {}
            )
    return out
