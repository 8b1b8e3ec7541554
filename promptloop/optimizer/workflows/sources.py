"""Where `eval`, `optimize` and `review` read prompts, tasks and manuals: one repository, seen at
one git ref or in its working tree, and the output says which.

A `RepoSource` is the repository holding the current folder seen at `ref` (None: the working
tree). At a ref, files come from the object database and a suite is exported from it into the
state folder once per commit, with the shared fixtures of that commit beside it (the loader
looks for fixtures in the suite folder first), so the loader reads exactly that commit. A
prompt or suite the repository lacks is an error naming promptloop.toml's key (what is
evaluated must be what the repository holds); suites come from promptloop's bundled copy
(`agents.data`) only outside any repository, the proposer's manual whenever the repository
lacks one, and the description says so. Every description is kept in `served`, for the
command's output and the run's provenance.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Literal

from promptloop.agents.data import DATA_FOLDERS, data_dir
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.names import did_you_mean
from promptloop.optimizer.core.project import active_project
from promptloop.optimizer.core.prompt_target import PromptSource, open_target
from promptloop.optimizer.core.regions.model import CODE_LANGUAGES, language_of
from promptloop.optimizer.core.suites import FIXTURES_DIR, JSONL_SUFFIX, is_jsonl_suite, is_suite
from promptloop.optimizer.git import GitOps, GitOpsError, repo_root
from promptloop.optimizer.git_read import (
    export_tree,
    files_in,
    folder_files,
    has_file,
    subfolders,
    tree_files,
)

MANUAL = "manuals/prompt_engineering.md"
_EXPORTED = ".promptloop-export"
"""Marker file of a complete export (a half-written one is never reused)."""


@dataclass(frozen=True)
class Origin:
    """Where a file or folder was read: a commit, the working tree, or the bundled copy."""

    kind: Literal["commit", "worktree", "bundled"]
    ref: str = ""
    commit: str = ""
    note: str = ""

    def describe(self) -> str:
        if self.kind == "commit":
            text = f"{self.ref} {self.commit[:7]}"
            if self.commit.startswith(self.ref):
                text = self.commit[:7]
        elif self.kind == "worktree":
            text = "working tree"
        else:
            text = "promptloop's bundled copy"
        return f"{text} ({self.note})" if self.note else text


@dataclass(frozen=True)
class Sourced:
    """A file or folder (`path`, relative to the repository top) and where it was read."""

    path: str
    origin: Origin
    text: str = ""
    """The file's text (files only)."""
    folder: Path | None = None
    """Where the folder's files are on disk (folders only)."""
    kind: str = ""
    """What it is for the output (prompt, tasks, manual, project); "" = from its path."""
    hint: str = ""
    """A note for the user after the line (e.g. a whole source file used as the prompt)."""

    def describe(self) -> str:
        return f"{self.path} @ {self.origin.describe()}"

    def line(self) -> str:
        """`prompt: prompts/card_agent.md @ HEAD 1a2b3c4`, for the command's output."""
        what = self.kind or {"prompts": "prompt", "manuals": "manual"}.get(
            self.path.partition("/")[0], "tasks")
        return f"{what}: {self.describe()}" + (f"; {self.hint}" if self.hint else "")


