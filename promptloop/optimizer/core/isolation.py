"""The mechanisms that box a process of promptloop's: shared by the sandbox of every agent
trial (`optimizer/adapters/box.py`, issue 30) and the external proposer's sandbox
(`optimizer/propose/sandbox.py`). No provider imports: the standard library only.

Two mechanisms, the strongest that works here is used (`available()`, probed once):

- `bwrap` (bubblewrap): user, PID, IPC and UTS namespaces, every capability dropped;
- `unshare` (util-linux `unshare` + `setpriv`): user, PID and mount namespaces, as root of the
  new user namespace only to set up the mounts, then every capability dropped and
  `no_new_privs` set before the process runs.

Either way a `Layout` says what the process sees: every file system read-only, a fresh `/proc`
of its own PID namespace (the host's processes and their environment are not there), the
`hidden` folders covered by an empty read-only tmpfs, the `readable` ones shown again
read-only (a folder under a hidden one), and the `writable` ones the only places it can write.
The process is PID 1 of its PID namespace: when it exits, the kernel kills everything it
started, a `setsid` daemon included. The network namespace is shared.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Mechanism = Literal["bwrap", "unshare", "none"]
MECHANISMS: tuple[Mechanism, ...] = ("bwrap", "unshare", "none")
SETUP_FAILED = 97
"""The exit code of an `unshare` setup that could not build the layout (never runs the
process less isolated than promised)."""

OUTSIDE = "wrote outside its workspace"
REFUSED_WRITE = "its stderr shows a write refused"
"""In the message of a boxed trial that ended on a write its box refused (adapters/runner.py):
the prompt drove the agent outside its workspace as surely as a write that went through."""
"""The cause of a trial errored because it wrote outside its workspace
(optimizer/adapters/escape.py), by which the run's summary counts such trials and optimize's
gate rejects a candidate (here, below both: report and workflows read it)."""
MAX_BINDS = 7
"""At most this many folders are shown again under hidden ones with `unshare` (file
descriptors 3 to 9, all a POSIX shell can name); `wrap` refuses more (ValueError)."""

# Run as root of a new user + mount + PID namespace, with a fresh /proc (unshare
# --mount-proc). Arguments: N, then N (kind, path) operations, then the working folder, then
# the argv. 1) The source of every `ro`/`rw` bind under a hidden folder is opened first (fd
# 3 to 9), while it can still be reached (`ro-path`/`rw-path`: bound by its path, not under
# any hidden folder); 2) every mount is remounted read-only; 3) the operations in order:
# `hide` covers a folder with an empty tmpfs, a bind puts the folder (or file) back at its
# path (made in a covering tmpfs when needed), `rw*` writable again; 4) the tmpfs covers
# become read-only; 5) every capability is dropped (no remount possible any more) and the
# argv runs.
_UNSHARE_SCRIPT = r"""
n=$1; shift
i=0; j=3
while [ "$i" -lt "$n" ]; do
  eval "k$i=\$1; p$i=\$2"; shift 2
  eval "k=\$k$i"
  case $k in ro|rw)
    [ "$j" -le 9 ] || exit 97
    eval "exec $j<\"\$p$i\"" || exit 97
    eval "f$i=$j"; j=$((j + 1));;
  esac
  i=$((i + 1))
done
while read -r _dev mnt _rest; do
  case $mnt in *\\*) mnt=$(printf '%b' "$mnt");; esac
  mount -o remount,bind,ro "$mnt" 2>/dev/null || exit 97
