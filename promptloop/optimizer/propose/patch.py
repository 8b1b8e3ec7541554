"""Parse the proposer's prompt patches.

Proposer models write unified diffs with wrong hunk counts, missing context spaces and prose
around them. We read every diff with a lenient parser that also understands git's extended
headers (renames, copies, mode changes, symlinks, binary patches), and trust unidiff's strict
reading of the hunks when it agrees. Every error is a `PatchError` whose message tells the model
what to fix, so the loop can send it back. Applying and rendering live in
`promptloop.optimizer.propose.apply`; guards in `promptloop.optimizer.propose.guards`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace

import unidiff

_FENCE_RE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
_HUNK_HEADER_RE = re.compile(r"^@@+\s*(?:-(\d+)(?:,(\d+))?)?\s*(?:\+(\d+)(?:,(\d+))?)?\s*@@+")
_BINARY_RE = re.compile(r"^Binary files (.+) and (.+) differ\s*$")
_QUOTED_PATH_RE = re.compile(r'^"((?:[^"\\]|\\.)*)"')
_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
            '"': '"', "\\": "\\"}
DEV_NULL = "/dev/null"
SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"


class PatchError(ValueError):
    """A diff or edit that cannot be parsed or applied. The message is written for the model
    (it goes back in the retry); `user` says the same to a person, without the instruction."""

    def __init__(self, message: str, user: str | None = None) -> None:
        super().__init__(message)
        self.user = user or message


@dataclass(frozen=True)
class Hunk:
    """One hunk: its tagged lines (' ', '-', '+') and the header's old start line (0 = none)."""

    lines: tuple[tuple[str, str], ...]
    old_start: int = 0
    old_no_newline: bool = False
    new_no_newline: bool = False
    """'\\ No newline at end of file' after the hunk's last old / new line."""

    @property
    def old_lines(self) -> tuple[str, ...]:
        """Context and removed lines: what must be found in the file."""
        return tuple(text for tag, text in self.lines if tag != "+")

    @property
    def new_lines(self) -> tuple[str, ...]:
        """Context and added lines: what replaces the old block."""
        return tuple(text for tag, text in self.lines if tag != "-")

    @property
    def added(self) -> int:
        return sum(1 for tag, _ in self.lines if tag == "+")

    @property
    def removed(self) -> int:
        return sum(1 for tag, _ in self.lines if tag == "-")


@dataclass(frozen=True)
class FilePatch:
    source: str | None
    """Path before the change (a/ stripped), None for a created file."""
    target: str | None
    """Path after the change (b/ stripped), None for a deleted file."""
    hunks: tuple[Hunk, ...]
    git_paths: tuple[str, ...] = ()
    """The paths of a `diff --git a/X b/Y` header (empty without one)."""
    operation: str = ""
    """'rename' or 'copy' when git's extended header says so."""
    old_mode: str = ""
    new_mode: str = ""
    """File modes from 'old mode' / 'new mode' / 'new file mode' / 'deleted file mode'."""
    binary: bool = False
    """'GIT binary patch' or 'Binary files ... differ': content the hunks do not show."""

    @property
    def path(self) -> str:
        return self.target or self.source or ""

    @property
    def all_paths(self) -> tuple[str, ...]:
        """Every path this section names: ---/+++, the git header, rename/copy from/to."""
        found = [p for p in (self.source, self.target, *self.git_paths) if p and p != DEV_NULL]
        return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class ParsedDiff:
    files: tuple[FilePatch, ...]
    lenient: bool
    """True when unidiff rejected the diff (wrong counts) and the lenient parser read it."""

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the diff touches (sources, targets, git headers), in order, once."""
        return tuple(dict.fromkeys(p for f in self.files for p in f.all_paths))

    @property
    def hunks(self) -> tuple[Hunk, ...]:
        return tuple(h for f in self.files for h in f.hunks)

    @property
    def added(self) -> int:
        return sum(h.added for h in self.hunks)

    @property
    def removed(self) -> int:
        return sum(h.removed for h in self.hunks)

    def hunks_for(self, path: str) -> tuple[Hunk, ...]:
        return tuple(h for f in self.files if same_path(f.path, path) for h in f.hunks)


def _unquote(path: str) -> str:
    """Git's C-style quoting of unusual path names ("a/t\\303\\251st.md" -> a/tést.md)."""
    m = _QUOTED_PATH_RE.match(path)
    if not m:
        return path
    raw, out, i = m.group(1), bytearray(), 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt in "0123" and re.match(r"[0-7]{3}", raw[i + 1:i + 4]):
                out.append(int(raw[i + 1:i + 4], 8))
                i += 4
                continue
            out.extend(_ESCAPES.get(nxt, nxt).encode())
            i += 2
            continue
        out.extend(ch.encode())
        i += 1
    return out.decode("utf-8", errors="replace")


