"""The report store: `index.jsonl`, `reports/<run>.json` (SPEC section 6 shape) and traces.

A report carries the SPEC camelCase sections for other tools plus the full `RunResult` under
the key "promptloop", so `load_run` gives back exactly what was saved.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import to_jsonable_python

from agents.llm.types import Message
from agents.transcript import Transcript
from optimizer.core.pricing import PriceOverrides
from optimizer.core.results import RunResult, TrialResult
from optimizer.report.summary import RunSummary, summarize
from optimizer.run.cache import atomic_write_text

REPORT_VERSION = 1
REPORT_FORMAT = "promptloop-report"
INDEX_FILE = "index.jsonl"


class ReportError(Exception):
    """A report or index file is missing or unreadable; the message names the file."""


class RunNotFoundError(ReportError):
    """No saved run has the requested name."""


class RunIndexEntry(BaseModel):
    """One line of index.jsonl (SPEC keys first, then ours)."""

    # Unknown keys are ignored so an index written by a newer version still lists.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    run_name: str
    suite_name: str
    suite_kind: str
    started_at: datetime
    ended_at: datetime
    task_pass_rate: float | None
    trial_pass_rate: float | None
    num_trials: int
    errored_trials: int = 0
    agent_name: str = ""
    agent_model: str = ""
    prompt_hash: str | None = None
    git_commit: str | None = None


def default_store_dir(state_dir: Path) -> Path:
    return state_dir / "runs"


def _safe_name(run_name: str) -> str:
    if not run_name or "/" in run_name or "\\" in run_name or run_name.startswith("."):
        raise ReportError(f"run name {run_name!r} cannot be used as a file name")
    return run_name


def report_path(store_dir: Path, run_name: str) -> Path:
    return store_dir / "reports" / f"{_safe_name(run_name)}.json"


def trace_path(store_dir: Path, run_name: str) -> Path:
    return store_dir / "traces" / f"{_safe_name(run_name)}.jsonl"


# --- SPEC-shaped report ----------------------------------------------------------------


def _camel_top(data: Mapping[str, Any]) -> dict[str, Any]:
    """camelCase the keys of one level only (nested user data such as arguments stays as is)."""
    return {to_camel(k): v for k, v in data.items()}


def _message(m: Message) -> dict[str, Any]:
    data = _camel_top(m.model_dump(mode="json"))
    data["toolCalls"] = [_camel_top(c) for c in data["toolCalls"]]
    return data


def _transcript(t: Transcript) -> dict[str, Any]:
    return {
        "messages": [_message(m) for m in t.messages],
        "toolCalls": [
            _camel_top(c.model_dump(mode="json", exclude={"raw_arguments"})) for c in t.tool_calls
        ],
        "events": [e.model_dump(mode="json") for e in t.events],
        "metrics": {
            "nTurns": t.metrics.n_turns,
            "nToolCalls": t.metrics.n_tool_calls,
            "nTotalTokens": t.metrics.n_total_tokens,
            "nModelCalls": t.metrics.n_model_calls,
            "nRetries": t.metrics.n_retries,
            "usage": _camel_top(t.metrics.usage.model_dump(mode="json")),
        },
        "completed": t.completed,
        "missingRequirements": list(t.missing_requirements),
    }


def _trial(run: RunResult, t: TrialResult) -> dict[str, Any]:
    outcome = dict(t.outcome)
    diff = outcome.pop("workspace_diff", None)
    return {
        "trial": {
            "runName": run.run_name,
            "suiteName": run.suite_name,
            "taskId": t.task_id,
            "trialIndex": t.trial_index,
            "startedAt": t.started_at.isoformat(),
            "endedAt": t.ended_at.isoformat(),
            "status": t.status,
            "failureReason": t.failure_reason,
        },
        "transcript": _transcript(t.transcript),
        "outcome": {
            "environmentState": to_jsonable_python(outcome),
            "workspaceDiff": to_jsonable_python(diff),
        },
        "scores": [s.model_dump(mode="json") for s in t.scores],
        "bucket": t.bucket,
        "score": t.score,
        "cached": t.cached,
        "infraError": t.infra_error,
    }


def build_report(run: RunResult, summary: RunSummary) -> dict[str, Any]:
    """The JSON document saved as reports/<runName>.json."""
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "runName": run.run_name,
        "suiteName": run.suite_name,
        "suiteKind": run.suite_kind,
        "agentName": run.agent_name,
        "startedAt": run.started_at.isoformat(),
        "endedAt": run.ended_at.isoformat(),
        "taskPassRate": summary.task_pass_rate,
        "trialPassRate": summary.trial_pass_rate,
        "numTrials": summary.num_trials,
        "erroredTrials": summary.errored_trials,
        "suite": {
            "name": run.suite_name,
            "kind": run.suite_kind,
            "taskIds": list(run.task_ids),
            "taskPassThreshold": run.task_pass_threshold,
            "requireReferenceSolution": run.require_reference_solution,
        },
        "summary": summary.model_dump(mode="json", by_alias=True),
        "provenance": _camel_top(run.provenance.model_dump(mode="json")),
        "trials": [_trial(run, t) for t in run.trials],
        "promptloop": run.model_dump(mode="json"),
    }


def index_entry(run: RunResult, summary: RunSummary) -> RunIndexEntry:
    hashes = run.provenance.prompt_hashes
    phash = hashes.get(run.agent_name) or next(iter(hashes.values()), None)
    return RunIndexEntry(
        run_name=run.run_name,
        suite_name=run.suite_name,
        suite_kind=run.suite_kind,
        started_at=run.started_at,
        ended_at=run.ended_at,
        task_pass_rate=summary.task_pass_rate,
        trial_pass_rate=summary.trial_pass_rate,
        num_trials=summary.num_trials,
        errored_trials=summary.errored_trials,
        agent_name=run.agent_name,
        agent_model=run.provenance.agent_model,
        prompt_hash=phash,
        git_commit=run.provenance.git_commit,
    )


# --- writing ---------------------------------------------------------------------------


def _append_index(store_dir: Path, entry: RunIndexEntry) -> None:
    """Append the entry, or replace the line of a run saved before under the same name."""
    path = store_dir / INDEX_FILE
    line = entry.model_dump_json(by_alias=True)
    with FileLock(str(path) + ".lock", timeout=30):
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        names = [_line_name(s) for s in lines]
        if entry.run_name in names:
            lines = [line if n == entry.run_name else s for s, n in zip(lines, names, strict=True)]
        else:
            lines.append(line)
        atomic_write_text(path, "".join(s + "\n" for s in lines if s.strip()))


def _line_name(line: str) -> str | None:
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return None
    return data.get("runName") if isinstance(data, dict) else None


def trace_lines(run: RunResult, summary: RunSummary) -> list[dict[str, Any]]:
    """trial_start / trial_end lines in time order, then one run_end line."""
    events: list[tuple[datetime, int, int, dict[str, Any]]] = []
    for n, t in enumerate(run.trials):
        base = {"runName": run.run_name, "taskId": t.task_id, "trialIndex": t.trial_index,
                "bucket": t.bucket}
        events.append((t.started_at, 0, n, {"type": "trial_start",
                                            "at": t.started_at.isoformat(), **base}))
        events.append((t.ended_at, 1, n, {
            "type": "trial_end", "at": t.ended_at.isoformat(), **base,
            "status": t.status, "score": t.score if t.counts else None, "cached": t.cached,
            "durationS": round((t.ended_at - t.started_at).total_seconds(), 3),
            "failureReason": t.failure_reason, "infraError": t.infra_error,
        }))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    lines = [e[3] for e in events]
    lines.append({
        "type": "run_end", "at": run.ended_at.isoformat(), "runName": run.run_name,
        "suiteName": run.suite_name, "taskPassRate": summary.task_pass_rate,
        "trialPassRate": summary.trial_pass_rate, "numTrials": summary.num_trials,
        "erroredTrials": summary.errored_trials, "allErrored": summary.all_errored,
    })
    return lines


def write_trace(run: RunResult, store_dir: Path, summary: RunSummary | None = None) -> Path:
    path = trace_path(store_dir, run.run_name)
    lines = trace_lines(run, summary or summarize(run))
    atomic_write_text(path, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    return path


def save_run(
    run: RunResult,
    store_dir: Path,
    *,
    summary: RunSummary | None = None,
    prices: PriceOverrides | None = None,
) -> Path:
    """Write the report and the trace, then record the run in index.jsonl; returns the report."""
    summary = summary or summarize(run, prices=prices)
    path = report_path(store_dir, run.run_name)
    report = build_report(run, summary)
    atomic_write_text(path, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    write_trace(run, store_dir, summary)
    _append_index(store_dir, index_entry(run, summary))
    return path


# --- reading ---------------------------------------------------------------------------


def list_runs(store_dir: Path) -> list[RunIndexEntry]:
    """Saved runs in the order they were saved (oldest first)."""
    path = store_dir / INDEX_FILE
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(RunIndexEntry.model_validate_json(line))
        except ValidationError as err:
            raise ReportError(f"{path}: line {n} is not a valid index entry: {err}") from err
    return out


def load_report_file(path: Path) -> RunResult:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ReportError(f"{path}: cannot read ({err.strerror})") from err
    except json.JSONDecodeError as err:
        raise ReportError(f"{path}: invalid JSON at line {err.lineno}: {err.msg}") from err
    if not isinstance(data, dict) or "promptloop" not in data:
        raise ReportError(f"{path}: not a promptloop report (no 'promptloop' section)")
    try:
        return RunResult.model_validate(data["promptloop"])
    except ValidationError as err:
        raise ReportError(f"{path}: the 'promptloop' section is invalid: {err}") from err


def load_run(store_dir: Path, run_name: str) -> RunResult:
    """Load a saved run by name, "latest", or a path to a report JSON file."""
    if run_name == "latest":
        runs = list_runs(store_dir)
        if not runs:
            raise RunNotFoundError(f"no saved runs in {store_dir}")
        run_name = runs[-1].run_name
    candidate = Path(run_name)
    if run_name.endswith(".json") or candidate.is_file():
        if not candidate.is_file():
            raise RunNotFoundError(f"{candidate}: report file not found")
        return load_report_file(candidate)
    path = report_path(store_dir, run_name)
    if not path.is_file():
        raise RunNotFoundError(_not_found_message(store_dir, run_name))
    return load_report_file(path)


def _not_found_message(store_dir: Path, run_name: str) -> str:
    names = [r.run_name for r in list_runs(store_dir)]
    if not names and (store_dir / "reports").is_dir():
        names = sorted(p.stem for p in (store_dir / "reports").glob("*.json"))
    msg = f"no run named '{run_name}' in {store_dir}"
    close = difflib.get_close_matches(run_name, names, n=1)
    if close:
        msg += f"; did you mean '{close[0]}'?"
    if names:
        msg += " Recent runs: " + ", ".join(reversed(names[-5:]))
    else:
        msg += " (the store holds no runs yet)"
    return msg
