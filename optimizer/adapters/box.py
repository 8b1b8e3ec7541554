"""The box a process of promptloop's runs in: the sandbox of every `command` and `worker` trial
(issue 30) and of the external proposer (`optimizer/propose/sandbox.py`).

Two mechanisms, the strongest that works here is used (`available()`, probed once):

- `bwrap` (bubblewrap): user, PID, IPC and UTS namespaces, every capability dropped;
- `unshare` (util-linux `unshare` + `setpriv`): user, PID and mount namespaces, as root of the
  new user namespace only to set up the mounts, then every capability dropped and
  `no_new_privs` set before the process runs.

Either way a `Layout` says what the process sees: every file system read-only, a fresh `/proc`
of its own PID namespace (promptloop's processes and their environment are not there), the
`hidden` folders covered by an empty read-only tmpfs (the system temp folders holding the other
trials' workspaces, promptloop's state folder and caches), the `readable` ones shown again
read-only (the repository when it lives under a hidden folder), and the `writable` ones
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
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Mechanism = Literal["bwrap", "unshare", "none"]
MECHANISMS: tuple[Mechanism, ...] = ("bwrap", "unshare", "none")
SANDBOX_VAR = "PROMPTLOOP_SANDBOX"
"""`off` (or `0`, `no`, `none`): run agent trials without a sandbox (tests of the fallback;
never for untrusted prompts)."""
SETUP_FAILED = 97
"""The exit code of an `unshare` setup that could not build the layout (never runs the
process less isolated than promised)."""

# Run as root of a new user + mount + PID namespace, with a fresh /proc (unshare
# --mount-proc). Arguments: N, then N (kind, path) operations, then the working folder, then
# the argv. 1) Every bind source is opened first (fd 3...), while it can still be reached;
# 2) every mount is remounted read-only; 3) the operations in order: `hide` covers a folder
# with an empty tmpfs, `ro`/`rw` bind the opened folder (or file) back at its path (made in a
# covering tmpfs when needed), `rw` writable again; 4) the tmpfs covers become read-only;
# 5) every capability is dropped (no remount possible any more) and the argv runs.
_UNSHARE_SCRIPT = r"""
n=$1; shift
i=0
while [ "$i" -lt "$n" ]; do
  eval "k$i=\$1; p$i=\$2"; shift 2
  eval "k=\$k$i"
  case $k in ro|rw) eval "exec $((i + 3))<\"\$p$i\"" || exit 97;; esac
  i=$((i + 1))
done
while read -r _dev mnt _rest; do
  case $mnt in *\\*) mnt=$(printf '%b' "$mnt");; esac
  mount -o remount,bind,ro "$mnt" 2>/dev/null || exit 97
done < /proc/self/mounts
i=0
while [ "$i" -lt "$n" ]; do
  eval "k=\$k$i; p=\$p$i"
  fd=/proc/self/fd/$((i + 3))
  case $k in
    hide) mount -t tmpfs -o mode=0755,size=64k promptloop-hidden "$p" || exit 97;;
    ro|rw)
      if [ -d "$fd" ]; then mkdir -p "$p" 2>/dev/null
      elif [ ! -e "$p" ]; then mkdir -p "${p%/*}" && : > "$p" || exit 97; fi
      mount -c --bind "$fd" "$p" || exit 97
      eval "exec $((i + 3))<&-"
      [ "$k" = rw ] && { mount -o remount,bind,rw "$p" || exit 97; };;
  esac
  i=$((i + 1))
done
i=0
while [ "$i" -lt "$n" ]; do
  eval "k=\$k$i; p=\$p$i"
  [ "$k" = hide ] && { mount -o remount,bind,ro "$p" || exit 97; }
  i=$((i + 1))
done
cd "$1" || exit 97
unset OLDPWD
shift
exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs "$@"
"""


@dataclass(frozen=True)
class Layout:
    """What a boxed process sees (see the module's docstring)."""

    cwd: Path
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()

    def operations(self) -> list[tuple[str, str]]:
        """(kind, path) in the order they are mounted: outer folders first, at one depth a
        cover before what is shown again in it. A path that does not exist is left out."""
        order = {"hide": 0, "ro": 1, "rw": 2}
        ops: dict[str, str] = {}
        for kind, paths in (("hide", self.hidden), ("ro", self.readable),
                            ("rw", self.writable)):
            for path in paths:
                real = os.path.realpath(path)
                if kind == "hide" and not os.path.isdir(real):
                    continue
                if kind != "hide" and not os.path.exists(real):
                    continue
                ops[real] = kind  # a later, more permissive kind wins for the same path
        return sorted(((k, p) for p, k in ops.items()),
                      key=lambda kp: (kp[1].rstrip("/").count("/"), order[kp[0]]))


def wrap(mechanism: Mechanism, layout: Layout, argv: Sequence[str]) -> list[str]:
    """The argv running `argv` boxed by `mechanism` in `layout` (unchanged for `none`)."""
    if mechanism == "bwrap":
        out = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               "--cap-drop", "ALL", "--die-with-parent", "--as-pid-1", "--ro-bind", "/", "/",
               "--dev", "/dev", "--proc", "/proc"]
        covers: list[str] = []
        for kind, path in layout.operations():
            if kind == "hide":
                out += ["--tmpfs", path]
                covers.append(path)
            else:
                out += ["--bind" if kind == "rw" else "--ro-bind", path, path]
        for path in covers:
            out += ["--remount-ro", path]
        return [*out, "--chdir", str(layout.cwd), *argv]
    if mechanism == "unshare":
        ops = layout.operations()
        flat = [item for op in ops for item in op]
        return ["unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork",
                "--kill-child", "--mount-proc", "sh", "-c", _UNSHARE_SCRIPT,
                "promptloop-box", str(len(ops)), *flat, str(layout.cwd), *argv]
    return list(argv)


