"""Branches and temporary worktrees for prompt candidates, without touching the user's checkout.

Every candidate lives on its own branch in a worktree under the system temp dir, created with
`git worktree add -b` so the user's working tree, index and current branch are never modified.
Worktrees are removed on every exit path of `GitOps.candidate` (normal, exception, Ctrl-C,
task cancellation) and, as a last resort, by an atexit / SIGTERM hook that cleans up whatever
this process still has registered; after a kill -9 the next run's sweep removes them (git_sweep).
Files are read from the object database, never the checkout.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Self

import git

from promptloop.optimizer.core.config import STATE_ENV, STATE_FOLDER, ConfigError, state_folder
from promptloop.optimizer.core.killpoint import kill_point
from promptloop.optimizer.core.results import Provenance, new_session

BRANCH_PREFIX = "promptloop/"
WORKTREE_PREFIX = "promptloop-wt-"
DEFAULT_AUTHOR = "promptloop <promptloop@localhost>"
# Hooks of the user's repository must not run for our internal commits and checkouts.
_SAFE_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false")


class GitOpsError(RuntimeError):
    """A git operation failed; the message says which and why."""


@dataclass(frozen=True)
class HeadInfo:
    commit: str | None
    """Sha of HEAD, None in a repository without commits."""
    branch: str | None
    """Current branch name, None when detached."""
    detached: bool
    dirty: bool
    """Tracked files differ from HEAD (staged or not); untracked files do not count."""


@dataclass(frozen=True)
class Candidate:
    path: Path
    """Root of the temporary worktree: write the candidate prompt here."""
    branch: str
    base_sha: str


# --- registry of live worktrees, cleaned at exit and on SIGTERM ------------------------------

_LIVE: dict[Path, tuple[Path, Path]] = {}  # worktree path -> (repo working dir, temp dir)
_LOCK = threading.Lock()
_HOOKS_INSTALLED = False
_PREVIOUS_SIGTERM: Any = None


def remove_worktree(repo_dir: Path, wt: Path, tmp: Path | None) -> None:
    """The one removal of a candidate worktree, best effort (also at exit and on SIGTERM):
    `git worktree remove --force`, delete its temporary folder `tmp`, `git worktree prune`."""
    _plain(repo_dir, *_SAFE_CONFIG, "worktree", "remove", "--force", str(wt))
    if tmp is not None:
        release_owner(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    _plain(repo_dir, "worktree", "prune")


def cleanup_live_worktrees() -> None:
    """Remove every worktree this process created and has not removed yet."""
    with _LOCK:
        items = list(_LIVE.items())
    for wt, (repo_dir, tmp) in items:
        remove_worktree(repo_dir, wt, tmp)
        with _LOCK:
            _LIVE.pop(wt, None)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    cleanup_live_worktrees()
    if callable(_PREVIOUS_SIGTERM):
        _PREVIOUS_SIGTERM(signum, frame)
    elif _PREVIOUS_SIGTERM != signal.SIG_IGN:
        raise SystemExit(128 + signum)


def _install_hooks() -> None:
    global _HOOKS_INSTALLED, _PREVIOUS_SIGTERM
    with _LOCK:
        if _HOOKS_INSTALLED:
            return
        _HOOKS_INSTALLED = True
    atexit.register(cleanup_live_worktrees)
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            _PREVIOUS_SIGTERM = signal.signal(signal.SIGTERM, _on_sigterm)


OWNER_MARKER = "promptloop-owner.json"
"""Written into every candidate folder: which repository made it. `doctor --fix` removes a
folder only when this repository's ledger names it, or when this marker names this repository
and no live process holds the marker's lock (`folder_owner`, `owner_locked`)."""
_OWNER_LOCKS: dict[Path, int] = {}  # candidate folder -> open fd holding its marker's flock


def repository_id(root: Path) -> str:
    """What names a repository in an owner marker: its git common folder, resolved (the same
    for every worktree of one repository, different for any other repository)."""
    common = _plain(root, "rev-parse", "--git-common-dir") or ".git"
    return str((root / common).resolve())


