"""Every agent gets the same publish time for a task (issue 29): an adapter agent's request
carries what the bundled agents' AgentInput carries: the fact entry's time where the task has
one, the task's own `published_at` where it gives one, else the suite clock. And a generic task
(no fact id) loads and runs through an adapter."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from promptloop.agents.llm.scripted import ScriptedModel
from promptloop.optimizer.core.project import parse_project, project_scope
from promptloop.optimizer.core.suites import Suite, load_suite
from promptloop.optimizer.run.runner import RunOptions, run_suite
from promptloop.optimizer.run.trial_input import agent_input_for, published_at_for
from tests.optimizer import suite_builder as sb

PROBE = """\
import json, sys
req = json.loads(sys.stdin.read())
print(json.dumps({"contract": "promptloop.trial/1",
                  "outcome": {"published_at": req["published_at"],
                              "input": req["task"]["input"],
                              "task_keys": sorted(req["task"])}}))
"""
FACT_DAY = '## <id:ts_5> 21:15:42 "{}"\n\nDinner with Ana tomorrow at 7pm.\n'
GRADERS = [{"name": "json_path", "config": {"path": "$.published_at", "matches": "^2026-"}}]


def probe_project(root: Path) -> None:
    root.mkdir()
    (root / "probe.py").write_text(PROBE)
    (root / "prompt.md").write_text("Answer.\n")
    (root / "promptloop.toml").write_text(
        '[agents.probe]\nprompt = "prompt.md"\nsuites = ["s"]\nadapter = "command"\n'
        f'command = [{sys.executable!r}, "probe.py"]\n')


def suite_of(root: Path, **config: object) -> Suite:
    """Three tasks: one with a fact entry in its fixture, one with its own published_at, one
    generic (no fact id, a string input)."""
    fact = sb.task("fact", "Dinner with Ana tomorrow at 7pm.", 5, trials=1, graders=GRADERS,
                   input={"fact_id": "2026/05/25.md#ts_5",
                          "fixture_dir": "tasks/cases/fact/workspace"})
    own = {"id": "own", "input": {"ticket": "Refund please"}, "graders": GRADERS,
           "published_at": "2026-06-02T18:45:00+02:00"}
    generic = {"id": "generic", "input": "Refund please", "graders": GRADERS}
    folder = sb.suite(root / "s", [fact, own, generic], agent="probe", **config)
    day = folder / "tasks" / "cases" / "fact" / "workspace" / "Facts" / "2026" / "05" / "25.md"
    day.parent.mkdir(parents=True)
    day.write_text(FACT_DAY)
    return load_suite(folder)


@pytest.mark.parametrize("pinned", [False, True])
def test_the_adapter_request_has_the_bundled_agents_publish_time(
        tmp_path: Path, pinned: bool) -> None:
    repo = tmp_path / "repo"
    probe_project(repo)
    project = parse_project((repo / "promptloop.toml").read_text(), repo / "promptloop.toml")
    with project_scope(project):
        suite = suite_of(repo, **({"clock": "2026-07-01T08:00:00+02:00"} if pinned else {}))
        options = RunOptions(agent_model="scripted:probe", state_dir=tmp_path / "state",
                             reuse=False, prompt_text="Answer.\n")
        run = asyncio.run(run_suite(suite, options, ScriptedModel(lambda req: "unused")))
    sent = {t.task_id: t.outcome["published_at"] for t in run.trials}
    assert all(t.status == "passed" for t in run.trials), [t.failure_reason for t in run.trials]
    for task in suite.tasks:
        bundled = agent_input_for(suite, task).published_at.isoformat()
        assert sent[task.id] == bundled == published_at_for(suite, task)
    # the task's own time wins; the fact entry's time unless the suite pins a clock
    assert sent["own"] == "2026-06-02T18:45:00+02:00"
    if pinned:
        assert sent["fact"] == sent["generic"] == "2026-07-01T08:00:00+02:00"
    else:
        assert sent["fact"].startswith("2026-05-25T21:15:42")
        assert sent["generic"].startswith("2026-03-14T09:30:00")  # the default suite clock
    inputs = {t.task_id: t.outcome["input"] for t in run.trials}
    # the input as the task declares it (docs/agents.md), no keys of the bundled agents added
    assert inputs["own"] == {"ticket": "Refund please"}
    assert inputs["generic"] == {"content": "Refund please"}  # a string is short for content


def test_a_generic_task_gives_the_bundled_agent_a_fact_id_of_its_day(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    probe_project(repo)
    project = parse_project((repo / "promptloop.toml").read_text(), repo / "promptloop.toml")
    with project_scope(project):
        suite = suite_of(repo)
    generic = next(t for t in suite.tasks if t.id == "generic")
    assert generic.spec.input.fact_id is None
    assert agent_input_for(suite, generic).fact_id == "2026/03/14.md#ts_1"