def normalize_path(path: str) -> str:
    """Strip quoting, the a/ b/ prefixes, a leading ./ or /, and a trailing timestamp."""
    p = path.strip()
    p = _unquote(p) if p.startswith('"') else p.split("\t")[0].strip()
    if p == DEV_NULL:
        return p
    if p.startswith(("a/", "b/")):
        p = p[2:]
    while p.startswith("./"):
        p = p[2:]
    return p.lstrip("/")


def same_path(diff_path: str, target_path: str) -> bool:
    """A diff path names the target when equal, or when it is the bare file name of it."""
    d, t = normalize_path(diff_path), normalize_path(target_path)
    return d == t or ("/" not in d and d == t.rsplit("/", 1)[-1])


# --- extraction ----------------------------------------------------------------------------


def _looks_like_diff(text: str) -> bool:
    return bool(re.search(r"^(---|\+\+\+) ", text, re.MULTILINE)) and "@@" in text


def extract_diff(model_text: str) -> str:
    """The unified diff in a reply: fenced ```diff blocks (joined) or raw ---/+++ text."""
    blocks = [m.group(2) for m in _FENCE_RE.finditer(model_text)
              if m.group(1).lower() in ("diff", "patch", "udiff", "")]
    diffs = [b for b in blocks if _looks_like_diff(b)]
    if diffs:
        return "".join(d if d.endswith("\n") else d + "\n" for d in diffs)
    lines = model_text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        starts_git = line.startswith("diff --git ")
        starts_plain = (line.startswith("--- ") and i + 1 < len(lines)
                        and lines[i + 1].startswith("+++ "))
        if starts_git or starts_plain:
            text = "".join(lines[i:])
            return text if text.endswith("\n") else text + "\n"
    raise PatchError("no unified diff found in the reply: answer with one ```diff block that "
                     "starts with '--- a/<path>' and '+++ b/<path>' lines followed by '@@' hunks",
                     user="the reply contained no diff")


# --- parsing -------------------------------------------------------------------------------


def parse_diff(diff_text: str) -> ParsedDiff:
    """Parse leniently (git headers included); when unidiff reads the same hunks, the diff is
    well formed and `lenient` is False."""
    if not diff_text.strip():
        raise PatchError("the diff is empty: send a unified diff with ---/+++ headers and hunks",
                         user="the diff was empty")
    lenient = _Lenient().parse(diff_text)
    try:
        patch = unidiff.PatchSet(diff_text)
    except unidiff.UnidiffParseError:
        return lenient
    # unidiff silently stops a hunk whose header count is too small; trust it only when it
    # read the same lines as the lenient parser.
    strict_hunks = [tuple(_unidiff_hunks(f)) for f in patch]
    if strict_hunks and strict_hunks == [f.hunks for f in lenient.files]:
        return replace(lenient, lenient=False)
    return lenient


def _eof_markers(tags: list[str]) -> tuple[bool, bool]:
    """(old lacks, new lacks) the final newline, from the tags with '\\' marker lines."""
    old = new = False
    for prev, tag in itertools.pairwise(tags):
        if tag == "\\":
            old = old or prev in (" ", "-")
            new = new or prev in (" ", "+")
    return old, new


