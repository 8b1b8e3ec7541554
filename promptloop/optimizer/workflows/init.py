"""`promptloop init`: write a runnable starting point into a repository.

The template (optimizer/init_template/, package data) holds a commented promptloop.toml that
declares one agent, `example`: a standard-library Python script that speaks the trial contract
and calls the configured model (the embedded one by default), its prompt file, and a suite of 6
tasks in 2 buckets graded by the general graders. `init_project` copies it into the
repository; it writes nothing when any of those files already exists, unless `force`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "init_template"
SKIPPED = {"__init__.py"}
"""Files of the template folder that belong to the package, not to the template."""
EXAMPLE_AGENT = "example"
EXAMPLE_BUCKET = "urgency"


class InitError(Exception):
    """init cannot write the template (not a repository, files in the way); exit 1."""


@dataclass(frozen=True)
class InitResult:
    root: Path
    files: tuple[Path, ...]
    """The files written, relative to `root`, in path order."""
    overwritten: tuple[Path, ...]
    """Those of `files` that existed before (only with force)."""
    next_commands: tuple[str, ...]
    """What to run next: eval, optimize one bucket, review a branch."""


def template_files() -> list[Path]:
    """The template's files, relative to the template folder, in path order."""
    out = []
    for path in TEMPLATE_DIR.rglob("*"):
        rel = path.relative_to(TEMPLATE_DIR)
        if path.is_file() and rel.as_posix() not in SKIPPED and not _generated(rel):
            out.append(rel)
    return sorted(out, key=lambda p: p.as_posix())


def _generated(rel: Path) -> bool:
    return "__pycache__" in rel.parts or rel.suffix in (".pyc", ".pyo")


def _git_top(root: Path) -> Path | None:
    for folder in (root, *root.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _current_branch(top: Path) -> str:
    """The branch checked out at `top` (read from .git/HEAD), else "main"."""
    head = top / ".git" / "HEAD"
    try:
        text = head.read_text(encoding="utf-8").strip()
    except OSError:
        return "main"
    prefix = "ref: refs/heads/"
    return text[len(prefix):] if text.startswith(prefix) else "main"


def next_commands(base: str = "main") -> tuple[str, ...]:
    return (
        f"promptloop eval --agent {EXAMPLE_AGENT}",
        f"promptloop optimize --agent {EXAMPLE_AGENT} --bucket {EXAMPLE_BUCKET}",
        f"promptloop review --agent {EXAMPLE_AGENT} --base {base}",
    )


def init_project(root: Path, *, force: bool = False) -> InitResult:
    """Copy the template into `root` (a folder inside a git repository).

    Refuses (InitError, nothing written) when `root` is not the top of a git repository
    (promptloop.toml lives at the root: `core.project.check_at_top`), or when any template
    file already exists there and `force` is false; the error lists those files.
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise InitError(f"{root}: not a folder")
    top = _git_top(root)
    if top is None:
        raise InitError(f"{root}: not inside a git repository (run `git init` first: promptloop "
                        "keeps each prompt change on a branch)")
    if top.resolve() != root:
        sub = root.relative_to(top.resolve()).as_posix()
        raise InitError(f"{root}: promptloop.toml belongs at the repository root ({top}), not "
                        f"in {sub}/ (optimize, review and nightly read it from commits there): "
                        f"run `promptloop init` at the root, then point its paths at {sub}/ "
                        "(nothing written)")
    files = template_files()
    if not files:
        raise InitError(f"{TEMPLATE_DIR}: the init template is missing from the installation")
    existing = [rel for rel in files if (root / rel).exists() or (root / rel).is_symlink()]
    if existing and not force:
        listed = ", ".join(rel.as_posix() for rel in existing)
        raise InitError(f"{root}: would overwrite {listed} (nothing written; --force overwrites)")
    blocked = [rel for rel in existing if not (root / rel).is_file() or (root / rel).is_symlink()]
    if blocked:
        listed = ", ".join(rel.as_posix() for rel in blocked)
        raise InitError(f"{root}: {listed} exists and is not a regular file (nothing written)")
    for rel in files:
        _write(TEMPLATE_DIR / rel, root / rel)
    return InitResult(root, tuple(files), tuple(existing), next_commands(_current_branch(top)))


def _write(source: Path, target: Path) -> None:
    """Copy one file through a temporary sibling, so a target is never left half-written; a
    script (a file starting with `#!`) is made executable."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.promptloop-init.tmp")
    data = source.read_bytes()
    try:
        tmp.write_bytes(data)
        tmp.chmod(0o755 if data.startswith(b"#!") else 0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