class RepoSource:
    """The repository at `root` seen at `ref` (None: its working tree); `root` None: outside a
    repository, where everything is the bundled copy. `ops` lends an open `GitOps`."""

    def __init__(self, root: Path | None, ref: str | None, cache_dir: Path,
                 ops: GitOps | None = None) -> None:
        if root is None:
            _refuse_a_project_outside_git()
        self.root, self.ref, self.cache_dir = root, ref, cache_dir
        self._owned = ops is None and root is not None
        self.ops = ops if ops is not None else (GitOps(root) if root is not None else None)
        self.sha: str | None = None
        self.served: list[Sourced] = []
        self._taken = 0
        if ref is not None:
            if self.ops is None:
                raise ConfigError(f"cannot read git ref {ref!r}: {Path.cwd()} is not inside a "
                                  "git repository")
            self.sha = self.ops.resolve(ref)

    @classmethod
    def find(cls, ref: str | None, state_dir: Path, start: Path | None = None) -> RepoSource:
        """The repository holding `start` (default: the current folder), at `ref`."""
        return cls(repo_root(start), ref, state_dir / "sources")

    def close(self) -> None:
        if self._owned and self.ops is not None:
            self.ops.close()

    def __enter__(self) -> RepoSource:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def take_new(self) -> list[Sourced]:
        """What was served since the last call (to announce each source once)."""
        new, self._taken = self.served[self._taken:], len(self.served)
        return new

    def _hint(self, item: Sourced, hint: str) -> None:
        """Attach `hint` to a served item not yet announced."""
        for i, s in enumerate(self.served):
            if s is item and i >= self._taken:
                self.served[i] = replace(item, hint=hint)

    def _serve(self, item: Sourced) -> Sourced:
        if all(s.path != item.path for s in self.served):
            self.served.append(item)
        return item

    def _at_ref(self) -> Origin:
        assert self.ref is not None and self.sha is not None
        return Origin("commit", self.ref, self.sha)

    def head(self) -> str | None:
        """The sha of HEAD, None outside a repository or before the first commit."""
        if self.ops is None:
            return None
        try:
            return self.ops.resolve("HEAD")
        except GitOpsError:
            return None

    # --- files -----------------------------------------------------------------------------
    def read(self, rel: str, *, bundled: bool = True, kind: str = "",
             announce: bool = True) -> Sourced:
        """The text of file `rel`; from the bundled copy when the repository lacks it (unless
        `bundled` is False, which raises instead). `kind` names it in the output; `announce`
        False reads it without listing it among the command's sources."""
        if not announce:
            saved = list(self.served)
            try:
                return self.read(rel, bundled=bundled, kind=kind)
            finally:
                self.served[:] = saved
        if self.sha is not None:
            assert self.ops is not None
            try:
                return self._serve(Sourced(rel, self._at_ref(), self.ops.read_file(self.sha, rel),
                                           kind=kind))
            except GitOpsError as err:
                if not bundled:
                    at = self._at_ref().describe()
                    inside: dict[str, str] = {}
                    with contextlib.suppress(GitOpsError):
                        inside = self.ops.list_files(self.sha, rel)
                    if any(n.startswith(rel.rstrip("/") + "/") for n in inside):
                        raise GitOpsError(f"{rel} is a folder at {at}, not a file") from err
                    raise GitOpsError(f"{rel} does not exist at {at}") from err
                return self._bundled_file(rel, f"not at {self.ref}")
        if self.root is not None and (self.root / rel).is_file():
            text = self._as_committed(rel, _text(self.root / rel) or "")
            origin = Origin("worktree", note=self._file_note(rel, text))
            return self._serve(Sourced(rel, origin, text, kind=kind))
        if not bundled:
            where = self.root or Path.cwd()
            if (where / rel).is_dir():
                raise ConfigError(f"{rel} is a folder in {where}, not a file")
            raise ConfigError(f"{rel} does not exist in {where}")
        return self._bundled_file(rel, "not in this repository" if self.root else
                                  "no git repository here")

    def prompt(self, agent: str, name: str | None = None) -> PromptSource:
        """Prompt target `name` (default: the agent's first) of `agent`, read from its file
        here: inside a repository never from promptloop's bundled copy, since what is evaluated
        must be what the repository holds (a missing file is an error naming the project file
        and key); outside any repository, promptloop's own agents read their bundled prompt,
        and the output says so (as their suites do)."""
        declared = active_project().agent(agent)
        target = declared.target(name)
        bundled = self.root is None and declared.project.path is None
        try:
            sourced = self.read(target.path, bundled=bundled, kind="prompt")
            if target.whole_file and language_of(target.path) in CODE_LANGUAGES:
                self._hint(sourced, f"note: the whole file is the prompt (the agent gets its "
                           f"source as prompt.text); for a string literal in it, declare "
                           f"[[agents.{agent}.prompts]] with path and variable "
                           "(docs/agents.md, Prompt targets)")
        except (ConfigError, GitOpsError) as err:
            raise ConfigError(f"{declared.project.where}: {declared.target_key(target)}: "
                              f"{err}" + (". Start a project with `promptloop init`"
                                          if declared.project.path is None else "")) from None
        return open_target(declared, target, sourced.text,
                           self.sha if self.sha is not None else "working tree")

    def _bundled_file(self, rel: str, note: str) -> Sourced:
        path = _bundled(rel)
        if path is None or not path.is_file():
            raise ConfigError(f"{rel} exists neither in the repository nor in promptloop")
        return self._serve(Sourced(rel, Origin("bundled", note=note),
                                   path.read_text(encoding="utf-8")))

    def _as_committed(self, rel: str, text: str) -> str:
        """The working tree's `text` of `rel`, or HEAD's when they differ only in line endings
        (a checkout with `eol=crlf` or core.autocrlf writes CRLF where the blob holds LF): the
        text a commit holds, so eval runs what optimize and review run at a ref, and their
        trials are shared (a team's eval said "same as HEAD" and paid the baseline again)."""
        head = self.head()
        if head is None or self.ops is None or "\r" not in text:
            return text
        try:
            committed = self.ops.read_file(head, rel)
        except GitOpsError:
            return text
        return committed if committed != text and _same_text(committed, text) else text

    def _file_note(self, rel: str, text: str) -> str:
        head = self.head()
        if head is None:
            return "no commit yet"
        assert self.ops is not None
        try:
            committed = self.ops.read_file(head, rel)
        except GitOpsError:
            return "not committed"
        same = _same_text(committed, text)
        return f"{'same as' if same else 'differs from'} HEAD {head[:7]}"

    def uncommitted_edit(self, rel: str) -> bool:
        """The working tree's `rel` differs from HEAD: an edit not committed (yet)."""
        text = _text(self.root / rel) if self.root is not None else None
        return text is not None and self._file_note(rel, text).startswith(("differs", "not"))

    def unevaluated_warning(self, rel: str, command: str) -> str | None:
        """A warning when the working tree's `rel` differs from what this source reads at its
        ref (which the command evaluates instead); None when they agree or there is no ref."""
        if self.sha is None or self.root is None or not (self.root / rel).is_file():
            return None
        assert self.ops is not None
        try:
            at_ref = self.ops.read_file(self.sha, rel)
        except GitOpsError:
            at_ref = None
        if at_ref is not None and _same_text(at_ref, _text(self.root / rel)):
            return None
        uses = f"{command} uses {self._at_ref().describe()}"
        if self.uncommitted_edit(rel):
            return f"your uncommitted edit to {rel} is not evaluated: {uses}"
        return f"{rel} of your checkout (HEAD) is not evaluated: {uses}"

    # --- suites ----------------------------------------------------------------------------
    def suite(self, agent: str, kind: str) -> Sourced | None:
        """The agent's suite `kind`: the suite (folder or JSONL file) of that name among those
        its promptloop.toml table lists (`suites`), or a suite given by its path (relative to
        the current folder, inside the repository), else the first whose suite.json has that
        `kind`; None when it has none."""
        folders = self.suite_folders(agent)
        rel = folders.get(kind)
        if rel is None and ("/" in kind or is_jsonl_suite(kind)):  # a path to a suite
            rel = self.relative(kind)
            outside = Path(kind).resolve()
            if rel is None and self.sha is None and is_suite(outside):
                return self._serve(Sourced(str(outside), Origin(
                    "worktree", note="outside the repository"), folder=outside))
        if rel is None:
            rel = self.by_kind(agent, kind)
        return self.suite_at(rel) if rel is not None else None

    def suite_folders(self, agent: str) -> dict[str, str]:
        """Suite name -> folder (relative to the repository top) of every suite the agent's
        `suites` list names, here (at the ref or in the working tree); outside any repository,
        in promptloop's bundled copy."""
        out: dict[str, str] = {}
        for entry in active_project().agent(agent).config.suites:
            entry = entry.strip("/")
            if is_jsonl_suite(entry):  # a suite in one file: named after it
                if self._exists(entry):
                    out.setdefault(entry.rsplit("/", 1)[-1].removesuffix(JSONL_SUFFIX), entry)
                continue
            if self._exists(f"{entry}/suite.json"):
                out.setdefault(entry.rsplit("/", 1)[-1], entry)
                continue
            for name in self._subfolders(entry):
                if self._exists(f"{entry}/{name}/suite.json"):
                    out.setdefault(name, f"{entry}/{name}")
            for name in self._files(entry, JSONL_SUFFIX):
                out.setdefault(name.removesuffix(JSONL_SUFFIX), f"{entry}/{name}")
        return out

    def _files(self, rel: str, suffix: str) -> list[str]:
        """The names of the files ending in `suffix` directly inside folder `rel`."""
        if self.sha is not None:
            assert self.ops is not None
            return [n for n in files_in(self.ops, self.sha, rel) if n.endswith(suffix)]
        folder = self.root / rel if self.root is not None else _bundled(rel)
        if folder is None or not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if p.is_file() and p.name.endswith(suffix))

    def _exists(self, rel: str) -> bool:
        if self.sha is not None:
            assert self.ops is not None
            return has_file(self.ops, self.sha, rel)  # at a ref: the commit's files only
        if self.root is not None:
            return (self.root / rel).is_file()
        bundled = _bundled(rel)  # outside any repository only
        return bundled is not None and bundled.is_file()

    def _subfolders(self, rel: str) -> list[str]:
        found: set[str] = set()
        if self.sha is not None:
            assert self.ops is not None
            found |= set(subfolders(self.ops, self.sha, rel))
        elif self.root is not None and (self.root / rel).is_dir():
            found |= {p.name for p in (self.root / rel).iterdir() if p.is_dir()}
        bundled = _bundled(rel) if self.root is None else None
        if bundled is not None and bundled.is_dir():
            found |= {p.name for p in bundled.iterdir() if p.is_dir()}
        return sorted(found)

    def _suite_kind(self, rel: str) -> str | None:
        """The `kind` the suite declares (suite.json, or a JSONL file's header line), "mixed"
        (suite.json's default) when it declares none; None when its settings cannot be read
        (loading it names the file, the line and the field)."""
        try:
            if is_jsonl_suite(rel):  # the kind is in the header line, if any
                first = json.loads(self.read(rel, announce=False).text.lstrip().split("\n", 1)[0])
                if not isinstance(first, dict):
                    return None
                data = first.get("suite", {}) if "id" not in first else {}
            else:
                data = json.loads(self.read(f"{rel}/suite.json", announce=False).text)
        except (ValueError, OSError, ConfigError, GitOpsError):
            return None
        if not isinstance(data, dict):
            return None
        kind = data.get("kind", "mixed")
        return kind if isinstance(kind, str) else None

    def by_kind(self, agent: str, kind: str) -> str | None:
        """The first of `agent`'s suites that declares `kind`. For "capability" (what eval and
        optimize run when no --suite is given), an agent without one falls back to its first
        suite that declares no kind ("mixed") or whose settings cannot be read, so a lone
        headerless JSONL file runs, and a broken header is reported by the loader (file,
        line, field) instead of as a missing suite."""
        folders = list(self.suite_folders(agent).values())
        kinds = {rel: self._suite_kind(rel) for rel in folders}
        rel = next((r for r in folders if kinds[r] == kind), None)
        if rel is None and kind == "capability":
            rel = next((r for r in folders if kinds[r] in ("mixed", None)), None)
        return rel

    def suite_at(self, rel: str) -> Sourced | None:
        """The suite folder `rel` (relative to the repository top); None when the repository
        (at the ref or in its working tree) lacks it. Only outside any repository does
        promptloop's bundled copy serve it, and the description says so. `rel` may also be a
        JSONL suite file (served as the file)."""
        if is_jsonl_suite(rel):
            return self._jsonl_at(rel)
        if self.sha is not None:
            assert self.ops is not None
            if has_file(self.ops, self.sha, f"{rel}/suite.json"):
                return self._serve(Sourced(rel, self._at_ref(), folder=self._export(rel)))
            return None
        if self.root is not None:
            if not (self.root / rel / "suite.json").is_file():
                return None
            folder = self.root / rel if self._own_fixtures() else self._copy_worktree(rel)
            origin = Origin("worktree", note=self._folder_note(rel))
            return self._serve(Sourced(rel, origin, folder=folder))
        path = _bundled(rel)
        if path is None or not (path / "suite.json").is_file():
            return None
        return self._serve(Sourced(rel, Origin("bundled", note="no git repository here"),
                                   folder=path))

    def _jsonl_at(self, rel: str) -> Sourced | None:
        """A JSONL suite file: at a ref, exported from the commit (with the commit's shared
        fixtures beside it); in the working tree, the file itself."""
        if self.sha is not None:
            assert self.ops is not None
            if not has_file(self.ops, self.sha, rel):
                return None
            dest = self.cache_dir / self.sha / rel
            if not dest.is_file():
                tmp = dest.with_name(f"{dest.name}.{os.getpid()}.partial")
                tmp.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_bytes(self.ops.read_file(self.sha, rel).encode("utf-8"))
                tmp.replace(dest)
            return self._serve(Sourced(rel, self._at_ref(), folder=dest))
        if self.root is not None:
            path = self.root / rel
            if not path.is_file():
                return None
            origin = Origin("worktree", note=self._file_note(rel, _text(path) or ""))
            return self._serve(Sourced(rel, origin, folder=path))
        bundled = _bundled(rel)
        if bundled is None or not bundled.is_file():
            return None
        return self._serve(Sourced(rel, Origin("bundled", note="no git repository here"),
                                   folder=bundled))

    def relative(self, path: str) -> str | None:
        """`path` (relative to the current folder, or absolute) relative to the repository
        top; None outside the repository."""
        if self.root is None:
            return None
        full = Path(path).resolve()
        top = self.root.resolve()
        return full.relative_to(top).as_posix() if full.is_relative_to(top) else None

    def missing_suite(self, agent: str, kind: str) -> str:
        """What to say when `agent` has no suite `kind` here: the project file and its
        `suites` key, the suites that exist, and how to start one."""
        declared = active_project().agent(agent)
        known = self.kinds(agent)
        where = (self._at_ref().describe() if self.sha is not None
                 else "the working tree" if self.root is not None else "promptloop's bundled copy")
        listed = ", ".join(declared.config.suites) or "nothing"
        return (f"{agent} has no suite {kind!r} in {where}: {declared.project.where} "
                f"{declared.table} key 'suites' lists {listed}."
                f"{did_you_mean(kind, known)} Suites found: {', '.join(known) or 'none'}. "
                "Create one with `promptloop init`, or add its folder to 'suites'")

    def kinds(self, agent: str) -> list[str]:
        """The names of `agent`'s suites (for error messages)."""
        return sorted(self.suite_folders(agent))

    def _folder_note(self, rel: str) -> str:
        head = self.head()
        if head is None:
            return "no commit yet"
        assert self.root is not None and self.ops is not None
        committed = tree_files(self.ops, head, rel)
        if committed is None:
            return "not committed"
        same = committed == folder_files(self.root / rel)
        return f"{'same as' if same else 'differs from'} HEAD {head[:7]}"

    def _own_fixtures(self) -> bool:
        """The shared fixtures the loader falls back to are this checkout's own (or it has
        none), so a working-tree suite can be loaded in place."""
        assert self.root is not None
        own = self.root / "fixtures"
        return not own.is_dir() or own.resolve() == FIXTURES_DIR.resolve()

    def _export(self, rel: str) -> Path:
        """Suite `rel` at the ref, with the commit's shared fixtures beside its tasks."""
        assert self.ops is not None and self.sha is not None
        dest = self.cache_dir / self.sha / rel
        if (dest / _EXPORTED).is_file():
            return dest
        tmp = dest.with_name(f"{dest.name}.{os.getpid()}.partial")
        shutil.rmtree(tmp, ignore_errors=True)
        export_tree(self.ops, self.sha, rel, tmp)
        for name in subfolders(self.ops, self.sha, "fixtures"):
            if not (tmp / name).exists():
                export_tree(self.ops, self.sha, f"fixtures/{name}", tmp / name)
        return _publish(tmp, dest, f"{rel} at {self.sha}\n")

    def _copy_worktree(self, rel: str) -> Path:
        """A working-tree suite copied with this checkout's shared fixtures beside its tasks
        (the loader's fallback fixtures are another checkout's or the bundled ones)."""
        assert self.root is not None
        key = hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:12]
        dest = self.cache_dir / f"worktree-{key}" / rel
        tmp = dest.with_name(f"{dest.name}.{os.getpid()}.partial")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(self.root / rel, tmp)
        for fixture in sorted((self.root / "fixtures").iterdir()):
            if fixture.is_dir() and not (tmp / fixture.name).exists():
                shutil.copytree(fixture, tmp / fixture.name)
        shutil.rmtree(dest, ignore_errors=True)
        return _publish(tmp, dest, f"{rel} of the working tree at {self.root}\n")


