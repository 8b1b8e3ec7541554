"""The box of every `command` and `worker` trial (issue 30). The mechanisms (`Layout`, `wrap`,
`probe`, `available`) live in `optimizer/core/isolation.py`, shared with the external
proposer's sandbox (`optimizer/propose/sandbox.py`); this module says what a trial sees
(`trial_layout`), when trials run unboxed, and sweeps a worker slot's processes.

Two mechanisms, the strongest that works here is used (`available()`, probed once):

- `bwrap` (bubblewrap): user, PID, IPC and UTS namespaces, every capability dropped;
- `unshare` (util-linux `unshare` + `setpriv`): user, PID and mount namespaces, as root of the
  new user namespace only to set up the mounts, then every capability dropped and
  `no_new_privs` set before the process runs.

Either way a `Layout` says what the process sees: every file system read-only, a fresh `/proc`
of its own PID namespace (promptloop's processes and their environment are not there), the
`hidden` folders covered by an empty read-only tmpfs (the system temp folders holding the other
trials' workspaces, promptloop's state folders and caches), the `readable` ones shown again
read-only (the repository when it lives under a hidden folder, review's export of the base
commit inside the state folder), and the `writable` ones
(the workspace, a private HOME and TMPDIR) the only places it can write. The process is PID 1
of its PID namespace: when it exits, the kernel kills everything it started, a `setsid`
daemon included. The network namespace is shared: the loopback model gateway stays reachable
(and so does anything else on the network; docs/sandbox.md).

`none`: no mechanism works (or `PROMPTLOOP_SANDBOX=off`): the process runs as is, promptloop
warns once per run (`warn_unsandboxed`) and the after-the-fact checks of `escape` are all
there is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptloop.optimizer.core.isolation import (
    MECHANISMS,
    REFUSED_WRITE,
    SETUP_FAILED,
    Layout,
    Mechanism,
    available,
    probe,
    wrap,
)

SANDBOX_VAR = "PROMPTLOOP_SANDBOX"
"""Which box agent trials run in: unset or `auto`, the strongest mechanism that works (else
none, with a warning); `off` (or `0`, `no`, `none`, `false`) none (tests of the fallback,
debugging; never for untrusted prompts); `on` (or `1`, `yes`, `true`, `required`) the
strongest that works, and no trial runs when none does; `bwrap` or `unshare` that mechanism,
and no trial runs when it does not work here."""
_OFF = ("off", "0", "no", "none", "false")
_ON = ("on", "1", "yes", "true", "required")


class SandboxUnavailable(OSError):
    """$PROMPTLOOP_SANDBOX asks for a box that does not work here (or is not a known value):
    no trial runs (each errors with this message) rather than run less isolated than asked."""


def disabled() -> bool:
    """Whether $PROMPTLOOP_SANDBOX turns the trial sandbox off."""
    return os.environ.get(SANDBOX_VAR, "").strip().lower() in _OFF


def for_trials() -> Mechanism:
    """The mechanism agent trials run under, as $PROMPTLOOP_SANDBOX asks (`SANDBOX_VAR`);
    raises `SandboxUnavailable` when it insists on a box that does not work here."""
    raw = os.environ.get(SANDBOX_VAR, "")
    value = raw.strip().lower()
    if value in _OFF:
        return "none"
    if value in ("", "auto"):
        return available()
    if value in ("bwrap", "unshare"):
        if probe(value):  # type: ignore[arg-type]
            return value  # type: ignore[return-value]
        tools = "bwrap" if value == "bwrap" else "unshare and setpriv (util-linux)"
        raise SandboxUnavailable(
            f"{SANDBOX_VAR}={value} asks for the {value} sandbox, which does not work here "
            f"(needs {tools} on PATH and unprivileged user namespaces); unset it to use the "
            f"strongest box that works, or see `promptloop doctor`")
    if value in _ON:
        mechanism = available()
        if mechanism == "none":
            raise SandboxUnavailable(
                f"{SANDBOX_VAR}={value} insists on a sandbox and neither bwrap nor unshare "
                "user namespaces work here: install bubblewrap or allow unprivileged user "
                "namespaces (docs/sandbox.md)")
        return mechanism
    raise SandboxUnavailable(
        f"{SANDBOX_VAR}={raw.strip()!r} is not a known value: auto (the default), on, off, "
        "bwrap or unshare")


_DESCRIPTION: dict[Mechanism, str] = {
    "bwrap": "bubblewrap: own PID namespace and /proc, every file system read-only but the "
             "workspace, private HOME and TMPDIR; other trials, the state folder and caches "
             "hidden; no capabilities; the network is shared (the gateway and anything else)",
    "unshare": "user, PID and mount namespaces (unshare): own /proc, every file system "
               "read-only but the workspace, private HOME and TMPDIR; other trials, the state "
               "folder and caches hidden; no capabilities; the network is shared",
    "none": "none: an environment allowlist and checks after the trial only; the agent can "
            "read and write what your user can (writes to the checkout, its .git and HOME's "
            "startup files are detected and undone where possible)",
}


def describe(mechanism: Mechanism) -> str:
    """What `mechanism` isolates, for `promptloop doctor`."""
    return _DESCRIPTION[mechanism]


_warned: list[bool] = []


def unsandboxed_warning() -> str:
    why = (f"${SANDBOX_VAR}=off" if disabled()
           else "neither bwrap nor unshare user namespaces work here")
    return (f"warning: agent trials run without a sandbox ({why}): an agent can read and "
            "write what your user can; see docs/sandbox.md")


def warn_unsandboxed() -> None:
    """Say once per process that trials run without a sandbox (on stderr)."""
    if _warned:
        return
    _warned.append(True)
    print(unsandboxed_warning(), file=sys.stderr, flush=True)


def reset_warning() -> None:
    """Forget the warning was given (a new run in the same process, tests)."""
    _warned.clear()


def require_sandbox(config: Any, agent: str) -> None:
    """For `review`: refuse (ConfigError) to run a command or worker agent (`config`: its
    AgentConfig) where no sandbox works, unless `--no-sandbox` was given."""
    from promptloop.optimizer.core.config import ConfigError

    if getattr(config, "adapter", None) not in ("command", "worker"):
        return
    try:
        mechanism = for_trials()
    except SandboxUnavailable as err:
        raise ConfigError(f"review: agent {agent!r}: {err}") from None
    if mechanism == "none":
        raise ConfigError(
            f"review: agent {agent!r} runs a {config.adapter} adapter and no sandbox works "
            f"here ({unsandboxed_warning().split('(', 1)[1].split(')')[0]}): the PR's prompt "
            "would drive it with your user's rights. Install bubblewrap, allow unprivileged "
            "user namespaces, or pass --no-sandbox (unsafe for PRs from forks)")


EXPORT_MARKER = ".promptloop-export"
"""The file marking a complete export of a commit (`review` runs the base's agent from
`<state>/sources/<sha>/tree`, optimizer/workflows/review_trust.py; the file holds the sha)."""


def export_of(repo_root: Path) -> str | None:
    """The commit `repo_root` is an export of (None: not an export)."""
    try:
        text = (repo_root / EXPORT_MARKER).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def _toplevel(folder: Path) -> Path | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    top = done.stdout.strip()
    return Path(top).resolve() if done.returncode == 0 and top else None


def checkout_of(repo_root: Path) -> Path | None:
    """Where `repo_root` is an export of a commit (`export_of`), the checkout promptloop runs
    in: the git top level of the current folder (None outside one, or when it is `repo_root`
    itself). A trial's absolute-path writes there must be stopped or caught as well."""
    if export_of(repo_root) is None:
        return None
    top = _toplevel(Path.cwd())
    return top if top is not None and top != repo_root.resolve() else None