done < /proc/self/mounts
i=0
while [ "$i" -lt "$n" ]; do
  eval "k=\$k$i; p=\$p$i; f=\${f$i:-}"
  case $k in
    hide) mount -t tmpfs -o mode=0755,size=64k promptloop-hidden "$p" || exit 97;;
    blank) mount --bind /dev/null "$p" && mount -o remount,bind,ro "$p" || exit 97;;
    ro*|rw*)
      if [ -n "$f" ]; then src=/proc/self/fd/$f; else src=$p; fi
      if [ -d "$src" ]; then mkdir -p "$p" 2>/dev/null
      elif [ ! -e "$p" ]; then mkdir -p "${p%/*}" && : > "$p" || exit 97; fi
      mount -c --bind "$src" "$p" || exit 97
      if [ -n "$f" ]; then eval "exec $f<&-"; fi
      case $k in rw*) mount -o remount,bind,rw "$p" || exit 97;; esac;;
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
    blanked: tuple[Path, ...] = ()
    """Files read as empty (/dev/null bound over them): the repository's .env files."""

    def operations(self) -> list[tuple[str, str]]:
        """(kind, path) in the order they are mounted: outer folders first, at one depth a
        cover before what is shown again in it. A path that does not exist is left out."""
        order = {"hide": 0, "ro": 1, "rw": 2, "blank": 3}
        ops: dict[str, str] = {}
        for kind, paths in (("hide", self.hidden), ("ro", self.readable),
                            ("rw", self.writable), ("blank", self.blanked)):
            for path in paths:
                real = os.path.realpath(path)
                if kind == "hide" and not os.path.isdir(real):
                    continue
                if kind == "blank" and not os.path.isfile(real):
                    continue
                if kind != "hide" and not os.path.exists(real):
                    continue
                ops[real] = kind  # a later, more permissive kind wins for the same path
        shown = [p for p, k in ops.items() if k in ("ro", "rw")]
        covers = [p for p, k in ops.items() if k == "hide"]

        def within(path: str, folder: str) -> bool:
            return path.startswith(folder.rstrip("/") + "/")

        def covered(path: str) -> bool:
            """Under a hidden folder, and nothing shown again between the two: not there in
            the box (no mount point for it: a cover inside is redundant, a file to blank
            already unreadable, e.g. the checkout's .env under /tmp during a review)."""
            return any(within(path, c) and not any(
                within(p, c) and (p == path or within(path, p)) for p in shown)
                for c in covers)

        kept = [(k, p) for p, k in ops.items() if k not in ("hide", "blank") or not covered(p)]
        return sorted(kept, key=lambda kp: (kp[1].rstrip("/").count("/"), order[kp[0]]))


@functools.cache
def _empty_file() -> str:
    """An empty read-only file of this process's, removed at exit: what bwrap binds over a
    file the box must read as empty."""
    fd, path = tempfile.mkstemp(prefix="promptloop-empty-")
    os.close(fd)
    os.chmod(path, 0o444)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


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
            elif kind == "blank":
                # an empty regular file, not /dev/null: bwrap's binds are nodev, so a device
                # node bound there reads EACCES, where the file must read as empty
                out += ["--ro-bind", _empty_file(), path]
            else:
                out += ["--bind" if kind == "rw" else "--ro-bind", path, path]
        for path in covers:
            out += ["--remount-ro", path]
        return [*out, "--chdir", str(layout.cwd), *argv]
    if mechanism == "unshare":
        ops = _by_fd_or_path(layout.operations())
        flat = [item for op in ops for item in op]
        return ["unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork",
                "--kill-child", "--mount-proc", "sh", "-c", _UNSHARE_SCRIPT,
                "promptloop-box", str(len(ops)), *flat, str(layout.cwd), *argv]
    return list(argv)


def _by_fd_or_path(ops: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`ops` for the unshare script: a bind outside every hidden folder is made by its path
    (`ro-path`, `rw-path`), one under a hidden folder through a file descriptor opened before
    (at most `MAX_BINDS`)."""
    covers = [p.rstrip("/") + "/" for k, p in ops if k == "hide"]
    out: list[tuple[str, str]] = []
    for kind, path in ops:
        under = kind in ("ro", "rw") and any(path.startswith(c) for c in covers)
        out.append((kind if kind in ("hide", "blank") or under else f"{kind}-path", path))
    if sum(k in ("ro", "rw") for k, _ in out) > MAX_BINDS:
        shown = [p for k, p in out if k in ("ro", "rw")]
        raise ValueError(f"the unshare sandbox can show at most {MAX_BINDS} folders again "
                         f"under hidden ones, not {len(shown)}: {', '.join(shown)}")
    return out


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


__all__ = ["MAX_BINDS", "MECHANISMS", "OUTSIDE", "REFUSED_WRITE", "SETUP_FAILED", "Layout",
           "Mechanism", "available", "probe", "wrap"]
