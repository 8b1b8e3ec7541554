"""The shared sandbox mechanisms (optimizer/core/isolation.py): the layout's operations, the
unshare script's limits, and layouts review needs (the base's export shown again inside a
hidden state folder), run for real where a mechanism works here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from promptloop.optimizer.core import isolation
from promptloop.optimizer.core.isolation import MAX_BINDS, Layout, available, wrap

BOXED = [m for m in ("bwrap", "unshare") if isolation.probe(m)]
NONE_WORKS = "neither bwrap nor unshare user namespaces work on this system"


def test_a_hide_inside_a_hidden_folder_is_dropped_unless_something_is_shown_between(
        tmp_path: Path) -> None:
    outer, state = tmp_path / "tmp", tmp_path / "tmp" / "x" / "state"
    tree, repo = state / "sources" / "abc" / "tree", tmp_path / "tmp" / "repo"
    for folder in (tree, repo / ".promptloop", tmp_path / "w"):
        folder.mkdir(parents=True)
    layout = Layout(cwd=tmp_path / "w", writable=(tmp_path / "w",), readable=(tree, repo),
                    hidden=(outer, state, repo / ".promptloop"))
    ops = layout.operations()
    hidden = [p for k, p in ops if k == "hide"]
    # the state folder is already not there (only the path to the export is made again);
    # the repository's state folder is inside a folder shown again, so it is covered again
    assert hidden == [str(outer.resolve()), str((repo / ".promptloop").resolve())]
    assert ("ro", str(tree.resolve())) in ops


def test_unshare_binds_by_path_outside_hidden_folders_and_refuses_too_many(
        tmp_path: Path) -> None:
    hidden = tmp_path / "h"
    shown = [hidden / f"s{i}" for i in range(MAX_BINDS + 1)]
    for folder in (*shown, tmp_path / "w"):
        folder.mkdir(parents=True)
    ok = Layout(cwd=tmp_path / "w", writable=(tmp_path / "w",), readable=tuple(shown[:-1]),
                hidden=(hidden,))
    argv = wrap("unshare", ok, ["true"])
    assert argv.count("ro") == MAX_BINDS and "rw-path" in argv  # the workspace: by path
    too_many = Layout(cwd=tmp_path / "w", readable=tuple(shown), hidden=(hidden,))
    with pytest.raises(ValueError, match=f"at most {MAX_BINDS} folders"):
        wrap("unshare", too_many, ["true"])


@pytest.mark.skipif(not BOXED, reason=NONE_WORKS)
@pytest.mark.parametrize("mechanism", BOXED)
def test_reviews_layout_runs_with_many_operations(tmp_path: Path, mechanism: str) -> None:
    """More operations than a shell can name file descriptors for (the unshare script once
    opened one per operation: fd 10 was 'exec: 10: not found'), the export shown again inside
    a hidden state folder, a nested hide dropped."""
    hidden = [tmp_path / f"hide{i}" for i in range(8)]
    state = hidden[0] / "state"
    tree = state / "sources" / "abc" / "tree"
    work = tmp_path / "w"
    for folder in (*hidden, tree, work):
        folder.mkdir(parents=True, exist_ok=True)
    (state / "secret").write_text("s")
    (tree / "agent.py").write_text("code\n")
    layout = Layout(cwd=work, writable=(work,), readable=(tree,), hidden=(*hidden, state))
    assert len(layout.operations()) > 7
    script = (f"cat {tree / 'agent.py'} > seen; ls {state} >> seen; "
              f"{{ echo x > {tree / 'agent.py'}; }} 2>/dev/null || echo ro >> seen")
    done = subprocess.run(wrap(mechanism, layout, ["sh", "-c", script]),  # type: ignore[arg-type]
                          cwd=work, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    seen = (work / "seen").read_text().split()
    assert seen[0] == "code" and "secret" not in seen and "ro" in seen
    assert (tree / "agent.py").read_text() == "code\n"


def test_available_is_one_of_the_mechanisms() -> None:
    assert available() in isolation.MECHANISMS


def test_a_dotenv_under_a_hidden_folder_is_not_blanked_unless_shown_again(
        tmp_path: Path) -> None:
    """Review runs its trials in an export of the base; the checkout's .env is blanked too. A
    checkout under /tmp is hidden with it: binding /dev/null over its .env has no mount point
    there ('mount point does not exist', every trial errored), and it is unreadable anyway."""
    outer = tmp_path / "tmp"
    checkout, shown = outer / "shop", outer / "export"
    for folder in (checkout, shown, tmp_path / "w"):
        folder.mkdir(parents=True)
    (checkout / ".env").write_text("KEY=x\n")
    (shown / ".env").write_text("KEY=x\n")
    layout = Layout(cwd=tmp_path / "w", writable=(tmp_path / "w",), readable=(shown,),
                    hidden=(outer,), blanked=(checkout / ".env", shown / ".env"))
    blanks = [p for k, p in layout.operations() if k == "blank"]
    assert blanks == [str((shown / ".env").resolve())]


@pytest.mark.skipif(not BOXED, reason=NONE_WORKS)
@pytest.mark.parametrize("mechanism", BOXED)
def test_a_box_starts_with_a_hidden_checkouts_dotenv(tmp_path: Path, mechanism: str) -> None:
    outer = tmp_path / "tmp"
    checkout, work = outer / "shop", tmp_path / "w"
    for folder in (checkout, work):
        folder.mkdir(parents=True)
    (checkout / ".env").write_text("KEY=secret\n")
    layout = Layout(cwd=work, writable=(work,), hidden=(outer,),
                    blanked=(checkout / ".env",))
    done = subprocess.run(wrap(mechanism, layout,  # type: ignore[arg-type]
                               ["sh", "-c", f"cat {checkout / '.env'} 2>/dev/null; echo ok"]),
                          cwd=work, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"]


@pytest.mark.skipif(not BOXED, reason=NONE_WORKS)
@pytest.mark.parametrize("mechanism", BOXED)
def test_a_blanked_dotenv_reads_as_empty_and_cannot_be_written(tmp_path: Path,
                                                               mechanism: str) -> None:
    """docs/sandbox.md: the repository's .env files "read as empty" under either mechanism
    (bwrap's binds are nodev: /dev/null bound there read EACCES, not empty); a write goes
    nowhere (refused, or into /dev/null under unshare)."""
    repo, work = tmp_path / "repo", tmp_path / "w"
    for folder in (repo, work):
        folder.mkdir()
    env = repo / ".env"
    env.write_text("KEY=secret\n")
    layout = Layout(cwd=work, writable=(work,), readable=(repo,), blanked=(env,))
    script = f"cat {env}; echo rc=$?; echo x 2>/dev/null > {env}; cat {env}"
    done = subprocess.run(wrap(mechanism, layout, ["sh", "-c", script]),  # type: ignore[arg-type]
                          cwd=work, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["rc=0"], (done.stdout, done.stderr)
    assert env.read_text() == "KEY=secret\n"
