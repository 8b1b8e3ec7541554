"""System reminders appended to a successful Read, and the user's PKM session history.

The reminders nudge the agent about structural smells of the file it just read: a file that
grew too long, a directory fragmented into one-fact files, a date-named file, and a file that
keeps being edited session after session (an accidental log or a too generic name).

Session history (shared format, do not change): `<workspace>/_System/pkm/sessions.jsonl`, one
JSON object per line, oldest first:
`{"fact_id": str, "at": ISO-8601 str, "edited": ["Areas/Health/log.md", ...]}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from agents.pkm.paths import Sandbox

SOFT_LINE_LIMIT = 1000
HARD_LINE_LIMIT = 2000
FRAGMENT_THRESHOLD = 5
RECENT_SESSIONS = 5
HOT_FILE_SESSIONS = 3
FACT_ID_COMMENT_RE = re.compile(r"<!--\s*fact_id:\s*(.+?)\s*-->")
DATE_NAME_RE = re.compile(r"(?<!\d)20\d{2}(-?)(0[1-9]|1[0-2])\1(0[1-9]|[12]\d|3[01])(?!\d)")
SESSIONS_FILE = Path("_System") / "pkm" / "sessions.jsonl"


def wrap(text: str) -> str:
    return f"<system-reminder>\n{text}\n</system-reminder>"


def count_fact_ids(text: str) -> int:
    return len(FACT_ID_COMMENT_RE.findall(text))


def length_reminder(virtual: str, n_lines: int) -> str | None:
    if n_lines >= HARD_LINE_LIMIT:
        return (
            f"{virtual} has {n_lines} lines, past the {HARD_LINE_LIMIT}-line limit. Restructure "
            "it before adding more: split it into several focused files (by topic or by period) "
            "in a folder, and keep only a short index here."
        )
    if n_lines > SOFT_LINE_LIMIT:
        return (
            f"{virtual} has {n_lines} lines. Consider splitting it into smaller files by topic "
            "if what you add does not clearly belong here."
        )
    return None


def fragmentation_reminder(sandbox: Sandbox, real: Path) -> str | None:
    """More than FRAGMENT_THRESHOLD sibling files that each hold exactly one fact_id comment."""
    parent = real.parent
    single = 0
    try:
        siblings = sorted(parent.iterdir())
    except OSError:
        return None
    for sibling in siblings:
        if sibling.name.startswith(".") or sibling.is_symlink() or not sibling.is_file():
            continue
        try:
            text = sibling.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if count_fact_ids(text) == 1:
            single += 1
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


def load_sessions(workspace_root: Path) -> list[dict[str, object]]:
    """Read the session history; malformed lines are ignored."""
    path = workspace_root / SESSIONS_FILE
    if not path.is_file():
        return []
    out: list[dict[str, object]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
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


def append_session(workspace_root: Path, fact_id: str, at: str, edited: Sequence[str]) -> None:
    path = workspace_root / SESSIONS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"fact_id": fact_id, "at": at, "edited": [p.lstrip("/") for p in edited]}
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, ensure_ascii=False) + "\n")


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