def _probe_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ("PATH", "LANG") or k.startswith("LC_")}


def probe(mechanism: Mechanism) -> bool:
    """Whether `mechanism` works here: inside a box, a process writes its workspace, cannot
    write beside it, cannot see a hidden folder's content nor promptloop in /proc, and a
    daemon it leaves is gone when it exits."""
    tools = {"bwrap": ("bwrap",), "unshare": ("unshare", "setpriv"), "none": ()}[mechanism]
    if any(shutil.which(tool) is None for tool in tools):
        return False
    parent = Path(tempfile.mkdtemp(prefix="promptloop-probe-"))
    try:
        work, hidden = parent / "work", parent / "hidden"
        work.mkdir()
        hidden.mkdir()
        (hidden / "secret").write_text("x")
        layout = Layout(cwd=work, writable=(work,), hidden=(hidden,))
        cmd = (f"echo in > inside && {{ echo out > ../outside; true; }} 2>/dev/null; "
               f"if [ -e {hidden}/secret ]; then echo > seen; fi; "
               "while read -r k _v more; do "
               'if [ "$k" = NSpid: ] && [ -n "$more" ]; then echo > ppid; fi; '
               "done < /proc/self/status; [ -e inside ]")
        done = subprocess.run(wrap(mechanism, layout, ["sh", "-c", cmd]), cwd=work,
                              env=_probe_env(), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=30, check=False)
        return (done.returncode == 0 and (work / "inside").is_file()
                and not (parent / "outside").exists()
                and (mechanism == "none" or not ((work / "seen").exists()
                                                 or (work / "ppid").exists())))
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(parent, ignore_errors=True)


@functools.cache
def available() -> Mechanism:
    """The strongest mechanism that works on this system: bwrap, unshare, else none."""
    return next((m for m in MECHANISMS[:-1] if probe(m)), "none")


def disabled() -> bool:
    """Whether $PROMPTLOOP_SANDBOX turns the trial sandbox off."""
    return os.environ.get(SANDBOX_VAR, "").strip().lower() in ("off", "0", "no", "none",
                                                               "false")


def for_trials() -> Mechanism:
    """The mechanism agent trials run under: `available()`, or none when disabled."""
    return "none" if disabled() else available()


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
    from optimizer.core.config import ConfigError

    if getattr(config, "adapter", None) in ("command", "worker") and for_trials() == "none":
        raise ConfigError(
            f"review: agent {agent!r} runs a {config.adapter} adapter and no sandbox works "
            f"here ({unsandboxed_warning().split('(', 1)[1].split(')')[0]}): the PR's prompt "
            "would drive it with your user's rights. Install bubblewrap, allow unprivileged "
            "user namespaces, or pass --no-sandbox (unsafe for PRs from forks)")


def hidden_folders(repo_root: Path) -> tuple[Path, ...]:
    """What a trial must not see at all: the system temp folders (every other trial's
    workspace and scratch, the proposer's sandboxes), $PROMPTLOOP_TRIAL_DIR, promptloop's state
    folder ($PROMPTLOOP_HOME or <repo>/.promptloop: runs, traces, the trial cache) and the
    user's cache folder."""
    from optimizer.core.config import state_folder

    out = [Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"),
           state_folder(repo_root)]
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


def trial_layout(repo_root: Path, cwd: Path, writable: Sequence[Path],
                 argv: Sequence[str] = ()) -> Layout:
    """The layout of an agent trial: `writable` (its workspace, its scratch), the repository
    read-only (shown again when under a hidden folder, its state folder hidden), the files an
    absolute argument names read-only, the rest of `hidden_folders` not there."""
    hidden = hidden_folders(repo_root)
    named = [Path(a) for a in argv if os.path.isabs(a) and os.path.exists(a)]
    readable = shown_again(hidden, [repo_root, *named, Path(sys.prefix)])
    # the state folder stays hidden inside a repository shown again
    return Layout(cwd=cwd, writable=tuple(writable), readable=readable, hidden=hidden)


# --- the processes of a box ------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


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
        """Host pids of the box's processes but its PID 1."""
        ns = self._namespace()
        if ns is None:
            return []
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
    "MECHANISMS",
    "SANDBOX_VAR",
    "SETUP_FAILED",
    "BoxProcesses",
    "Layout",
    "Mechanism",
    "available",
    "describe",
    "disabled",
    "for_trials",
    "hidden_folders",
    "probe",
    "require_sandbox",
    "reset_warning",
    "shown_again",
    "trial_layout",
    "unsandboxed_warning",
    "warn_unsandboxed",
    "wrap",
]
