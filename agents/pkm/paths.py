"""The PKM sandbox: virtual paths (`/` = the PKM root) mapped to real paths, safely.

Every PKM tool goes through `Sandbox.resolve`, the single place that decides whether a path the
model sent may be touched. It rejects, before anything is read or written: NUL bytes,
Windows-style paths, over-long names, `..` that climbs above the root, paths that spell a real
host location (a real ancestor of the PKM root), and anything whose real path (symlinks
resolved) leaves the PKM root. Error messages only ever echo virtual paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agents.tools import ToolError

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
_DRIVE_RE = re.compile(r"^[A-Za-z]:")


class SandboxError(ToolError):
    """A path the model sent may not be used. The message contains only virtual paths."""


def _short(value: str, limit: int = 80) -> str:
    """The model's own path, shortened for an error message (it may be megabytes long)."""
    return value if len(value) <= limit else value[:limit] + "..."


@dataclass(frozen=True)
class Entry:
    """One directory entry met while walking the sandbox (never a link that leaves it)."""

    real: Path
    virtual: str
    is_dir: bool
    depth: int


class Sandbox:
    """Maps virtual PKM paths to real paths under `root` and walks the tree without escaping."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = Path(os.path.realpath(root))
        self._host_prefixes = self._ancestors(Path(os.path.abspath(root))) | self._ancestors(
            self.root
        )

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
        """Check the syntax of a virtual path and return it normalized (`/a/b`, root = `/`)."""
        if not isinstance(virtual, str):
            raise SandboxError("path must be a string")
        value = virtual.strip()
        if "\x00" in value:
            raise SandboxError("path contains a NUL byte")
        if "\\" in value or _DRIVE_RE.match(value):
            raise SandboxError(
                f"'{_short(value)}' looks like a Windows path; use virtual POSIX paths such as "
                "/Areas/Health/sleep.md"
            )
        if len(value.encode("utf-8")) > MAX_PATH_BYTES:
            raise SandboxError(f"path is longer than {MAX_PATH_BYTES} bytes")
        parts: list[str] = []
        for part in value.split("/"):
            if len(part.encode("utf-8")) > MAX_NAME_BYTES:
                raise SandboxError(
                    f"a path component of '{_short(value)}' is longer than {MAX_NAME_BYTES} bytes"
                )
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise SandboxError(
                        f"'{_short(value)}' leaves the PKM root; paths are virtual and '/' is "
                        "the PKM root"
                    )
                parts.pop()
                continue
            parts.append(part)
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

    # -- walking ------------------------------------------------------------------------------

    def walk(
        self, start: Path, *, max_depth: int | None = None, include_hidden: bool = False
    ) -> Iterator[Entry]:
        """Depth-first walk under `start` (a resolved directory inside the root), sorted by name.

        Symlinks are only reported when their target stays inside; symlinked directories are
        never descended (no loops, no escapes). Virtual paths keep the link's own name.
        """
        base_virtual = self.to_virtual(start)
        yield from self._walk(start, base_virtual, 1, max_depth, include_hidden)

    def _walk(
        self,
        directory: Path,
        virtual: str,
        depth: int,
        max_depth: int | None,
        include_hidden: bool,
    ) -> Iterator[Entry]:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if not include_hidden and entry.name.startswith("."):
                continue
            path = Path(entry.path)
            child_virtual = f"{virtual.rstrip('/')}/{entry.name}"
            if entry.is_symlink():
                target = self.safe_real(path)
                if target is None:
                    continue
                yield Entry(target, child_virtual, target.is_dir(), depth)
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            yield Entry(path, child_virtual, is_dir, depth)
            if is_dir and (max_depth is None or depth < max_depth):
                yield from self._walk(path, child_virtual, depth + 1, max_depth, include_hidden)

    def glob(self, pattern: str, base: str = "/") -> list[Entry]:
        """Files under virtual `base` matching `pattern`, newest first (then by path).

        A leading `/` makes the pattern start at the PKM root. The literal leading directories
        of the pattern are resolved through `resolve`, so a glob can never start outside.
        """
        if "\x00" in pattern or "\\" in pattern or _DRIVE_RE.match(pattern.strip()):
            raise SandboxError("glob patterns are virtual POSIX paths (no NUL, '\\' or drive)")
        if pattern.startswith("/"):
            base, pattern = "/", pattern.lstrip("/")
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise SandboxError("glob patterns may not contain '..'")
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
