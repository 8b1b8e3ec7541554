"""The PKM search tools: LS (tree), Glob (names) and Grep (contents), plus the tree renderer
used for the first message. Traversal never follows a symlink out of the PKM root."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field

from promptloop.agents.pkm.fs_tools import MAX_OUTPUT_BYTES, cut_line, os_guard
from promptloop.agents.pkm.paths import Entry, Sandbox, check_pattern, glob_to_regex
from promptloop.agents.tools import Tool, ToolArgs, ToolError, ToolResult

MAX_LS_ENTRIES = 1000
MAX_GLOB_RESULTS = 100
DEFAULT_GREP_LINES = 500
MAX_GREP_FILE_BYTES = 5 * 1024 * 1024


class LSArgs(ToolArgs):
    path: str = Field(description="Virtual folder to list; '/' is the PKM root")
    ignore: list[str] = Field(
        default_factory=list, description="Glob patterns of names to leave out, e.g. ['*.png']"
    )
    depth: int = Field(3, ge=1, le=20, description="How many folder levels to show")


class GlobArgs(ToolArgs):
    pattern: str = Field(description="Glob pattern, e.g. '**/*.md' or '/Areas/**/sleep*'")
    path: str = Field("/", description="Virtual folder the pattern is relative to")


class GrepArgs(ToolArgs):
    pattern: str = Field(description="Regular expression (Python syntax) to search for")
    path: str = Field("/", description="Virtual file or folder to search in")
    include: str | None = Field(
        None, description="Only files matching this glob, e.g. '*.md' or 'Areas/**/*.md'"
    )
    output_mode: Literal["files_with_matches", "content", "count"] = Field(
        "files_with_matches",
        description="files_with_matches: paths only; content: matching lines; count: per file",
    )
    after: int | None = Field(
        None, validation_alias=AliasChoices("A", "-A"), ge=0, description="Lines after each match"
    )
    before: int | None = Field(
        None, validation_alias=AliasChoices("B", "-B"), ge=0, description="Lines before each match"
    )
    context: int | None = Field(
        None,
        validation_alias=AliasChoices("C", "-C"),
        ge=0,
        description="Lines before and after each match",
    )
    line_numbers: bool = Field(
        True,
        validation_alias=AliasChoices("n", "-n"),
        description="Show line numbers (content mode)",
    )
    ignore_case: bool = Field(
        True,
        validation_alias=AliasChoices("i", "-i"),
        description="Case-insensitive (default true)",
    )
    file_type: str | None = Field(
        None,
        validation_alias=AliasChoices("type", "file_type"),
        description="Only files of this type, by extension: 'md', 'txt', 'json', ...",
    )
    head_limit: int | None = Field(
        None, ge=1, description="Return only the first N output lines / files"
    )
    multiline: bool = Field(
        False, description="Let the pattern span lines ('.' also matches newlines)"
    )


LS_DESC = (
    "List a PKM folder as an indented tree (folders end with '/'). Paths are virtual: '/' is "
    f"the PKM root. Hidden entries are skipped; at most {MAX_LS_ENTRIES} entries. A folder "
    "marked '(more inside)' has deeper content: list it or raise depth."
)
GLOB_DESC = (
    "Find PKM files by name pattern (case-insensitive). `*` matches within a name, `**` across "
    "folders, `{a,b}` alternatives. Returns virtual paths, most recently modified first, at "
    f"most {MAX_GLOB_RESULTS}."
)
GREP_DESC = (
    "Search file contents with a regular expression (case-insensitive by default: set i to "
    "false for exact case). output_mode files_with_matches lists files, content shows matching "
    "lines as `path:line:text` with A/B/C context lines as `path-line-text`, count gives "
    "matches per file. Use include (a glob) or type (an extension such as 'md') to filter "
    "files and head_limit to cap the output."
)


@dataclass(frozen=True)
class _Tree:
    lines: list[str]
    total: int


def render_tree(
    sandbox: Sandbox,
    start: Path,
    *,
    depth: int | None,
    ignore: list[str] | tuple[str, ...] = (),
    max_entries: int = MAX_LS_ENTRIES,
) -> _Tree:
    """Indented tree of `start` (a resolved directory inside the sandbox)."""
    header = sandbox.to_virtual(start).rstrip("/") + "/"
    lines = [header]
    base_depth = 0
    ignored: list[str] = []
    total = 0
    for entry in sandbox.walk(start, max_depth=depth):
        if any(entry.virtual.startswith(p + "/") for p in ignored):
            continue
        if any(fnmatch.fnmatch(entry.virtual.rsplit("/", 1)[-1], pat) for pat in ignore):
            if entry.is_dir:
                ignored.append(entry.virtual)
            continue
        total += 1
        if len(lines) - 1 >= max_entries:
            continue
        name = entry.virtual.rsplit("/", 1)[-1]
        indent = "  " * (entry.depth - base_depth)
        suffix = "/" if entry.is_dir else ""
        more = ""
        at_limit = depth is not None and entry.depth >= depth
        if entry.is_dir and at_limit and _has_visible(sandbox, entry):
            more = " (more inside)"
        lines.append(f"{indent}{name}{suffix}{more}")
    return _Tree(lines, total)


def _has_visible(sandbox: Sandbox, entry: Entry) -> bool:
    try:
        return any(not item.name.startswith(".") for item in sandbox.list_dir(entry.real))
    except (OSError, ToolError):
        return False


_TYPE_SUFFIXES = {
    "md": (".md", ".markdown"),
    "markdown": (".md", ".markdown"),
    "txt": (".txt",),
    "text": (".txt",),
    "json": (".json",),
    "yaml": (".yaml", ".yml"),
    "yml": (".yaml", ".yml"),
    "csv": (".csv",),
    "html": (".html", ".htm"),
}


def _type_suffixes(file_type: str | None) -> tuple[str, ...]:
    """File name endings of a Grep `type` ('md' -> .md/.markdown; unknown 'x' -> .x)."""
    if not file_type or not file_type.strip():
        return ()
    key = file_type.strip().lower().lstrip("*").lstrip(".")
    return _TYPE_SUFFIXES.get(key, ("." + key,))


def _matches(pattern: re.Pattern[str], text: str, multiline: bool) -> list[tuple[int, int]]:
    """(first line, last line) 0-based ranges covered by each match."""
    if multiline:
        out = []
        for m in pattern.finditer(text):
            first = text.count("\n", 0, m.start())
            last = first + text.count("\n", m.start(), max(m.start(), m.end() - 1))
            out.append((first, last))
        return out
    return [(i, i) for i, line in enumerate(_split(text)) if pattern.search(line)]


def _split(text: str) -> list[str]:
    """Lines split on newlines only, so match offsets and line numbers agree."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


