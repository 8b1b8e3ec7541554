"""Our run in the original harness's report, trace and index shapes (docs/compat.md).

A format converter, one function per shape. Everything the original's shapes have no place for
(buckets, cache and infrastructure flags, provenance, token detail, typed assertion values)
is collected as "extras" and stored in a sibling file by store.py, so each trial is stored
once. readback.py is the inverse: original shapes plus extras give back the same `RunResult`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic.alias_generators import to_camel
from pydantic_core import to_jsonable_python

from promptloop.agents.llm.types import Message
from promptloop.agents.transcript import ToolCallRecord, Transcript
from promptloop.graders.base import Score
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.report.summary import RunSummary

EXTRAS_FORMAT = "promptloop-extras"
EXTRAS_VERSION = 2
DIFF_KEYS = frozenset({"created", "modified", "deleted", "snippets"})
"""Our workspace diff's keys; a diff of exactly these becomes the original's `workspaceDiff`."""
ORIGINAL_INDEX_KEYS = (
    "runName", "suiteName", "suiteKind", "startedAt", "endedAt", "taskPassRate",
    "trialPassRate", "numTrials",
)


def iso(at: datetime) -> str:
    return at.isoformat()


def camel_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """camelCase the keys of one level (nested data such as prompt hashes by agent stays)."""
    return {to_camel(k): v for k, v in data.items()}


def _text(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def _call_arguments(messages: list[Message]) -> dict[str, str]:
    """Call id -> the arguments the model sent, as a JSON string (the raw text when it was not
    a JSON object), for the `arguments` of the original's tool results."""
    out: dict[str, str] = {}
    for m in messages:
        for c in m.tool_calls:
            raw = c.raw_arguments if c.parse_error and c.raw_arguments is not None else None
            out[c.id] = raw if raw is not None else json.dumps(c.arguments, ensure_ascii=False)
    return out


def message_doc(
    m: Message, arguments: Mapping[str, str], times: Mapping[str, str], fallback_at: str
) -> dict[str, Any]:
    """One message in the original's shape (system / user / assistant / tool). A tool result's
    `arguments` are those of its call, its `timestamp` the call's end (else `fallback_at`)."""
    if m.role == "system":
        return {"role": "system", "content": m.content}
    if m.role == "user":
        return {"role": "user", "contents": _text(m.content)}
    if m.role == "assistant":
        doc: dict[str, Any] = {"role": "assistant"}
        if m.content:
            doc["content"] = m.content
        doc["functionCalls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
        ]
        return doc
    call_id = m.tool_call_id or ""
    result = {
        "id": call_id,
        "name": m.tool_name or "",
        "isError": m.is_error,
        "arguments": arguments.get(call_id, "{}"),
        "content": _text(m.content),
        "metadata": {},
        "timestamp": times.get(call_id, fallback_at),
    }
    return {"role": "tool", "results": [result]}


def tool_call_doc(c: ToolCallRecord) -> dict[str, Any]:
    """One recorded tool call: a successful result as `result: {text}`, a failed one as
    `errorMessage` (the original's result is an object; ours is the text the model saw)."""
    doc: dict[str, Any] = {
        "callId": c.call_id,
        "toolName": c.tool_name,
        "arguments": c.arguments,
        "startedAt": iso(c.started_at),
        "endedAt": iso(c.ended_at),
        "isError": c.is_error,
    }
    if c.is_error:
        doc["errorMessage"] = c.result
    else:
        doc["result"] = {"text": c.result}
    return doc