def _refuse_a_project_outside_git() -> None:
    """A ConfigError when the active project is a promptloop.toml of the user's outside any
    git repository: its agents would otherwise be looked up in promptloop's bundled copy
    (the fallback for promptloop's own agents), with messages about files that are there."""
    project = active_project()
    if project.path is None or repo_root(project.path.parent) is not None:
        return  # promptloop's own agents, or a suite given by a path outside the repository
    raise ConfigError(
        f"{project.path} is not in a git repository: promptloop reads an agent's prompts and "
        f"suites as a git repository holds them (optimize patches them on a branch). Run "
        f"`git init && git add -A && git commit -m init` in {project.path.parent}")


def project_suite(agent: str, kind: str, start: Path | None = None) -> Path:
    """The folder of `agent`'s suite `kind` in the working tree of the repository holding
    `start` (outside any repository, promptloop's bundled copy); a ConfigError naming the
    agent's `suites` key when it has none."""
    root = repo_root(start)
    with RepoSource(root, None, Path(os.devnull)) as source:
        rel = source.suite_folders(agent).get(kind)
        if rel is None and root is not None and ("/" in kind or is_jsonl_suite(kind)):
            rel = source.relative(kind)  # a suite given by its path
        if rel is None:
            rel = source.by_kind(agent, kind)
        if rel is None:
            raise ConfigError(source.missing_suite(agent, kind))
    path = root / rel if root is not None else _bundled(rel)
    assert path is not None
    return path


