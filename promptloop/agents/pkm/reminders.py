"""System reminders appended to a successful Read, and the user's PKM session stats.

The reminders nudge the agent about structural smells of the file it just read: a Read that
returned too many lines, a directory fragmented into one-fact files, a date-named file, and a
file that keeps being edited session after session (an accidental log or a too generic name).
The counting rules are the original harness's (docs/compat.md).

Session stats: `<workspace>/_System/pkm_stats.json`, a JSON object
`{"version": 1, "sessions": [{"fact_id": str, "at": ISO-8601 str, "edited": [path, ...]}]}`,
oldest first, one entry per session that made a successful Write or Edit; `edited` lists the
files written or edited (relative to PKM/). Without that file the older
`_System/pkm/sessions.jsonl` (one such entry per line) is read, so fixtures in that form keep
working; the next recorded session writes both histories into `pkm_stats.json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from promptloop.agents.files import write_atomic
from promptloop.agents.pkm.paths import Sandbox
from promptloop.agents.tools import ToolError

SOFT_LINE_LIMIT = 1000
HARD_LINE_LIMIT = 2000
FRAGMENT_THRESHOLD = 5
FRAGMENT_MAX_FILES = 200
"""Files of a folder the fragmentation reminder reads at most."""
FRAGMENT_MAX_BYTES = 64 * 1024
"""A file larger than this is no one-fact fragment (and is not read)."""
RECENT_SESSIONS = 5
HOT_FILE_SESSIONS = 3
DATE_NAME_RE = re.compile(r"20\d{2}-?\d{2}-?\d{2}")
STATS_FILE = Path("_System") / "pkm_stats.json"
LEGACY_SESSIONS_FILE = Path("_System") / "pkm" / "sessions.jsonl"
STATS_VERSION = 1


def wrap(text: str) -> str:
    return f"<system-reminder>\n{text}\n</system-reminder>"


def count_fact_id_lines(text: str) -> int:
    """Lines that contain `fact_id` (the original counts lines, not well-formed comments)."""
    return sum("fact_id" in line for line in text.splitlines())


def length_reminder(virtual: str, n_lines: int) -> str | None:
    """`n_lines` is the number of lines the Read returned (not the file's length)."""
    if n_lines >= HARD_LINE_LIMIT:
        return (
            f"Reading {virtual} returned {n_lines} lines: the file is past the "
            f"{HARD_LINE_LIMIT}-line limit. Restructure it before adding more: split it into "
            "several focused files (by topic or by period) in a folder, and keep only a short "
            "index here."
        )
    if n_lines > SOFT_LINE_LIMIT:
        return (
            f"Reading {virtual} returned {n_lines} lines. Consider splitting it into smaller "
            "files by topic if what you add does not clearly belong here."
        )
    return None


def fragmentation_reminder(sandbox: Sandbox, real: Path) -> str | None:
    """More than FRAGMENT_THRESHOLD files in the folder that each have exactly one line
    containing `fact_id`. At most FRAGMENT_MAX_FILES files are read (the first by name), each
    through one descriptor of the folder; a file over FRAGMENT_MAX_BYTES is no one-fact
    fragment and is not read."""
    parent = real.parent
    try:
        siblings = sandbox.list_dir(parent)
    except (OSError, ToolError):
        return None
    names = [s.name for s in siblings if not s.name.startswith(".") and s.kind == "file"]
    single = 0
    try:
        for _, data in sandbox.fs.read_files(parent, names[:FRAGMENT_MAX_FILES],
                                             max_bytes=FRAGMENT_MAX_BYTES):
            if data is not None and count_fact_id_lines(
                    data.decode("utf-8", errors="replace")) == 1:
                single += 1
    except (OSError, ToolError):
        return None
    if single <= FRAGMENT_THRESHOLD:
        return None
    folder = sandbox.to_virtual(parent)
    return (
        f"The folder {folder} holds {single} files that each record a single fact: it is "
        "fragmented. Prefer consolidating related entries into one file per topic (move their "
        "content together, then remove the emptied files) instead of creating another one."
    )


def date_name_reminder(virtual: str) -> str | None:
    name = virtual.rsplit("/", 1)[-1]
    if not DATE_NAME_RE.search(name):
        return None
    return (
        f"The file name of {virtual} is a date. Date-named files turn the knowledge base into a "
        "diary. Put new content into a topic file (e.g. a running log per subject) and consider "
        "moving this file's content into one."
    )


def hot_file_reminder(virtual: str, sessions: Sequence[dict[str, object]]) -> str | None:
    """The file was edited in >= HOT_FILE_SESSIONS of the last RECENT_SESSIONS sessions."""
    key = virtual.lstrip("/")
    recent = sessions[-RECENT_SESSIONS:]
    hits = 0
    for entry in recent:
        edited = entry.get("edited")
        if isinstance(edited, list) and key in {str(p).lstrip("/") for p in edited}:
            hits += 1
    if hits < HOT_FILE_SESSIONS:
        return None
    return (
        f"{virtual} was edited in {hits} of the user's last {len(recent)} sessions. It may be "
        "an accidental log or its name is too generic: check whether this input belongs to a "
        "more specific file, or split this one by topic and give the parts precise names."
    )


def _parse_jsonl(text: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _parse_stats(text: str) -> list[dict[str, object]]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return []
    sessions = value.get("sessions") if isinstance(value, dict) else value
    if not isinstance(sessions, list):
        return []
    return [s for s in sessions if isinstance(s, dict)]


def load_sessions(workspace_root: Path) -> list[dict[str, object]]:
    """The session history, oldest first (`pkm_stats.json`, else the legacy JSONL file);
    malformed entries are ignored."""
    stats = workspace_root / STATS_FILE
    if stats.is_file():
        return _parse_stats(stats.read_text(encoding="utf-8", errors="replace"))
    legacy = workspace_root / LEGACY_SESSIONS_FILE
    if legacy.is_file():
        return _parse_jsonl(legacy.read_text(encoding="utf-8", errors="replace"))
    return []


def append_session(workspace_root: Path, fact_id: str, at: str, edited: Sequence[str]) -> None:
    """Record one Write/Edit session in `_System/pkm_stats.json` (written atomically)."""
    sessions = load_sessions(workspace_root)
    sessions.append({"fact_id": fact_id, "at": at, "edited": [p.lstrip("/") for p in edited]})
    path = workspace_root / STATS_FILE
    payload = {"version": STATS_VERSION, "sessions": sessions}
    write_atomic(path, json.dumps(payload, ensure_ascii=False, indent=1) + "\n")


def read_reminders(
    sandbox: Sandbox,
    real: Path,
    virtual: str,
    n_lines: int,
    sessions: Sequence[dict[str, object]],
) -> list[str]:
    """Every reminder that applies to the file just read (plain texts, not yet wrapped)."""
    found = [
        length_reminder(virtual, n_lines),
        fragmentation_reminder(sandbox, real),
        date_name_reminder(virtual),
        hot_file_reminder(virtual, sessions),
    ]
    return [r for r in found if r]
