"""`promptloop agent`: one input through the production agent code path."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from optimizer.cli.app import app

runner = CliRunner()


def test_card_agent_prints_the_card(tmp_path: Path) -> None:
    result = runner.invoke(app, ["agent", "card_agent", "--model", "scripted:card",
                                 "--content", "Lunch at Nora's, $18.40", "--workspace",
                                 str(tmp_path), "--published", "2026-03-14 12:00:00"])
    assert result.exit_code == 0, result.output
    assert "status: completed" in result.stdout and "transaction" in result.stdout
    card = tmp_path / "Cards" / "2026" / "03" / "14_ts_1.yaml"
    assert card.is_file() and "$18.40" in card.read_text()


def test_pkm_agent_json_shows_diff_and_tool_calls(tmp_path: Path) -> None:
    result = runner.invoke(app, ["agent", "pkm_agent", "--model", "scripted:pkm", "--json",
                                 "--content", "Bought a standing desk for the home office",
                                 "--fact-id", "2026/03/14.md#ts_4"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["outcome"]["is_complete"] is True
    assert "+++ b/PKM/Resources/" in data["pkm_diff"]
    assert "<!-- fact_id: 2026/03/14.md#ts_4 -->" in data["pkm_diff"]
    assert [c["tool_name"] for c in data["tool_calls"]] == ["Write",
                                                           "update_timeline_card_insight"]


def test_user_errors_exit_1() -> None:
    bad_agent = runner.invoke(app, ["agent", "nope_agent", "--content", "x",
                                    "--model", "scripted:card"])
    assert bad_agent.exit_code == 1 and "card_agent" in bad_agent.output
    bad_fact = runner.invoke(app, ["agent", "card_agent", "--content", "x", "--model",
                                   "scripted:card", "--fact-id", "yesterday"])
    assert bad_fact.exit_code == 1 and "--fact-id" in bad_fact.output