def project_suites(start: Path | None = None, agents: Sequence[str] | None = None
                   ) -> tuple[list[tuple[Path, str]], str]:
    """The suites (folders and JSONL files, each with the agent declaring it: a headerless
    JSONL suite is that agent's) of the active project's agents (or of `agents`) in the
    repository holding `start` (default: the current folder), and where they were read: the
    working tree, or outside any repository promptloop's bundled copy. None at all is an error
    naming the project file."""
    root = repo_root(start)
    found: dict[Path, str] = {}
    with RepoSource(root, None, Path(os.devnull)) as source:
        for agent in agents if agents is not None else active_project().agent_names():
            for rel in source.suite_folders(agent).values():
                path = root / rel if root is not None else _bundled(rel)
                if path is not None:
                    found.setdefault(path, agent)
    where = (f"the working tree of {root}" if root is not None
             else "promptloop's bundled copy (no git repository here)")
    if not found:
        project = active_project()
        listed = sorted({f"{e} ({n})" for n, a in project.agents.items() for e in a.suites})
        raise ConfigError(f"no suites in {where}: the 'suites' keys of {project.where} list "
                          f"{', '.join(listed) or 'none'}, and none holds a suite.json. Start "
                          "a project with `promptloop init`")
    return list(found.items()), where


def _publish(tmp: Path, dest: Path, marker: str) -> Path:
    """Move a finished export into place (another process may have won the race)."""
    (tmp / _EXPORTED).write_text(marker, encoding="utf-8")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (dest / _EXPORTED).is_file():
            raise
    return dest


def _bundled(rel: str) -> Path | None:
    """`rel` inside promptloop's bundled data folders, None outside them."""
    top, _, rest = rel.partition("/")
    for folder in DATA_FOLDERS:
        if top == folder:
            return data_dir(folder) / rest
    return None


def _same_text(a: str, b: str | None) -> bool:
    """The same file as git sees it: equal but for CRLF against LF (a checkout with
    core.autocrlf holds CRLF where the blob holds LF, and `git status` calls it clean)."""
    return b is not None and (a == b or a.replace("\r\n", "\n") == b.replace("\r\n", "\n"))


def _text(path: Path) -> str | None:
    """A working-tree file's text as git holds it: bytes decoded, line endings untouched
    (`read_text` turns CRLF into LF, and a committed CRLF prompt then read as edited and
    reached the agent with other bytes than at a ref)."""
    return path.read_bytes().decode("utf-8") if path.is_file() else None


__all__ = ["MANUAL", "Origin", "RepoSource", "Sourced", "project_suite", "project_suites"]
