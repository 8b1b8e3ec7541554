"""Semantics and limits of Read, BatchRead, Write, Edit, Move and Remove."""

from __future__ import annotations

import os

from promptloop.agents.pkm.agent import PkmAgentSession
from promptloop.agents.workspace import Workspace
from tests.pkm.conftest import FACT_ID, invoke, write


async def test_read_numbers_lines_cat_style(session: PkmAgentSession) -> None:
    result = await invoke(session, "Read", file_path="/Areas/Health/sleep.md")
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[0] == "     1\t# Sleep"
    assert lines[3] == "     4\t- 03-09: 7 h, felt fine"
    assert "<system-reminder>" not in result.content


async def test_read_offset_and_limit(session: PkmAgentSession) -> None:
    result = await invoke(session, "Read", file_path="Areas/Health/sleep.md", offset=3, limit=2)
    assert result.content.splitlines()[:2] == [
        "     3\t## March 2026",
        "     4\t- 03-09: 7 h, felt fine",
    ]
    assert "Showing lines 3-4 of 5" in result.content
    assert "offset=5" in result.content
    past = await invoke(session, "Read", file_path="/Areas/Health/sleep.md", offset=9)
    assert past.is_error and "5 lines" in past.content


async def test_read_caps_at_2000_lines_and_truncates_long_lines(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    write(workspace.pkm, "Resources/big.md", "".join(f"line {i}\n" for i in range(1, 2501)))
    result = await invoke(session, "Read", file_path="/Resources/big.md", limit=5000)
    numbered = [line for line in result.content.splitlines() if "\t" in line]
    assert len(numbered) == 2000
    assert numbered[-1] == "  2000\tline 2000"
    assert "Showing lines 1-2000 of 2500" in result.content
    rest = await invoke(session, "Read", file_path="/Resources/big.md", offset=2001)
    assert rest.content.splitlines()[0] == "  2001\tline 2001"
    assert "Showing" not in rest.content

    write(workspace.pkm, "Resources/wide.md", "x" * 2500 + "\nshort\n")
    wide = await invoke(session, "Read", file_path="/Resources/wide.md")
    first = wide.content.splitlines()[0]
    assert first.startswith("     1\t" + "x" * 2000)
    assert "x" * 2001 not in first and "truncated" in first


async def test_read_over_256_kib_asks_for_offset(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    write(workspace.pkm, "Resources/heavy.md", ("y" * 1900 + "\n") * 300)
    result = await invoke(session, "Read", file_path="/Resources/heavy.md")
    assert result.is_error
    assert (
        "offset" in result.content and "limit" in result.content and "300 lines" in result.content
    )
    part = await invoke(session, "Read", file_path="/Resources/heavy.md", offset=10, limit=20)
    assert not part.is_error and part.content.startswith("    10\t")


async def test_read_empty_missing_directory_binary(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    write(workspace.pkm, "Areas/empty.md", "")
    empty = await invoke(session, "Read", file_path="/Areas/empty.md")
    assert not empty.is_error
    assert "<system-reminder>" in empty.content and "File is empty" in empty.content
    missing = await invoke(session, "Read", file_path="/Areas/nope.md")
    assert missing.is_error and "/Areas/nope.md does not exist" in missing.content
    folder = await invoke(session, "Read", file_path="/Areas")
    assert folder.is_error and "directory" in folder.content
    (workspace.pkm / "Resources" / "img.png").write_bytes(b"\x89PNG\x00\x00data")
    binary = await invoke(session, "Read", file_path="/Resources/img.png")
    assert binary.is_error and "binary" in binary.content


async def test_batch_read_paths_and_globs(session: PkmAgentSession) -> None:
    result = await invoke(
        session,
        "BatchRead",
        file_patterns=["/Areas/Health/sleep.md", "/Projects/**/*.md", "/Areas/none.md"],
    )
    assert not result.is_error
    assert "==> /Areas/Health/sleep.md (5 lines) <==\n     1\t# Sleep" in result.content
    assert "==> /Projects/Garden/plan.md (2 lines) <==" in result.content
    assert "Not read: /Areas/none.md does not exist" in result.content
    nothing = await invoke(session, "BatchRead", file_patterns=["/nope/*.md"])
    assert nothing.is_error and "no files match" in nothing.content


async def test_write_creates_parents_and_overwrites(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    result = await invoke(session, "Write", file_path="/Projects/Trip/plan.md", content="a\nb\n")
    assert not result.is_error and result.content == "Created /Projects/Trip/plan.md (2 lines)."
    assert (workspace.pkm / "Projects/Trip/plan.md").read_text() == "a\nb\n"
    again = await invoke(session, "Write", file_path="/Projects/Trip/plan.md", content="c\n")
    assert again.content.startswith("Overwrote")
    assert (workspace.pkm / "Projects/Trip/plan.md").read_text() == "c\n"
    onto_dir = await invoke(session, "Write", file_path="/Projects", content="x")
    assert onto_dir.is_error
    assert session.edited == ["/Projects/Trip/plan.md"]
    assert session.successful_mutation and not session.wrote_para


async def test_edit_exact_once_and_snippet(session: PkmAgentSession, workspace: Workspace) -> None:
    old = "- 03-09: 7 h, felt fine\n"
    new = old + f"- 03-14: 5 h, coffee after 4pm <!-- fact_id: {FACT_ID} -->\n"
    result = await invoke(
        session, "Edit", file_path="/Areas/Health/sleep.md", old_string=old, new_string=new
    )
    assert not result.is_error, result.content
    assert "Edited /Areas/Health/sleep.md (1 replacement)" in result.content
    assert "     5\t- 03-14: 5 h, coffee after 4pm" in result.content
    assert "     1\t# Sleep" in result.content
    text = (workspace.pkm / "Areas/Health/sleep.md").read_text()
    assert text.index("03-09") < text.index("03-14") < text.index("03-10")
    assert session.wrote_para


async def test_edit_match_count_errors_and_replace_all(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    write(workspace.pkm, "Areas/todo.md", "- [ ] a\n- [ ] b\n- [ ] c\n")
    none = await invoke(
        session, "Edit", file_path="/Areas/todo.md", old_string="- [x]", new_string="-"
    )
    assert none.is_error and "0 matches" in none.content
    many = await invoke(
        session, "Edit", file_path="/Areas/todo.md", old_string="- [ ]", new_string="- [x]"
    )
    assert many.is_error and "3 times" in many.content and "replace_all" in many.content
    assert (workspace.pkm / "Areas/todo.md").read_text() == "- [ ] a\n- [ ] b\n- [ ] c\n"
    done = await invoke(
        session,
        "Edit",
        file_path="/Areas/todo.md",
        old_string="- [ ]",
        new_string="- [x]",
        replace_all=True,
    )
    assert not done.is_error and "3 replacements" in done.content
    assert (workspace.pkm / "Areas/todo.md").read_text() == "- [x] a\n- [x] b\n- [x] c\n"
    same = await invoke(session, "Edit", file_path="/Areas/todo.md", old_string="a", new_string="a")
    assert same.is_error and "identical" in same.content
    gone = await invoke(session, "Edit", file_path="/Areas/x.md", old_string="a", new_string="b")
    assert gone.is_error and "does not exist" in gone.content


async def test_edit_with_empty_old_string_creates(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    created = await invoke(
        session, "Edit", file_path="/Resources/Tea/notes.md", old_string="", new_string="# Tea\n"
    )
    assert not created.is_error and "     1\t# Tea" in created.content
    assert (workspace.pkm / "Resources/Tea/notes.md").read_text() == "# Tea\n"
    clash = await invoke(
        session, "Edit", file_path="/Resources/Tea/notes.md", old_string="", new_string="x"
    )
    assert clash.is_error and "not empty" in clash.content
    write(workspace.pkm, "Resources/blank.md", "")
    fill = await invoke(
        session, "Edit", file_path="/Resources/blank.md", old_string="", new_string="filled\n"
    )
    assert not fill.is_error
    assert (workspace.pkm / "Resources/blank.md").read_text() == "filled\n"


async def test_move_rename_overwrite_rules(session: PkmAgentSession, workspace: Workspace) -> None:
    pkm = workspace.pkm
    moved = await invoke(
        session,
        "Move",
        source_path="/Projects/Garden",
        destination_path="/Archives/Garden 2025",
    )
    assert not moved.is_error and "Moved /Projects/Garden to /Archives/Garden 2025" in moved.content
    assert (pkm / "Archives/Garden 2025/plan.md").is_file() and not (
        pkm / "Projects/Garden"
    ).exists()
    write(pkm, "Areas/a.md", "A")
    write(pkm, "Areas/b.md", "B")
    clash = await invoke(session, "Move", source_path="/Areas/a.md", destination_path="/Areas/b.md")
    assert clash.is_error and "overwrite" in clash.content
    assert (pkm / "Areas/b.md").read_text() == "B"
    over = await invoke(
        session, "Move", source_path="/Areas/a.md", destination_path="/Areas/b.md", overwrite=True
    )
    assert not over.is_error and (pkm / "Areas/b.md").read_text() == "A"
    into_self = await invoke(
        session, "Move", source_path="/Areas", destination_path="/Areas/Health/x"
    )
    assert into_self.is_error
    missing = await invoke(session, "Move", source_path="/nope.md", destination_path="/x.md")
    assert missing.is_error and "does not exist" in missing.content
    root = await invoke(session, "Move", source_path="/", destination_path="/x")
    assert root.is_error
    assert "/Archives/Garden 2025" in session.edited and "/Areas/b.md" in session.edited


async def test_remove_needs_confirm(session: PkmAgentSession, workspace: Workspace) -> None:
    refused = await invoke(session, "Remove", path="/Projects/Garden/plan.md", confirm=False)
    assert refused.is_error and "confirm" in refused.content
    assert (workspace.pkm / "Projects/Garden/plan.md").is_file()
    no_flag = await invoke(session, "Remove", path="/Projects/Garden/plan.md")
    assert no_flag.is_error and "confirm" in no_flag.content
    assert not session.successful_mutation
    removed = await invoke(session, "Remove", path="/Projects/Garden", confirm=True)
    assert not removed.is_error and "Removed folder /Projects/Garden" in removed.content
    assert not (workspace.pkm / "Projects/Garden").exists()
    assert session.successful_mutation
    root = await invoke(session, "Remove", path="/", confirm=True)
    assert root.is_error and workspace.pkm.is_dir()
    missing = await invoke(session, "Remove", path="/Projects/Garden", confirm=True)
    assert missing.is_error and "does not exist" in missing.content


async def test_batch_read_literal_name_with_glob_characters(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    write(workspace.pkm, "Resources/notes [draft] {v2}.md", "draft text\n")
    result = await invoke(session, "BatchRead", file_patterns=["/Resources/notes [draft] {v2}.md"])
    assert not result.is_error
    assert "==> /Resources/notes [draft] {v2}.md (1 lines) <==" in result.content


async def test_special_files_are_refused(session: PkmAgentSession, workspace: Workspace) -> None:
    os.mkfifo(workspace.pkm / "Areas" / "pipe")
    for tool, args in (
        ("Read", {"file_path": "/Areas/pipe"}),
        ("Write", {"file_path": "/Areas/pipe", "content": "x"}),
        ("Edit", {"file_path": "/Areas/pipe", "old_string": "", "new_string": "x"}),
    ):
        result = await invoke(session, tool, **args)
        assert result.is_error, tool


async def test_failed_read_fires_no_reminder(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    write(workspace.pkm, "Areas/2026-03-01.md", "one line\n")
    result = await invoke(session, "Read", file_path="/Areas/2026-03-01.md", offset=5)
    assert result.is_error and "<system-reminder>" not in result.content
    assert session.reminders_total == 0 and session.reminders_this_run == []