class SearchTools:
    """Handlers of LS, Glob and Grep bound to one sandbox."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def tools(self) -> list[Tool]:
        return [
            Tool("LS", LS_DESC, LSArgs, self._ls),
            Tool("Glob", GLOB_DESC, GlobArgs, self._glob),
            Tool("Grep", GREP_DESC, GrepArgs, self._grep),
        ]

    def _folder(self, path: str) -> tuple[Path, str]:
        real, virtual = self.sandbox.resolve(path)
        if not real.exists():
            raise ToolError(f"{virtual} does not exist")
        if not real.is_dir():
            raise ToolError(f"{virtual} is a file; use Read to see it")
        return real, virtual

    @os_guard
    def _ls(self, args: LSArgs) -> ToolResult:
        real, _ = self._folder(args.path)
        tree = render_tree(self.sandbox, real, depth=args.depth, ignore=args.ignore)
        lines = tree.lines
        if tree.total == 0:
            lines.append("  (empty)")
        elif tree.total > MAX_LS_ENTRIES:
            lines.append(
                f"... {tree.total - MAX_LS_ENTRIES} more entries not shown; list a subfolder "
                "or lower depth"
            )
        return ToolResult(content="\n".join(lines))

    @os_guard
    def _glob(self, args: GlobArgs) -> ToolResult:
        self._folder(args.path)
        found = self.sandbox.glob(args.pattern, base=args.path)
        if not found:
            return ToolResult(content=f"No files match {args.pattern}")
        shown = [e.virtual for e in found[:MAX_GLOB_RESULTS]]
        if len(found) > MAX_GLOB_RESULTS:
            shown.append(f"({len(found) - MAX_GLOB_RESULTS} more not shown; narrow the pattern)")
        return ToolResult(content="\n".join(shown))

    @os_guard
    def _grep(self, args: GrepArgs) -> ToolResult:
        flags = re.IGNORECASE if args.ignore_case else 0
        if args.multiline:
            flags |= re.MULTILINE | re.DOTALL
        try:
            regex = re.compile(args.pattern, flags)
        except re.error as err:
            raise ToolError(f"invalid regular expression: {err}") from None
        real, virtual = self.sandbox.resolve(args.path)
        if not real.exists():
            raise ToolError(f"{virtual} does not exist")
        if args.include:
            check_pattern(args.include)
        include = glob_to_regex(args.include) if args.include else None
        suffixes = _type_suffixes(args.file_type)
        base = virtual.rstrip("/") + "/"
        out: list[str] = []
        n_files = 0
        for entry in self.sandbox.files(real):
            name = entry.virtual.rsplit("/", 1)[-1]
            if include is not None:
                rel = entry.virtual[len(base) :] if entry.virtual.startswith(base) else ""
                subject = rel if "/" in (args.include or "") else name
                if not include.match(subject):
                    continue
            if suffixes and not name.lower().endswith(suffixes):
                continue
            text = self._text(entry.real)
            if text is None:
                continue
            spans = _matches(regex, text, args.multiline)
            if not spans:
                continue
            n_files += 1
            if args.output_mode == "files_with_matches":
                out.append(entry.virtual)
            elif args.output_mode == "count":
                out.append(f"{entry.virtual}:{len(spans)}")
            else:
                out.extend(self._content(entry.virtual, _split(text), spans, args))
        if not out:
            return ToolResult(content=f"No matches for {args.pattern!r} in {virtual}")
        limit = args.head_limit or (DEFAULT_GREP_LINES if args.output_mode == "content" else None)
        note = ""
        if limit is not None and len(out) > limit:
            note = f"\n({len(out) - limit} more lines not shown; raise head_limit or narrow)"
            out = out[:limit]
        body = "\n".join(out)
        if len(body.encode("utf-8")) > MAX_OUTPUT_BYTES:
            body = body.encode("utf-8")[:MAX_OUTPUT_BYTES].decode("utf-8", "ignore")
            note = "\n(output cut at 256 KiB; narrow the search or use head_limit)"
        if args.output_mode == "count":
            note += f"\n({n_files} files matched)"
        return ToolResult(content=body + note)

    def _text(self, path: Path) -> str | None:
        try:
            data = self.sandbox.read_bytes(path, max_bytes=MAX_GREP_FILE_BYTES)
        except (OSError, ToolError):  # unreadable, or refused by the sandbox: not searched
            return None
        if data is None or b"\x00" in data[:8192]:
            return None
        return data.decode("utf-8", errors="replace")

    @staticmethod
    def _content(
        virtual: str, lines: list[str], spans: list[tuple[int, int]], args: GrepArgs
    ) -> list[str]:
        ctx = args.context or 0
        before = args.before if args.before is not None else ctx
        after = args.after if args.after is not None else ctx
        matched = {i for a, b in spans for i in range(a, b + 1)}
        shown: list[int] = sorted(
            {i for a, b in spans for i in range(max(0, a - before), min(len(lines), b + after + 1))}
        )
        out: list[str] = []
        prev: int | None = None
        for i in shown:
            if prev is not None and i > prev + 1 and (before or after):
                out.append("--")
            sep = ":" if i in matched else "-"
            number = f"{i + 1}{sep}" if args.line_numbers else ""
            out.append(f"{virtual}{sep}{number}{cut_line(lines[i])}")
            prev = i
        return out
