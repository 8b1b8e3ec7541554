"""A trial's publish time comes from its fixture's fact entry (docs/compat.md), a suite may pin
a clock, and the agent options and runtime defaults reach the run."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import pytest

from promptloop.agents.card.agent import CardAgentSession
from promptloop.agents.llm.scripted import ScriptedModel
from promptloop.agents.pkm.agent import PkmAgentSession
from promptloop.agents.registry import AGENT_OPTIONS_VAR, AgentOptions, AgentOptionsError
from promptloop.agents.runtime import DEFAULT_MAX_TURNS, RuntimeConfig
from promptloop.agents.workspace import Workspace
from promptloop.optimizer.core.suites import LoadedTask, Suite, load_suite
from promptloop.optimizer.run.agent_cmd import AgentCommand
from promptloop.optimizer.run.agents import get_agent
from promptloop.optimizer.run.runner import RunOptions, run_suite
from promptloop.optimizer.run.trial_input import agent_input_for, task_published_at, trial_variant
from promptloop.optimizer.workflows.optimize_models import OptimizeConfig
from tests import policies
from tests.optimizer import suite_builder as sb

FACT = "2026/05/25.md#ts_5"
DAY = """## <id:ts_4> 07:10:00 "{}"

Alarm did not go off.

## <id:ts_5> 21:15:42 "{}"

Dinner with Ana tomorrow at 7pm.
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def suite_with_fact(root: Path, fact_file: str | None, fact: str = FACT, **config: object) -> Suite:
    task = sb.task("dinner", "Dinner with Ana tomorrow at 7pm.", 5, trials=1,
                   input={"fact_id": fact, "fixture_dir": "tasks/cases/dinner/workspace"},
                   graders=[{"name": "card_completion"}])
    workspace = root / "tasks" / "cases" / "dinner" / "workspace"
    workspace.mkdir(parents=True)
    if fact_file is not None:
        write(workspace / "Facts" / "2026" / "05" / "25.md", fact_file)
    return load_suite(sb.suite(root, [task], **config))


def naive(at: datetime) -> datetime:
    assert at.utcoffset() is not None  # always with its UTC offset
    return at.replace(tzinfo=None)


def only(suite: Suite) -> LoadedTask:
    [task] = suite.tasks
    return task


def test_publish_time_is_the_fact_entry(tmp_path: Path) -> None:
    suite = suite_with_fact(tmp_path / "s", DAY)
    # date from the fact id, time from the `## <id:ts_5> HH:MM:SS` header of the fixture
    assert naive(task_published_at(suite, only(suite))) == datetime(2026, 5, 25, 21, 15, 42)


@pytest.mark.parametrize("fact_file", [None, '## <id:ts_4> 07:10:00 "{}"\n\nother\n',
                                       '## <id:ts_5> 25:61:00 "{}"\n\nbad time\n'])
def test_without_a_header_the_suite_clock_gives_the_time_of_day(
    tmp_path: Path, fact_file: str | None
) -> None:
    suite = suite_with_fact(tmp_path / "s", fact_file)
    assert naive(task_published_at(suite, only(suite))) == datetime(2026, 5, 25, 9, 30)


def test_the_overlay_fact_file_replaces_the_base_one(tmp_path: Path) -> None:
    suite = suite_with_fact(tmp_path / "s", '## <id:ts_4> 07:10:00 "{}"\n\nother\n')
    task = only(suite)
    base = tmp_path / "base"
    write(base / "Facts" / "2026" / "05" / "25.md", DAY)
    with_base = LoadedTask(task.spec, task.path, base, task.fixture_dir, task.content_hash)
    # the workspace gets the overlay's copy of the day file, which has no ts_5 header
    assert naive(task_published_at(suite, with_base)).time().hour == 9
    no_overlay = LoadedTask(task.spec, task.path, base, None, task.content_hash)
    assert naive(task_published_at(suite, no_overlay)).time().hour == 21


def test_a_suite_clock_pins_every_task(tmp_path: Path) -> None:
    suite = suite_with_fact(tmp_path / "s", DAY, clock="2026-07-01T08:00:00+02:00")
    at = task_published_at(suite, only(suite))
    assert at.isoformat() == "2026-07-01T08:00:00+02:00"
    assert agent_input_for(suite, only(suite)).published_at == at


def test_the_agent_sees_the_fact_entry_time(tmp_path: Path, state: Path) -> None:
    suite = suite_with_fact(tmp_path / "s", DAY)
    model = ScriptedModel(policies.card_policy)
    options = RunOptions(agent_model="scripted:card", state_dir=state, reuse=False,
                         prompt_text="Make a card.")
    run = asyncio.run(run_suite(suite, options, model))
    assert run.trials[0].status == "passed"  # the card was saved for the fixture's fact
    assert "Published time: 2026-05-25 21:15:42 UTC" in model.calls[0].messages[1].content


def test_the_cache_variant_follows_time_threshold_and_options(tmp_path: Path) -> None:
    a = suite_with_fact(tmp_path / "a", DAY)
    b = suite_with_fact(tmp_path / "b", None)
    c = suite_with_fact(tmp_path / "c", DAY, task_pass_threshold=0.5)
    variants = {
        trial_variant("turns=20", a, only(a)),
        trial_variant("turns=20", b, only(b)),
        trial_variant("turns=20", c, only(c)),
        trial_variant("turns=20", a, only(a), AgentOptions(strict_templates=True).key()),
    }
    assert len(variants) == 4


def test_agent_options_parse_and_reach_the_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert AgentOptions.parse("") == AgentOptions()
    both = AgentOptions.parse("strict_templates, require_skip_evidence")
    assert both.key() == "strict_templates,require_skip_evidence"
    with pytest.raises(AgentOptionsError, match="Did you mean 'strict_insight'"):
        AgentOptions.parse("strict_insights")
    monkeypatch.setenv(AGENT_OPTIONS_VAR, "strict_insight")
    assert RunOptions(agent_model="scripted:pkm").agent_options == AgentOptions(
        strict_insight=True)
    monkeypatch.setenv(AGENT_OPTIONS_VAR, "nope")
    with pytest.raises(AgentOptionsError, match=AGENT_OPTIONS_VAR):
        RunOptions(agent_model="scripted:pkm")

    suite = suite_with_fact(tmp_path / "s", DAY)
    ws = Workspace(tmp_path / "ws")
    (ws.pkm).mkdir(parents=True)
    agent_input = agent_input_for(suite, only(suite))
    card = get_agent("card_agent", both)(ws, agent_input, "p")
    assert isinstance(card, CardAgentSession) and card._tools.strict_templates
    pkm = get_agent("pkm_agent", both)(ws, agent_input, "p")
    assert isinstance(pkm, PkmAgentSession)
    assert (pkm.options.require_skip_evidence, pkm.options.strict_insight) == (True, False)
    default = get_agent("pkm_agent")(ws, agent_input, "p")
    assert isinstance(default, PkmAgentSession) and not default.options.require_skip_evidence


def test_the_runtime_default_is_not_overridden() -> None:
    # the original runs 20 turns; the optimizer and `agent` defaults no longer say 12
    assert RuntimeConfig().max_turns == DEFAULT_MAX_TURNS == 20
    assert OptimizeConfig(suite="pkm_agent", bucket="b").max_turns == DEFAULT_MAX_TURNS
    cmd = AgentCommand("card_agent", "hi", "", None, "scripted:card", None, datetime(2026, 3, 14))
    assert cmd.max_turns == DEFAULT_MAX_TURNS
