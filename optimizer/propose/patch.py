"""Parse, apply and render the proposer's prompt patches.

Proposer models write unified diffs with wrong hunk counts, missing context spaces and prose
around them. We parse with unidiff when the diff is well formed and fall back to a lenient
parser otherwise, then apply hunks by locating their old lines in the file (the header line
numbers are only a hint). Every error is a `PatchError` whose message tells the model what to
fix, so the loop can send it back. The canonical diff stored everywhere is `render_unified` of
the applied result, never the model's text. Guards live in `optimizer.propose.guards`.
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass

import unidiff

_FENCE_RE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
_HUNK_HEADER_RE = re.compile(r"^@@+\s*(?:-(\d+)(?:,(\d+))?)?\s*(?:\+(\d+)(?:,(\d+))?)?\s*@@+")
DEV_NULL = "/dev/null"


class PatchError(ValueError):
    """A diff or edit that cannot be parsed or applied; the message is written for the model."""


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

    @property
    def path(self) -> str:
        return self.target or self.source or ""


@dataclass(frozen=True)
class ParsedDiff:
    files: tuple[FilePatch, ...]
    lenient: bool
    """True when unidiff rejected the diff (wrong counts) and the lenient parser read it."""

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the diff touches (sources and targets), in order, without duplicates."""
        out: list[str] = []
        for f in self.files:
            for p in (f.source, f.target):
                if p is not None and p not in out:
                    out.append(p)
        return tuple(out)

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


def normalize_path(path: str) -> str:
    """Strip the a/ b/ prefixes, a leading ./ or /, and a trailing timestamp (GNU diff)."""
    p = path.strip().split("\t")[0].strip()
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


# --- extraction and parsing ----------------------------------------------------------------


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
                     "starts with '--- a/<path>' and '+++ b/<path>' lines followed by '@@' hunks")


def parse_diff(diff_text: str) -> ParsedDiff:
    """Parse with unidiff; fall back to the lenient parser when the hunk counts are wrong."""
    if not diff_text.strip():
        raise PatchError("the diff is empty: send a unified diff with ---/+++ headers and hunks")
    lenient = _parse_lenient(diff_text)
    try:
        patch = unidiff.PatchSet(diff_text)
    except unidiff.UnidiffParseError:
        return lenient
    strict = ParsedDiff(tuple(_from_unidiff(f) for f in patch), lenient=False)
    # unidiff silently stops a hunk whose header count is too small; trust it only when it
    # read the same lines as the lenient parser.
    if strict.files and [f.hunks for f in strict.files] == [f.hunks for f in lenient.files]:
        return strict
    return lenient


def _eof_markers(tags: list[str]) -> tuple[bool, bool]:
    """(old lacks, new lacks) the final newline, from the tags with '\\' marker lines."""
    old = new = False
    for prev, tag in itertools.pairwise(tags):
        if tag == "\\":
            old = old or prev in (" ", "-")
            new = new or prev in (" ", "+")
    return old, new


def _from_unidiff(f: unidiff.PatchedFile) -> FilePatch:
    hunks = []
    for h in f:
        tags = [ln.line_type for ln in h]
        lines = tuple((ln.line_type, ln.value.rstrip("\r\n")) for ln in h
                      if ln.line_type in (" ", "-", "+"))
        hunks.append(Hunk(lines, h.source_start, *_eof_markers(tags)))
    src, tgt = normalize_path(f.source_file), normalize_path(f.target_file)
    return FilePatch(None if src == DEV_NULL else src, None if tgt == DEV_NULL else tgt,
                     tuple(hunks))


def _parse_lenient(diff_text: str) -> ParsedDiff:
    files: list[FilePatch] = []
    src: str | None = None
    tgt: str | None = None
    hunks: list[Hunk] = []
    cur: list[tuple[str, str]] | None = None
    cur_start = 0
    stray: tuple[int, str] | None = None  # a non-diff line inside a hunk, fatal if more follow

    def close_hunk() -> None:
        nonlocal cur, stray
        if cur is not None:
            while cur and cur[-1][0] == "~":
                cur.pop()  # empty lines after the last hunk line are the reply's, not context
            if any(tag in "+-" for tag, _ in cur):
                body = tuple((" " if t == "~" else t, x) for t, x in cur if t != "\\")
                hunks.append(Hunk(body, cur_start, *_eof_markers([t for t, _ in cur])))
        cur, stray = None, None

    def close_file() -> None:
        nonlocal hunks
        close_hunk()
        if src is not None or tgt is not None:
            files.append(FilePatch(src, tgt, tuple(hunks)))
        hunks = []

    lines = diff_text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\r")
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            close_file()
            s, t = normalize_path(line[4:]), normalize_path(lines[i + 1][4:])
            src, tgt = (None if s == DEV_NULL else s), (None if t == DEV_NULL else t)
            i += 2
            continue
        header = _HUNK_HEADER_RE.match(line)
        if header:
            if src is None and tgt is None:
                raise PatchError(f"line {i + 1}: hunk '@@' before any '--- a/<path>' / "
                                 "'+++ b/<path>' header lines")
            close_hunk()
            cur, cur_start = [], int(header.group(1) or 0)
        elif cur is not None:
            if line.startswith("\\"):
                cur.append(("\\", ""))  # "\ No newline at end of file"
            elif line == "" or line[0] in " -+":
                if stray is not None and line != "":
                    raise PatchError(f"line {stray[0]} inside a hunk does not start with ' ', "
                                     f"'-' or '+': {stray[1]!r}. Prefix every unchanged context "
                                     "line with one space.")
                # "~": an empty line, a blank context line that lost its space (or trailing)
                tag, text = ("~", "") if line == "" else (line[0], line[1:])
                cur.append((tag, text))
            elif stray is None:
                stray = (i + 1, line)
        i += 1
    close_file()
    if not files:
        raise PatchError("no file headers found: a unified diff needs '--- a/<path>' and "
                         "'+++ b/<path>' lines before its '@@' hunks")
    if not any(f.hunks for f in files):
        raise PatchError("the diff has file headers but no hunks with '-' or '+' lines: add "
                         "'@@ -<line>,<count> +<line>,<count> @@' hunks")
    return ParsedDiff(tuple(files), lenient=True)


