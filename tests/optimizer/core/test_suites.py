"""Suite loading: errors name the file and the field; the checked-in task.json schema is current;
agent names come from the agent registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptloop.optimizer.core.suites import (
    SuiteError,
    check_runnable,
    load_suite,
    resolve_suite_path,
)
from tests.optimizer import suite_builder as sb

# --- loader errors name the file and the field ----------------------------------------------


def _broken(root: Path, case: str) -> tuple[Path, str]:
    """Write a suite with one defect; return (file that must be named, expected text)."""
    good = sb.task("fine", "Coffee $3", 1)
    tasks = [good]
    if case == "bad json":
        sb.suite(root, tasks)
        bad = root / "tasks" / "cases" / "zz" / "task.json"
        bad.parent.mkdir(parents=True)
        bad.write_text('{"id": "zz", "description": ')
        return bad, "invalid JSON at line 1"
    if case == "unknown kind":
        sb.suite(root, tasks, kind="nightly")
        return root / "suite.json", "field 'kind'"
    broken = dict(sb.task("broken", "Coffee $3", 2))
    expected = {
        "missing id": "field 'id': Field required",
        "missing description": "field 'description': Field required",
        "empty graders": "field 'graders': List should have at least 1 item",
        "unknown grader": "field 'graders.1.name': unknown grader 'card_templates'. Did you "
        "mean 'card_template_choice'? Known graders: general (any agent): command",
        "duplicate ids": "field 'id': duplicate task id 'fine'",
        "bad grader config": "field 'graders.1.config'",
    }[case]
    if case == "missing id":
        del broken["id"]
    elif case == "missing description":
        del broken["description"]
    elif case == "empty graders":
        broken["graders"] = []
    elif case == "unknown grader":
        broken["graders"] = [{"name": "card_completion"}, {"name": "card_templates"}]
    elif case == "duplicate ids":
        broken["id"] = "fine"
    elif case == "bad grader config":
        broken["graders"] = [{"name": "card_completion"}, {"name": "card_template_choice"}]
    sb.suite(root, tasks)
    path = sb.write_json(root / "tasks" / "cases" / "zz-broken" / "task.json", broken)
    return path, expected


@pytest.mark.parametrize(
    "case",
    [
        "bad json",
        "missing id",
        "missing description",
        "empty graders",
        "unknown grader",
        "duplicate ids",
        "bad grader config",
        "unknown kind",
    ],
)
def test_loader_errors_name_file_and_field(tmp_path: Path, case: str) -> None:
    path, expected = _broken(tmp_path / "s", case)
    with pytest.raises(SuiteError) as info:
        load_suite(tmp_path / "s")
    message = str(info.value)
    assert message.startswith(f"{path.resolve()}: "), message
    assert expected in message
    if case == "duplicate ids":
        assert str((tmp_path / "s" / "tasks" / "cases" / "fine" / "task.json").resolve()) in message


# --- the checked-in JSON schema of task.json ------------------------------------------------


def test_task_schema_is_current(tmp_path: Path) -> None:
    import subprocess
    import sys

    from promptloop.optimizer.core.suites import REPO_ROOT, SCHEMA_PATH, task_json_schema

    checked_in = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert checked_in == task_json_schema(), (
        "tasks/task.schema.json is stale: run `python -m optimizer.core.suites --write-schema`"
    )
    out = tmp_path / "schema.json"
    subprocess.run(
        [sys.executable, "-m", "promptloop.optimizer.core.suites", "--write-schema", str(out)],
        cwd=REPO_ROOT,
        check=True,
    )
    assert out.read_text(encoding="utf-8") == SCHEMA_PATH.read_text(encoding="utf-8")
    assert set(checked_in["required"]) == {"id", "input", "graders"}
    # unknown keys load (the loader warns about them), as in the original (docs/compat.md)
    assert checked_in.get("additionalProperties", True) is not False


def test_unknown_agent_loads_and_fails_when_run_by_name(tmp_path: Path) -> None:
    """docs/compat.md: any non-empty agent_name loads; an agent we cannot run fails when the
    suite is run, naming it and the agents we can run."""
    sb.suite(tmp_path / "s", [sb.task("fine", "Coffee $3", 1)])
    suite_json = tmp_path / "s" / "suite.json"
    suite_json.write_text(json.dumps(json.loads(suite_json.read_text()) | {"agent_name": "pkm"}))
    suite = load_suite(tmp_path / "s")
    assert suite.agent_name == "pkm"
    with pytest.raises(SuiteError) as info:
        check_runnable(suite)
    message = str(info.value)
    assert message.startswith(f"{suite_json.resolve()}: field 'agent_name': ")
    assert "unknown agent 'pkm'" in message and "card_agent, pkm_agent" in message
    with pytest.raises(SuiteError, match=r"give card_agent, pkm_agent, a suite folder"):
        resolve_suite_path("pkm")


def test_an_unknown_task_id_gets_a_did_you_mean_and_the_tasks() -> None:
    """`agent --task` said only "unknown task id(s) nope" (a new-team trial); eval's --task
    already suggested one. Both go through Suite.select."""
    from promptloop.optimizer.core.suites import TASKS_DIR

    suite = load_suite(TASKS_DIR / "card_agent" / "quickstart")
    first = suite.tasks[0].id
    with pytest.raises(SuiteError) as err:
        suite.select(task_ids=[first[:-1] + ("x" if first[-1] != "x" else "y")])
    message = str(err.value)
    assert f"Did you mean '{first}'?" in message and "tasks: " in message, message
