"""A generic task needs only an id, an input and graders (issue 29); the card/PKM shape keeps the
original's rules; configuration errors are found when the suite loads, naming file and key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from promptloop.optimizer.core.project import parse_project, project_scope
from promptloop.optimizer.core.suite_files import SuiteError
from promptloop.optimizer.core.suites import check_runnable, load_suite
from tests.optimizer import suite_builder as sb

SCHEMA = [{"name": "json_schema", "config": {"schema": {"type": "object"}}}]


def one(tmp: Path, task: dict[str, Any], agent: str = "triage") -> Path:
    return sb.suite(tmp / "s", [task], agent=agent)


def test_a_generic_task_loads_with_an_id_an_input_and_graders(tmp_path: Path) -> None:
    task = {"id": "t1", "input": {"ticket": {"from": "ana", "text": "Refund?"}, "lang": "en"},
            "graders": SCHEMA, "bucket": "billing"}
    suite = load_suite(one(tmp_path, task))
    [loaded] = suite.tasks
    assert loaded.spec.input.fact_id is None and loaded.spec.description == ""
    assert loaded.bucket == "billing"
    assert loaded.spec.input.declared() == task["input"]  # as the task declares it
    assert suite.warnings == ()  # the agent's own input keys are no typo
    text = load_suite(one(tmp_path / "b", {"id": "t2", "input": "Refund?", "graders": SCHEMA}))
    assert text.tasks[0].spec.input.content == "Refund?"


@pytest.mark.parametrize("bad", ["a/b", "a\\b", "..", "x..y"])
def test_a_task_id_that_names_a_path_is_refused(tmp_path: Path, bad: str) -> None:
    folder = one(tmp_path, {"id": "ok", "input": "x", "graders": SCHEMA})
    sb.write_json(folder / "tasks" / "cases" / "bad" / "task.json",
                  {"id": bad, "input": "x", "graders": SCHEMA})
    with pytest.raises(SuiteError) as info:
        load_suite(folder)
    message = str(info.value)
    assert message.startswith(str((folder / "tasks/cases/bad/task.json").resolve()))
    assert "field 'id'" in message and "may not contain" in message


def test_the_card_shape_keeps_the_originals_rules(tmp_path: Path) -> None:
    task = sb.task("c1", "Coffee $3", 1)
    del task["description"]
    with pytest.raises(SuiteError, match="field 'description': Field required"):
        load_suite(one(tmp_path, task, "card_agent"))
    task = sb.task("c1", "Coffee $3", 1, input={"locale": "en"})
    suite = load_suite(one(tmp_path / "w", task, "card_agent"))
    assert any("input.locale" in w for w in suite.warnings)  # the bundled agents ignore it


PROJECT = """
[agents.triage]
prompt = "p.md"
suites = ["s"]
adapter = "command"
command = ["python3", "agent.py"]

[agents.triage.graders.tone]
command = ["python3", "tone.py"]
"""


def test_an_undeclared_command_grader_is_refused_before_any_trial(tmp_path: Path) -> None:
    project = parse_project(PROJECT, tmp_path / "promptloop.toml")
    graders = [*SCHEMA, {"name": "command", "config": {"grader": "tonne"}}]
    folder = one(tmp_path, {"id": "t1", "input": "x", "graders": graders})
    with project_scope(project):
        suite = load_suite(folder)  # loads: the check is the agent's, when it is to run
        with pytest.raises(SuiteError) as info:
            check_runnable(suite)
        check_runnable(suite, command_graders=False)  # review leaves them out itself
        ok = load_suite(one(tmp_path / "ok", {"id": "t1", "input": "x", "graders": [
            {"name": "command", "config": {"grader": "tone"}}]}))
        check_runnable(ok)
    message = str(info.value)
    assert message.startswith(str((folder / "tasks/cases/t1/task.json").resolve()))
    assert "field 'graders.1.config.grader'" in message
    assert str(tmp_path / "promptloop.toml") in message and "[agents.triage.graders]" in message
    assert "Did you mean 'tone'?" in message
