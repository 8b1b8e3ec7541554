"""Folder trees walked and removed without recursion.

An agent can leave a tree deeper than Python's recursion limit (issue 19: 1,100 levels), and
`Path.rglob`, `os.walk` and `shutil.rmtree` of Python 3.11 recurse once per level. These walk
with an explicit stack, so any depth the file system holds is walked, read and removed.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def iter_entries(base: Path) -> Iterator[Path]:
    """Every entry under `base`: folders, files and links (never descended), in no particular
    order; unreadable folders are skipped. `os.walk(followlinks=False)` without recursion."""
    stack = [base]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    yield Path(entry.path)
        except OSError:
            continue


def iter_files(base: Path) -> Iterator[Path]:
    """Every regular file under `base` (links not followed, hidden ones included)."""
    for path in iter_entries(base):
        if path.is_file() and not path.is_symlink():
            yield path


def copy_tree(src: Path, dest: Path) -> None:
    """Copy the folder `src` onto `dest` (existing folders merged, files overwritten, links
    copied as links), as `shutil.copytree(symlinks=True, dirs_exist_ok=True)` does."""
    stack = [(src, dest)]
    while stack:
        here, there = stack.pop()
        there.mkdir(parents=True, exist_ok=True)
        with os.scandir(here) as entries:
            for entry in entries:
                target = there / entry.name
                if entry.is_symlink():
                    if os.path.lexists(target):
                        os.unlink(target)
                    os.symlink(os.readlink(entry.path), target)
                elif entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), target))
                else:
                    shutil.copy2(entry.path, target)
        shutil.copystat(here, there)


def remove_tree(path: Path) -> None:
    """Delete `path` and everything under it, as far as possible (errors are ignored, as
    `shutil.rmtree(ignore_errors=True)`), without following links."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(path)
        except OSError:
            pass
        return
    parent = os.open(path.parent, _DIR_FLAGS)
    try:
        remove_tree_at(parent, path.name)
    except OSError:
        pass
    finally:
        os.close(parent)


def remove_tree_at(parent_fd: int, name: str) -> None:
    """Delete the folder `name` in the folder open as `parent_fd` with its content, descriptor by
    descriptor (O_NOFOLLOW: a link met on the way is removed as a link, never followed). Holds
    one descriptor per level of the deepest branch being removed; raises OSError."""
    stack: list[tuple[int, str, int]] = [(parent_fd, name, os.open(name, _DIR_FLAGS,
                                                                   dir_fd=parent_fd))]
    try:
        while stack:
            pfd, own, fd = stack[-1]
            sub = _clear_files(fd)
            if sub is None:
                stack.pop()
                os.close(fd)
                os.rmdir(own, dir_fd=pfd)
            else:
                stack.append((fd, sub, os.open(sub, _DIR_FLAGS, dir_fd=fd)))
    finally:
        for _, _, fd in stack:
            os.close(fd)


def _clear_files(fd: int) -> str | None:
    """Unlink every non-folder in the folder `fd`; the name of one subfolder left, or None."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            os.unlink(entry.name, dir_fd=fd)
    return None


__all__ = ["copy_tree", "iter_entries", "iter_files", "remove_tree", "remove_tree_at"]