def state_folders(repo_root: Path) -> tuple[Path, ...]:
    """promptloop's state folders a trial of `repo_root` must not see: `repo_root`'s
    ($PROMPTLOOP_HOME or <repo>/.promptloop) and, where `repo_root` is an export, the one
    holding it (`<state>/sources/<sha>/tree`) and the checkout's."""
    from promptloop.optimizer.core.config import state_folder

    out = [state_folder(repo_root)]
    if export_of(repo_root) is not None:
        parents = repo_root.resolve().parents
        if len(parents) > 2 and parents[1].name == "sources":
            out.append(parents[2])
        checkout = checkout_of(repo_root)
        if checkout is not None:
            out.append(state_folder(checkout))
    return tuple(dict.fromkeys(out))


def hidden_folders(repo_root: Path) -> tuple[Path, ...]:
    """What a trial must not see at all: the system temp folders (every other trial's
    workspace and scratch, the proposer's sandboxes), $PROMPTLOOP_TRIAL_DIR, promptloop's state
    folders (`state_folders`: runs, traces, the trial cache) and the user's cache folder."""
    out = [Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"),
           *state_folders(repo_root)]
    for var in ("PROMPTLOOP_TRIAL_DIR", "XDG_CACHE_HOME"):
        if os.environ.get(var, "").strip():
            out.append(Path(os.environ[var]))
    out.append(Path.home() / ".cache")
    return tuple(out)


def shown_again(hidden: Iterable[Path], paths: Iterable[Path]) -> tuple[Path, ...]:
    """Those of `paths` a hidden folder covers (they are bound back read-only)."""
    real_hidden = [os.path.realpath(h) for h in hidden]
    out = []
    for path in paths:
        real = os.path.realpath(path)
        if any(real.startswith(h.rstrip("/") + "/") for h in real_hidden):
            out.append(Path(real))
    return tuple(out)


