"""The PKM sandbox: virtual paths (`/` = the PKM root) mapped to real paths, safely.

Every PKM tool goes through `Sandbox.resolve`, the single place that decides whether a path the
model sent may be touched. It rejects, before anything is read or written: NUL bytes and other
control characters, Windows-style paths, `~`, over-long names, unicode lookalikes of `/`, `\\`
and `..`, `..` that climbs above the root, paths that spell a real host location (a real
ancestor of the PKM root), and anything whose real path (symlinks resolved) leaves the PKM root.

Validation alone leaves a window: a path component could be swapped for a symlink between the
check and the open. So every read, write, rename, delete and listing then goes through the
`Sandbox` again and opens the path one component at a time from the root with `O_NOFOLLOW`
(`openat`-style, `safe_fs`), refusing a link, a non-regular file or a hard-linked file met on
the way. Error messages only ever contain virtual paths, never the model's raw path.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from promptloop.agents.pkm.safe_fs import DirItem, SafeRoot, SandboxError

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_DEPTH = 32
"""Folders below the PKM root a path may name (a file at depth 32 is `/a/.../f`, 32 parts)."""
MAX_PATH_CHARS = 1024
"""Characters a virtual path or glob pattern may have."""
_DRIVE_RE = re.compile(r"^[A-Za-z]:")
_SLASH_LOOKALIKES = frozenset("\u2215\u2044\u29f8\u2571\u2216\u29f5\u29f9\u20e5")
"""DIVISION SLASH, FRACTION SLASH, BIG SOLIDUS, BOX DIAGONAL, SET MINUS, REVERSE SOLIDUS
OPERATOR, BIG REVERSE SOLIDUS, COMBINING REVERSE SOLIDUS: not folded to `/` or `\\` by NFKC."""


def check_name(part: str) -> None:
    """Refuse one path component that is, or could be read as, a separator or `..`."""
    if any(unicodedata.category(ch) == "Cc" for ch in part):
        raise SandboxError("a path contains a control character (NUL, newline, ...)")
    folded = unicodedata.normalize("NFKC", part)
    if (
        (folded in (".", "..") and part != folded)
        or "/" in folded
        or "\\" in folded
        or _SLASH_LOOKALIKES & set(part)
    ):
        raise SandboxError(
            "a path component is a lookalike of '/', '\\' or '..'; use plain virtual POSIX "
            "paths such as /Areas/Health/sleep.md"
        )


def check_syntax(value: str) -> None:
    """Refuse what is never a virtual path: NUL and control characters, Windows paths, `~`."""
    if "\x00" in value:
        raise SandboxError("the path contains a NUL byte")
    if "\\" in value or _DRIVE_RE.match(value):
        raise SandboxError(
            "that looks like a Windows path; use virtual POSIX paths such as "
            "/Areas/Health/sleep.md"
        )
    if value.lstrip("/").startswith("~"):
        raise SandboxError(
            "'~' is not expanded: paths are virtual and '/' is the PKM root (e.g. /Areas/...)"
        )


def check_size(value: str, what: str) -> None:
    """Refuse a path or pattern longer than MAX_PATH_CHARS characters (or MAX_PATH_BYTES)."""
    if len(value) > MAX_PATH_CHARS:
        raise SandboxError(
            f"the {what} is longer than {MAX_PATH_CHARS:,} characters; use shorter names"
        )
    if len(value.encode("utf-8")) > MAX_PATH_BYTES:
        raise SandboxError(f"the {what} is longer than {MAX_PATH_BYTES} bytes")


def check_depth(parts: int, what: str) -> None:
    """Refuse a path or pattern of more than MAX_DEPTH components."""
    if parts > MAX_DEPTH:
        raise SandboxError(
            f"the {what} is deeper than {MAX_DEPTH} levels; keep the knowledge base shallow "
            "(e.g. /Areas/Health/sleep.md)"
        )


@dataclass(frozen=True)
class Entry:
    """One directory entry met while walking the sandbox (never a link that leaves it)."""

    real: Path
    virtual: str
    is_dir: bool
    depth: int


class Sandbox:
    """Maps virtual PKM paths to real paths under `root` and walks the tree without escaping.

    Resolving validates; the I/O methods (`read_bytes`, `write_bytes`, `rename`, `remove`,
    `makedirs`, `list_dir`) re-check at the moment of use, without following links.
    """

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = Path(os.path.realpath(root))
        self._host_prefixes = self._ancestors(Path(os.path.abspath(root))) | self._ancestors(
            self.root
        )
        self.fs = SafeRoot(self.root, self.to_virtual)

    @staticmethod
    def _ancestors(path: Path) -> set[tuple[str, ...]]:
        """Real ancestors (and the path itself) with >= 2 components, as component tuples.

        A virtual path that starts with one of them is a host path the model should not know
        (e.g. `/tmp/pytest-of-x/.../outside.txt`); `/etc/passwd` is not one and stays virtual.
        """
        parts = PurePosixPath(path.as_posix()).parts[1:]
        return {tuple(parts[:i]) for i in range(2, len(parts) + 1)}

    # -- resolving ----------------------------------------------------------------------------

    def normalize(self, virtual: str) -> str:
        """Check the syntax of a virtual path and return it normalized (`/a/b`, root = `/`).

        Errors never echo the raw path: it may spell a host location.
        """
        if not isinstance(virtual, str):
            raise SandboxError("path must be a string")
        value = virtual.strip()
        check_syntax(value)
        check_size(value, "path")
        parts: list[str] = []
        for part in value.split("/"):
            if len(part.encode("utf-8")) > MAX_NAME_BYTES:
                raise SandboxError(f"a path component is longer than {MAX_NAME_BYTES} bytes")
            check_name(part)
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise SandboxError(
                        "the path leaves the PKM root; paths are virtual and '/' is the PKM root"
                    )
                parts.pop()
                continue
            parts.append(part)
        check_depth(len(parts), "path")
        for n in range(2, len(parts) + 1):
            if tuple(parts[:n]) in self._host_prefixes:
                raise SandboxError(
                    "that is a host filesystem path; use virtual paths where '/' is the PKM "
                    "root (e.g. /Projects/...)"
                )
        return "/" + "/".join(parts)

    def resolve(self, virtual: str, *, follow_final: bool = True) -> tuple[Path, str]:
        """Return (real path, normalized virtual path), or raise SandboxError.

        The real path with every symlink resolved must lie inside the root. With
        `follow_final=False` the returned path is the entry itself (a symlink is moved or
        removed as a link), but its target is still required to stay inside.
        """
        norm = self.normalize(virtual)
        lexical = self.root.joinpath(*norm.split("/")[1:]) if norm != "/" else self.root
        real = Path(os.path.realpath(lexical))
        if not self.contains(real):
            raise SandboxError(f"'{norm}' points outside the PKM root (through a symbolic link)")
        if follow_final or lexical == self.root:
            return real, norm
        parent = Path(os.path.realpath(lexical.parent))
        if not self.contains(parent):
            raise SandboxError(f"'{norm}' points outside the PKM root (through a symbolic link)")
        return parent / lexical.name, norm

    def contains(self, real: Path) -> bool:
        return real == self.root or self.root in real.parents

    def to_virtual(self, real: Path) -> str:
        """The virtual path of a real path inside the root (the caller guarantees it is)."""
        rel = Path(real).relative_to(self.root).as_posix()
        return "/" if rel == "." else "/" + rel

    def safe_real(self, path: Path) -> Path | None:
        """The resolved path of `path` if it stays inside the root, else None."""
        real = Path(os.path.realpath(path))
        return real if self.contains(real) else None

    # -- I/O at the moment of use (no link followed) ------------------------------------------

    def read_bytes(self, real: Path, *, max_bytes: int | None = None) -> bytes | None:
        return self.fs.read_bytes(real, max_bytes=max_bytes)

    def write_bytes(self, real: Path, data: bytes) -> bool:
        return self.fs.write_bytes(real, data)

    def makedirs(self, real_dir: Path) -> None:
        self.fs.makedirs(real_dir)

    def rename(self, src: Path, dst: Path) -> None:
        self.fs.rename(src, dst)

    def remove(self, real: Path) -> Literal["file", "folder"]:
        return self.fs.remove(real)

    def list_dir(self, real_dir: Path) -> list[DirItem]:
        return self.fs.list_dir(real_dir)

    # -- walking ------------------------------------------------------------------------------

    def walk(
        self, start: Path, *, max_depth: int | None = None, include_hidden: bool = False
    ) -> Iterator[Entry]:
        """Depth-first walk under `start` (a resolved directory inside the root), sorted by name.

        Symlinks are only reported when their target stays inside; symlinked directories are
        never descended (no loops, no escapes). Virtual paths keep the link's own name.
        """
        stack: list[tuple[Path, str, int, Iterator[DirItem]]] = []
        self._push(stack, start, self.to_virtual(start), 1)
        while stack:
            directory, virtual, depth, items = stack[-1]
            item = next(items, None)
            if item is None:
                stack.pop()
                continue
            if not include_hidden and item.name.startswith("."):
                continue
            path = directory / item.name
            child_virtual = f"{virtual.rstrip('/')}/{item.name}"
            if item.kind == "link":
                target = self.safe_real(path)
                if target is not None:
                    yield Entry(target, child_virtual, target.is_dir(), depth)
                continue
            is_dir = item.kind == "dir"
            yield Entry(path, child_virtual, is_dir, depth)
            if is_dir and (max_depth is None or depth < max_depth):
                self._push(stack, path, child_virtual, depth + 1)

    def _push(
        self,
        stack: list[tuple[Path, str, int, Iterator[DirItem]]],
        directory: Path,
        virtual: str,
        depth: int,
    ) -> None:
        """Put `directory`'s sorted entries on the walk's stack (an unlistable folder, e.g. one
        swapped for a link, is skipped). An explicit stack, not recursion: a tree of any depth
        walks without RecursionError."""
        try:
            items = self.list_dir(directory)
        except (OSError, SandboxError):
            return
        stack.append((directory, virtual, depth, iter(items)))

    def glob(self, pattern: str, base: str = "/") -> list[Entry]:
        """Files under virtual `base` matching `pattern`, newest first (then by path).

        A leading `/` makes the pattern start at the PKM root. The literal leading directories
        of the pattern are resolved through `resolve`, so a glob can never start outside.
        """
        parts = check_pattern(pattern)
        if pattern.strip().startswith("/"):
            base = "/"
        literal: list[str] = []
        while parts and not has_glob_chars(parts[0]):
            literal.append(parts.pop(0))
        start_virtual = base.rstrip("/") + "/" + "/".join(literal)
        start, _ = self.resolve(start_virtual)
        if not parts:
            return [Entry(start, self.to_virtual(start), False, 0)] if start.is_file() else []
        if not start.is_dir():
            return []
        regex = glob_to_regex("/".join(parts))
        hidden = any(p.startswith(".") for p in parts)
        prefix = self.to_virtual(start).rstrip("/") + "/"
        found = [
            e
            for e in self.files(start, include_hidden=hidden)
            if regex.match(e.virtual[len(prefix) :])
        ]
        return sorted(found, key=lambda e: (-_mtime(e.real), e.virtual))

    def files(self, start: Path, *, include_hidden: bool = False) -> Iterator[Entry]:
        """Every regular file under `start` (or `start` itself when it is a file)."""
        if start.is_file():
            yield Entry(start, self.to_virtual(start), False, 0)
            return
        for entry in self.walk(start, include_hidden=include_hidden):
            if not entry.is_dir and entry.real.is_file():
                yield entry


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def check_pattern(pattern: str) -> list[str]:
    """Validate a glob pattern as a virtual path (no `..`, host syntax or lookalikes) and return
    its components."""
    if not isinstance(pattern, str):
        raise SandboxError("a glob pattern must be a string")
    value = pattern.strip()
    check_syntax(value)
    check_size(value, "pattern")
    parts = [p for p in value.split("/") if p not in ("", ".")]
    check_depth(len(parts), "pattern")
    for part in parts:
        if part == "..":
            raise SandboxError("glob patterns may not contain '..'")
        check_name(part)
    return parts


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob to a regex over `/`-separated relative paths (case-insensitive).

    `**` spans directories (`**/` also matches nothing), `*` and `?` stay within one name,
    `[...]` is a character class, `{a,b}` an alternation.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    depth = 0
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        elif c == "{":
            depth += 1
            out.append("(?:")
            i += 1
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
            i += 1
        elif c == "," and depth:
            out.append("|")
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    out.extend(")" for _ in range(depth))
    return re.compile("^" + "".join(out) + "$", re.IGNORECASE | re.DOTALL)


def has_glob_chars(value: str) -> bool:
    return any(ch in value for ch in "*?[{")
