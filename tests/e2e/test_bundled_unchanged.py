"""The card and PKM agents give the same trial results and cache keys as before issue 24 (its
must-hold): both now run as `python` adapter entries of promptloop's own promptloop.toml, and
a small suite of each, run with the scripted policies of tests/policies.py, matches the golden
file recorded from commit dba772a (the last commit before the change) by
tests/e2e/bundled_probe.py, trial by trial: status, failure reason, outcome, every grader's
value, pass and rationale, the tool calls, the seed.

Cache keys are compared by their inputs (harness version, task hash, prompt hash, models,
trial index and the variant string), not the final key: the key also holds a fingerprint of
the source of agents/, graders/ and the runner, which changes with any edit there (as it must,
so a code change never serves stale trials), and did change in this issue.

If the bundled prompts or these suites are changed on purpose, re-record the golden file as
bundled_probe.py's docstring says (from the commit before the behaviour change).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptloop.optimizer.core.project import active_project
from tests.e2e.bundled_probe import SUITES, probe
from tests.e2e.support import enter

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("golden") / "bundled_dba772a.json"


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN.read_text())
    return data


@pytest.fixture(scope="module")
def now(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as mp:
        enter(ROOT, mp)
        return probe(ROOT, tmp_path_factory.mktemp("state"))


def test_the_bundled_agents_run_through_the_session_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    enter(ROOT, monkeypatch)
    for agent, *_ in SUITES:
        config = active_project().agent(agent).config
        assert config.adapter == "session" and config.spec.in_process, agent


def test_same_cache_key_inputs(golden: dict[str, Any], now: dict[str, Any]) -> None:
    assert now["harness_version"] == golden["harness_version"]
    assert set(now["suites"]) == set(golden["suites"])
    for name, before in golden["suites"].items():
        after = now["suites"][name]
        assert after["suite_hash"] == before["suite_hash"], name
        assert after["prompt_hashes"] == before["prompt_hashes"], name
        assert set(after["cache_key_inputs"]) == set(before["cache_key_inputs"]), name
        for trial, inputs in before["cache_key_inputs"].items():
            assert after["cache_key_inputs"][trial] == inputs, (name, trial)


@pytest.mark.parametrize("suite", [f"{agent}/{kind}" for agent, kind, _ in SUITES])
def test_same_trial_results(golden: dict[str, Any], now: dict[str, Any], suite: str) -> None:
    before, after = golden["suites"][suite]["trials"], now["suites"][suite]["trials"]
    assert set(after) == set(before)
    # the golden run graded every trial (none errored), with partial credit on some graders
    assert all(t["status"] in ("passed", "failed") and t["scores"] for t in before.values())
    assert any(0 < s["value"] < 1 for t in before.values() for s in t["scores"])
    for trial, expected in before.items():
        got = after[trial]
        for field in expected:
            assert got[field] == expected[field], (suite, trial, field)
