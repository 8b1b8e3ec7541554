"""The PKM file tools: Read, BatchRead, Write, Edit, Move, Remove.

Every path goes through the Sandbox; OS errors are turned into ToolErrors that name only the
virtual path (an OSError's own message would carry the real host path).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import Field

from promptloop.agents.pkm.paths import MAX_DEPTH, Entry, Sandbox, SandboxError, has_glob_chars
from promptloop.agents.pkm.reminders import read_reminders, wrap
from promptloop.agents.tools import Tool, ToolArgs, ToolError, ToolResult

MAX_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_OUTPUT_BYTES = 256 * 1024
MAX_BATCH_FILES = 50
SNIPPET_CONTEXT = 4

A = TypeVar("A", bound=ToolArgs)


class PkmObserver(Protocol):
    """What the tools report to the session: mutations, fired reminders, session history."""

    def mutated(self, tool: str, paths: list[str], arguments: dict[str, Any]) -> None: ...

    def reminded(self, texts: list[str]) -> None: ...

    def sessions(self) -> list[dict[str, object]]: ...


def os_guard(handler: Callable[[Any, A], ToolResult]) -> Callable[[Any, A], ToolResult]:
    """Turn OSError/UnicodeError into a ToolError without the (real) path in the message."""

    @functools.wraps(handler)
    def wrapper(self: Any, args: A) -> ToolResult:
        try:
            return handler(self, args)
        except OSError as err:
            reason = err.strerror or type(err).__name__
            raise ToolError(f"{handler.__name__.strip('_')} failed: {reason}") from None
        except UnicodeError as err:
            raise ToolError(f"the file is not valid text ({type(err).__name__})") from None

    return wrapper


def cut_line(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return line[:MAX_LINE_CHARS] + f"... [line truncated, {len(line)} chars]"


def number_lines(lines: list[str], start: int) -> str:
    """`cat -n` style: right-aligned line number, a tab, the (truncated) line."""
    return "\n".join(f"{n:>6}\t{cut_line(line)}" for n, line in enumerate(lines, start))


def read_text(sandbox: Sandbox, real: Path, virtual: str) -> str:
    """The file's text, read without following links (see `Sandbox.read_bytes`)."""
    data = sandbox.read_bytes(real) or b""
    if b"\x00" in data[:8192]:
        raise ToolError(f"{virtual} is a binary file and cannot be read as text")
    return data.decode("utf-8", errors="replace")


def require_file(real: Path, virtual: str) -> None:
    if real.is_dir():
        raise ToolError(f"{virtual} is a directory; use LS to list it")
    if not real.is_file():
        raise ToolError(f"{virtual} does not exist. Use LS or Glob to find the right path")


# -- argument models -------------------------------------------------------------------------


class ReadArgs(ToolArgs):
    file_path: str = Field(description="Virtual path of the file, e.g. /Areas/Health/sleep.md")
    offset: int = Field(1, ge=1, description="First line to show (1-based)")
    limit: int | None = Field(
        None, ge=1, description=f"How many lines to show (at most {MAX_LINES})"
    )


class BatchReadArgs(ToolArgs):
    file_patterns: list[str] = Field(
        min_length=1,
        max_length=MAX_BATCH_FILES,
        description="Virtual file paths or glob patterns, e.g. ['/Areas/Health/*.md']",
    )


class WriteArgs(ToolArgs):
    file_path: str = Field(description="Virtual path of the file to create or overwrite")
    content: str = Field(description="The complete new content of the file")


class EditArgs(ToolArgs):
    file_path: str = Field(description="Virtual path of the file to edit")
    old_string: str = Field(
        description="Exact text to replace (copy it from Read output, without line numbers). "
        "Empty string: create a new file containing new_string."
    )
    new_string: str = Field(description="Text that replaces old_string")
    replace_all: bool = Field(False, description="Replace every occurrence instead of one")


class MoveArgs(ToolArgs):
    source_path: str = Field(description="Virtual path of the file or folder to move")
    destination_path: str = Field(description="Its new virtual path (including the name)")
    overwrite: bool = Field(False, description="Replace an existing destination file")


