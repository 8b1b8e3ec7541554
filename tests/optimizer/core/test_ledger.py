"""The ledger's open/close records, and torn lines left by killed writers."""

from __future__ import annotations

import json
from pathlib import Path

from promptloop.optimizer.core.ledger import Ledger, LedgerEntry, LedgerOpen, diff_hash


def opened(id_: str, pid: int = 4242) -> LedgerOpen:
    return LedgerOpen(id=id_, command="optimize", pid=pid, host="box", suite="pkm_agent",
                      agent="pkm_agent", bucket="skip_trivial", iteration=1, base_commit="b" * 40,
                      prompt_path="prompts/pkm_agent.md", proposer="scripted:proposer",
                      repo="/repo", branch=f"promptloop/pkm_agent/skip_trivial/{id_}",
                      worktree=f"/tmp/promptloop-wt-{pid}-x/worktree")


def closed(id_: str, outcome: str = "rejected", diff: str = "-a\n+b\n") -> LedgerEntry:
    return LedgerEntry.model_validate({
        "id": id_, "suite": "pkm_agent", "agent": "pkm_agent", "bucket": "skip_trivial",
        "iteration": 1, "base_commit": "b" * 40, "prompt_path": "prompts/pkm_agent.md",
        "proposer": "p", "outcome": outcome, "diff": diff, "diff_hash": diff_hash(diff)})


def test_records_pair_by_id_and_ids_may_run_again(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(opened("s-1"))
    ledger.append(opened("s-2"))
    ledger.append(closed("s-1"))
    assert [r.id for r in ledger.unclosed()] == ["s-2"]
    ledger.append(opened("s-2").abandoned(["its process died"]))
    ledger.append(opened("s-2"))  # a resumed night runs the same iteration again
    [again] = ledger.unclosed()
    assert again.id == "s-2"
    ledger.append(closed("s-2", "accepted"))
    assert ledger.unclosed() == []
    assert [(e.id, e.outcome) for e in ledger.entries()] == [
        ("s-1", "rejected"), ("s-2", "abandoned"), ("s-2", "accepted")]
    abandoned = ledger.entries()[1]
    assert abandoned.branch is None and abandoned.reasons == ["its process died"]
    assert [json.loads(line)["kind"] for line in ledger.path.read_text().splitlines()] == [
        "open", "open", "close", "close", "open", "close"]


def test_records_written_before_open_records_existed_still_read(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    old = closed("s-1").model_dump(mode="json")
    del old["kind"]
    path.write_text(json.dumps(old) + "\n")
    ledger = Ledger(path)
    assert [e.outcome for e in ledger.entries()] == ["rejected"]
    assert ledger.rejected("pkm_agent", "skip_trivial")[0].id == "s-1"
    assert ledger.seen_diff("pkm_agent", "skip_trivial", diff_hash("-a\n+b\n")).id == "s-1"


def test_a_torn_last_line_is_skipped_then_cut_by_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.append(opened("s-1"))
    whole = path.read_bytes()
    torn = closed("s-1").model_dump_json().encode()[:57]
    path.write_bytes(whole + torn)
    assert [r.id for r in ledger.unclosed()] == ["s-1"] and ledger.entries() == []
    ledger.append(opened("s-1").abandoned(["killed"]))
    text = path.read_text()
    assert text.endswith("\n") and text.count("\n") == 2
    assert [json.loads(line)["kind"] for line in text.splitlines()] == ["open", "close"]
    assert ledger.unclosed() == []


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text(closed("s-1").model_dump_json())  # written by hand, or cut after the brace
    ledger = Ledger(path)
    ledger.append(closed("s-2"))
    assert [e.id for e in ledger.entries()] == ["s-1", "s-2"]
    assert path.read_text().count("\n") == 2


def test_a_torn_line_that_is_the_whole_file_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text('{"version": 1, "kind": "op')
    Ledger(path).append(closed("s-1"))
    [line] = path.read_text().splitlines()
    assert json.loads(line)["id"] == "s-1"


def test_the_same_idea_with_a_repeated_line_or_other_spacing_is_a_repeat(tmp_path: Path) -> None:
    """A tiny proposer's second iteration sent the first's rule minus a line it had written
    twice: another diff hash, the same idea, evaluated again (a team's first hour)."""
    twice = ("--- a/p.md\n+++ b/p.md\n@@ -1 +1,3 @@\n Answer with JSON.\n"
             "+Never invent a time.\n+Never invent a time.\n")
    once = "--- a/p.md\n+++ b/p.md\n@@ -1 +1,2 @@\n Answer with JSON.\n+Never  invent a time. \n"
    other = "--- a/p.md\n+++ b/p.md\n@@ -1 +1,2 @@\n Answer with JSON.\n+Never guess a time.\n"
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(closed("s-1", diff=twice))
    assert diff_hash(once) != diff_hash(twice)
    seen = ledger.seen_diff("pkm_agent", "skip_trivial", diff_hash(once), once)
    assert seen is not None and seen.id == "s-1"
    assert ledger.seen_diff("pkm_agent", "skip_trivial", diff_hash(other), other) is None


def test_an_accepted_idea_is_among_those_a_proposer_must_not_repeat(tmp_path: Path) -> None:
    """A team deleted a declined accepted branch; the next night's proposer, told nothing,
    proposed the same change, which the duplicate guard refused: one proposer call and the
    iteration wasted. Accepted ideas are listed too, saying why not to repeat them."""
    from promptloop.optimizer.propose.proposer import rejected_block

    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(closed("s-1", outcome="accepted", diff="-a\n+kept rule\n"))
    ledger.append(closed("s-2", outcome="error", diff="-a\n+never judged\n"))
    ideas = ledger.rejected("pkm_agent", "skip_trivial")
    assert [e.id for e in ideas] == ["s-1"]  # an idea never judged may be tried again
    block = rejected_block(ideas)
    assert "accepted" in block and "propose a different change" in block
    assert "+kept rule" in block