# --- applying --------------------------------------------------------------------------------


def split_lines(text: str) -> tuple[list[str], bool]:
    """The lines of `text` without newlines, and whether it ended with one."""
    if text == "":
        return [], False
    ends = text.endswith("\n")
    return text.removesuffix("\n").split("\n"), ends


def join_lines(lines: list[str], trailing_newline: bool) -> str:
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if trailing_newline else "")


def _find_block(lines: list[str], block: tuple[str, ...]) -> list[int]:
    n = len(block)
    exact = [i for i in range(len(lines) - n + 1) if tuple(lines[i:i + n]) == block]
    if exact:
        return exact
    stripped = tuple(b.rstrip() for b in block)
    return [i for i in range(len(lines) - n + 1)
            if tuple(x.rstrip() for x in lines[i:i + n]) == stripped]


def _not_found(lines: list[str], block: tuple[str, ...], index: int, path: str) -> PatchError:
    best_len, best_at = 0, 0
    for i in range(len(lines)):
        k = 0
        while k < len(block) and i + k < len(lines) and lines[i + k].rstrip() == block[k].rstrip():
            k += 1
        if k > best_len:
            best_len, best_at = k, i
    bad = block[best_len] if best_len < len(block) else block[-1]
    close = difflib.get_close_matches(bad, lines, n=2, cutoff=0.6)
    where = (f" (the {best_len} line(s) before it match file line {best_at + 1})"
             if best_len else "")
    hint = f"; closest file lines: {', '.join(repr(c) for c in close)}" if close else ""
    return PatchError(f"hunk {index + 1} does not apply to {path}: the line {bad!r} was not "
                      f"found where expected{where}{hint}. Copy context and '-' lines exactly "
                      "from the current file.")


def apply_diff(original: str, diff: ParsedDiff | str, target_path: str) -> str:
    """Apply the diff's hunks for `target_path` to `original`, locating them by content."""
    parsed = parse_diff(diff) if isinstance(diff, str) else diff
    hunks = parsed.hunks_for(target_path)
    if not hunks:
        raise PatchError(f"the diff has no hunks for {target_path}; its paths are: "
                         f"{', '.join(parsed.paths) or '(none)'}")
    lines, trailing = split_lines(original)
    placed: list[tuple[int, int, Hunk]] = []  # (start, old length, hunk) in original lines
    for idx, hunk in enumerate(hunks):
        block = hunk.old_lines
        if not block:
            start = min(max(hunk.old_start, 0), len(lines))
            matches = [start]
        else:
            matches = _find_block(lines, block)
            if not matches:
                raise _not_found(lines, block, idx, target_path)
        free = [m for m in matches if not any(m < s + n and s < m + len(block)
                                              for s, n, _ in placed)]
        if not free:
            raise PatchError(f"hunk {idx + 1} overlaps an earlier hunk in {target_path}; "
                             "merge overlapping hunks into one")
        if len(free) > 1:
            if hunk.old_start <= 0:
                raise PatchError(f"hunk {idx + 1} is ambiguous in {target_path}: its lines match "
                                 f"at lines {', '.join(str(m + 1) for m in free)}; add more "
                                 "context lines or a correct '@@ -<line>' header")
            hint = hunk.old_start - 1
            free.sort(key=lambda m: (abs(m - hint), m))
        start = free[0]
        placed.append((start, len(block), hunk))
    at_end = [h for s, n, h in placed if s + n == len(lines)]
    for start, n, hunk in sorted(placed, key=lambda p: p[0], reverse=True):
        old = lines[start:start + n]
        new: list[str] = []
        pos = 0
        for tag, text in hunk.lines:
            if tag == " ":
                new.append(old[pos])  # keep the file's own text for context lines
                pos += 1
            elif tag == "-":
                pos += 1
            else:
                new.append(text)
        lines[start:start + n] = new
    if at_end and at_end[-1].new_no_newline:
        trailing = False
    elif (at_end and at_end[-1].old_no_newline) or (original == "" and lines):
        trailing = True
    return join_lines(lines, trailing)


def render_unified(original: str, new: str, path: str) -> str:
    """The canonical unified diff (a/<path>, b/<path>, 3 context lines); '' when unchanged."""
    if original == new:
        return ""
    out: list[str] = []
    for line in difflib.unified_diff(original.splitlines(keepends=True),
                                     new.splitlines(keepends=True),
                                     fromfile=f"a/{path}", tofile=f"b/{path}", n=3):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


@dataclass(frozen=True)
class LineStats:
    added: int
    removed: int
    changed: int
    """A replaced block of i old and j new lines counts max(i, j); inserts and deletes count
    their own length. This is what --max-changed-lines limits."""
    added_lines: tuple[str, ...]
    removed_lines: tuple[str, ...]


def line_stats(original: str, new: str) -> LineStats:
    """Line-level change statistics of `original` -> `new` (difflib opcodes)."""
    a, _ = split_lines(original)
    b, _ = split_lines(new)
    added: list[str] = []
    removed: list[str] = []
    changed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        removed.extend(a[i1:i2])
        added.extend(b[j1:j2])
        changed += max(i2 - i1, j2 - j1)
    return LineStats(len(added), len(removed), changed, tuple(added), tuple(removed))
