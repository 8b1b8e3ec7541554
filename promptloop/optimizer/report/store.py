"""The report store, in the original harness's shapes (docs/compat.md), plus our extras.

    index.jsonl                       one line per run: the original's eight keys and rates
    index.promptloop.jsonl            ours per run: rates without errored trials, provenance
    reports/<run>.json                the original's report: each trial stored once, no aggregates
    reports/<run>.promptloop.json     ours: buckets, cache/infrastructure flags, provenance,
                                      token detail, typed assertion values (no transcripts)
    traces/<run>.jsonl                the original's trace: trial_start, trial_end, run_end

`load_run` gives back exactly the `RunResult` that was saved. It also reads reports written
before this layout (one document whose "promptloop" key held the whole run) and reports the
original harness wrote (no extras: buckets from its trace, our fields at their defaults).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.core.names import did_you_mean
from promptloop.optimizer.core.pricing import PriceOverrides
from promptloop.optimizer.core.results import RunResult, TaskInfo
from promptloop.optimizer.report.readback import ShapeError, run_from_docs, tasks_from_trace
from promptloop.optimizer.report.shapes import index_docs, report_docs, trace_docs
from promptloop.optimizer.report.summary import RunSummary, summarize

LEGACY_FORMAT = "promptloop-report"
"""The `format` of reports written before the original's layout (read, never written)."""
INDEX_FILE = "index.jsonl"
INDEX_EXTRAS_FILE = "index.promptloop.jsonl"
EXTRAS_SUFFIX = ".promptloop.json"
_OURS_IN_LEGACY_INDEX = ("erroredTrials", "agentName", "agentModel", "promptHash", "gitCommit")


class ReportError(Exception):
    """A report or index file is missing or unreadable; the message names the file."""


class RunNotFoundError(ReportError):
    """No saved run has the requested name."""


class RunIndexEntry(BaseModel):
    """One saved run as `list_runs` shows it: the index.jsonl line joined with ours.

    `task_pass_rate` / `trial_pass_rate` are ours (errored trials excluded; None when no trial
    counted), as in `RunSummary`; `original_*` are the rates index.jsonl holds (every trial
    counts), None for a line saved before they were recorded in a run with errored trials.
    """

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
    original_task_pass_rate: float | None = None
    original_trial_pass_rate: float | None = None
    errored_trials: int = 0
    agent_name: str = ""
    agent_model: str = ""
    prompt_hash: str | None = None
    git_commit: str | None = None
    role: str = ""
    """What the run was for (`Provenance.role`); empty for runs saved before roles."""
    branch: str | None = None
    candidate_commit: str | None = None
    verdict: str | None = None
    session: str | None = None
    """The command run that made it (`Provenance.session`: an optimize session's id for its
    runs); None for runs indexed before sessions were."""
    fresh_trials: int | None = None
    """Counted trials not served from the trial cache (None: indexed before this was kept).
    A run without any is no evidence of its own (`lifecycle.lineage` leaves it out)."""
    mode: str = ""
    """live, record or replay (`Provenance.mode`); empty for runs indexed before it was."""

    @property
    def new_evidence(self) -> bool:
        """The run measured something of its own, as `lifecycle.lineage` counts runs: not a
        replay (recorded replies again), not served wholly from the trial cache, and not one
        whose every trial errored (no counted trial)."""
        return self.mode != "replay" and (self.fresh_trials is None or self.fresh_trials > 0)

    @property
    def listed_task_pass_rate(self) -> float | None:
        """The task pass rate a listing shows (`runs`, the viewer): errored trials counted as
        failed, as eval's first line (a run whose trials mostly errored must not read 100%);
        ours (errored excluded) for a line saved before the original's was kept."""
        return (self.original_task_pass_rate if self.original_task_pass_rate is not None
                else self.task_pass_rate)

    @property
    def listed_trial_pass_rate(self) -> float | None:
        """`listed_task_pass_rate` for trials."""
        return (self.original_trial_pass_rate if self.original_trial_pass_rate is not None
                else self.trial_pass_rate)

    @property
    def on_lineage(self) -> bool:
        """The run evaluated a prompt of the lineage: no candidate (an accepted one waits on
        its branch until merged; once merged, the next baseline or eval measures it) and no
        review head (a proposal under review)."""
        return self.role not in ("candidate", "review-head")