class RemoveArgs(ToolArgs):
    path: str = Field(description="Virtual path of the file or folder to delete")
    confirm: bool = Field(description="Must be true; deletion cannot be undone")


READ_DESC = (
    "Read a text file of the PKM. Paths are virtual: '/' is the PKM root. Returns lines in "
    f"`cat -n` format (line number, tab, text); at most {MAX_LINES} lines per call, lines longer "
    f"than {MAX_LINE_CHARS} characters are truncated. Use offset (1-based) and limit to read a "
    "part of a long file. The line numbers are not part of the file: never copy them into "
    "Edit's old_string. System reminders about the file's structure may follow the content."
)
BATCH_DESC = (
    "Read several PKM files in one call. Each item is a virtual path or a glob pattern "
    "(`*` within a name, `**` across folders, e.g. '/Projects/**/*.md'). Every file is shown "
    f"under a header line `==> /path (N lines) <==` followed by numbered lines; up to "
    f"{MAX_BATCH_FILES} files and {MAX_OUTPUT_BYTES // 1024} KiB in total."
)
WRITE_DESC = (
    "Create a file, or overwrite an existing one with the complete new content. Missing parent "
    "folders are created. To add to an existing file prefer Edit (overwriting loses whatever "
    "you did not copy); Read a file before overwriting it."
)
EDIT_DESC = (
    "Replace text in a file. old_string must match the file exactly (whitespace included) and "
    "occur exactly once, unless replace_all is true; otherwise the error says how many matches "
    "were found. To append, use the file's last lines as old_string and repeat them at the start "
    "of new_string. An empty old_string creates a new file with new_string (error if the file "
    "exists and is not empty). Returns the changed region with line numbers."
)
MOVE_DESC = (
    "Move or rename a file or folder inside the PKM. destination_path is the full new path; "
    "missing parent folders are created. An existing destination is only replaced (files only) "
    "when overwrite is true."
)
REMOVE_DESC = (
    "Delete a file or a folder (with everything in it). confirm must be true. Use it to clean "
    "up after consolidating content, never to discard the user's notes."
)


