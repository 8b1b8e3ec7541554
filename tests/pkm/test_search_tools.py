"""Semantics and limits of LS, Glob and Grep."""

from __future__ import annotations

import os

from promptloop.agents.pkm.agent import PkmAgentSession
from promptloop.agents.workspace import Workspace
from tests.pkm.conftest import invoke, write


async def test_ls_tree_hidden_depth_ignore(session: PkmAgentSession, workspace: Workspace) -> None:
    write(workspace.pkm, ".obsidian/config.json", "{}")
    write(workspace.pkm, "Areas/.draft.md", "hidden")
    write(workspace.pkm, "Areas/Health/Deep/Deeper/x.md", "x")
    write(workspace.pkm, "Resources/pic.png", "png")
    tree = await invoke(session, "LS", path="/")
    assert not tree.is_error
    lines = tree.content.splitlines()
    assert lines[0] == "/"
    assert "  Areas/" in lines and "    Health/" in lines and "      sleep.md" in lines
    assert "      Deep/ (more inside)" in lines
    assert "Deeper" not in tree.content
    assert ".obsidian" not in tree.content and ".draft" not in tree.content
    deep = await invoke(session, "LS", path="/Areas", depth=5)
    assert deep.content.splitlines()[0] == "/Areas/"
    assert "      Deeper/" in deep.content.splitlines()
    ignored = await invoke(session, "LS", path="/", ignore=["*.png", "Projects"])
    assert "pic.png" not in ignored.content and "Garden" not in ignored.content
    assert "recipes.md" in ignored.content
    as_file = await invoke(session, "LS", path="/Areas/Health/sleep.md")
    assert as_file.is_error and "Read" in as_file.content
    write(workspace.pkm, "Empty/.keep", "")
    empty = await invoke(session, "LS", path="/Empty")
    assert empty.content == "/Empty/\n  (empty)"


async def test_ls_caps_entries(session: PkmAgentSession, workspace: Workspace) -> None:
    bulk = workspace.pkm / "Resources" / "Bulk"
    bulk.mkdir(parents=True)
    for i in range(1100):
        (bulk / f"n{i:04}.md").write_text("x")
    result = await invoke(session, "LS", path="/Resources")
    entries = [line for line in result.content.splitlines()[1:] if not line.startswith("...")]
    assert len(entries) == 1000
    assert "103 more entries not shown" in result.content


async def test_glob_spans_dirs_newest_first(session: PkmAgentSession, workspace: Workspace) -> None:
    older = write(workspace.pkm, "Areas/Money/budget.md", "b")
    newer = write(workspace.pkm, "Areas/Money/Deep/tax.md", "t")
    os.utime(older, (1_700_000_000, 1_700_000_000))
    os.utime(newer, (1_800_000_000, 1_800_000_000))
    os.utime(workspace.pkm / "Areas/Health/sleep.md", (1_600_000_000, 1_600_000_000))
    result = await invoke(session, "Glob", pattern="Areas/**/*.md")
    assert result.content.splitlines() == [
        "/Areas/Money/Deep/tax.md",
        "/Areas/Money/budget.md",
        "/Areas/Health/sleep.md",
    ]
    scoped = await invoke(session, "Glob", pattern="*.md", path="/Areas/Money")
    assert scoped.content.splitlines() == ["/Areas/Money/budget.md"]
    braces = await invoke(session, "Glob", pattern="**/{plan,recipes}.MD")
    assert sorted(braces.content.splitlines()) == [
        "/Projects/Garden/plan.md",
        "/Resources/Cooking/recipes.md",
    ]
    none = await invoke(session, "Glob", pattern="**/*.pdf")
    assert not none.is_error and "No files match" in none.content


async def test_glob_caps_results(session: PkmAgentSession, workspace: Workspace) -> None:
    for i in range(120):
        write(workspace.pkm, f"Resources/Many/f{i}.md", "x")
    result = await invoke(session, "Glob", pattern="Resources/Many/*.md")
    lines = result.content.splitlines()
    assert len(lines) == 101 and "20 more not shown" in lines[-1]