def mark_owner(folder: Path, repo_id: str) -> None:
    """Write the owner marker into `folder` and hold its lock while this process lives (the
    kernel drops the lock when the process dies, whatever its pid namespace)."""
    marker = folder / OWNER_MARKER
    marker.write_text(json.dumps({"repository": repo_id, "pid": os.getpid(),
                                  "host": socket.gethostname()}), encoding="utf-8")
    fd = os.open(marker, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return
    with _LOCK:
        _OWNER_LOCKS[folder] = fd


def release_owner(folder: Path) -> None:
    with _LOCK:
        fd = _OWNER_LOCKS.pop(folder, None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def folder_owner(folder: Path) -> str | None:
    """The repository id an owner marker in `folder` names; None without a readable marker."""
    try:
        data = json.loads((folder / OWNER_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    repo = data.get("repository") if isinstance(data, dict) else None
    return repo if isinstance(repo, str) else None


def owner_locked(folder: Path) -> bool:
    """A live process (any pid namespace sharing this file system) holds `folder`'s marker."""
    try:
        fd = os.open(folder / OWNER_MARKER, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def candidate_folder() -> Path:
    """A fresh name (not yet created) for a candidate's temporary folder, holding this
    process's id so a sweep can tell whose it is: `<tmp>/promptloop-wt-<pid>-<random>`."""
    return Path(tempfile.gettempdir()) / f"{WORKTREE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"


# --- branch names ----------------------------------------------------------------------------


def sanitize_ref_component(text: str) -> str:
    """One path component of a branch name that `git check-ref-format` accepts: letters and
    digits of any script kept (a bucket named in Chinese names its branch too), every other
    run of characters a hyphen."""
    s = re.sub(r"[^\w.-]+", "-", text.strip())
    s = re.sub(r"\.{2,}", ".", s)
    s = re.sub(r"-{2,}", "-", s).strip(".-")
    while s.endswith(".lock"):
        s = s[: -len(".lock")].rstrip(".-")
    return s or "x"


# --- outside a GitOps: where the repository is -----------------------------------------------


def _plain(cwd: Path, *args: str) -> str | None:
    """Output of a git command run in `cwd` (GitPython), None when git fails or is missing."""
    try:
        return str(git.Git(str(cwd)).execute(["git", *args])).strip()
    except (git.GitCommandError, git.GitCommandNotFound, OSError):
        return None


def repo_root(start: Path | None = None) -> Path | None:
    """Top folder of the working tree holding `start` (default: cwd); None outside a repo. A
    repository git refuses because another user owns it (a CI container's checkout) is a
    ConfigError giving git's own fix, not "not a repository"."""
    where = start or Path.cwd()
    try:
        top = str(git.Git(str(where)).execute(["git", "rev-parse", "--show-toplevel"])).strip()
    except git.GitCommandError as err:
        said = str(err.stderr or "")
        if "dubious ownership" in said:
            fix = next((ln.strip() for ln in said.splitlines()
                        if "safe.directory" in ln and ln.strip().startswith("git config")),
                       "git config --global --add safe.directory <the repository>")
            raise ConfigError(f"git refuses the repository holding {where}: another user owns "
                              f"it (git's safe.directory check, common in CI containers). "
                              f"Allow it with: {fix}") from None
        return None
    except (git.GitCommandNotFound, OSError):
        return None
    return Path(top) if top else None


def add_exclude(root: Path, pattern: str) -> None:
    """Add `pattern` to the repository's `info/exclude` (shared by its worktrees), once.

    Best effort: an unwritable .git only means the pattern's files show up as untracked."""
    common = _plain(root, "rev-parse", "--git-common-dir")
    if common is None:
        return
    exclude = (root / common / "info" / "exclude").resolve()
    try:
        text = exclude.read_text(encoding="utf-8") if exclude.is_file() else ""
        if pattern not in text.splitlines():
            exclude.parent.mkdir(parents=True, exist_ok=True)
            exclude.write_text(
                text + ("" if text.endswith("\n") or not text else "\n") + pattern + "\n",
                encoding="utf-8",
            )
    except OSError:
        pass


class GitOps:
    """Git operations for the optimizer on the repository at `repo_path`."""

    def __init__(self, repo_path: str | os.PathLike[str]) -> None:
        try:
            # expand_vars=False: a folder named `dollar$HOME` is that folder (GitPython would
            # expand it, and call the repository missing)
            self.repo = git.Repo(repo_path, search_parent_directories=False, expand_vars=False)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as err:
            raise GitOpsError(f"{repo_path}: not a git repository") from err
        if self.repo.working_tree_dir is None:
            raise GitOpsError(f"{repo_path}: a bare repository has no working tree")
        self.root = Path(self.repo.working_tree_dir)

    def close(self) -> None:
        """Stop GitPython's persistent helper processes."""
        self.repo.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _git(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
        where = ("-C", str(cwd)) if cwd is not None else ()
        try:
            out = self.repo.git.execute(["git", *where, *_SAFE_CONFIG, *args], env=env,
                                        strip_newline_in_stdout=False,
                                        stdout_as_string=False)
            # git writes file contents and paths as they are (UTF-8 in practice): decoded as
            # such, not with the locale's encoding (a Latin-1 locale garbled a prompt diff
            # into the review comment)
            return out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)
        except git.GitCommandError as err:
            detail = (err.stderr or err.stdout or "").strip().removeprefix("stderr: ").strip("'")
            raise GitOpsError(f"git {' '.join(args[:2])} failed: {detail}") from err

    # --- reading ---------------------------------------------------------------------------

    def resolve(self, ref: str) -> str:
        """The commit sha `ref` names; a clear error for an unknown ref."""
        try:
            return self._git("rev-parse", "--verify", "--quiet", "--end-of-options",
                             f"{ref}^{{commit}}").strip()
        except GitOpsError as err:
            raise GitOpsError(f"unknown git ref {ref!r} in {self.root} (not a branch, tag or "
                              f"commit){self._fetch_hint(ref)}") from err

    def _fetch_hint(self, ref: str) -> str:
        """How to get `ref` where a CI clone lacks it: a shallow or single-branch clone
        (actions/checkout's default) holds only the PR's branch, and `git fetch origin main`
        there updates FETCH_HEAD, not origin/main."""
        remote, _, branch = ref.partition("/")
        try:
            remotes = self._git("remote").split()
            shallow = self._git("rev-parse", "--is-shallow-repository").strip() == "true"
        except GitOpsError:
            return ""
        if branch and remote in remotes:
            return (f": fetch it first, e.g. `git fetch {remote} "
                    f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}`"
                    + (" (this clone is shallow: add --depth=50 or more, or use "
                       "fetch-depth: 0 with actions/checkout)" if shallow else ""))
        if shallow:
            return (": this clone is shallow (only the newest commits are here); fetch more "
                    "history (git fetch --deepen=50, or fetch-depth: 0 with actions/checkout)")
        return ""

    def is_ancestor(self, ref: str, of: str) -> bool:
        """Whether commit `ref` is in `of`'s history (a branch merged into it)."""
        try:
            self._git("merge-base", "--is-ancestor", self.resolve(ref), self.resolve(of))
        except GitOpsError:
            return False
        return True

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits; None when the history here has none (a
        shallow clone, unrelated histories)."""
        try:
            out = self._git("merge-base", self.resolve(a), self.resolve(b)).strip()
        except GitOpsError:
            return None
        return out or None

    def read_file(self, ref: str, path: str) -> str:
        """The text of `path` at `ref`, from the object database (never the working tree)."""
        commit = self.repo.commit(self.resolve(ref))
        try:
            blob = commit.tree / path.strip("/")
        except KeyError as err:
            raise GitOpsError(f"{path} does not exist at {ref} ({commit.hexsha[:10]})") from err
        if blob.type != "blob":
            raise GitOpsError(f"{path} at {ref} is a {blob.type}, not a file")
        data: bytes = blob.data_stream.read()
        return data.decode("utf-8")

    def list_files(self, ref: str, path: str) -> dict[str, str]:
        """The files under `path` at `ref` (from the object database): path -> blob id."""
        out = self._git("ls-tree", "-r", "-z", self.resolve(ref), "--", path.strip("/"))
        files = {}
        for entry in out.split("\0"):
            meta, tab, name = entry.partition("\t")
            parts = meta.split()
            if tab and len(parts) == 3 and parts[1] == "blob":
                files[name] = parts[2]
        return dict(sorted(files.items()))

    def file_versions(self, ref: str, path: str) -> list[tuple[str, str]]:
        """(commit sha, text) of `path` after every commit in the history of `ref` that
        changed it, newest first; commits that deleted it are left out."""
        shas = self._git("log", "--format=%H", self.resolve(ref), "--", path.strip("/")).split()
        out = []
        for sha in shas:
            try:
                out.append((sha, self.read_file(sha, path)))
            except GitOpsError:
                continue
        return out

    def head_info(self) -> HeadInfo:
        """Commit, branch (or detached) and dirty flag of the user's checkout."""
        try:
            commit: str | None = self.repo.head.commit.hexsha
        except ValueError:
            commit = None
        detached = self.repo.head.is_detached
        branch = None if detached else self.repo.head.ref.name
        dirty = commit is not None and self.repo.is_dirty(index=True, working_tree=True,
                                                          untracked_files=False)
        return HeadInfo(commit, branch, detached, dirty)

    def subject(self, ref: str) -> str | None:
        """The first line of the message of the commit `ref` names (None if unknown)."""
        try:
            return self._git("log", "-1", "--format=%s", ref, "--").strip() or None
        except GitOpsError:
            return None

    def message(self, ref: str) -> str:
        """The whole message of the commit `ref` names ("" if unknown)."""
        try:
            return self._git("log", "-1", "--format=%B", ref, "--")
        except GitOpsError:
            return ""

    def diff_files(self, base_ref: str, head_ref: str, paths: Sequence[str]) -> str:
        """Unified diff between two refs restricted to `paths` ('' when they are equal)."""
        return self._git("diff", "--no-color", "--no-ext-diff", "--no-textconv",
                         self.resolve(base_ref), self.resolve(head_ref), "--", *paths)

    def branch_of(self, ref: str) -> str | None:
        """The branch name `ref` stands for (local, or remote-tracking without the remote),
        None for a commit, a tag or an unknown ref."""
        try:
            full = self._git("rev-parse", "--symbolic-full-name", ref).strip()
        except GitOpsError:
            return None
        if full.startswith("refs/heads/"):
            return full.removeprefix("refs/heads/")
        if full.startswith("refs/remotes/") and full.count("/") >= 3:
            return full.split("/", 3)[3]
        return None

    # --- branches --------------------------------------------------------------------------

    def branch_exists(self, name: str) -> bool:
        return f"refs/heads/{name}" in {r.path for r in self.repo.branches}

    def list_branches(self, prefix: str = BRANCH_PREFIX) -> list[str]:
        return sorted(h.name for h in self.repo.branches if h.name.startswith(prefix))

    def unique_branch_name(self, suite: str, bucket: str, short_id: str) -> str:
        """`promptloop/<suite>/<bucket>/<short-id>`, sanitised, with -2, -3... if taken."""
        parts = [sanitize_ref_component(p) for p in (suite, bucket, short_id)]
        base = BRANCH_PREFIX + "/".join(parts)
        name, n = base, 1
        while self.branch_exists(name):
            n += 1
            name = f"{base}-{n}"
        self._git("check-ref-format", "--branch", name)
        return name

    def delete_branch(self, name: str) -> None:
        """Delete one of our branches (refuses others and the user's current branch)."""
        if not name.startswith(BRANCH_PREFIX):
            raise GitOpsError(f"refusing to delete {name!r}: not a {BRANCH_PREFIX}* branch")
        if not self.branch_exists(name):
            raise GitOpsError(f"no branch {name!r}")
        self._git("branch", "-D", "--", name)

    def push(self, remote: str, branch: str) -> str | None:
        """`git push <remote> <branch>`, never forced (the user's hooks run as for any push).
        Returns None on success, else git's error output."""
        try:
            self.repo.git.execute(["git", "push", remote, branch])
        except git.GitCommandError as err:
            detail = (err.stderr or "").strip().removeprefix("stderr: ").strip("'").strip()
            return detail or "git push failed"
        return None

    # --- worktrees ---------------------------------------------------------------------------

    def staged_diff(self, worktree: Path) -> str:
        """Everything changed in `worktree` (tracked or new files), as one diff: what an
        external proposer did in the candidate worktree. Stages the changes to diff them."""
        self._git("add", "-A", cwd=worktree)
        return self._git("diff", "--cached", "--no-color", cwd=worktree)

    # --- candidates ------------------------------------------------------------------------

    @contextlib.contextmanager
    def candidate(self, base_ref: str, branch_name: str,
                  folder: Path | None = None) -> Iterator[Candidate]:
        """A new branch at `base_ref` checked out in a temporary worktree, removed on exit.

        The worktree is `<folder>/worktree`; `folder` (default: a new `candidate_folder()`)
        must not exist yet. The branch survives the context (delete it with `delete_branch`)."""
        sha = self.resolve(base_ref)
        if self.branch_exists(branch_name):
            raise GitOpsError(f"branch {branch_name!r} already exists")
        _install_hooks()
        tmp = folder or candidate_folder()
        tmp.mkdir(parents=True)
        mark_owner(tmp, repository_id(self.root))
        wt = tmp / "worktree"
        with _LOCK:
            _LIVE[wt] = (self.root, tmp)
        try:
            self._git("worktree", "add", "--quiet", "-b", branch_name, str(wt), sha)
            kill_point("worktree")
            yield Candidate(wt, branch_name, sha)
        finally:
            # Unregister only once removed: a second Ctrl-C here leaves it to the atexit hook.
            with _LOCK:
                live = wt in _LIVE
            if live:
                remove_worktree(self.root, wt, tmp)
                with _LOCK:
                    _LIVE.pop(wt, None)

    def commit(self, candidate: Candidate, paths: Sequence[str], message: str,
               author: str = DEFAULT_AUTHOR) -> str:
        """Commit only `paths` (relative to the worktree root) on the candidate's branch."""
        rel = []
        for p in paths:
            path = Path(p)
            if path.is_absolute():
                try:
                    path = path.relative_to(candidate.path)
                except ValueError as err:
                    raise GitOpsError(f"{p} is outside the candidate worktree") from err
            rel.append(path.as_posix())
        if not rel:
            raise GitOpsError("nothing to commit: no paths given")

        env = identity_env(author)
        self._git("add", "--", *rel, cwd=candidate.path)
        if not self._git("diff", "--cached", "--name-only", "--", *rel,
                         cwd=candidate.path).strip():
            raise GitOpsError(f"nothing to commit: {', '.join(rel)} unchanged")
        self._git("commit", "--quiet", "--no-verify", "-m", message, "--", *rel,
                  cwd=candidate.path, env=env)
        return self._git("rev-parse", "HEAD", cwd=candidate.path).strip()


def identity_env(author: str) -> dict[str, str]:
    """`author` as author and committer, so no user.name/email config is needed."""
    m = re.fullmatch(r"\s*(.*?)\s*<([^>]*)>\s*", author)
    if not m or not m.group(1):
        raise GitOpsError(f"author must look like 'Name <email>', got {author!r}")
    name, email = m.group(1), m.group(2)
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}


def state_dir(explicit: Path | None = None) -> Path:
    """Where runs, caches and ledgers live: --state-dir, $PROMPTLOOP_HOME, or <repo>/.promptloop.

    The folder is added to the repository's `.git/info/exclude` so it never shows up as an
    untracked change in the user's checkout.
    """
    if explicit is not None or os.environ.get(STATE_ENV):
        chosen = state_folder(None, explicit)
        root = repo_root()
        if root is not None:  # inside the checkout (a CI job's $PROMPTLOOP_HOME): excluded too
            with contextlib.suppress(ValueError, OSError):
                rel = chosen.resolve().relative_to(root.resolve()).as_posix()
                if rel not in ("", "."):
                    add_exclude(root, f"/{rel}/")
        return chosen
    root = repo_root()
    if root is not None:
        add_exclude(root, f"{STATE_FOLDER}/")
    return state_folder(root)


def provenance(root: Path | None = None) -> Provenance:
    """Git commit and dirty flag of the checkout at `root` (default: the current one), and a
    new session id (the caller's runs share it)."""
    root = root or repo_root()
    if root is None:
        return Provenance(session=new_session())
    try:
        with GitOps(root) as git:
            head = git.head_info()
    except GitOpsError:
        return Provenance(session=new_session())
    if head.commit is None:
        return Provenance(session=new_session())
    return Provenance(git_commit=head.commit, git_dirty=head.dirty, branch=head.branch,
                      session=new_session())
