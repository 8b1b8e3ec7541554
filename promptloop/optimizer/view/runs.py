"""The runs list: every saved run from the index alone, filtered and searched.

A state folder of hundreds of runs opens in well under a second because nothing here opens a
report: suite, agent, model, prompt hash, commit, rates and time all come from the run index.
Filters are query parameters (the page works without script); view.js only submits the form
as the user changes a select and narrows rows while typing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from promptloop.optimizer.report.store import RunIndexEntry

FILTERS = ("suite", "kind", "agent", "model")
MAX_ROWS = 2000


@dataclass(frozen=True)
class RunFilter:
    suite: str = ""
    kind: str = ""
    agent: str = ""
    model: str = ""
    q: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> RunFilter:
        return cls(**{k: query.get(k, "").strip()[:200] for k in (*FILTERS, "q")})

    def keep(self, e: RunIndexEntry) -> bool:
        if self.suite and e.suite_name != self.suite:
            return False
        if self.kind and e.suite_kind != self.kind:
            return False
        if self.agent and e.agent_name != self.agent:
            return False
        if self.model and e.agent_model != self.model:
            return False
        return not self.q or self.q.lower() in search_text(e)

    @property
    def active(self) -> bool:
        return any((self.suite, self.kind, self.agent, self.model, self.q))


def search_text(e: RunIndexEntry) -> str:
    """What the search box matches: names, model, prompt hash and commit."""
    return " ".join((e.run_name, e.suite_name, e.suite_kind, e.agent_name, e.agent_model,
                     e.prompt_hash or "", e.git_commit or "")).lower()


def choices(entries: Sequence[RunIndexEntry]) -> dict[str, list[str]]:
    """The distinct values of each filter, for its select."""
    attrs = {"suite": "suite_name", "kind": "suite_kind", "agent": "agent_name",
             "model": "agent_model"}
    return {k: sorted({getattr(e, a) for e in entries if getattr(e, a)}) for k, a in attrs.items()}


@dataclass(frozen=True)
class RunsPage:
    rows: list[RunIndexEntry]
    total: int
    matched: int
    filter: RunFilter
    choices: dict[str, list[str]]

    @property
    def suites(self) -> list[str]:
        """Suites with at least two runs shown (a trend needs two points)."""
        counts: dict[str, int] = {}
        for e in self.rows:
            counts[e.suite_name] = counts.get(e.suite_name, 0) + 1
        return sorted(s for s, n in counts.items() if n >= 2)


def runs_page(entries: Sequence[RunIndexEntry], f: RunFilter) -> RunsPage:
    """Newest first; at most MAX_ROWS rows (the page says how many matched)."""
    kept = [(e.started_at, n, e) for n, e in enumerate(entries) if f.keep(e)]
    kept.sort(key=lambda x: (x[0], x[1]), reverse=True)  # equal times: the later saved first
    rows = [e for _, _, e in kept]
    return RunsPage(rows=rows[:MAX_ROWS], total=len(entries), matched=len(rows), filter=f,
                    choices=choices(entries))


def same_suite(entries: Sequence[RunIndexEntry], run: RunIndexEntry) -> list[RunIndexEntry]:
    """Other runs of `run`'s suite (and kind), newest first: what it can be compared with."""
    out = [e for e in entries if e.suite_name == run.suite_name
           and e.suite_kind == run.suite_kind and e.run_name != run.run_name]
    return sorted(out, key=lambda e: e.started_at, reverse=True)
