"""The external proposer (`--proposer-cmd`) runs in a throwaway copy, never in your repository.

`run_sandboxed` exports the base commit (`git archive`) into a fresh folder outside the
repository, makes it a one-commit git repository of its own (hooks off: `core.hooksPath` is an
empty folder; no git config of yours but your name and email), and runs the command there:

- HOME and TMPDIR are folders of the sandbox; the environment is an allowlist (PATH, LANG,
  LANGUAGE, LC_*, the PROMPTLOOP_* variables the command needs, and the variables you name with
  `--proposer-env`; no provider key unless named);
- where the system can (`isolation()`): under bubblewrap (`bwrap`) or in user, PID and mount
  namespaces (`unshare`), with every file system read-only but the sandbox, a /proc of its own
  and no capabilities (the mechanism shared with the agent trials' sandbox:
  optimizer/core/isolation.py);
  otherwise ("none") only the copy and the allowlist protect you, and the watch
  (propose/watch.py) refuses the iteration when the command wrote into your checkout, its git
  folders, the candidate worktree or your HOME's startup files;
- promptloop then reads back only the prompt file (a regular file, not through a link) and never
  runs git in the copy again: a hook, a `core.fsmonitor` or an attributes file the command left
  there is never executed. Any other change in the copy refuses the iteration (`other_file`,
  `deleted`, `symlink`, `mode_change`). The sandbox is deleted afterwards.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shlex
import shutil
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from promptloop.agents import trees
from promptloop.optimizer.core.isolation import MECHANISMS, Layout, Mechanism, available
from promptloop.optimizer.core.isolation import probe as mechanism_probe
from promptloop.optimizer.core.isolation import wrap as mechanism_wrap
from promptloop.optimizer.core.redact import register_secret
from promptloop.optimizer.propose.guards import GuardCode, GuardViolation
from promptloop.optimizer.propose.proposer import ProposerError, run_command
from promptloop.optimizer.propose.watch import (
    OutsideWriteError,
    Snapshot,
    Watched,
    changed_paths,
    outside_writes,
    proposer_watch,
    snapshot,
)

Isolation = Mechanism
ISOLATIONS: tuple[Isolation, ...] = MECHANISMS
ENV_ALLOWED = ("PATH", "LANG", "LANGUAGE")
"""Variables passed through, with every LC_* one; the rest only when named."""
MAX_PROMPT_BYTES = 2_000_000


@dataclass(frozen=True)
class Sandbox:
    """The folders of one sandbox: `root` holds the copy, HOME, TMPDIR and git's config."""

    root: Path

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def hooks(self) -> Path:
        return self.root / "hooks"

    @property
    def gitconfig(self) -> Path:
        return self.root / "gitconfig"

    @property
    def package(self) -> Path:
        return self.root / "package.md"


@dataclass(frozen=True)
class SandboxResult:
    new_text: str
    """The prompt file's content when the command ended."""
    stdout: str
    stderr: str
    isolation: Isolation


def layout(sandbox: Sandbox) -> Layout:
    """What the command sees (optimizer/core/isolation.py): the sandbox the only writable
    place, its copy the working folder; nothing hidden (it may read what your user can)."""
    return Layout(cwd=sandbox.repo, writable=(sandbox.root,))


def wrap(isolation: Isolation, sandbox: Sandbox, cmd: str) -> list[str]:
    """The argv running shell command `cmd` in `sandbox.repo` under `isolation` (the shared
    mechanism of optimizer/core/isolation.py)."""
    return mechanism_wrap(isolation, layout(sandbox), ["sh", "-c", cmd])


def probe(iso: Isolation) -> bool:
    """Whether `iso` works here (optimizer/core/isolation.py's probe: a write inside the box,
    none beside it, hidden folders and the host's processes not visible)."""
    return mechanism_probe(iso)


def isolation() -> Isolation:
    """The strongest isolation that works on this system: bwrap, unshare, else none (probed
    once per process, shared with the agent trials' sandbox)."""
    return available()


