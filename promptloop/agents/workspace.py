"""A trial workspace: Facts/, Cards/, PKM/ and _System/ under one root directory.

Layout (docs/suites.md):
  Facts/YYYY/MM/DD.md          daily fact file with entries `## <id:ts_N> HH:MM:SS "{}"`
  Cards/YYYY/MM/DD_ts_N.yaml   timeline card of one fact
  PKM/...                      the knowledge base (the only place PKM tools can see)
  _System/...                  agent state, never visible to the agent
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time
from pathlib import Path

from pydantic import BaseModel, Field

from promptloop.agents.trees import iter_files

FACT_ID_RE = re.compile(r"^(?P<y>\d{4})/(?P<m>\d{2})/(?P<d>\d{2})\.md#(?P<ts>ts_\d+)$")
ENTRY_RE = re.compile(r"^## <id:(?P<ts>ts_\d+)> (?P<time>\d{2}:\d{2}:\d{2})(?: .*)?$")
SNIPPET_LIMIT = 4096
FACT_ID_PATTERN = r"^[0-9]{4}/[0-9]{2}/[0-9]{2}\.md#ts_[0-9]{1,6}$"
"""The fact id format as a JSON-schema pattern (also constrains grammar-guided decoding)."""


class FactIdError(ValueError):
    pass


@dataclass(frozen=True)
class FactId:
    year: str
    month: str
    day: str
    ts: str

    @classmethod
    def parse(cls, value: str) -> FactId:
        m = FACT_ID_RE.match(value.strip())
        if not m:
            raise FactIdError(
                f"fact id {value!r} is not of the form YYYY/MM/DD.md#ts_N (e.g. 2026/03/14.md#ts_2)"
            )
        return cls(m["y"], m["m"], m["d"], m["ts"])

    def __str__(self) -> str:
        return f"{self.year}/{self.month}/{self.day}.md#{self.ts}"

    @property
    def fact_file(self) -> str:
        return f"Facts/{self.year}/{self.month}/{self.day}.md"

    @property
    def card_file(self) -> str:
        return f"Cards/{self.year}/{self.month}/{self.day}_{self.ts}.yaml"


def parse_fact_entries(text: str) -> dict[str, str]:
    """Return ts id -> raw content for every entry of a daily fact file."""
    entries: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = ENTRY_RE.match(line)
        if m:
            current = m["ts"]
            entries[current] = []
        elif current is not None:
            entries[current].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in entries.items()}


def entry_time(text: str, ts: str) -> time | None:
    """The `HH:MM:SS` of entry `ts` in a daily fact file's text; None when the entry is missing
    or its time is not a valid clock time."""
    for line in text.splitlines():
        m = ENTRY_RE.match(line)
        if m and m["ts"] == ts:
            try:
                return time.fromisoformat(m["time"])
            except ValueError:
                return None
    return None


class WorkspaceDiff(BaseModel):
    created: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    snippets: dict[str, str] = Field(default_factory=dict)
    """path -> after-content (created/modified) or before-content (deleted), <=4096 chars."""

    @property
    def changed(self) -> list[str]:
        return sorted(set(self.created) | set(self.modified))


class Workspace:
    def __init__(self, root: Path, *, durable: bool = True) -> None:
        self.root = Path(root)
        self.durable = durable
        """False for throw-away trial workspaces: card writes skip fsync (still atomic)."""

    @property
    def pkm(self) -> Path:
        return self.root / "PKM"

    @property
    def system(self) -> Path:
        return self.root / "_System"

    def fact_path(self, fact_id: str | FactId) -> Path:
        fid = fact_id if isinstance(fact_id, FactId) else FactId.parse(fact_id)
        return self.root / fid.fact_file

    def card_path(self, fact_id: str | FactId) -> Path:
        fid = fact_id if isinstance(fact_id, FactId) else FactId.parse(fact_id)
        return self.root / fid.card_file

    def read_fact(self, fact_id: str | FactId) -> str | None:
        fid = fact_id if isinstance(fact_id, FactId) else FactId.parse(fact_id)
        path = self.fact_path(fid)
        if not path.is_file():
            return None
        return parse_fact_entries(path.read_text(encoding="utf-8")).get(fid.ts)

    def ensure_fact(self, fact_id: str | FactId, content: str, published: datetime) -> None:
        """Append the fact entry to its daily file unless an entry with that id exists."""
        fid = fact_id if isinstance(fact_id, FactId) else FactId.parse(fact_id)
        path = self.fact_path(fid)
        existing = path.read_text(encoding="utf-8") if path.is_file() else ""
        if fid.ts in parse_fact_entries(existing):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        sep = (
            ""
            if not existing or existing.endswith("\n\n")
            else ("\n" if existing.endswith("\n") else "\n\n")
        )
        entry = f'## <id:{fid.ts}> {published:%H:%M:%S} "{{}}"\n\n{content}\n'
        path.write_text(existing + sep + entry, encoding="utf-8")

    def snapshot(self, sub: str = "PKM") -> dict[str, bytes]:
        """All files under `sub` (hidden ones included), keyed by path relative to `sub`."""
        base = self.root / sub
        if not base.is_dir():
            return {}
        files = sorted((p.relative_to(base) for p in iter_files(base)), key=lambda p: p.parts)
        return {rel.as_posix(): (base / rel).read_bytes() for rel in files}


def diff_snapshots(before: dict[str, bytes], after: dict[str, bytes]) -> WorkspaceDiff:
    diff = WorkspaceDiff()
    for path in sorted(set(before) | set(after)):
        if path not in before:
            diff.created.append(path)
            diff.snippets[path] = _text(after[path])
        elif path not in after:
            diff.deleted.append(path)
            diff.snippets[path] = _text(before[path])
        elif before[path] != after[path]:
            diff.modified.append(path)
            diff.snippets[path] = _text(after[path])
    return diff


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")[:SNIPPET_LIMIT]