class FileTools:
    """Handlers of the six file tools, bound to one sandbox and one observer."""

    def __init__(self, sandbox: Sandbox, observer: PkmObserver) -> None:
        self.sandbox = sandbox
        self.observer = observer

    def tools(self) -> list[Tool]:
        return [
            Tool("Read", READ_DESC, ReadArgs, self._read),
            Tool("BatchRead", BATCH_DESC, BatchReadArgs, self._batch_read),
            Tool("Write", WRITE_DESC, WriteArgs, self._write),
            Tool("Edit", EDIT_DESC, EditArgs, self._edit),
            Tool("Move", MOVE_DESC, MoveArgs, self._move),
            Tool("Remove", REMOVE_DESC, RemoveArgs, self._remove),
        ]

    # -- reading -------------------------------------------------------------------------------

    @os_guard
    def _read(self, args: ReadArgs) -> ToolResult:
        real, virtual = self.sandbox.resolve(args.file_path)
        require_file(real, virtual)
        text = read_text(self.sandbox, real, virtual)
        lines = text.splitlines()
        sessions = self.observer.sessions()
        if not text.strip():
            # the size reminders count the lines the Read returned: none here
            found = read_reminders(self.sandbox, real, virtual, 0, sessions)
            self.observer.reminded(found)
            extra = [wrap(r) for r in found]
            return ToolResult(content="\n\n".join([wrap(f"File is empty: {virtual}"), *extra]))
        if args.offset > len(lines):
            raise ToolError(
                f"offset {args.offset} is past the end of {virtual}, which has {len(lines)} lines"
            )
        limit = min(args.limit or MAX_LINES, MAX_LINES)
        chunk = lines[args.offset - 1 : args.offset - 1 + limit]
        body = number_lines(chunk, args.offset)
        size = len(body.encode("utf-8"))
        if size > MAX_OUTPUT_BYTES:
            raise ToolError(
                f"reading {virtual} this way would return {size // 1024} KiB, more than "
                f"{MAX_OUTPUT_BYTES // 1024} KiB. Read a part with offset and limit (the file "
                f"has {len(lines)} lines), or use Grep to find the lines you need"
            )
        found = read_reminders(self.sandbox, real, virtual, len(chunk), sessions)
        self.observer.reminded(found)
        extra = [wrap(r) for r in found]
        last = args.offset - 1 + len(chunk)
        if last < len(lines):
            body += (
                f"\n\n(Showing lines {args.offset}-{last} of {len(lines)}. "
                f"Use offset={last + 1} to continue.)"
            )
        return ToolResult(content="\n\n".join([body, *extra]))

    @os_guard
    def _batch_read(self, args: BatchReadArgs) -> ToolResult:
        entries: dict[str, Entry] = {}
        problems: list[str] = []
        for index, pattern in enumerate(args.file_patterns, 1):
            try:
                matches = self.sandbox.glob(pattern) if has_glob_chars(pattern) else []
                if matches:
                    for entry in matches:
                        entries.setdefault(entry.virtual, entry)
                    continue
                if has_glob_chars(pattern) and not self.sandbox.resolve(pattern)[0].is_file():
                    problems.append(f"no files match {pattern}")
                    continue
                real, virtual = self.sandbox.resolve(pattern)
                require_file(real, virtual)
                entries.setdefault(virtual, Entry(real, virtual, False, 0))
            except SandboxError as err:  # never echo a rejected path: it may be a host path
                problems.append(f"item {index}: {err}")
            except ToolError as err:
                problems.append(str(err))
        if not entries:
            raise ToolError("nothing to read. " + "; ".join(problems))
        sections: list[str] = []
        used = 0
        skipped: list[str] = []
        for virtual, entry in list(entries.items())[:MAX_BATCH_FILES]:
            try:
                text = read_text(self.sandbox, entry.real, virtual)
            except ToolError as err:
                problems.append(str(err))
                continue
            lines = text.splitlines()
            body = number_lines(lines[:MAX_LINES], 1) if text.strip() else "(empty file)"
            if len(lines) > MAX_LINES:
                body += f"\n(Only the first {MAX_LINES} lines; use Read with offset for more.)"
            section = f"==> {virtual} ({len(lines)} lines) <==\n{body}"
            size = len(section.encode("utf-8"))
            if used + size > MAX_OUTPUT_BYTES:
                skipped.append(virtual)
                continue
            used += size
            sections.append(section)
        if not sections and not skipped:
            raise ToolError("nothing could be read. " + "; ".join(problems))
        skipped.extend(list(entries)[MAX_BATCH_FILES:])
        if skipped:
            sections.append("Output limit reached; read these separately: " + ", ".join(skipped))
        if problems:
            sections.append("Not read: " + "; ".join(problems))
        return ToolResult(content="\n\n".join(sections))

    # -- mutating ------------------------------------------------------------------------------

    def _target_file(self, path: str) -> tuple[Path, str]:
        real, virtual = self.sandbox.resolve(path)
        if virtual == "/":
            raise ToolError("the PKM root is a folder; give a file path such as /Areas/notes.md")
        if real.is_dir():
            raise ToolError(f"{virtual} is a directory, not a file")
        if real.exists() and not real.is_file():
            raise ToolError(f"{virtual} is not a regular file")
        return real, virtual

    @os_guard
    def _write(self, args: WriteArgs) -> ToolResult:
        real, virtual = self._target_file(args.file_path)
        existed = self.sandbox.write_bytes(real, args.content.encode("utf-8"))
        self.observer.mutated("Write", [virtual], args.model_dump())
        n = len(args.content.splitlines())
        verb = "Overwrote" if existed else "Created"
        return ToolResult(content=f"{verb} {virtual} ({n} lines).")

    @os_guard
    def _edit(self, args: EditArgs) -> ToolResult:
        real, virtual = self._target_file(args.file_path)
        if args.old_string == "":
            if real.exists() and read_text(self.sandbox, real, virtual).strip():
                raise ToolError(
                    f"{virtual} already exists and is not empty; Read it and pass the text to "
                    "replace as old_string"
                )
            self.sandbox.write_bytes(real, args.new_string.encode("utf-8"))
            self.observer.mutated("Edit", [virtual], args.model_dump())
            lines = args.new_string.splitlines()
            return ToolResult(
                content=f"Created {virtual}:\n" + number_lines(lines[: 2 * SNIPPET_CONTEXT + 1], 1)
            )
        require_file(real, virtual)
        text = read_text(self.sandbox, real, virtual)
        count = text.count(args.old_string)
        if count == 0:
            raise ToolError(
                f"old_string was not found in {virtual} (0 matches). Read the file and copy the "
                "exact text, whitespace included and without line numbers"
            )
        if count > 1 and not args.replace_all:
            raise ToolError(
                f"old_string occurs {count} times in {virtual}; include more surrounding text "
                "so it matches exactly once, or set replace_all to true"
            )
        if args.old_string == args.new_string:
            raise ToolError("old_string and new_string are identical; nothing would change")
        pos = text.index(args.old_string)
        new_text = text.replace(args.old_string, args.new_string, -1 if args.replace_all else 1)
        self.sandbox.write_bytes(real, new_text.encode("utf-8"))
        self.observer.mutated("Edit", [virtual], args.model_dump())
        first = text[:pos].count("\n")
        last = first + args.new_string.count("\n")
        lines = new_text.splitlines()
        lo = max(0, first - SNIPPET_CONTEXT)
        hi = min(len(lines), last + SNIPPET_CONTEXT + 1)
        label = f"{count} replacements" if args.replace_all and count > 1 else "1 replacement"
        return ToolResult(
            content=f"Edited {virtual} ({label}). Result around the change:\n"
            + number_lines(lines[lo:hi], lo + 1)
        )

    @os_guard
    def _move(self, args: MoveArgs) -> ToolResult:
        src, src_v = self.sandbox.resolve(args.source_path, follow_final=False)
        dst, dst_v = self.sandbox.resolve(args.destination_path, follow_final=False)
        if "/" in (src_v, dst_v):
            raise ToolError("the PKM root itself cannot be moved or replaced")
        if not os.path.lexists(src):
            raise ToolError(f"{src_v} does not exist")
        if src_v == dst_v:
            raise ToolError("source and destination are the same path")
        if dst_v.startswith(src_v + "/"):
            raise ToolError(f"cannot move {src_v} into itself")
        if os.path.lexists(dst):
            if not args.overwrite:
                raise ToolError(f"{dst_v} already exists; set overwrite to true to replace it")
            if dst.is_dir() and not dst.is_symlink():
                raise ToolError(f"{dst_v} is a folder; only files can be overwritten")
        self._check_moved_depth(src, dst_v)
        self.sandbox.rename(src, dst)
        self.observer.mutated("Move", [dst_v], args.model_dump())
        return ToolResult(content=f"Moved {src_v} to {dst_v}.")

    def _check_moved_depth(self, src: Path, dst_v: str) -> None:
        """Refuse a Move that would put something deeper than MAX_DEPTH levels: each Move of a
        folder could otherwise stack its depth onto the destination's."""
        deepest = 0
        if src.is_dir() and not src.is_symlink():
            deepest = max((e.depth for e in self.sandbox.walk(src, include_hidden=True)),
                          default=0)
        if dst_v.count("/") + deepest > MAX_DEPTH:
            raise ToolError(
                f"the move would put files deeper than {MAX_DEPTH} levels; keep the knowledge "
                "base shallow (e.g. /Areas/Health/sleep.md)"
            )

    @os_guard
    def _remove(self, args: RemoveArgs) -> ToolResult:
        if not args.confirm:
            raise ToolError("Remove needs confirm set to true")
        real, virtual = self.sandbox.resolve(args.path, follow_final=False)
        if virtual == "/":
            raise ToolError("the PKM root cannot be removed")
        if not os.path.lexists(real):
            raise ToolError(f"{virtual} does not exist")
        kind = self.sandbox.remove(real)
        self.observer.mutated("Remove", [], args.model_dump())
        return ToolResult(content=f"Removed {kind} {virtual}.")


__all__ = ["FileTools", "PkmObserver", "SandboxError"]