async def test_grep_modes_and_flags(session: PkmAgentSession, workspace: Workspace) -> None:
    write(workspace.pkm, "Areas/Health/run.md", "Run 5k\nrun 10k\nrest\nRUN 3k\n")
    files = await invoke(session, "Grep", pattern="run")
    assert files.content.splitlines() == ["/Areas/Health/run.md"]
    content = await invoke(session, "Grep", pattern="^run", output_mode="content")
    assert content.content.splitlines() == [
        "/Areas/Health/run.md:1:Run 5k",
        "/Areas/Health/run.md:2:run 10k",
        "/Areas/Health/run.md:4:RUN 3k",
    ]
    exact = await invoke(session, "Grep", pattern="^run", output_mode="content", **{"-i": False})
    assert exact.content.splitlines() == ["/Areas/Health/run.md:2:run 10k"]
    count = await invoke(session, "Grep", pattern="k$", output_mode="count")
    assert count.content.splitlines()[0] == "/Areas/Health/run.md:3"
    ctx = await invoke(
        session,
        "Grep",
        pattern="rest",
        output_mode="content",
        path="/Areas",
        **{"-B": 1, "-n": False},
    )
    assert ctx.content.splitlines() == [
        "/Areas/Health/run.md-run 10k",
        "/Areas/Health/run.md:rest",
    ]
    around = await invoke(
        session, "Grep", pattern="5k|3k", output_mode="content", **{"-C": 0, "-A": 1}
    )
    assert around.content.splitlines() == [
        "/Areas/Health/run.md:1:Run 5k",
        "/Areas/Health/run.md-2-run 10k",
        "--",
        "/Areas/Health/run.md:4:RUN 3k",
    ]
    head = await invoke(session, "Grep", pattern="k", output_mode="content", head_limit=2)
    assert len([ln for ln in head.content.splitlines() if ln.startswith("/")]) == 2
    assert "more lines not shown" in head.content


async def test_grep_include_multiline_and_errors(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    write(workspace.pkm, "Resources/notes.txt", "lentil soup is great\n")
    include = await invoke(session, "Grep", pattern="lentil", include="*.md")
    assert include.content.splitlines() == ["/Resources/Cooking/recipes.md"]
    nested = await invoke(session, "Grep", pattern="lentil", include="Resources/**/*.txt")
    assert nested.content.splitlines() == ["/Resources/notes.txt"]
    multi = await invoke(
        session, "Grep", pattern=r"## Soups\n- lentil", multiline=True, output_mode="content"
    )
    assert multi.content.splitlines() == [
        "/Resources/Cooking/recipes.md:3:## Soups",
        "/Resources/Cooking/recipes.md:4:- lentil soup",
    ]
    single = await invoke(session, "Grep", pattern=r"## Soups\n- lentil")
    assert "No matches" in single.content and not single.is_error
    bad = await invoke(session, "Grep", pattern="(unclosed")
    assert bad.is_error and "invalid regular expression" in bad.content
    one_file = await invoke(session, "Grep", pattern="seeds", path="/Projects/Garden/plan.md")
    assert one_file.content == "/Projects/Garden/plan.md"
    missing = await invoke(session, "Grep", pattern="x", path="/Nope")
    assert missing.is_error


def test_grep_schema_uses_flag_aliases(session: PkmAgentSession) -> None:
    grep = next(t for t in session.tools if t.name == "Grep")
    props = grep.spec().parameters["properties"]
    # docs/compat.md: Grep takes A, B, C, n, i and type (the original's names; -A etc. are
    # still accepted, see test_grep_accepts_both_flag_spellings)
    assert {"A", "B", "C", "n", "i", "type", "head_limit", "multiline", "include"} <= set(props)
    assert props["i"]["default"] is True
    # docs/compat.md: LS requires path
    ls = next(t for t in session.tools if t.name == "LS")
    assert ls.spec().parameters["required"] == ["path"]
    assert [t.name for t in session.tools] == [
        "Read",
        "BatchRead",
        "Write",
        "Edit",
        "Move",
        "Remove",
        "LS",
        "Glob",
        "Grep",
        "update_timeline_card_insight",
        "skip_pkm_organization",
    ]


async def test_grep_accepts_both_flag_spellings_and_type(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    write(workspace.pkm, "Areas/Health/run.md", "Run 5k\nrun 10k\nrest\n")
    write(workspace.pkm, "Areas/Health/run.txt", "run 1k\n")
    dashed = await invoke(session, "Grep", pattern="rest", output_mode="content", **{"-B": 1})
    plain = await invoke(session, "Grep", pattern="rest", output_mode="content", B=1)
    assert dashed.content == plain.content
    assert plain.content.splitlines() == [
        "/Areas/Health/run.md-2-run 10k",
        "/Areas/Health/run.md:3:rest",
    ]
    exact = await invoke(session, "Grep", pattern="^Run", output_mode="content", i=False, n=False)
    assert exact.content.splitlines() == ["/Areas/Health/run.md:Run 5k"]
    md = await invoke(session, "Grep", pattern="run", type="md")
    assert md.content.splitlines() == ["/Areas/Health/run.md"]
    txt = await invoke(session, "Grep", pattern="run", type="txt")
    assert txt.content.splitlines() == ["/Areas/Health/run.txt"]


async def test_ls_requires_path(session: PkmAgentSession) -> None:
    result = await invoke(session, "LS")
    assert result.is_error and "path" in result.content
