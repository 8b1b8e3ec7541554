"""MUST-HOLD: no PKM tool can read, write, list, move or remove anything outside PKM/, and no
result shows a real host path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from promptloop.agents.pkm.agent import PkmAgentSession
from promptloop.agents.pkm.paths import Sandbox, SandboxError
from promptloop.agents.workspace import Workspace
from tests.pkm.conftest import invoke, make_session, write

SECRET = "TOP SECRET: outside the sandbox\n"


def _tree_state(root: Path) -> dict[str, bytes | str]:
    """Every entry under root: file bytes, 'dir' or the link target."""
    state: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                state[rel] = "link->" + os.readlink(path)
            elif path.is_dir():
                state[rel] = "dir"
            else:
                state[rel] = path.read_bytes()
    return state


@pytest.fixture
def hostile(tmp_path: Path, workspace: Workspace) -> tuple[PkmAgentSession, Path]:
    outside = tmp_path / "outside"
    write(outside, "secret.txt", SECRET)
    write(outside, "dir/inner.md", SECRET)
    os.symlink(outside / "secret.txt", workspace.pkm / "link_file.md")
    os.symlink(outside, workspace.pkm / "link_dir")
    os.symlink(outside / "dir", workspace.pkm / "Areas" / "escape")
    os.symlink(outside / "missing.md", workspace.pkm / "dangling.md")
    write(workspace.system, "pkm/sessions.jsonl", "")
    return make_session(workspace), outside


def _attacks(tmp_path: Path, outside: Path) -> list[str]:
    return [
        "../../outside/secret.txt",
        "/../../outside/secret.txt",
        "Areas/../../../outside/secret.txt",
        "..",
        "../_System/pkm/sessions.jsonl",
        str(outside / "secret.txt"),
        str(outside),
        str(tmp_path / "ws" / "_System" / "pkm" / "sessions.jsonl"),
        str(tmp_path / "ws" / "PKM" / "Areas" / "Health" / "sleep.md"),
        "/link_file.md",
        "/link_dir",
        "/link_dir/secret.txt",
        "/link_dir/new.md",
        "/Areas/escape/inner.md",
        "/Areas/escape/created.md",
        "/dangling.md",
        "/Areas/Health/sleep.md\x00.txt",
        "C:\\Users\\me\\notes.md",
        "C:/outside/secret.txt",
        "..\\..\\outside\\secret.txt",
        "Areas\\Health\\sleep.md",
        "/" + "a" * 300 + ".md",
        "/" + "/".join(["abcd"] * 1100),
    ]


def _calls(attack: str) -> list[tuple[str, dict[str, object]]]:
    return [
        ("Read", {"file_path": attack}),
        ("BatchRead", {"file_patterns": [attack]}),
        ("Write", {"file_path": attack, "content": "pwned"}),
        ("Edit", {"file_path": attack, "old_string": "TOP SECRET", "new_string": "pwned"}),
        ("Edit", {"file_path": attack, "old_string": "", "new_string": "pwned"}),
        ("Move", {"source_path": attack, "destination_path": "/moved.md"}),
        ("Move", {"source_path": "/Projects/Garden/plan.md", "destination_path": attack}),
        (
            "Move",
            {
                "source_path": "/Projects/Garden/plan.md",
                "destination_path": attack,
                "overwrite": True,
            },
        ),
        ("Remove", {"path": attack, "confirm": True}),
        ("LS", {"path": attack}),
        ("Glob", {"pattern": "*", "path": attack}),
        ("Glob", {"pattern": attack.rstrip("/") + "/*"}),
        ("Grep", {"pattern": "SECRET", "path": attack}),
    ]


async def test_every_tool_rejects_every_escape(
    tmp_path: Path, workspace: Workspace, hostile: tuple[PkmAgentSession, Path]
) -> None:
    session, outside = hostile
    outside_before = _tree_state(outside)
    system_before = _tree_state(workspace.system)
    links_before = {
        name: os.readlink(workspace.pkm / name) for name in ("link_file.md", "link_dir")
    }
    plan = workspace.pkm / "Projects" / "Garden" / "plan.md"
    plan_before = plan.read_bytes()
    for attack in _attacks(tmp_path, outside):
        for tool, args in _calls(attack):
            result = await invoke(session, tool, **args)
            label = f"{tool}({args!r})"
            assert result.is_error, f"{label} succeeded: {result.content[:200]}"
            assert "TOP SECRET" not in result.content, label
            assert str(tmp_path) not in result.content, f"{label} leaked a real path"
            assert str(Path(os.path.realpath(tmp_path))) not in result.content, label
    assert _tree_state(outside) == outside_before
    assert _tree_state(workspace.system) == system_before
    assert plan.read_bytes() == plan_before
    assert not (workspace.pkm / "moved.md").exists()
    assert {n: os.readlink(workspace.pkm / n) for n in links_before} == links_before
    assert not session.successful_mutation


async def test_listing_tools_do_not_follow_links_out(
    tmp_path: Path, hostile: tuple[PkmAgentSession, Path]
) -> None:
    session, _ = hostile
    outputs = [
        await invoke(session, "LS", path="/", depth=10),
        await invoke(session, "Glob", pattern="**/*"),
        await invoke(session, "Glob", pattern="**/*.txt"),
        await invoke(session, "Grep", pattern="SECRET", output_mode="content"),
        await invoke(session, "Grep", pattern="SECRET", output_mode="count"),
        await invoke(session, "BatchRead", file_patterns=["**/*.md", "**/*.txt"]),
    ]
    for result in outputs:
        assert not result.is_error, result.content
        assert "TOP SECRET" not in result.content
        assert "inner.md" not in result.content
        assert "secret.txt" not in result.content
        assert "link_dir" not in result.content
        assert "link_file" not in result.content
        assert str(tmp_path) not in result.content
    assert "sleep.md" in outputs[0].content
    assert "/Areas/Health/sleep.md" in outputs[1].content
    first_message = session.first_message()
    assert "TOP SECRET" not in first_message and "link_dir" not in first_message
    assert str(tmp_path) not in first_message


async def test_virtual_etc_passwd_stays_inside(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    result = await invoke(session, "Read", file_path="/etc/passwd")
    assert result.is_error and "does not exist" in result.content
    written = await invoke(session, "Write", file_path="/etc/passwd", content="not the host\n")
    assert not written.is_error
    assert (workspace.pkm / "etc" / "passwd").read_text() == "not the host\n"
    assert "/etc/passwd" in written.content


async def test_dotdot_inside_the_root_is_normalized(session: PkmAgentSession) -> None:
    result = await invoke(session, "Read", file_path="/Projects/../Areas/./Health/sleep.md")
    assert not result.is_error
    assert "# Sleep" in result.content


async def test_symlink_inside_pointing_inside_is_allowed(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    os.symlink(workspace.pkm / "Areas" / "Health", workspace.pkm / "health")
    result = await invoke(session, "Read", file_path="/health/sleep.md")
    assert not result.is_error and "# Sleep" in result.content
    removed = await invoke(session, "Remove", path="/health", confirm=True)
    assert not removed.is_error
    assert (workspace.pkm / "Areas" / "Health" / "sleep.md").is_file()
    assert not os.path.lexists(workspace.pkm / "health")


def test_resolver_error_messages_are_virtual(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path / "PKM")
    for bad in ("../x", str(tmp_path / "x"), "a\x00b", "D:\\x", "/" + "é" * 200):
        with pytest.raises(SandboxError) as info:
            sandbox.resolve(bad)
        assert str(tmp_path) not in str(info.value)
    real, virtual = sandbox.resolve("Areas//Health/./x.md")
    assert virtual == "/Areas/Health/x.md"
    assert sandbox.contains(real)
    assert sandbox.resolve("/")[1] == "/"
    assert sandbox.resolve("")[1] == "/"