def transcript_doc(t: Transcript, fallback_at: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    """The original's transcript, and our extras of it (completion, token detail, raw text of
    tool calls whose arguments did not parse)."""
    times = {c.call_id: iso(c.ended_at) for c in t.tool_calls}
    arguments = _call_arguments(t.messages)
    fallback = iso(fallback_at)
    doc = {
        "messages": [message_doc(m, arguments, times, fallback) for m in t.messages],
        "toolCalls": [tool_call_doc(c) for c in t.tool_calls],
        "reasoningSteps": [],
        "events": [
            {"at": iso(e.at), "kind": e.kind, "message": e.detail}
            | ({"details": to_jsonable_python(e.data)} if e.data else {})
            for e in t.events
        ],
        "metrics": {
            "nTurns": t.metrics.n_turns,
            "nToolCalls": t.metrics.n_tool_calls,
            "nTotalTokens": t.metrics.n_total_tokens,
        },
    }
    m = t.metrics
    extras: dict[str, Any] = {
        "completed": t.completed,
        "missingRequirements": list(t.missing_requirements),
        "metrics": {
            "nModelCalls": m.n_model_calls,
            "nRetries": m.n_retries,
            "nRuns": m.n_runs,
            "usage": camel_keys(m.usage.model_dump(mode="json")),
            "modelSeconds": m.model_seconds,
            "toolSeconds": m.tool_seconds,
        },
    }
    unparsed = [
        {"message": i, "call": j, "rawArguments": c.raw_arguments, "parseError": c.parse_error}
        for i, msg in enumerate(t.messages)
        for j, c in enumerate(msg.tool_calls)
        if c.raw_arguments is not None or c.parse_error is not None
    ]
    if unparsed:
        extras["unparsedCalls"] = unparsed
    raw = {str(i): c.raw_arguments for i, c in enumerate(t.tool_calls) if c.raw_arguments}
    if raw:
        extras["rawArguments"] = raw
    return doc, extras


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(
        to_jsonable_python(value), ensure_ascii=False
    )


def score_doc(s: Score) -> tuple[dict[str, Any], dict[str, Any]]:
    """One score in the original's shape (assertion values as strings), and the typed values
    of the assertions whose actual/expected were not strings, keyed by assertion index."""
    assertions = []
    typed: dict[str, Any] = {}
    for i, a in enumerate(s.assertions):
        doc: dict[str, Any] = {"description": a.description, "passed": a.passed}
        for key, value in (("actual", a.actual), ("expected", a.expected)):
            if value is None:
                continue
            doc[key] = _as_text(value)
            if not isinstance(value, str):
                typed.setdefault(str(i), {})[key] = to_jsonable_python(value)
        assertions.append(doc)
    out: dict[str, Any] = {"graderName": s.grader, "value": s.value}
    if s.passed is not None:
        out["passed"] = s.passed
    out["assertions"] = assertions
    if s.rationale:
        out["rationale"] = s.rationale
    if s.metadata:
        out["metadata"] = to_jsonable_python(s.metadata)
    return out, typed


def outcome_doc(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """`environmentState` (our outcome keys) and the workspace diff as `workspaceDiff`."""
    state = dict(outcome)
    diff = state.get("workspace_diff")
    doc: dict[str, Any] = {}
    if isinstance(diff, Mapping) and set(diff) == DIFF_KEYS:
        del state["workspace_diff"]
        doc["workspaceDiff"] = {
            "created": list(diff["created"]),
            "modified": list(diff["modified"]),
            "deleted": list(diff["deleted"]),
            "contentSnippets": dict(diff["snippets"]),
        }
    return {"environmentState": to_jsonable_python(state), **to_jsonable_python(doc)}


def trial_head(run: RunResult, t: TrialResult) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "runName": run.run_name,
        "suiteName": run.suite_name,
        "taskId": t.task_id,
        "trialIndex": t.trial_index,
        "startedAt": iso(t.started_at),
        "endedAt": iso(t.ended_at),
        "status": t.status,
    }
    if t.failure_reason is not None:
        doc["failureReason"] = t.failure_reason
    return doc


def trial_doc(run: RunResult, t: TrialResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """One trial `{trial, transcript, outcome, scores}` and its extras."""
    transcript, transcript_extras = transcript_doc(t.transcript, t.ended_at)
    scores = [score_doc(s) for s in t.scores]
    doc = {
        "trial": trial_head(run, t),
        "transcript": transcript,
        "outcome": outcome_doc(t.outcome),
        "scores": [d for d, _ in scores],
    }
    extras: dict[str, Any] = {
        "taskId": t.task_id,
        "trialIndex": t.trial_index,
        "bucket": t.bucket,
        "cached": t.cached,
        "infraError": t.infra_error,
        "agentError": t.agent_error,
        "seed": t.seed,
        "transcript": transcript_extras,
    }
    typed = {str(i): values for i, (_, values) in enumerate(scores) if values}
    if typed:
        extras["assertionValues"] = typed
    return doc, extras


def report_docs(run: RunResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """The original's `reports/<runName>.json` (no aggregates) and our extras document."""
    trials = [trial_doc(run, t) for t in run.trials]
    report = {
        "runName": run.run_name,
        "suite": {
            "name": run.suite_name,
            "kind": run.suite_kind,
            "taskIds": list(run.task_ids),
            "taskPassThreshold": run.task_pass_threshold,
            "requireReferenceSolution": run.require_reference_solution,
        },
        "startedAt": iso(run.started_at),
        "endedAt": iso(run.ended_at),
        "trials": [doc for doc, _ in trials],
    }
    extras = {
        "format": EXTRAS_FORMAT,
        "version": EXTRAS_VERSION,
        "runName": run.run_name,
        "resultsVersion": run.version,
        "agentName": run.agent_name,
        "suiteRoot": run.suite_root,
        "taskBuckets": dict(run.task_buckets),
        "taskInfo": {k: v.model_dump(mode="json") for k, v in run.task_info.items()},
        "trialsPerTask": dict(run.trials_per_task),
        "provenance": camel_keys(run.provenance.model_dump(mode="json")),
        "concurrency": (camel_keys(run.concurrency.model_dump(mode="json"))
                        if run.concurrency else None),
        "trials": [x for _, x in trials],
    }
    return report, extras


def _task_doc(run: RunResult, task_id: str, bucket: str) -> dict[str, Any]:
    info = run.task_info.get(task_id)
    metadata = dict(info.metadata) if info else {"failure_bucket": bucket}
    return {"id": task_id, "description": info.description if info else "", "metadata": metadata}


def trace_docs(
    run: RunResult, summary: RunSummary, report: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The original's trace: trial_start / trial_end lines in time order, then run_end.
    `report` (from `report_docs(run)`) saves converting every trial a second time."""
    docs = report["trials"] if report is not None else [trial_doc(run, t)[0] for t in run.trials]
    events: list[tuple[datetime, int, int, dict[str, Any]]] = []
    for n, (t, doc) in enumerate(zip(run.trials, docs, strict=True)):
        start = {"kind": "trial_start", "at": iso(t.started_at), "trial": doc["trial"],
                 "task": _task_doc(run, t.task_id, t.bucket)}
        events.append((t.started_at, 0, n, start))
        events.append((t.ended_at, 1, n, {"kind": "trial_end", "at": iso(t.ended_at), **doc}))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    original = summary.original
    aggregate: dict[str, float] = {
        "task_pass_rate": original.task_pass_rate,
        "trial_pass_rate": original.trial_pass_rate,
    }
    aggregate |= {f"grader_mean.{k}": v for k, v in original.grader_means.items()}
    end = {"kind": "run_end", "at": iso(run.ended_at), "runName": run.run_name,
           "suiteName": run.suite_name, "aggregateScores": aggregate}
    return [e[3] for e in events] + [end]


def index_docs(run: RunResult, summary: RunSummary) -> tuple[dict[str, Any], dict[str, Any]]:
    """The original's index line (its rates: errored trials count as not passed) and ours
    (errored trials excluded, provenance) for index.promptloop.jsonl."""
    line = {
        "runName": run.run_name,
        "suiteName": run.suite_name,
        "suiteKind": run.suite_kind,
        "startedAt": iso(run.started_at),
        "endedAt": iso(run.ended_at),
        "taskPassRate": summary.original.task_pass_rate,
        "trialPassRate": summary.original.trial_pass_rate,
        "numTrials": summary.num_trials,
    }
    hashes = run.provenance.prompt_hashes
    extras = {
        "runName": run.run_name,
        "countedTaskPassRate": summary.counted_task_pass_rate,
        "countedTrialPassRate": summary.counted_trial_pass_rate,
        "erroredTrials": summary.errored_trials,
        "agentName": run.agent_name,
        "agentModel": run.provenance.agent_model,
        "promptHash": hashes.get(run.agent_name) or next(iter(hashes.values()), None),
        "gitCommit": run.provenance.git_commit,
        "role": run.provenance.role,
        "branch": run.provenance.branch,
        "candidateCommit": run.provenance.candidate_commit,
        "verdict": run.provenance.verdict,
        "session": run.provenance.session,
        "freshTrials": sum(t.counts and not t.cached for t in run.trials),
        "mode": run.provenance.mode,
    }
    return line, extras