def default_store_dir(state_dir: Path) -> Path:
    return state_dir / "runs"


def _safe_name(run_name: str) -> str:
    if (
        not run_name
        or "/" in run_name
        or "\\" in run_name
        or run_name.startswith(".")
        or run_name.endswith(EXTRAS_SUFFIX.removesuffix(".json"))
    ):
        raise ReportError(f"run name {run_name!r} cannot be used as a file name")
    return run_name


def report_path(store_dir: Path, run_name: str) -> Path:
    return store_dir / "reports" / f"{_safe_name(run_name)}.json"


def extras_path(store_dir: Path, run_name: str) -> Path:
    """Our extras of a run, beside its report."""
    return store_dir / "reports" / f"{_safe_name(run_name)}{EXTRAS_SUFFIX}"


def trace_path(store_dir: Path, run_name: str) -> Path:
    return store_dir / "traces" / f"{_safe_name(run_name)}.jsonl"


def build_report(run: RunResult, summary: RunSummary) -> dict[str, Any]:
    """One document for `report --format json`: the original's report, with our extras and
    the summary (both rates) under the key "promptloop"."""
    report, extras = report_docs(run)
    return {**report, "promptloop": {**extras, "summary": summary.model_dump(
        mode="json", by_alias=True)}}


# --- writing ---------------------------------------------------------------------------