def _unidiff_hunks(f: unidiff.PatchedFile) -> list[Hunk]:
    hunks = []
    for h in f:
        tags = [ln.line_type for ln in h]
        lines = tuple((ln.line_type, ln.value.rstrip("\r\n")) for ln in h
                      if ln.line_type in (" ", "-", "+"))
        hunks.append(Hunk(lines, h.source_start, *_eof_markers(tags)))
    return hunks


def _git_header_paths(rest: str) -> tuple[str, ...]:
    """The two paths of `diff --git a/X b/Y` (quoted, or split where both halves agree)."""
    rest = rest.strip()
    m = _QUOTED_PATH_RE.match(rest)
    if m:
        return normalize_path(m.group(0)), normalize_path(rest[m.end():])
    n = (len(rest) - 5) // 2
    if rest.startswith("a/") and rest[2 + n:5 + n] == " b/" and rest[2:2 + n] == rest[5 + n:]:
        return normalize_path(rest[:2 + n]), normalize_path(rest[3 + n:])
    for sep in (' "b/', " b/", " "):
        at = rest.rfind(sep)
        if at > 0:
            return normalize_path(rest[:at]), normalize_path(rest[at + 1:])
    return (normalize_path(rest),)


@dataclass
class _File:
    """A file section being read: mutable until it is closed into a `FilePatch`."""

    source: str | None = None
    target: str | None = None
    git_paths: tuple[str, ...] = ()
    operation: str = ""
    old_mode: str = ""
    new_mode: str = ""
    binary: bool = False
    in_header: bool = False
    has_plain_header: bool = False
    hunks: list[Hunk] | None = None

    def header_line(self, line: str) -> bool:
        """Read one git extended header line; False when it is not one."""
        key, _, value = line.partition(" ")
        words = line.split(" ", 2)
        if line.startswith(("old mode ", "new mode ")):
            setattr(self, "old_mode" if key == "old" else "new_mode", line.rsplit(" ", 1)[-1])
        elif line.startswith("deleted file mode "):
            self.target, self.old_mode = None, value.rsplit(" ", 1)[-1]
        elif line.startswith("new file mode "):
            self.source, self.new_mode = None, value.rsplit(" ", 1)[-1]
        elif words[0] in ("rename", "copy") and len(words) == 3 and words[1] in ("from", "to"):
            path = normalize_path(words[2])
            self.operation = words[0]
            self.git_paths = (*self.git_paths, path)
            if words[1] == "from":
                self.source = path
            else:
                self.target = path
        elif line.startswith(("similarity index ", "dissimilarity index ", "index ")):
            pass
        else:
            return False
        return True

    def close(self) -> FilePatch | None:
        if self.source is None and self.target is None and not self.git_paths:
            return None
        return FilePatch(self.source, self.target, tuple(self.hunks or ()), self.git_paths,
                         self.operation, self.old_mode, self.new_mode, self.binary)

    @property
    def has_metadata(self) -> bool:
        return bool(self.operation or self.old_mode or self.new_mode or self.binary)


