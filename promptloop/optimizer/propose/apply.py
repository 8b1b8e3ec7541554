"""Apply parsed prompt patches by content, render the canonical diff, count what changed.

Hunks are located by their old lines (the header line numbers are only a hint). A proposer that
copies context from the package's numbered prompt (`"   7  text"`, the format of
`number_line`) is understood: that prefix is stripped when, and only when, its number is the
line's own number in the file, so lines that genuinely start with digits still match as written.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass

from promptloop.optimizer.propose.patch import Hunk, ParsedDiff, PatchError, parse_diff

LINE_NUMBER_WIDTH = 4
LINE_NUMBER_GAP = "  "


def number_line(number: int, line: str) -> str:
    """One line as the package prints the prompt: right-aligned number, two spaces, text."""
    return f"{number:{LINE_NUMBER_WIDTH}d}{LINE_NUMBER_GAP}{line}"


def numbered(text: str) -> str:
    """The prompt with line numbers, as the proposer sees it."""
    return "\n".join(number_line(i, line) for i, line in enumerate(text.splitlines(), 1))


def strip_line_number(text: str, number: int) -> str | None:
    """`text` without the exact `number_line(number, ...)` prefix; None when it has none.

    A context line whose diff space was taken for the tag (`"   7  x"` read as `" "` +
    `"  7  x"`) is accepted too."""
    prefix = f"{number:{LINE_NUMBER_WIDTH}d}"
    for candidate in (text, " " + text):
        if candidate.rstrip() == prefix:
            return ""  # a numbered blank line, its trailing spaces trimmed
        if candidate.startswith(prefix + LINE_NUMBER_GAP):
            return candidate[len(prefix) + len(LINE_NUMBER_GAP):]
    return None


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


def _same(file_line: str, block_line: str, _number: int) -> bool:
    return file_line == block_line


def _same_rstripped(file_line: str, block_line: str, _number: int) -> bool:
    return file_line.rstrip() == block_line.rstrip()


def _same_unnumbered(file_line: str, block_line: str, number: int) -> bool:
    if file_line.rstrip() == block_line.rstrip():
        return True
    bare = strip_line_number(block_line, number)
    return bare is not None and bare.rstrip() == file_line.rstrip()


_MATCHERS: tuple[Callable[[str, str, int], bool], ...] = (
    _same, _same_rstripped, _same_unnumbered)


def _find_block(lines: list[str], block: tuple[str, ...]) -> list[int]:
    """Start indexes where `block` matches: exactly, else ignoring trailing whitespace, else
    with the package's line-number prefixes removed."""
    n = len(block)
    for same in _MATCHERS:
        hits = [i for i in range(len(lines) - n + 1)
                if all(same(lines[i + k], block[k], i + k + 1) for k in range(n))]
        if hits:
            return hits
    return []


def _not_found(lines: list[str], block: tuple[str, ...], index: int, path: str) -> PatchError:
    best_len, best_at = 0, 0
    for i in range(len(lines)):
        k = 0
        while k < len(block) and i + k < len(lines) and _same_unnumbered(
                lines[i + k], block[k], i + k + 1):
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
                      "from the current file.",
                      user=f"hunk {index + 1} of the diff does not match {path}: the line "
                      f"{bad!r} is not where the diff expects it")


def _place(lines: list[str], hunks: tuple[Hunk, ...], path: str) -> list[tuple[int, int, Hunk]]:
    """(start, old length, hunk) of every hunk in the original lines."""
    placed: list[tuple[int, int, Hunk]] = []
    for idx, hunk in enumerate(hunks):
        block = hunk.old_lines
        if not block:
            matches = [min(max(hunk.old_start, 0), len(lines))]
        else:
            matches = _find_block(lines, block)
            if not matches:
                raise _not_found(lines, block, idx, path)
        free = [m for m in matches if not any(m < s + n and s < m + len(block)
                                              for s, n, _ in placed)]
        if not free:
            raise PatchError(f"hunk {idx + 1} overlaps an earlier hunk in {path}; "
                             "merge overlapping hunks into one",
                             user=f"two hunks of the diff edit the same lines of {path}")
        if len(free) > 1:
            if hunk.old_start <= 0:
                raise PatchError(f"hunk {idx + 1} is ambiguous in {path}: its lines match "
                                 f"at lines {', '.join(str(m + 1) for m in free)}; add more "
                                 "context lines or a correct '@@ -<line>' header",
                                 user=f"hunk {idx + 1} of the diff matches several places in "
                                 f"{path} (lines {', '.join(str(m + 1) for m in free)})")
            hint = hunk.old_start - 1
            free.sort(key=lambda m: (abs(m - hint), m))
        placed.append((free[0], len(block), hunk))
    return placed


def apply_diff(original: str, diff: ParsedDiff | str, target_path: str) -> str:
    """Apply the diff's hunks for `target_path` to `original`, locating them by content."""
    parsed = parse_diff(diff) if isinstance(diff, str) else diff
    hunks = parsed.hunks_for(target_path)
    if not hunks:
        raise PatchError(f"the diff has no hunks for {target_path}; its paths are: "
                         f"{', '.join(parsed.paths) or '(none)'}")
    lines, trailing = split_lines(original)
    placed = _place(lines, hunks, target_path)
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
    return same_line_endings(original, join_lines(lines, trailing))


def same_line_endings(original: str, new: str) -> str:
    """`new` with CRLF line endings where `original` uses CRLF throughout (a proposer writes
    LF: its lines would leave the file with mixed endings); else `new` as it is."""
    crlf = original.count("\r\n")
    if not crlf or crlf != original.count("\n"):
        return new
    return re.sub(r"(?<!\r)\n", "\r\n", new)


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
    added_blocks: tuple[tuple[str, ...], ...] = ()
    """`added_lines` grouped into runs of consecutive new lines."""


def line_stats(original: str, new: str) -> LineStats:
    """Line-level change statistics of `original` -> `new` (difflib opcodes)."""
    a, _ = split_lines(original)
    b, _ = split_lines(new)
    blocks: list[tuple[str, ...]] = []
    removed: list[str] = []
    changed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        removed.extend(a[i1:i2])
        if j2 > j1:
            blocks.append(tuple(b[j1:j2]))
        changed += max(i2 - i1, j2 - j1)
    added = tuple(line for block in blocks for line in block)
    return LineStats(len(added), len(removed), changed, added, tuple(removed), tuple(blocks))