_DESCRIPTION: dict[Isolation, str] = {
    "bwrap": "bubblewrap: every file system read-only but the sandbox, own PID namespace and "
             "/proc, no capabilities; the network is not cut and your files can be read",
    "unshare": "user, PID and mount namespaces (unshare): every file system read-only but the "
               "sandbox, own /proc, no capabilities; the network is not cut and your files can "
               "be read",
    "none": "none: a throwaway copy and an environment allowlist only; a write elsewhere is "
            "detected only in your checkout, its git folders, the candidate worktree and your "
            "HOME's startup files, and is not undone",
}


def describe(iso: Isolation) -> str:
    """What `iso` isolates, for `promptloop doctor`."""
    return _DESCRIPTION[iso]


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ENV_ALLOWED or k.startswith("LC_")}


def _git_env(sandbox: Sandbox) -> dict[str, str]:
    """git's environment in the sandbox: no system config, the sandbox's as the global one."""
    return {"GIT_CONFIG_GLOBAL": str(sandbox.gitconfig), "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(sandbox.home), "TMPDIR": str(sandbox.tmp)}


def command_env(sandbox: Sandbox, prompt_path: str, bucket: str,
                named: Sequence[str] = ()) -> dict[str, str]:
    """The command's whole environment: the allowlist, the `named` variables that are set
    (their values are redacted from every file from now on), the sandbox's HOME, TMPDIR and
    git config, and what the command is told."""
    env = _base_env()
    for name in named:
        if name in os.environ:
            env[name] = os.environ[name]
            register_secret(os.environ[name])
    return {**env, **_git_env(sandbox), "PROMPTLOOP_PACKAGE": str(sandbox.package),
            "PROMPTLOOP_PROMPT_FILE": prompt_path, "PROMPTLOOP_BUCKET": bucket}


def _git(sandbox: Sandbox, *args: str) -> None:
    done = subprocess.run(["git", *args], cwd=sandbox.repo, env={**_base_env(),
                          **_git_env(sandbox)}, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise ProposerError(f"could not prepare the proposer's sandbox: git {args[0]}: "
                            f"{done.stderr.strip()[-300:]}")


def _identity(repo: Path) -> tuple[str, str]:
    """Your git name and email (the only git settings the sandbox inherits)."""
    def get(key: str, default: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), "config", "--get", key],
                              capture_output=True, text=True, check=False)
        return done.stdout.strip() or default
    return get("user.name", "promptloop"), get("user.email", "promptloop@localhost")