def _dump(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def _replace_line(path: Path, run_name: str, line: str) -> None:
    """Replace the line of `run_name` in a JSONL file, or append it."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    names = [_line_name(s) for s in lines]
    if run_name in names:
        lines = [line if n == run_name else s for s, n in zip(lines, names, strict=True)]
    else:
        lines.append(line)
    atomic_write_text(path, "".join(s + "\n" for s in lines if s.strip()))


def _append_index(store_dir: Path, run: RunResult, summary: RunSummary) -> None:
    """Record the run in index.jsonl and ours, replacing the lines of a run of the same name."""
    line, extras = index_docs(run, summary)
    path = store_dir / INDEX_FILE
    with FileLock(str(path) + ".lock", timeout=30):
        _replace_line(path, run.run_name, _dump(line))
        _replace_line(store_dir / INDEX_EXTRAS_FILE, run.run_name, _dump(extras))


def _line_name(line: str) -> str | None:
    data = _json_line(line)
    return data.get("runName") if data is not None else None


def _json_line(line: str) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def write_trace(
    run: RunResult,
    store_dir: Path,
    summary: RunSummary | None = None,
    report: Mapping[str, Any] | None = None,
) -> Path:
    """Write the run's trace in the original's shape."""
    path = trace_path(store_dir, run.run_name)
    lines = trace_docs(run, summary or summarize(run), report)
    atomic_write_text(path, "".join(_dump(x) + "\n" for x in lines))
    return path


def save_run(
    run: RunResult,
    store_dir: Path,
    *,
    summary: RunSummary | None = None,
    prices: PriceOverrides | None = None,
) -> Path:
    """Write the report, our extras and the trace, then record the run in the index; returns
    the report's path."""
    summary = summary or summarize(run, prices=prices)
    path = report_path(store_dir, run.run_name)
    report, extras = report_docs(run)
    atomic_write_text(path, json.dumps(report, ensure_ascii=False, indent=1) + "\n")
    atomic_write_text(extras_path(store_dir, run.run_name), _dump(extras) + "\n")
    write_trace(run, store_dir, summary, report)
    _append_index(store_dir, run, summary)
    return path


# --- reading ---------------------------------------------------------------------------


def _index_entry(line: dict[str, Any], ours: Mapping[str, Any] | None) -> RunIndexEntry:
    """Join an index.jsonl line with our line; a legacy line carries ours itself, and its
    rates were ours (errored trials excluded)."""
    if any(k in line for k in _OURS_IN_LEGACY_INDEX):
        exact = not line.get("erroredTrials")
        return RunIndexEntry.model_validate({
            **line,
            "originalTaskPassRate": line.get("taskPassRate") if exact else None,
            "originalTrialPassRate": line.get("trialPassRate") if exact else None,
        })
    ours = ours or {}
    return RunIndexEntry.model_validate({
        **{k: v for k, v in ours.items() if k != "runName"},
        **line,
        "taskPassRate": ours.get("countedTaskPassRate"),
        "trialPassRate": ours.get("countedTrialPassRate"),
        "originalTaskPassRate": line.get("taskPassRate"),
        "originalTrialPassRate": line.get("trialPassRate"),
    })


def _ours_by_run(store_dir: Path) -> dict[str, dict[str, Any]]:
    path = store_dir / INDEX_EXTRAS_FILE
    if not path.is_file():
        return {}
    lines = (_json_line(s) for s in path.read_text(encoding="utf-8").splitlines())
    return {str(d["runName"]): d for d in lines if d is not None and "runName" in d}


def list_runs(store_dir: Path) -> list[RunIndexEntry]:
    """Saved runs in the order they were saved (oldest first)."""
    path = store_dir / INDEX_FILE
    if not path.is_file():
        return []
    ours = _ours_by_run(store_dir)
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        data = _json_line(line)
        try:
            if data is None:
                raise ValueError("not a JSON object")
            out.append(_index_entry(data, ours.get(str(data.get("runName")))))
        except (ValueError, ValidationError) as err:
            raise ReportError(f"{path}: line {n} is not a valid index entry: {err}") from err
    return out


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ReportError(f"{path}: cannot read ({err.strerror})") from err
    except json.JSONDecodeError as err:
        raise ReportError(f"{path}: invalid JSON at line {err.lineno}: {err.msg}") from err


def _trace_tasks(report: Path) -> dict[str, TaskInfo]:
    """Task metadata from the trace beside a report the original harness wrote (no extras)."""
    trace = report.parent.parent / "traces" / f"{report.stem}.jsonl"
    if not trace.is_file():
        return {}
    lines = (_json_line(s) for s in trace.read_text(encoding="utf-8").splitlines())
    return tasks_from_trace([d for d in lines if d is not None])


def load_report_file(path: Path) -> RunResult:
    """The run of a report file: ours (with the extras beside it), a legacy one, or one the
    original harness wrote."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ReportError(f"{path}: not a report (the file holds no JSON object)")
    try:
        if data.get("format") == LEGACY_FORMAT:
            return RunResult.model_validate(data["promptloop"])
        sibling = path.with_name(path.name.removesuffix(".json") + EXTRAS_SUFFIX)
        extras = _read_json(sibling) if sibling.is_file() else data.get("promptloop")
        if isinstance(extras, dict):
            return run_from_docs(data, extras)
        return run_from_docs(data, None, _trace_tasks(path))
    except (ShapeError, ValidationError, KeyError, TypeError, ValueError) as err:
        raise ReportError(f"{path}: not a readable report: {err}") from err


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
        names = sorted(
            p.stem
            for p in (store_dir / "reports").glob("*.json")
            if not p.name.endswith(EXTRAS_SUFFIX)
        )
    msg = f"no run named '{run_name}' in {store_dir}"
    msg += did_you_mean(run_name, names)
    if names:
        msg += " Recent runs: " + ", ".join(reversed(names[-5:]))
    else:
        msg += " (the store holds no runs yet)"
    return msg