def own_code() -> Path:
    """promptloop's own code, read-only in a box: the import package, or the whole source
    folder when it runs from a clone (its data folders, prompts/ and tasks/, sit beside the
    package). A clone or a virtual environment under /tmp would otherwise be hidden with the
    system temp folders, and an agent importing promptloop (a python worker) would not start."""
    package = Path(__file__).resolve().parents[2]
    source = package.parent
    return source if (source / "setup.py").is_file() else package


def trial_layout(repo_root: Path, cwd: Path, writable: Sequence[Path],
                 argv: Sequence[str] = ()) -> Layout:
    """The layout of an agent trial: `writable` (its workspace, its scratch), the repository
    read-only (shown again when under a hidden folder, its state folder hidden), the files an
    absolute argument names read-only, the rest of `hidden_folders` not there."""
    hidden = hidden_folders(repo_root)
    named = [Path(a) for a in argv if os.path.isabs(a) and os.path.exists(a)]
    readable = shown_again(hidden, [repo_root, *named, Path(sys.prefix), own_code()])
    # the state folder stays hidden inside a repository shown again, its .env files read empty
    return Layout(cwd=cwd, writable=tuple(writable), readable=readable, hidden=hidden,
                  blanked=(*dotenv_files(repo_root), *dotenv_files(checkout_of(repo_root))))


def dotenv_files(repo_root: Path | None) -> tuple[Path, ...]:
    """The repository's `.env` and `.env.*` files at its top (where promptloop reads provider
    keys): a boxed trial reads them as empty, so the agent under test never finds a key there
    (review's trials run in an export: the checkout's are blanked too)."""
    if repo_root is None:
        return ()
    try:
        found = [p for p in repo_root.iterdir()
                 if (p.name == ".env" or p.name.startswith(".env.")) and p.is_file()]
    except OSError:
        return ()
    return tuple(sorted(found))


# --- the processes of a box ------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _ns_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _descendants(roots: list[int]) -> list[int] | None:
    """`roots` and every process below them (the children of each of their threads); None
    when the kernel gives no children files (CONFIG_PROC_CHILDREN off: scan instead)."""
    if not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists():
        return None
    seen: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone meanwhile
        for tid in tasks:
            try:
                text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
            except OSError:
                continue
            todo.extend(int(p) for p in text.split())
    return seen


def _ns_pid(pid: int) -> list[int]:
    """The process's pid in each PID namespace it belongs to (outermost first)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


@dataclass
class BoxProcesses:
    """The processes of one box whose launcher (`unshare` or `bwrap`) is `launcher`: the box's
    PID 1 is the agent's process (a worker), `sweep()` kills every other process in the box."""

    launcher: int
    namespace: str | None = field(default=None)

    def _namespace(self) -> str | None:
        if self.namespace is None:
            for child in _children(self.launcher):
                with contextlib.suppress(OSError):
                    ns = os.readlink(f"/proc/{child}/ns/pid")
                    if ns != os.readlink("/proc/self/ns/pid"):
                        self.namespace = ns
                        break
        return self.namespace

    def others(self) -> list[int]:
        """Host pids of the box's processes but its PID 1: the descendants of the launcher's
        child in the box (every process of a PID namespace descends from its PID 1: orphans
        are reparented to it), read from /proc/<pid>/task/*/children; a scan of all of /proc
        where those files are missing (a team measured the scan at 2 ms a trial with 90
        processes on the host, 70 ms with 1,600)."""
        ns = self._namespace()
        if ns is None:
            return []
        roots = [c for c in _children(self.launcher) if _ns_of(c) == ns]
        tree = _descendants(roots) if roots else None
        if tree is not None:
            return [pid for pid in tree if (ids := _ns_pid(pid)) and ids[-1] != 1]
        out = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry.name}/ns/pid") != ns:
                    continue
            except OSError:
                continue
            pid = int(entry.name)
            ids = _ns_pid(pid)
            if ids and ids[-1] != 1:
                out.append(pid)
        return out

    def sweep(self, rounds: int = 5) -> int:
        """SIGKILL every process of the box but its PID 1 (again while new ones appear);
        how many were killed."""
        killed = 0
        for _ in range(rounds):
            pids = self.others()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
        return killed


__all__ = [
    "EXPORT_MARKER",
    "MECHANISMS",
    "REFUSED_WRITE",
    "SANDBOX_VAR",
    "SETUP_FAILED",
    "BoxProcesses",
    "Layout",
    "Mechanism",
    "SandboxUnavailable",
    "available",
    "checkout_of",
    "describe",
    "disabled",
    "dotenv_files",
    "export_of",
    "for_trials",
    "hidden_folders",
    "probe",
    "require_sandbox",
    "reset_warning",
    "shown_again",
    "state_folders",
    "trial_layout",
    "unsandboxed_warning",
    "warn_unsandboxed",
    "wrap",
]
