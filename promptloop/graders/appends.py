"""Find the change an append-coherence judge should grade.

`first_edit` is the original's choice (docs/compat.md): the first successful Edit, not judged
when it created a file, targets a file that did not exist before the run, has a blank
old_string or an empty new_string. The judge then sees only old_string and new_string.

`find_append` is ours (the `_plus` grader): the first successful change to a file that
existed (non-empty) before the run, an Edit with a non-empty old_string or a Write whose new
content keeps every original line (or contains the whole original text). The judge then sees
the whole original file.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from promptloop.agents.transcript import ToolCallRecord
from promptloop.graders.base import pkm_relative


@dataclass(frozen=True)
class EditCase:
    """The Edit the original append-coherence judge grades."""

    path: str
    old_string: str
    new_string: str


@dataclass(frozen=True)
class EditPick:
    case: EditCase | None
    reason: str = ""
    """Why there is nothing to judge (for the null-score rationale)."""


def first_edit(calls: Sequence[ToolCallRecord], before: Mapping[str, str] | None) -> EditPick:
    """The first successful Edit, or why it is not judged. A file is new when it is missing
    from `before` (the PKM contents before the run); without `before` the original cannot tell
    and judges the Edit."""
    edit = next((c for c in calls if c.tool_name == "Edit" and not c.is_error), None)
    if edit is None:
        return EditPick(None, "no successful Edit")
    path = pkm_relative(str(edit.arguments.get("file_path", "")))
    old_string = str(edit.arguments.get("old_string") or "")
    new_string = str(edit.arguments.get("new_string") or "")
    if not old_string.strip():
        return EditPick(None, f"the first Edit ({path}) has a blank old_string")
    if before is not None and _lookup(before, path) is None:
        return EditPick(None, f"the first Edit ({path}) is to a new file")
    if not new_string:
        return EditPick(None, f"the first Edit ({path}) has an empty new_string")
    return EditPick(EditCase(path=path, old_string=old_string, new_string=new_string))


@dataclass(frozen=True)
class Insertion:
    after_line: int
    """Number of original lines before the inserted text (0 = at the top)."""
    text: str


@dataclass(frozen=True)
class AppendCase:
    path: str
    tool: Literal["Edit", "Write"]
    original: str
    """The whole file before the run."""
    old_string: str = ""
    new_string: str = ""
    insertions: tuple[Insertion, ...] = ()

    @property
    def new_text(self) -> str:
        if self.tool == "Edit":
            return self.new_string
        return "\n".join(i.text for i in self.insertions)

    def describe_change(self) -> str:
        """The change as shown to the judge."""
        if self.tool == "Edit":
            return (
                "The agent used Edit, replacing this exact text of the original file:\n"
                f"<<<OLD\n{self.old_string}\nOLD>>>\nwith this text:\n"
                f"<<<NEW\n{self.new_string}\nNEW>>>"
            )
        parts = ["The agent rewrote the file with Write, keeping the original text and adding:"]
        for ins in self.insertions:
            where = "at the top" if ins.after_line == 0 else f"after original line {ins.after_line}"
            parts.append(f"--- inserted {where}:\n<<<NEW\n{ins.text}\nNEW>>>")
        return "\n".join(parts)


@dataclass
class AppendSearch:
    case: AppendCase | None = None
    notes: list[str] = field(default_factory=list)
    """Why earlier Write/Edit calls were not judged (for the null-score rationale)."""


def _lookup(before: Mapping[str, str], path: str) -> str | None:
    if path in before:
        return path
    folded = path.casefold()
    return next((p for p in before if p.casefold() == folded), None)


def write_insertions(original: str, content: str) -> tuple[Insertion, ...] | None:
    """The text a Write added while keeping every original line, or None if it did not."""
    old = [line.rstrip() for line in original.splitlines()]
    new = [line.rstrip() for line in content.splitlines()]
    raw_new = content.splitlines()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    inserts: list[Insertion] = []
    for tag, i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag == "insert":
            inserts.append(Insertion(after_line=i1, text="\n".join(raw_new[j1:j2])))
        elif tag != "equal":
            break
    else:
        return tuple(inserts) if inserts else None
    stripped = original.strip()
    if stripped and stripped in content and content.strip() != stripped:
        head, _, tail = content.partition(stripped)
        found = []
        if head.strip():
            found.append(Insertion(after_line=0, text=head.strip("\n")))
        if tail.strip():
            found.append(Insertion(after_line=len(old), text=tail.strip("\n")))
        return tuple(found)
    return None


def find_append(calls: Sequence[ToolCallRecord], before: Mapping[str, str]) -> AppendSearch:
    """The first successful Edit/Write-append to a file that existed before the run."""
    search = AppendSearch()
    for call in calls:
        if call.is_error or call.tool_name not in ("Edit", "Write"):
            continue
        path = pkm_relative(str(call.arguments.get("file_path", "")))
        key = _lookup(before, path)
        if key is None or not before[key].strip():
            search.notes.append(f"{call.tool_name} {path}: new file")
            continue
        original = before[key]
        if call.tool_name == "Edit":
            old_string = str(call.arguments.get("old_string", ""))
            if not old_string:
                search.notes.append(f"Edit {path}: empty old_string (creates a file)")
                continue
            search.case = AppendCase(
                path=key,
                tool="Edit",
                original=original,
                old_string=old_string,
                new_string=str(call.arguments.get("new_string", "")),
            )
            return search
        insertions = write_insertions(original, str(call.arguments.get("content", "")))
        if not insertions:
            search.notes.append(
                f"Write {path}: not an append (original text not kept, or nothing added)"
            )
            continue
        search.case = AppendCase(path=key, tool="Write", original=original, insertions=insertions)
        return search
    return search