class _Lenient:
    """Reads a diff line by line: git headers, ---/+++ pairs, hunks with sloppy counts."""

    def __init__(self) -> None:
        self.files: list[FilePatch] = []
        self.metadata = False
        self.file: _File | None = None
        self.cur: list[tuple[str, str]] | None = None
        self.cur_start = 0
        self.stray: tuple[int, str] | None = None  # a non-diff line in a hunk: fatal if more follow
        self.in_binary = False

    def close_hunk(self) -> None:
        cur = self.cur
        if cur is not None and self.file is not None:
            while cur and cur[-1][0] == "~":
                cur.pop()  # empty lines after the last hunk line are the reply's, not context
            if any(tag in "+-" for tag, _ in cur):
                body = tuple((" " if t == "~" else t, x) for t, x in cur if t != "\\")
                hunk = Hunk(body, self.cur_start, *_eof_markers([t for t, _ in cur]))
                self.file.hunks = [*(self.file.hunks or []), hunk]
        self.cur, self.stray = None, None

    def close_file(self, new: _File | None = None) -> None:
        self.close_hunk()
        if self.file is not None:
            self.metadata = self.metadata or self.file.has_metadata
            closed = self.file.close()
            if closed is not None:
                self.files.append(closed)
        self.file, self.in_binary = new, False

    def parse(self, diff_text: str) -> ParsedDiff:
        lines = [ln.rstrip("\r") for ln in diff_text.splitlines()]
        i = 0
        while i < len(lines):
            i += self.line(lines, i)
        self.close_file()
        if not self.files:
            raise PatchError("no file headers found: a unified diff needs '--- a/<path>' and "
                             "'+++ b/<path>' lines before its '@@' hunks",
                             user="the diff had no file headers")
        if not self.metadata and not any(f.hunks for f in self.files):
            raise PatchError("the diff has file headers but no hunks with '-' or '+' lines: add "
                             "'@@ -<line>,<count> +<line>,<count> @@' hunks",
                             user="the diff changed no line")
        return ParsedDiff(tuple(self.files), lenient=True)

    def line(self, lines: list[str], i: int) -> int:
        """Read line `i` (and the +++ line after a ---); returns how many lines were read."""
        line = lines[i]
        if line.startswith("diff --git "):
            paths = _git_header_paths(line[len("diff --git "):])
            self.close_file(_File(paths[0], paths[-1], paths, in_header=True))
            return 1
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            self.file_header(line[4:], lines[i + 1][4:])
            return 2
        binary = _BINARY_RE.match(line)
        if binary or line.startswith("GIT binary patch"):
            if self.file is None or (binary and not self.file.in_header):
                paths = tuple(normalize_path(p) for p in binary.groups()) if binary else ()
                src, tgt = paths or (None, None)
                self.close_file(_File(src, tgt, git_paths=paths))
            assert self.file is not None
            self.file.binary, self.in_binary = True, line.startswith("GIT")
            return 1
        if self.in_binary:
            return 1  # base85 payload of a binary patch
        if self.file is not None and self.file.in_header and self.file.header_line(line):
            return 1
        self.hunk_line(line, i)
        return 1

    def file_header(self, old: str, new: str) -> None:
        s, t = normalize_path(old), normalize_path(new)
        src, tgt = (None if s == DEV_NULL else s), (None if t == DEV_NULL else t)
        f = self.file
        if f is not None and f.in_header and not f.has_plain_header and not f.hunks:
            f.source, f.target, f.has_plain_header = src, tgt, True
            return
        self.close_file(_File(src, tgt, has_plain_header=True))

    def hunk_line(self, line: str, i: int) -> None:
        header = _HUNK_HEADER_RE.match(line)
        if header:
            if self.file is None:
                raise PatchError(f"line {i + 1}: hunk '@@' before any '--- a/<path>' / "
                                 "'+++ b/<path>' header lines",
                                 user="the diff had a hunk before its file headers")
            self.close_hunk()
            self.file.in_header = False
            self.cur, self.cur_start = [], int(header.group(1) or 0)
            return
        cur = self.cur
        if cur is None:
            return
        if line.startswith("\\"):
            cur.append(("\\", ""))  # "\ No newline at end of file"
        elif line == "" or line[0] in " -+":
            if self.stray is not None and line != "":
                raise PatchError(f"line {self.stray[0]} inside a hunk does not start with ' ', "
                                 f"'-' or '+': {self.stray[1]!r}. Prefix every unchanged context "
                                 "line with one space.",
                                 user=f"line {self.stray[0]} of the diff is malformed (no ' ', "
                                 "'-' or '+' prefix)")
            # "~": an empty line, a blank context line that lost its space (or trailing)
            cur.append(("~", "") if line == "" else (line[0], line[1:]))
        elif self.stray is None:
            self.stray = (i + 1, line)