def create_sandbox(root: Path, repo: Path, base_sha: str, package: Path) -> Sandbox:
    """A sandbox at `root` (a new folder outside `repo`) holding `repo` at `base_sha` as a
    fresh one-commit repository, a copy of the `package`, HOME, TMPDIR and git's config."""
    sandbox = Sandbox(root)
    if root.resolve().is_relative_to(repo.resolve()):
        raise ProposerError(f"the proposer's sandbox {root} would be inside the repository")
    for folder in (sandbox.repo, sandbox.home, sandbox.tmp, sandbox.hooks, root / "template"):
        folder.mkdir(parents=True)
    name, email = _identity(repo)
    for key, value in (("user.name", name), ("user.email", email),
                       ("core.hooksPath", str(sandbox.hooks)), ("commit.gpgSign", "false"),
                       ("init.defaultBranch", "main")):
        subprocess.run(["git", "config", "--file", str(sandbox.gitconfig), key, value],
                       check=True, capture_output=True)
    archive = subprocess.Popen(["git", "-C", str(repo), "archive", "--format=tar", base_sha],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    untar = subprocess.run(["tar", "-x", "--no-same-owner", "--no-same-permissions", "-f",
                            "-", "-C", str(sandbox.repo)],
                           stdin=archive.stdout, capture_output=True, check=False)
    if archive.stdout is not None:
        archive.stdout.close()
    if archive.wait() != 0 or untar.returncode != 0:
        raise ProposerError(f"could not export {base_sha[:12]} into the proposer's sandbox: "
                            f"{untar.stderr.decode(errors='replace').strip()[-300:]}")
    _git(sandbox, "init", "-q", f"--template={root / 'template'}")
    _git(sandbox, "add", "-A", "-f")
    _git(sandbox, "commit", "-q", "--no-verify", "--allow-empty", "-m",
         f"promptloop sandbox of {base_sha}")
    shutil.copyfile(package, sandbox.package)
    return sandbox


def remove_tree(path: Path) -> None:
    """Remove `path` also where the command left folders without write permission (and
    however deep it made them): folders made writable by an iterative walk, then
    `promptloop.agents.trees.remove_tree`, which never recurses."""
    if not path.is_dir() or path.is_symlink():
        trees.remove_tree(path)
        return
    for folder in [path, *(e for e in trees.iter_entries(path)
                           if e.is_dir() and not e.is_symlink())]:
        with contextlib.suppress(OSError):
            folder.chmod(folder.stat().st_mode | stat.S_IRWXU)
    trees.remove_tree(path)


def copy_changes(before: Snapshot, after: Snapshot, prompt_path: str) -> list[GuardViolation]:
    """Refusals for what the command changed in its copy (one watched tree) besides the
    prompt's text; the prompt's permission bits may change but for the executable ones (an
    editor's rewrite applies the umask)."""
    old, new = before.entries[0].get(prompt_path), after.entries[0].get(prompt_path)
    out: list[GuardViolation] = []
    others: list[str] = []
    for _, rel, how in changed_paths(before, after):
        if rel != prompt_path:
            others.append(f"{rel} {how}")
            continue
        if (how.startswith("mode") and old is not None and new is not None
                and not (old.mode ^ new.mode) & 0o111):
            continue
        code: GuardCode = ("symlink" if "link" in how else "mode_change"
                           if how.startswith("mode") else "deleted")
        out.append(GuardViolation(code, f"the proposer command left {prompt_path} {how}; "
                                  "only its text may change"))
    if others:
        more = f" and {len(others) - 8} more" if len(others) > 8 else ""
        out.append(GuardViolation("other_file", "the proposer command changed other files "
                                  f"than {prompt_path} in its copy of the repository: "
                                  f"{'; '.join(others[:8])}{more}; only the prompt file may "
                                  "be changed"))
    return out


def read_prompt(sandbox: Sandbox, prompt_path: str) -> str:
    """The prompt file's text in the copy: a regular file, not reached through a link."""
    path = sandbox.repo / prompt_path
    if not path.resolve().is_relative_to(sandbox.repo.resolve()):
        raise ProposerError(f"{prompt_path} in the sandbox leads outside it")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise ProposerError(f"cannot read {prompt_path} in the sandbox: {err}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ProposerError(f"{prompt_path} in the sandbox is not a regular file")
        data = fh.read(MAX_PROMPT_BYTES + 1)
    if len(data) > MAX_PROMPT_BYTES:
        raise ProposerError(f"{prompt_path} grew beyond {MAX_PROMPT_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:  # replaced, it would be committed as other text
        raise ProposerError(f"the proposer command left {prompt_path} that is not UTF-8 text "
                            f"(byte {err.start}: {data[err.start:err.start + 4]!r}); write "
                            "the prompt file as UTF-8") from None


_SHELL_WORDS = frozenset({
    ".", ":", "[", "alias", "case", "cd", "command", "eval", "exec", "export", "for", "if",
    "read", "set", "source", "test", "then", "true", "false", "ulimit", "umask", "unset",
    "until", "while", "{", "(", "!"})
"""First words of a shell command that are not programs to look for."""


def command_problem(cmd: str, repo: Path, base_sha: str) -> str | None:
    """Why `cmd` (`--proposer-cmd`) cannot start in the proposer's sandbox, found before any
    trial is paid for: its program is not on PATH, or a path to it names no file of the
    commit the sandbox holds (`base_sha`: the sandbox is that commit, not the checkout) or
    one without its executable bit. None when it looks runnable, or when its first word is
    not a program (a shell keyword, a variable) and only running it can tell."""
    try:
        words = shlex.split(cmd)
    except ValueError as err:
        return f"--proposer-cmd {cmd!r} is not a valid shell command: {err}"
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]  # VAR=value assignments before the program
    if not words:
        return f"--proposer-cmd {cmd!r} names no program"
    prog = words[0]
    if prog in _SHELL_WORDS or any(c in prog for c in "$`*?~;&|<>()"):
        return None
    if "/" not in prog:
        if shutil.which(prog) is None:
            return (f"--proposer-cmd: `{prog}` is not on PATH ({os.environ.get('PATH', '')}); "
                    "give its full path, or install it")
        return None
    if prog.startswith("/"):
        if not Path(prog).is_file():
            return f"--proposer-cmd: {prog} does not exist"
        if not os.access(prog, os.X_OK):
            return f"--proposer-cmd: {prog} is not executable (chmod +x {shlex.quote(prog)})"
        return None
    rel = posixpath.normpath(prog)
    if rel.startswith("../"):
        return None  # outside the sandbox's copy: only running it can tell
    listed = subprocess.run(["git", "-C", str(repo), "ls-tree", base_sha, "--", rel],
                            capture_output=True, text=True, check=False).stdout.split()
    if not listed:
        where = "untracked or changed since" if (repo / rel).exists() else "not in"
        return (f"--proposer-cmd: {prog} is {where} commit {base_sha[:12]}, and the proposer "
                "runs in a sandbox holding that commit (never your checkout): commit it "
                "first")
    if listed[0] != "100755":
        return (f"--proposer-cmd: {prog} is not executable in commit {base_sha[:12]} "
                f"(git update-index --chmod=+x {shlex.quote(rel)}, then commit; or run it "
                f"as `sh {prog}`)")
    return None


async def run_sandboxed(cmd: str, *, repo: Path, base_sha: str, package: Path,
                        prompt_path: str, bucket: str, root: Path,
                        worktree: Path | None = None, others: Sequence[Path] = (),
                        env_names: Sequence[str] = (),
                        using: Isolation | None = None, timeout_s: float = 1800
                        ) -> SandboxResult:
    """Run `cmd` in a sandbox at `root` (see the module's docstring) and return the prompt's
    new text and the command's (redacted) output. Raises `OutsideWriteError` when the watch saw
    a write outside the sandbox or the copy changed beyond the prompt's text (checked also when
    the command failed, so failing cannot hide a write), else the command's `ProposerError`.
    `others` are more candidate worktrees to watch (the other candidates of an iteration with
    `--candidates K`). The sandbox is removed in every case."""
    using = using or isolation()
    # refused before anything is created or removed: the cleanup below deletes `root`, so it
    # must be a new folder of ours, never inside the repository or already there
    if root.resolve().is_relative_to(repo.resolve()):
        raise ProposerError(f"the proposer's sandbox {root} would be inside the repository")
    if root.exists():
        raise ProposerError(f"the proposer's sandbox {root} already exists")
    try:
        sandbox = create_sandbox(root, repo, base_sha, package)
        watched = proposer_watch(repo, worktree, homes=(Path.home(),), others=others)
        copy = (Watched("the sandbox copy", sandbox.repo, skip=(".git",),
                        may_change=(prompt_path,)),)
        before, copy_before = snapshot(watched), snapshot(copy)
        failure: ProposerError | None = None
        out = err = ""
        try:
            out, err = await run_command(wrap(using, sandbox, cmd), sandbox.repo,
                                         command_env(sandbox, prompt_path, bucket, env_names),
                                         timeout_s)
        except ProposerError as exc:
            failure = exc
        violations = outside_writes(before, snapshot(watched))
        violations += copy_changes(copy_before, snapshot(copy), prompt_path)
        if violations:
            raise OutsideWriteError(violations)
        if failure is not None:
            raise failure
        return SandboxResult(read_prompt(sandbox, prompt_path), out, err, using)
    finally:
        remove_tree(root)


__all__ = ["ISOLATIONS", "Isolation", "Sandbox", "SandboxResult", "command_env", "command_problem",
           "create_sandbox", "describe", "isolation", "layout", "probe", "read_prompt",
           "remove_tree", "run_sandboxed", "wrap"]
