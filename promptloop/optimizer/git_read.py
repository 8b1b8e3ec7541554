"""Folders of a commit, read from the object database: list, compare and export them.

The companions of `GitOps.read_file` for whole folders (a suite's tasks and fixtures), used to
evaluate exactly what a git ref holds without checking it out. Every read goes through the
`GitOps` of the repository; nothing here writes to the repository or its working tree.
"""

from __future__ import annotations

from pathlib import Path

from git.objects.blob import Blob
from git.objects.tree import Tree

from promptloop.optimizer.git import GitOps, GitOpsError


def _tree(ops: GitOps, ref: str, path: str) -> Tree | None:
    """The tree object of folder `path` at `ref`, None when `path` is not a folder there."""
    commit = ops.repo.commit(ops.resolve(ref))
    path = path.strip("/")
    try:
        node = commit.tree / path if path else commit.tree
    except KeyError:
        return None
    return node if isinstance(node, Tree) else None


def tree_files(ops: GitOps, ref: str, path: str) -> dict[str, bytes] | None:
    """Every file below folder `path` at `ref` (path relative to it -> content); None when
    `path` is not a folder at `ref`."""
    tree = _tree(ops, ref, path)
    if tree is None:
        return None
    out: dict[str, bytes] = {}
    base = path.strip("/")
    for item in tree.traverse():
        if not isinstance(item, Blob):
            continue
        full = str(item.path)
        rel = full[len(base) + 1:] if base else full
        out[rel] = item.data_stream.read()
    return out


def subfolders(ops: GitOps, ref: str, path: str) -> list[str]:
    """Names of the folders directly inside `path` at `ref` (empty when there is none)."""
    tree = _tree(ops, ref, path)
    if tree is None:
        return []
    return sorted(t.name for t in tree.trees)


def files_in(ops: GitOps, ref: str, path: str) -> list[str]:
    """Names of the files directly inside `path` at `ref` (empty when there is none)."""
    tree = _tree(ops, ref, path)
    if tree is None:
        return []
    return sorted(b.name for b in tree.blobs)


def has_file(ops: GitOps, ref: str, path: str) -> bool:
    """Whether `path` is a file at `ref`: a tree lookup that never reads the blob, so a file
    counts whatever it holds (a suite.json that is not UTF-8 is there, and fails to load later
    with its own error)."""
    try:
        commit = ops.repo.commit(ops.resolve(ref))
        node = commit.tree / path.strip("/")
    except (GitOpsError, KeyError):
        return False
    return isinstance(node, Blob)


def export_tree(ops: GitOps, ref: str, path: str, dest: Path) -> bool:
    """Write the files of folder `path` at `ref` below `dest`; False when it is no folder."""
    files = tree_files(ops, ref, path)
    if files is None:
        return False
    for rel, data in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    dest.mkdir(parents=True, exist_ok=True)
    return True


def folder_files(folder: Path) -> dict[str, bytes]:
    """The files below a working-tree folder, as `tree_files` gives a commit's (caches out)."""
    if not folder.is_dir():
        return {}
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


__all__ = ["export_tree", "files_in", "folder_files", "has_file", "subfolders", "tree_files"]
