"""The four Read reminders, the session history, and the insight-stop-unless-reminder rule."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from promptloop.agents.pkm import reminders
from promptloop.agents.pkm.agent import PkmAgentSession, PkmOptions
from promptloop.agents.pkm.reminders import LEGACY_SESSIONS_FILE, STATS_FILE, load_sessions
from promptloop.agents.pkm.safe_fs import SafeRoot
from promptloop.agents.workspace import Workspace
from tests.pkm.conftest import FACT_ID, OLD_FACT_ID, PUBLISHED, invoke, make_session, write


async def _read(session: PkmAgentSession, path: str) -> str:
    result = await invoke(session, "Read", file_path=path)
    assert not result.is_error, result.content
    return result.content


async def test_length_reminders(session: PkmAgentSession, workspace: Workspace) -> None:
    for n, expected in ((1000, None), (1001, "Consider splitting"), (2000, "Restructure")):
        write(workspace.pkm, f"Resources/len{n}.md", "x\n" * n)
        content = await _read(session, f"/Resources/len{n}.md")
        if expected is None:
            assert "<system-reminder>" not in content
        else:
            assert "<system-reminder>" in content and expected in content
            assert f"{n} lines" in content
    assert session.reminders_total == 2


async def test_length_reminders_count_the_lines_the_read_returned(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    # docs/compat.md: the size reminders count the lines the Read returned, not the file's
    write(workspace.pkm, "Resources/long.md", "x\n" * 2500)
    part = await invoke(session, "Read", file_path="/Resources/long.md", limit=500)
    assert "<system-reminder>" not in part.content
    tail = await invoke(session, "Read", file_path="/Resources/long.md", offset=1400)
    assert "returned 1101 lines" in tail.content and "Consider splitting" in tail.content
    full = await invoke(session, "Read", file_path="/Resources/long.md")
    assert "returned 2000 lines" in full.content and "Restructure" in full.content


async def test_fragmented_directory_reminder(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    folder = "Areas/Meals"
    for i in range(5):
        write(
            workspace.pkm,
            f"{folder}/meal{i}.md",
            f"- soup <!-- fact_id: 2026/03/0{i + 1}.md#ts_1 -->\n",
        )
    write(
        workspace.pkm,
        f"{folder}/two.md",
        "a <!-- fact_id: 2026/03/08.md#ts_1 -->\nb <!-- fact_id: 2026/03/09.md#ts_2 -->\n",
    )
    write(workspace.pkm, f"{folder}/none.md", "plain\n")
    assert "<system-reminder>" not in await _read(session, f"/{folder}/meal0.md")
    write(workspace.pkm, f"{folder}/meal5.md", "- stew <!-- fact_id: 2026/03/07.md#ts_3 -->\n")
    content = await _read(session, f"/{folder}/none.md")
    assert "fragmented" in content and "6 files" in content and "/Areas/Meals" in content


async def test_the_fragmentation_reminder_reads_a_capped_number_of_small_files(
    session: PkmAgentSession, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = "Areas/Notes"
    fact = "<!-- fact_id: 2026/03/01.md#ts_1 -->"
    for i in range(8):  # one-fact files beyond the byte cap: no fragments, never read whole
        write(workspace.pkm, f"{folder}/big{i}.md", f"- x {fact}\n" + "y" * 300)
    for i in range(6):  # small one-fact files, after the byte cap files by name
        write(workspace.pkm, f"{folder}/small{i}.md", f"- x {fact}\n")
    write(workspace.pkm, f"{folder}/none.md", "plain\n")
    monkeypatch.setattr(reminders, "FRAGMENT_MAX_BYTES", 200)
    content = await _read(session, f"/{folder}/none.md")
    assert "fragmented" in content and "6 files" in content  # the big files do not count

    reads: list[int | None] = []
    real = SafeRoot.read_files

    def counted(self: SafeRoot, real_dir: Path, names: Sequence[str], *, max_bytes: int
                ) -> Iterator[tuple[str, bytes | None]]:
        reads.append(len(names))
        return real(self, real_dir, names, max_bytes=max_bytes)

    monkeypatch.setattr(SafeRoot, "read_files", counted)
    monkeypatch.setattr(reminders, "FRAGMENT_MAX_FILES", 10)  # big0-7, none, small0
    content = await _read(session, f"/{folder}/none.md")
    assert reads == [10] and "<system-reminder>" not in content  # 1 small file within the cap


async def test_date_named_file_reminder(session: PkmAgentSession, workspace: Workspace) -> None:
    # docs/compat.md: the pattern is 20\d{2}-?\d{2}-?\d{2} anywhere in the name, so
    # "2026-13-40" and "v202603141" now count as dates (no month/day or digit-boundary check)
    for name in (
        "2026-03-14.md",
        "20260314 standup.md",
        "notes 2025-12-01.md",
        "2026-13-40.md",
        "v202603141.md",
        "2026-0314.md",
    ):
        write(workspace.pkm, f"Areas/Journal/{name}", "entry\n")
        assert "is a date" in await _read(session, f"/Areas/Journal/{name}")
    for name in ("notes-2026.md", "1999-01-01.md", "2026-3-14.md", "20-26-03-14.md"):
        write(workspace.pkm, f"Areas/Journal/{name}", "entry\n")
        assert "<system-reminder>" not in await _read(session, f"/Areas/Journal/{name}")


def _entries(edited: list[list[str]]) -> list[dict[str, object]]:
    return [
        {"fact_id": f"2026/03/0{i + 1}.md#ts_1", "at": f"2026-03-0{i + 1}T08:00", "edited": e}
        for i, e in enumerate(edited)
    ]


def _history(workspace: Workspace, edited: list[list[str]]) -> None:
    """Session stats in `_System/pkm_stats.json` (docs/compat.md)."""
    path = workspace.root / STATS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"version": 1, "sessions": [*_entries(edited), "not a session"]}
    path.write_text(json.dumps(payload), encoding="utf-8")


def _legacy_history(workspace: Workspace, edited: list[list[str]]) -> None:
    path = workspace.root / LEGACY_SESSIONS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e) for e in _entries(edited)]
    path.write_text("\n".join(lines) + "\nnot json\n", encoding="utf-8")


async def test_hot_file_reminder_counts_last_five_sessions(workspace: Workspace) -> None:
    log = "Areas/Health/sleep.md"
    _history(workspace, [[log], ["x.md"], [log], [log], ["y.md"], [log, "q.md"]])
    hot = await _read(make_session(workspace), "/" + log)
    assert "edited in 3 of the user's last 5 sessions" in hot
    _history(workspace, [[log], [log], [log], ["a.md"], ["b.md"], ["c.md"], [log], ["/" + log]])
    cold = await _read(make_session(workspace), "/" + log)
    assert "<system-reminder>" not in cold


async def test_hot_file_reminder_reads_the_legacy_history(workspace: Workspace) -> None:
    log = "Areas/Health/sleep.md"
    _legacy_history(workspace, [[log], ["x.md"], [log], [log], ["y.md"]])
    hot = await _read(make_session(workspace), "/" + log)
    assert "edited in 3 of the user's last 5 sessions" in hot
    _history(workspace, [["x.md"]])  # pkm_stats.json wins over the legacy file
    cold = await _read(make_session(workspace), "/" + log)
    assert "<system-reminder>" not in cold


async def test_record_session_counts_write_edit_sessions(workspace: Workspace) -> None:
    # docs/compat.md: stats go to _System/pkm_stats.json and count Write/Edit sessions (a
    # Move-only session is not one; a Move's destination is not an edited file)
    idle = make_session(workspace)
    await invoke(idle, "Read", file_path="/Areas/Health/sleep.md")
    assert idle.record_session() is False
    mover = make_session(workspace)
    await invoke(mover, "Move", source_path="/Projects/Garden", destination_path="/Archives/G")
    assert mover.successful_mutation and mover.record_session() is False
    assert not (workspace.root / STATS_FILE).exists()
    _legacy_history(workspace, [["old.md"]])
    busy = make_session(workspace)
    await invoke(busy, "Write", file_path="/Areas/Health/caffeine.md", content="- late coffee\n")
    await invoke(busy, "Move", source_path="/Archives/G", destination_path="/Archives/Garden")
    assert busy.record_session() is True
    stats = json.loads((workspace.root / STATS_FILE).read_text())
    assert stats["version"] == 1
    assert load_sessions(workspace.root) == stats["sessions"]
    assert stats["sessions"][-1] == {
        "fact_id": FACT_ID,
        "at": PUBLISHED.isoformat(),
        "edited": ["Areas/Health/caffeine.md"],
    }
    assert [s["edited"] for s in stats["sessions"]] == [["old.md"], ["Areas/Health/caffeine.md"]]


async def _edit_with_fact_id(session: PkmAgentSession) -> None:
    result = await invoke(
        session,
        "Edit",
        file_path="/Areas/Health/sleep.md",
        old_string="- 03-09: 7 h, felt fine\n",
        new_string=f"- 03-09: 7 h, felt fine\n- 03-14: 5 h <!-- fact_id: {FACT_ID} -->\n",
    )
    assert not result.is_error, result.content


async def test_insight_sets_card_and_stops(session: PkmAgentSession, workspace: Workspace) -> None:
    await _edit_with_fact_id(session)
    result = await invoke(
        session,
        "update_timeline_card_insight",
        fact_id=FACT_ID,
        insight_text="Second short night this week, again after late caffeine.",
        related_fact_ids=[OLD_FACT_ID, OLD_FACT_ID, FACT_ID],
    )
    assert not result.is_error and result.stop
    card = yaml.safe_load(workspace.card_path(FACT_ID).read_text())
    assert card["fact_id"] == FACT_ID and card["status"] == "pending"
    # docs/compat.md: related ids are kept as given and character_id is "0" (before: deduped,
    # own id dropped, character kept)
    assert card["insight"] == {
        "text": "Second short night this week, again after late caffeine.",
        "related_facts": [{"id": OLD_FACT_ID}, {"id": OLD_FACT_ID}, {"id": FACT_ID}],
        "character_id": "0",
    }
    assert session.missing_requirements() == []


async def test_insight_accepts_what_the_original_accepts(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    # docs/compat.md: any fact id that exists in the fact file, any related id strings, empty
    # text; character_id "0" (before: only this input's id, fact-id-shaped related ids,
    # non-blank text were accepted and the old character was kept)
    path = workspace.card_path(FACT_ID)
    card = yaml.safe_load(path.read_text())
    card["insight"] = {"text": "old", "related_facts": [], "character_id": "owl"}
    path.write_text(yaml.safe_dump(card))
    missing = await invoke(
        session, "update_timeline_card_insight", fact_id=OLD_FACT_ID, insight_text="x"
    )
    assert missing.is_error and "does not exist" in missing.content
    malformed = await invoke(
        session,
        "update_timeline_card_insight",
        fact_id="fact_pkm_health_sleep_001",
        insight_text="x",
    )
    assert malformed.is_error and not session.updated_insight
    ok = await invoke(
        session,
        "update_timeline_card_insight",
        fact_id=FACT_ID,
        insight_text="",
        related_fact_ids=["fact_pkm_health_sleep_001", "nope"],
    )
    assert not ok.is_error and ok.stop and session.updated_insight
    assert yaml.safe_load(path.read_text())["insight"] == {
        "text": "",
        "related_facts": [{"id": "fact_pkm_health_sleep_001"}, {"id": "nope"}],
        "character_id": "0",
    }


async def test_insight_for_another_existing_fact(workspace: Workspace) -> None:
    workspace.ensure_fact(OLD_FACT_ID, "an older note", PUBLISHED)
    session = make_session(workspace)
    result = await invoke(
        session, "update_timeline_card_insight", fact_id=OLD_FACT_ID, insight_text="older"
    )
    assert not result.is_error
    assert yaml.safe_load(workspace.card_path(OLD_FACT_ID).read_text())["insight"]["text"] == (
        "older"
    )
    assert not session.updated_insight  # completion needs this input's card


async def test_strict_insight_is_an_option(workspace: Workspace) -> None:
    workspace.ensure_fact(OLD_FACT_ID, "an older note", PUBLISHED)
    session = make_session(workspace, options=PkmOptions(strict_insight=True))
    wrong = await invoke(
        session, "update_timeline_card_insight", fact_id=OLD_FACT_ID, insight_text="x"
    )
    assert wrong.is_error and FACT_ID in wrong.content
    blank = await invoke(
        session, "update_timeline_card_insight", fact_id=FACT_ID, insight_text="  "
    )
    assert blank.is_error
    bad_related = await invoke(
        session,
        "update_timeline_card_insight",
        fact_id=FACT_ID,
        insight_text="x",
        related_fact_ids=["nope"],
    )
    assert bad_related.is_error and not session.updated_insight
    ok = await invoke(
        session,
        "update_timeline_card_insight",
        fact_id=FACT_ID,
        insight_text=" new ",
        related_fact_ids=[OLD_FACT_ID, OLD_FACT_ID, FACT_ID],
    )
    assert ok.stop
    insight = yaml.safe_load(workspace.card_path(FACT_ID).read_text())["insight"]
    assert insight == {"text": "new", "related_facts": [{"id": OLD_FACT_ID}], "character_id": "0"}


async def test_insight_does_not_stop_after_a_reminder_in_the_run(
    session: PkmAgentSession, workspace: Workspace
) -> None:
    session.first_message()  # a run starts
    write(workspace.pkm, "Areas/Journal/2026-03-13.md", "entry\n")
    await _read(session, "/Areas/Journal/2026-03-13.md")
    await _edit_with_fact_id(session)
    first = await invoke(session, "update_timeline_card_insight", fact_id=FACT_ID, insight_text="a")
    assert not first.is_error and not first.stop
    assert "is a date" in first.content
    assert session.updated_insight
    again = await invoke(session, "update_timeline_card_insight", fact_id=FACT_ID, insight_text="b")
    assert again.stop  # the reminder was handed over once; the next call ends the run

    await _read(session, "/Areas/Journal/2026-03-13.md")
    session.reminder(["updated_insight"])  # a new run starts: earlier reminders do not count
    third = await invoke(session, "update_timeline_card_insight", fact_id=FACT_ID, insight_text="c")
    assert third.stop


async def test_skip_records_evidence(session: PkmAgentSession) -> None:
    result = await invoke(session, "skip_pkm_organization", evidence="the input is only 'hi'")
    assert result.stop and not result.is_error
    assert session.skipped and session.skip_evidence == "the input is only 'hi'"
    assert session.missing_requirements() == []


async def test_skip_accepts_empty_evidence(session: PkmAgentSession) -> None:
    # docs/compat.md: skip_pkm_organization accepts empty evidence (before: an error)
    blank = await invoke(session, "skip_pkm_organization", evidence="")
    assert not blank.is_error and blank.stop and session.skipped
    assert session.skip_evidence == "" and session.missing_requirements() == []


async def test_skip_evidence_can_be_required(workspace: Workspace) -> None:
    strict = make_session(workspace, options=PkmOptions(require_skip_evidence=True))
    blank = await invoke(strict, "skip_pkm_organization", evidence=" ")
    assert blank.is_error and not strict.skipped


async def test_skip_after_mutation_is_incomplete(session: PkmAgentSession) -> None:
    await invoke(session, "Write", file_path="/Areas/hi.md", content="hi")
    result = await invoke(session, "skip_pkm_organization", evidence="greeting")
    assert result.stop and "not clean" in result.content
    missing = session.missing_requirements()
    # docs/compat.md names
    assert missing == [
        "wrote_para_with_fact_id",
        "updated_timeline_card_insight",
        "skip_without_successful_pkm_mutation",
    ]
    reminder = session.reminder(missing)
    assert reminder.startswith("<system-reminder>") and "must not change anything" in reminder
    assert FACT_ID in reminder
