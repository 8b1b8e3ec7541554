"""Bounded trees (issue 19): no tool lets the agent build a tree deeper than 32 levels, and a
deeper one (from a fixture, or built before the bound) is walked without RecursionError by every
tool that walks it, by outcome capture and by the trial's cleanup."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptloop.agents.pkm.agent import PkmAgentSession
from promptloop.agents.transcript import Transcript
from promptloop.agents.trees import remove_tree
from promptloop.agents.workspace import Workspace
from tests.pkm.conftest import invoke, make_session

LEVELS = 1100
NEEDLE = "needle-at-the-bottom"


def _deep_tree(root: Path, levels: int = LEVELS) -> None:
    """`root/deep/d/d/.../d/bottom.md`, `levels` folders deep, made one folder at a time
    (os.makedirs recurses once per level)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in ["deep"] + ["d"] * (levels - 1):
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        out = os.open("bottom.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, f"# Bottom\n{NEEDLE}\n".encode())
        os.close(out)
    finally:
        os.close(fd)


@pytest.fixture
def deep(tmp_path: Path) -> Iterator[tuple[Workspace, PkmAgentSession]]:
    ws = Workspace(tmp_path / "ws")
    (ws.pkm / "Areas").mkdir(parents=True)
    (ws.pkm / "Areas" / "notes.md").write_text("# Notes\n", encoding="utf-8")
    _deep_tree(ws.pkm)
    yield ws, make_session(ws)
    remove_tree(tmp_path / "ws")  # pytest's own cleanup (shutil.rmtree) recurses per level


@pytest.mark.parametrize(("tool", "args"), [
    ("Glob", {"pattern": "**/*.md"}),
    ("Glob", {"pattern": "**/bottom.md", "path": "/deep"}),
    ("Grep", {"pattern": NEEDLE, "output_mode": "files_with_matches"}),
    ("Grep", {"pattern": NEEDLE, "output_mode": "content"}),
    ("BatchRead", {"file_patterns": ["**/*.md"]}),
    ("LS", {"path": "/", "depth": 2000}),
])
async def test_tools_walk_a_1100_level_tree(
    deep: tuple[Workspace, PkmAgentSession], tool: str, args: dict[str, object]
) -> None:
    _, session = deep
    result = await invoke(session, tool, **args)
    assert "RecursionError" not in result.content
    if tool != "LS":
        assert not result.is_error, result.content[:300]
    if tool in ("Glob", "BatchRead") or args.get("output_mode") == "files_with_matches":
        assert "bottom.md" in result.content


async def test_the_first_message_lists_a_1100_level_tree(
    deep: tuple[Workspace, PkmAgentSession],
) -> None:
    assert "deep/" in deep[1].first_message()


def test_outcome_capture_of_a_1100_level_tree(deep: tuple[Workspace, PkmAgentSession]) -> None:
    ws, session = deep
    outcome = session.outcome(Transcript())
    bottom = "deep/" + "d/" * (LEVELS - 1) + "bottom.md"
    assert NEEDLE in outcome["file_contents"][bottom]
    assert ws.snapshot("PKM")[bottom].decode().endswith(f"{NEEDLE}\n")


async def test_remove_and_cleanup_of_a_1100_level_tree(
    deep: tuple[Workspace, PkmAgentSession],
) -> None:
    ws, session = deep
    result = await invoke(session, "Remove", path="/deep", confirm=True)
    assert not result.is_error, result.content
    assert not (ws.pkm / "deep").exists()
    _deep_tree(ws.root / "again")
    remove_tree(ws.root)
    assert not ws.root.exists()


async def test_moves_cannot_stack_a_tree_deeper_than_32_levels(workspace: Workspace) -> None:
    session = make_session(workspace)
    deep_file = "/" + "/".join(f"a{i}" for i in range(30)) + "/f.md"  # 31 levels
    assert not (await invoke(session, "Write", file_path=deep_file, content="x")).is_error
    moved = await invoke(session, "Move", source_path="/a0", destination_path="/b/c/a0")
    assert moved.is_error and "deeper than 32 levels" in moved.content
    ok = await invoke(session, "Move", source_path="/a0", destination_path="/b/a0")  # 32
    assert not ok.is_error, ok.content
    assert (workspace.pkm / "b" / "a0").is_dir()
    too_deep = "/" + "/".join(f"a{i}" for i in range(32)) + "/f.md"  # 33 levels
    refused = await invoke(session, "Write", file_path=too_deep, content="x")
    assert refused.is_error and "deeper than 32 levels" in refused.content
