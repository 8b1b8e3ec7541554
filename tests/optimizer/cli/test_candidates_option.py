"""`--candidates K`: the optimize flag, its promptloop.toml key and nightly's pass-through."""

from __future__ import annotations

import pytest
import typer.main

from promptloop.optimizer.cli.app import app
from promptloop.optimizer.cli.common import command_table
from promptloop.optimizer.workflows.nightly.config import NightlyConfig
from tests.optimizer.cli.test_flag_spellings import REQUIRED, parse

GROUP = typer.main.get_command(app)


def test_optimize_candidates_from_flag_env_and_toml(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse("optimize", [])["candidates"] == 1
    assert parse("optimize", ["--candidates", "4"])["candidates"] == 4
    cmd = GROUP.commands["optimize"]  # type: ignore[attr-defined]
    table = command_table({"optimize": {"candidates": 3}}, "optimize")
    with cmd.make_context("optimize", REQUIRED["optimize"], default_map=table) as ctx:
        assert ctx.params["candidates"] == 3
    monkeypatch.setenv("PROMPTLOOP_CANDIDATES", "2")
    assert parse("optimize", [])["candidates"] == 2
    with pytest.raises(Exception, match="greater than or equal to 1"):
        parse("optimize", ["--candidates", "0"])


def test_nightly_passes_candidates_to_each_iteration() -> None:
    assert parse("nightly", ["--candidates", "3"])["candidates"] == 3
    night = NightlyConfig.model_validate({"candidates": 4})
    assert night.optimize_config("pkm_agent", "skip_trivial", "HEAD").candidates == 4
    assert NightlyConfig().optimize_config("pkm_agent", "skip_trivial", "HEAD").candidates == 1
