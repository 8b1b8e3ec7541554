"""The state files of submitted batches (`<folder>/<batch id>.json`, docs/batch.md), indexed by
request key.

`BatchJudge` (agents/llm/batch.py) asks before each submit whether a saved batch of the same
model already covers its request keys. `StateFolder` answers from an in-process index: each
file is read once (again only when its size or modification time changed), and its keys are
indexed, so a round costs one directory listing, not a read of every file. Files of batches
whose results were read (`state: "ended"`) are pruned `KEEP_ENDED_S` after that; a batch still
`submitted` is kept until it ends (a rerun resumes it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from promptloop.agents.files import write_atomic

FORMAT = "promptloop.batch/1"
KEEP_ENDED_S = 7 * 24 * 3600.0
FAILED = "failed"
"""The state of a batch that failed, expired or was cancelled as a whole: never resumed (a
rerun submits a new one), pruned as an ended one is."""
"""How long an ended batch's state file is kept: a rerun within that time reads the same
results again instead of paying for a new batch (providers keep results about 29-30 days)."""


@dataclass(frozen=True)
class Saved:
    """One state file, as read."""

    provider: str
    model: str
    batch_id: str
    state: str
    created_at: str
    requests: dict[str, str]
    """custom_id -> request key."""


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True))


def safe_name(batch_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in batch_id)


def _read(path: Path) -> Saved | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    return Saved(
        provider=str(data.get("provider")), model=str(data.get("model")),
        batch_id=str(data.get("batch_id")), state=str(data.get("state")),
        created_at=str(data.get("created_at", "")),
        requests={str(c): str(k) for c, k in (data.get("requests") or {}).items()},
    )


class StateFolder:
    """The state files of one folder (see the module docstring); `of(folder)` shares one per
    folder within the process."""

    _shared: ClassVar[dict[Path, StateFolder]] = {}

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, tuple[tuple[int, int], Saved | None]] = {}
        """File name -> ((size, mtime_ns), what it holds; None: not ours or unreadable)."""
        self.by_key: dict[str, set[str]] = {}
        """Request key -> names of the files whose batch holds it."""
        self.reads = 0
        """Files read so far (for tests)."""

    @classmethod
    def of(cls, folder: Path) -> StateFolder:
        key = folder.absolute()
        if key not in cls._shared:
            cls._shared[key] = cls(folder)
        return cls._shared[key]

    def path(self, batch_id: str) -> Path:
        return self.folder / f"{safe_name(batch_id)}.json"

    def save(self, provider: str, model: str, batch_id: str, ids: Mapping[str, str],
             state: str) -> None:
        path = self.path(batch_id)
        old = self.files.get(path.name, ((0, 0), None))[1] or (
            _read(path) if path.is_file() else None)
        now = datetime.now(UTC).isoformat()
        _write_json(path, {
            "format": FORMAT, "provider": provider, "model": model, "batch_id": batch_id,
            "state": state, "created_at": old.created_at if old else now, "updated_at": now,
            "requests": dict(ids),
        })
        self._forget(path.name)
        self._index(path.name, path.stat(), Saved(provider, model, batch_id, state,
                                                  old.created_at if old else now, dict(ids)))

    def find(self, provider: str, model: str, keys: set[str],
             skip: frozenset[str] = frozenset()) -> Saved | None:
        """The newest saved batch of this model whose requests cover every key (not one of
        the batch ids in `skip`)."""
        if not keys:
            return None
        self.refresh()
        names = self.by_key.get(next(iter(keys)), set())
        best: Saved | None = None
        for name in sorted(names):
            saved = self.files[name][1]
            if (saved is None or saved.provider != provider or saved.model != model
                    or saved.state == FAILED or saved.batch_id in skip
                    or not keys <= set(saved.requests.values())):
                continue
            if best is None or saved.created_at > best.created_at:
                best = saved
        return best

    def refresh(self) -> None:
        """Read new and changed files, forget removed ones, prune old ended batches."""
        seen: set[str] = set()
        if not self.folder.is_dir():
            self.files.clear()
            self.by_key.clear()
            return
        with os.scandir(self.folder) as listing:
            for entry in listing:
                if not entry.name.endswith(".json") or not entry.is_file():
                    continue
                seen.add(entry.name)
                stat = entry.stat()
                known = self.files.get(entry.name)
                if known is None or known[0] != (stat.st_size, stat.st_mtime_ns):
                    self._forget(entry.name)
                    self.reads += 1
                    self._index(entry.name, stat, _read(Path(entry.path)))
                saved = self.files[entry.name][1]
                if (saved is not None and saved.state in ("ended", FAILED)
                        and time.time() - stat.st_mtime > KEEP_ENDED_S):
                    Path(entry.path).unlink(missing_ok=True)
                    seen.discard(entry.name)
        for name in set(self.files) - seen:
            self._forget(name)

    def _index(self, name: str, stat: os.stat_result, saved: Saved | None) -> None:
        self.files[name] = ((stat.st_size, stat.st_mtime_ns), saved)
        for key in saved.requests.values() if saved else ():
            self.by_key.setdefault(key, set()).add(name)

    def _forget(self, name: str) -> None:
        _, saved = self.files.pop(name, ((0, 0), None))
        for key in saved.requests.values() if saved else ():
            names = self.by_key.get(key)
            if names is not None:
                names.discard(name)
                if not names:
                    del self.by_key[key]


__all__ = ["FORMAT", "KEEP_ENDED_S", "Saved", "StateFolder", "safe_name"]
