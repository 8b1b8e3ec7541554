"""File operations under a trusted root that never follow a symbolic link.

Each operation opens its directory one component at a time from the root's file descriptor with
`O_NOFOLLOW | O_DIRECTORY` (the `openat` pattern) and acts through that descriptor. A component
that became a symlink (or stopped being a folder) after a path was validated makes the
operation fail instead of following it out of the root; files are opened with `O_NOFOLLOW`, must
be regular and must not be hard links. Callers pass real paths already known to be inside.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from promptloop.agents.tools import ToolError
from promptloop.agents.trees import remove_tree_at

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
EntryKind = Literal["dir", "file", "link", "other"]


class SandboxError(ToolError):
    """A path the model sent may not be used. The message contains only virtual paths."""


class UnsafePathError(SandboxError):
    """A path changed under the tool (a link appeared) or is of a kind no tool may touch."""


@dataclass(frozen=True)
class DirItem:
    name: str
    kind: EntryKind


class SafeRoot:
    """Descriptor-relative operations under `root` (a resolved directory).

    `describe` turns a real path into the text shown in errors (the virtual path), so no error
    raised here carries a host path.
    """

    def __init__(self, root: Path, describe: Callable[[Path], str]) -> None:
        self.root = root
        self.describe = describe
        st = os.stat(root)
        self._root_id = (st.st_dev, st.st_ino)

    def _parts(self, real: Path) -> tuple[str, ...]:
        if real == self.root:
            return ()
        if self.root not in real.parents:
            raise UnsafePathError("the path is outside the PKM root")
        return real.relative_to(self.root).parts

    def _open_root(self) -> int:
        fd = os.open(self.root, _DIR_FLAGS)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self._root_id:
            os.close(fd)
            raise UnsafePathError("the PKM root was replaced while in use")
        return fd

    def _refuse(self, parent_fd: int, name: str, real: Path) -> UnsafePathError:
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        what = "is a symbolic link" if is_link else "is not a folder"
        return UnsafePathError(f"{self.describe(real)} {what}; refusing to follow it")

    @contextmanager
    def directory(self, real_dir: Path, *, create: bool = False) -> Iterator[int]:
        """A descriptor of `real_dir`, reached without following links (created if asked)."""
        parts = self._parts(real_dir)
        fd = self._open_root()
        try:
            walked = self.root
            for name in parts:
                walked = walked / name
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(name, dir_fd=fd)
                    except FileExistsError:
                        pass
                    try:
                        nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError as err:
                        if err.errno in (errno.ELOOP, errno.ENOTDIR):
                            raise self._refuse(fd, name, walked) from None
                        raise
                except OSError as err:
                    if err.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise self._refuse(fd, name, walked) from None
                    raise
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def _open_file(self, dir_fd: int, real: Path, flags: int, mode: int = 0o666) -> int:
        try:
            fd = os.open(real.name, flags | _FILE_FLAGS, mode, dir_fd=dir_fd)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise UnsafePathError(
                    f"{self.describe(real)} is a symbolic link; refusing to follow it"
                ) from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafePathError(f"{self.describe(real)} is not a regular file")
            if st.st_nlink > 1:
                raise UnsafePathError(
                    f"{self.describe(real)} has other hard links (it may be shared with files "
                    "outside the PKM); refusing to use it"
                )
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_bytes(self, real: Path, *, max_bytes: int | None = None) -> bytes | None:
        """The file's bytes, or None when it is larger than `max_bytes`."""
        if real == self.root:
            raise UnsafePathError(f"{self.describe(real)} is a directory")
        with self.directory(real.parent) as dir_fd:
            fd = self._open_file(dir_fd, real, os.O_RDONLY)
            with os.fdopen(fd, "rb") as fh:
                if max_bytes is not None and os.fstat(fd).st_size > max_bytes:
                    return None
                return fh.read()

    def read_files(self, real_dir: Path, names: Sequence[str], *, max_bytes: int
                   ) -> Iterator[tuple[str, bytes | None]]:
        """(name, bytes) of files of one folder, opened through ONE descriptor of the folder;
        None for a file larger than `max_bytes`; a file that cannot be read safely (a link, a
        hard link, gone) is left out."""
        with self.directory(real_dir) as dir_fd:
            for name in names:
                try:
                    fd = self._open_file(dir_fd, real_dir / name, os.O_RDONLY)
                except (OSError, UnsafePathError):
                    continue
                with os.fdopen(fd, "rb") as fh:
                    if os.fstat(fd).st_size > max_bytes:
                        yield name, None
                        continue
                    data = fh.read(max_bytes + 1)
                yield name, data if len(data) <= max_bytes else None

    def write_bytes(self, real: Path, data: bytes) -> bool:
        """Create or overwrite the file (parents created); True when it already existed."""
        if real == self.root:
            raise UnsafePathError(f"{self.describe(real)} is a directory")
        with self.directory(real.parent, create=True) as dir_fd:
            try:
                fd = self._open_file(dir_fd, real, os.O_WRONLY)
                existed = True
            except FileNotFoundError:
                fd = self._open_file(dir_fd, real, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                existed = False
            with os.fdopen(fd, "wb") as fh:
                fh.truncate(0)
                fh.write(data)
            return existed

    def makedirs(self, real_dir: Path) -> None:
        with self.directory(real_dir, create=True):
            pass

    def rename(self, src: Path, dst: Path) -> None:
        """Rename the entry `src` (a link is moved as a link) to `dst`; parents of dst created."""
        with self.directory(src.parent) as src_fd, self.directory(dst.parent, create=True) as dfd:
            os.rename(src.name, dst.name, src_dir_fd=src_fd, dst_dir_fd=dfd)

    def remove(self, real: Path) -> Literal["file", "folder"]:
        """Delete the entry `real` (a folder with its content; a link as a link)."""
        with self.directory(real.parent) as dir_fd:
            st = os.stat(real.name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                remove_tree_at(dir_fd, real.name)
                return "folder"
            os.unlink(real.name, dir_fd=dir_fd)
            return "file"

    def list_dir(self, real_dir: Path) -> list[DirItem]:
        """The entries of a folder, sorted by name, with their kind (links not followed)."""
        items: list[DirItem] = []
        with self.directory(real_dir) as fd, os.scandir(fd) as entries:
            for entry in entries:
                kind: EntryKind
                if entry.is_symlink():
                    kind = "link"
                elif entry.is_dir(follow_symlinks=False):
                    kind = "dir"
                elif entry.is_file(follow_symlinks=False):
                    kind = "file"
                else:
                    kind = "other"
                items.append(DirItem(entry.name, kind))
        return sorted(items, key=lambda item: item.name)


__all__ = ["DirItem", "SafeRoot", "SandboxError", "UnsafePathError"]
