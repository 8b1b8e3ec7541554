"""Terminal tables at 80 and 120 columns: identifiers are never split, long columns give way
(abbreviated titles, then detail columns, then wrapping at word boundaries), and a comparison
lists its changed buckets with a count of the unchanged ones unless --all."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from promptloop.optimizer.cli import ui
from promptloop.optimizer.gate.compare import BucketComparison
from promptloop.optimizer.report.table import Table, comparison_table, gate_table, verdict_table

CAPABILITY = ["bilingual", "decline_trivial", "key_facts", "tag_allowlist", "template_article",
              "template_conversation", "template_duration", "template_event", "template_link",
              "template_metric", "template_mood", "template_person", "template_place",
              "template_procedure", "template_progress", "template_quote", "template_rating",
              "template_routine", "template_task", "template_transaction", "title_quality"]
REGRESSION = ["regression/plain_event", "regression/plain_link", "regression/plain_minimal",
              "regression/plain_transaction"]
BUCKETS = CAPABILITY + REGRESSION
# the card agent's 25 buckets after a patch for template_event: the target undecided, one
# bucket better, one worse, a regression bucket drifting; every other bucket unchanged
MOVED = {"template_event": (0.25, "inconclusive", 2), "tag_allowlist": (0.5, "improved", 0),
         "template_transaction": (-0.5, "regressed", 0),
         "regression/plain_transaction": (-0.125, "inconclusive", 1)}


def comparisons() -> list[BucketComparison]:
    out = []
    for name in BUCKETS:
        delta, status, dropped = MOVED.get(name, (0.0, "unchanged", 0))
        out.append(BucketComparison(
            bucket=name, n_pairs=12, n_dropped=dropped, base_mean=0.5, cand_mean=0.5 + delta,
            delta=delta, ci_low=delta - 0.2 if delta else None,
            ci_high=delta + 0.2 if delta else None, base_pass_rate=0.5,
            cand_pass_rate=0.5 + delta, fixed=max(0, round(delta * 8)),
            broken=max(0, round(-delta * 8)), p_value=0.0078 if delta else 1.0,
            status=status))  # type: ignore[arg-type]
    return out


def render(monkeypatch: pytest.MonkeyPatch, width: int, *, every_row: bool) -> str:
    console = Console(width=width, record=True, color_system=None)
    monkeypatch.setattr(ui, "out", console)
    ui.verdict_rows(verdict_table(comparisons(), "template_event"), every_row=every_row)
    return console.export_text()


def cells_on_one_line(text: str, names: list[str]) -> None:
    for name in names:
        assert re.search(rf"(^| ){re.escape(name)}( |$)", text, re.M), f"{name} split"


@pytest.mark.parametrize("width", [80, 120])
def test_every_bucket_and_status_stays_whole(monkeypatch: pytest.MonkeyPatch,
                                             width: int) -> None:
    text = render(monkeypatch, width, every_row=True)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    cells_on_one_line(text, BUCKETS)
    rows = [line for line in text.splitlines() if line.split() and line.split()[0] in BUCKETS]
    assert len(rows) == 25  # one line per bucket: nothing wrapped onto a second line
    for status in ("unchanged", "inconclusive", "improved", "regressed"):
        assert status in text
    assert "template_e\n" not in text and "inconclusiv\n" not in text


def test_narrow_terminal_abbreviates_titles_and_drops_detail_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    narrow = render(monkeypatch, 80, every_row=True)
    wide = render(monkeypatch, 120, every_row=True)
    header = next(line for line in narrow.splitlines() if line.startswith("Bucket"))
    assert header.split() == ["Bucket", "Tgt", "n", "Base", "Cand", "Δ", "F/B", "p", "Status"]
    wide_header = next(line for line in wide.splitlines() if line.startswith("Bucket"))
    assert "CI" in wide_header.split() and "Drop" in wide_header.split()
    # the evidence the gate decides on stays; the display-only interval goes first
    assert "0.0078" in narrow and "4/0" in narrow and "[+0.300, +0.700]" not in narrow
    assert "[+0.300, +0.700]" in wide


@pytest.mark.parametrize("width", [80, 120])
def test_only_changed_buckets_unless_all(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    text = render(monkeypatch, width, every_row=False)
    listed = [b for b in BUCKETS if re.search(rf"^{re.escape(b)} ", text, re.M)]
    assert listed == [b for b in BUCKETS if b in MOVED]
    assert "21 unchanged buckets not shown (--all lists them)" in text
    assert "bilingual" not in text


def test_cells_with_spaces_wrap_at_word_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    view = Table.of(["suite", "note"], [["pkm_agent_capability",
                                         "rerun with more trials before deciding anything"]])
    console = Console(width=44, record=True, color_system=None)
    monkeypatch.setattr(ui, "out", console)
    ui.show_table(view)
    text = console.export_text()
    assert "pkm_agent_capability" in text
    words = " ".join(line[len("pkm_agent_capability") + 1:].strip()
                     for line in text.splitlines()[2:])
    assert words.split() == "rerun with more trials before deciding anything".split()


def test_too_narrow_a_terminal_overflows_rather_than_splitting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = render(monkeypatch, 50, every_row=True)
    cells_on_one_line(text, BUCKETS)
    assert "…" not in text


def test_fit_widths_takes_room_from_the_most_wrappable_column() -> None:
    assert ui.fit_widths([5, 3], [20, 3], 12) == [9, 3]
    assert ui.fit_widths([5, 3], [6, 3], 20) == [6, 3]
    assert ui.fit_widths([10, 10], [30, 30], 15) is None


def test_quiet_rows_are_the_unchanged_non_target_buckets() -> None:
    view = comparison_table(comparisons(), "template_event")
    quiet = {view.rows[i][0].text for i in view.quiet}
    assert quiet == set(BUCKETS) - set(MOVED)
    table = gate_table(verdict_table(comparisons(), "bilingual"))  # an unchanged target shows
    assert "bilingual" in {row[0].text for row in table.changed().rows}
