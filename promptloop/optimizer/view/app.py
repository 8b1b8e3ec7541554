"""Routing of the viewer: a request target in, a response out (no sockets here).

Paths are split into segments before percent-decoding, and a decoded segment holding `/`,
`\\`, a NUL or a dot-only name is refused, so `..`, `%2e%2e`, `%2f` and backslashes never reach
a lookup. Every route is a fixed shape; names in it are looked up among what the state
folder lists (see state.py), and static files are a fixed allow-list of package files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from promptloop.optimizer.lifecycle.calibration import CalibrationReport
from promptloop.optimizer.report.html.page import report_context
from promptloop.optimizer.report.html.trials import PromptPool
from promptloop.optimizer.report.store import ReportError
from promptloop.optimizer.view import judges, nightly, saved, sessions
from promptloop.optimizer.view.compare import compare_page, side_by_side
from promptloop.optimizer.view.health import health_page, health_rows
from promptloop.optimizer.view.render import render, static_file
from promptloop.optimizer.view.runs import RunFilter, runs_page, same_suite
from promptloop.optimizer.view.state import BadRequestError, NotFoundError, StateFolder
from promptloop.optimizer.view.trend import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    suite_runs,
    trend_page,
    trended,
)

HTML = "text/html; charset=utf-8"
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = HTML
    headers: dict[str, str] = field(default_factory=dict)


Query = dict[str, str]
Handler = Callable[[list[str], Query], Response]


def split_target(target: str) -> tuple[list[str], Query] | None:
    """Decoded path segments and the query of a request target; None if any segment is
    unsafe (a traversal attempt or an encoded separator)."""
    parts = urlsplit(target)
    segments = []
    for raw in parts.path.split("/"):
        if raw == "":
            continue
        try:
            text = unquote(raw, errors="strict")
        except UnicodeDecodeError:
            return None
        if any(c in text for c in "/\\\x00") or text.strip(".") == "":
            return None
        segments.append(text)
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, max_num_fields=40)
    except ValueError:
        return None
    return segments, dict(pairs)


class ViewApp:
    """The read-only web app over one state folder."""

    def __init__(self, state_dir: Path) -> None:
        self.state = StateFolder(state_dir)
        self.routes: dict[tuple[str, int], Handler] = {
            ("", 0): self.runs, ("run", 1): self.run, ("compare", 0): self.compare,
            ("compare", 1): self.compare_trial, ("trend", 0): self.trend,
            ("ledger", 0): self.ledger, ("sessions", 0): self.sessions,
            ("session", 1): self.session, ("nightly", 0): self.nights,
            ("nightly", 1): self.night, ("static", 1): self.static,
            ("favicon.ico", 0): self.favicon, ("trial", 0): self.trial,
            ("health", 0): self.healths, ("health", 1): self.health,
            ("graduations", 0): self.graduations, ("calibration", 0): self.calibrations,
            ("calibration", 1): self.calibration, ("label", 0): self.label,
        }

    def handle(self, target: str) -> Response:
        parsed = split_target(target)
        if parsed is None:
            return self.error(404, "Not found", "That address does not name a page.")
        segments, query = parsed
        head = segments[0] if segments else ""
        handler = self.routes.get((head, len(segments) - 1 if segments else 0))
        if head == "compare" and len(segments) == 2 and segments[1] != "trial":
            handler = None
        if handler is None:
            return self.error(404, "Not found", "That address does not name a page.")
        try:
            return handler(segments[1:], query)
        except NotFoundError as err:
            return self.error(404, "Not found", str(err))
        except BadRequestError as err:
            return self.error(400, "Cannot show this", str(err))
        except ReportError as err:
            return self.error(500, "Unreadable file in the state folder", str(err))

    # --- helpers --------------------------------------------------------------------------
    def page(self, template: str, **context: Any) -> Response:
        html = render(template, state=str(self.state.root), **context)
        return Response(200, html.encode("utf-8"))

    def error(self, status: int, title: str, message: str) -> Response:
        html = render("view_error.html.j2", state=str(self.state.root), title=title,
                      message=message, status=status)
        return Response(status, html.encode("utf-8"))

    # --- runs -----------------------------------------------------------------------------
    def runs(self, _: list[str], q: Query) -> Response:
        page = runs_page(self.state.runs(), RunFilter.of(q))
        return self.page("view_runs.html.j2", title="promptloop runs", active="/", p=page)

    def run(self, args: list[str], _: Query) -> Response:
        name = args[0]
        entry = self.state.entry(name)
        run, summary = self.state.run(name), self.state.summary(name)
        context = report_context(run, summary)
        statuses = judges.run_judges(self.state, [run])
        context["graders"] = judges.with_calibration(context["graders"], statuses)
        return self.page("view_run.html.j2", active="/", entry=entry, judges=statuses,
                         others=same_suite(self.state.runs(), entry), **context)

    def _pair(self, q: Query) -> tuple[str, str]:
        base, cand = q.get("base", ""), q.get("cand", "")
        if not base or not cand:
            raise BadRequestError("choose a base run and a candidate run (?base=...&cand=...)")
        return base, cand

    def compare(self, _: list[str], q: Query) -> Response:
        base, cand = self._pair(q)
        runs = self.state.run(base), self.state.run(cand)
        page = compare_page(*runs, self.state.summary(base), self.state.summary(cand))
        return self.page("view_compare.html.j2", active="/", p=page,
                         judges=judges.run_judges(self.state, runs),
                         title=f"{page.cand.suite_name}: {base} vs {cand}")

    def compare_trial(self, _: list[str], q: Query) -> Response:
        base, cand = self._pair(q)
        task, index = q.get("task", ""), q.get("index", "")
        if not task or not index.isdigit():
            raise BadRequestError("name the trial: ?task=<task id>&index=<trial index>")
        view = side_by_side(self.state.run(base), self.state.run(cand), task, int(index))
        trials = [t for t in (view.pair.base, view.pair.cand) if t is not None]
        return self.page("view_trial.html.j2", active="/", v=view, prompts=PromptPool(trials),
                         title=f"{task} #{index}: {base} vs {cand}")

    def trend(self, _: list[str], q: Query) -> Response:
        suite = q.get("suite", "")
        if not suite:
            raise BadRequestError("name a suite: ?suite=<suite name>")
        raw = q.get("limit", "")
        limit = min(MAX_LIMIT, max(2, int(raw))) if raw.isdigit() else DEFAULT_LIMIT
        entries = self.state.runs()
        runs = suite_runs(entries, suite, limit)
        if not runs:
            raise NotFoundError(f"no runs of suite {suite!r}")
        readable, summaries = [], []
        for e in runs:
            try:
                summaries.append(self.state.summary(e.run_name))
                readable.append(e)
            except (NotFoundError, ReportError):
                continue  # a missing or unreadable report leaves a gap, not an error page
        total = sum(trended(e, suite) for e in entries)
        page = trend_page(suite, readable, summaries, total, len(runs) - len(readable))
        return self.page("view_trend.html.j2", active="/", p=page, limit=limit,
                         title=f"{suite}: trend per bucket")

    def trial(self, _: list[str], q: Query) -> Response:
        """One trial of one run (what health evidence and labels link to)."""
        name, task, index = q.get("run", ""), q.get("task", ""), q.get("index", "")
        if not name or not task or not index.isdigit():
            raise BadRequestError("name the trial: ?run=<run>&task=<task id>&index=<index>")
        run = self.state.run(name)
        found = next((t for t in run.trials
                      if t.task_id == task and t.trial_index == int(index)), None)
        if found is None:
            raise NotFoundError(f"run {name!r} has no trial {index} of task {task!r}")
        return self.page("view_one_trial.html.j2", active="/", run=run, t=found,
                         prompts=PromptPool([found]), title=f"{task} #{index} · {name}",
                         others=same_suite(self.state.runs(), self.state.entry(name)))

    # --- suite lifecycle ------------------------------------------------------------------
    def healths(self, _: list[str], q: Query) -> Response:
        rows = health_rows(self.state.runs(), saved.saved_health(self.state))
        return self.page("view_healths.html.j2", active="/health", rows=rows,
                         title="promptloop suite health")

    def health(self, args: list[str], _: Query) -> Response:
        suite = args[0]
        page = health_page(suite, saved.health_of(self.state, suite), self.state.runs())
        return self.page("view_health.html.j2", active="/health", p=page,
                         title=f"{suite}: suite health")

    def graduations(self, _: list[str], q: Query) -> Response:
        return self.page("view_graduations.html.j2", active="/graduations",
                         rows=saved.graduations(self.state), title="promptloop graduations")

    def calibrations(self, _: list[str], q: Query) -> Response:
        rows = judges.calibration_rows(self.state, saved.calibrations(self.state))
        return self.page("view_calibrations.html.j2", active="/calibration", rows=rows,
                         title="promptloop judge calibration")

    def calibration(self, args: list[str], _: Query) -> Response:
        grader = args[0]
        found = saved.calibrations(self.state)
        known = set(judges.registered_judges()) | set(found)
        if grader not in known:
            raise NotFoundError(f"no judge grader {grader!r} (judges: {', '.join(sorted(known))})")
        got = found.get(grader)
        report = got if isinstance(got, CalibrationReport) else saved.calibration_of(self.state,
                                                                                     grader)
        page = judges.calibration_page(self.state, grader, report)
        return self.page("view_calibration.html.j2", active="/calibration", p=page,
                         title=f"{grader}: judge calibration")

    def label(self, _: list[str], q: Query) -> Response:
        grader, name = q.get("grader", ""), q.get("run", "")
        graders = sorted(set(judges.registered_judges()) | set(saved.calibrations(self.state)))
        if not grader or not name:
            return self.page("view_label.html.j2", active="/calibration", p=None,
                             graders=graders, grader=grader, run_name=name,
                             runs=list(reversed(self.state.runs())), title="Label trials")
        page = judges.label_page(self.state, grader, self.state.run(name))
        return self.page("view_label.html.j2", active="/calibration", p=page, graders=graders,
                         grader=grader, run_name=name, runs=list(reversed(self.state.runs())),
                         title=f"Label {grader} on {name}")

    # --- ledger and sessions --------------------------------------------------------------
    def ledger(self, _: list[str], q: Query) -> Response:
        page = sessions.ledger_page(self.state.ledger(), sessions.LedgerFilter.of(q))
        return self.page("view_ledger.html.j2", active="/ledger", p=page,
                         title="promptloop ledger")

    def sessions(self, _: list[str], q: Query) -> Response:
        rows = [sessions.SessionRow(s) for s in self.state.sessions()]
        return self.page("view_sessions.html.j2", active="/sessions", rows=rows,
                         title="promptloop optimize sessions")

    def session(self, args: list[str], _: Query) -> Response:
        page = sessions.session_page(self.state, self.state.session(args[0]))
        return self.page("view_session.html.j2", active="/sessions", p=page,
                         title=f"optimize session {args[0]}")

    # --- nightly --------------------------------------------------------------------------
    def nights(self, _: list[str], q: Query) -> Response:
        return self.page("view_nights.html.j2", active="/nightly",
                         rows=nightly.night_rows(self.state), title="promptloop nightly runs")

    def night(self, args: list[str], _: Query) -> Response:
        page = nightly.night_page(self.state, args[0])
        return self.page("view_night.html.j2", active="/nightly",
                         title=f"promptloop nightly {page.summary.night_id}", **page.context())

    # --- static files ---------------------------------------------------------------------
    def favicon(self, _: list[str], q: Query) -> Response:
        """No icon (browsers ask for one; an empty answer keeps their consoles quiet)."""
        return Response(204, b"", "image/x-icon")

    def static(self, args: list[str], _: Query) -> Response:
        body = static_file(args[0])
        if body is None:
            raise NotFoundError(f"no static file {args[0]!r}")
        return Response(200, body, TYPES[Path(args[0]).suffix],
                        {"Cache-Control": "max-age=300"})
