"""The general graders any agent may name: json_path, json_schema, rubric_judge and command,
with their config errors and failure modes (the judge is a scripted model)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.errors import ProviderError
from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.types import Message, ModelResponse
from promptloop.agents.transcript import Transcript
from promptloop.graders import (
    GraderConfigError,
    Score,
    config_warnings,
    run_grader,
    validate_config,
)
from promptloop.graders.general import (
    command_graders,
    parse_path,
    select,
    set_command_graders,
)
from promptloop.graders.judge import NO_JUDGE
from promptloop.graders.registry import get_grader, is_judge, judge_graders
from tests.graders.builders import ctx, rec

OUTCOME: dict[str, Any] = {
    "summary": "Weekly sync: ship the beta",
    "priority": "High",
    "count": 3,
    "done": True,
    "nothing": None,
    "items": [
        {"task": "Write release notes", "owner": "Ana", "due": "2026-03-20"},
        {"task": "Fix login bug", "owner": "Bob", "due": "2026-03-18"},
        {"task": "Book the room", "owner": "ana", "due": None},
    ],
    "odd key": {"x": 1},
}


async def grade(name: str, config: dict[str, Any], outcome: dict[str, Any] | None = None,
                **kw: Any) -> Score:
    return await run_grader(name, config, ctx(OUTCOME if outcome is None else outcome,
                                              agent="example", **kw))


def config_error(name: str, config: dict[str, Any]) -> str:
    with pytest.raises(GraderConfigError) as err:
        validate_config(name, config)
    return str(err.value)


def test_the_general_graders_are_registered_for_any_agent() -> None:
    for name in ("json_path", "json_schema", "rubric_judge", "command"):
        spec = get_grader(name)
        assert spec.agent is None and spec.description
    assert is_judge("rubric_judge") and "rubric_judge" in judge_graders()
    assert not any(is_judge(n) for n in ("json_path", "json_schema", "command"))


# --- JSON paths ------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "expected"), [
    ("$", [OUTCOME]),
    ("$.priority", ["High"]),
    ("priority", ["High"]),
    ("$.items[0].owner", ["Ana"]),
    ("items.0.owner", ["Ana"]),
    ("items[1].owner", ["Bob"]),
    ("$.items[-1].task", ["Book the room"]),
    ("$.items[*].owner", ["Ana", "Bob", "ana"]),
    ("$.items.*.owner", ["Ana", "Bob", "ana"]),
    ("$['odd key'].x", [1]),
    ('$["odd key"]["x"]', [1]),
    ("$.items[7].owner", []),
    ("$.missing.deeper", []),
    ("$.summary[0]", []),
    ("$.nothing", [None]),
])
def test_select(path: str, expected: list[Any]) -> None:
    assert [v for _, v in select(OUTCOME, path)] == expected


def test_select_names_the_concrete_paths() -> None:
    assert [w for w, _ in select(OUTCOME, "items[*].owner")] == [
        "$.items[0].owner", "$.items[1].owner", "$.items[2].owner"]


@pytest.mark.parametrize("path", ["", "$.", "$.a[", "$..a", "$[x]", "$.a]"])
def test_malformed_paths_are_config_errors_naming_the_field(path: str) -> None:
    with pytest.raises(ValueError):
        parse_path(path)
    message = config_error("json_path", {"path": path, "equals": 1})
    assert "'path'" in message and "json_path" in message


# --- json_path -------------------------------------------------------------------------------


@pytest.mark.parametrize(("config", "value"), [
    ({"path": "$.priority", "equals": "high"}, 1.0),
    ({"path": "$.priority", "equals": "  HIGH "}, 1.0),
    ({"path": "$.priority", "equals": "high", "case_sensitive": True}, 0.0),
    ({"path": "$.priority", "equals": "High", "case_sensitive": True}, 1.0),
    ({"path": "$.count", "equals": 3.0}, 1.0),
    ({"path": "$.done", "equals": 1}, 0.0),  # JSON true is not 1
    ({"path": "$.done", "equals": True}, 1.0),
    ({"path": "$.nothing", "equals": None}, 1.0),
    ({"path": "$.items[1]", "equals": {"task": "fix login bug", "owner": "BOB",
                                       "due": "2026-03-18"}}, 1.0),
    ({"path": "$.priority", "one_of": ["low", "high"]}, 1.0),
    ({"path": "$.priority", "one_of": ["low", "medium"]}, 0.0),
    ({"path": "$.items[0].due", "matches": r"^\d{4}-\d{2}-\d{2}$"}, 1.0),
    ({"path": "$.summary", "matches": "BETA"}, 1.0),
    ({"path": "$.summary", "matches": "BETA", "case_sensitive": True}, 0.0),
    ({"path": "$.count", "matches": "^3$"}, 1.0),
    ({"path": "$.items", "matches": "x"}, 0.0),  # not a string
    ({"path": "$.summary", "contains": ["weekly", "BETA"]}, 1.0),
    ({"path": "$.summary", "contains": "ship"}, 1.0),
    ({"path": "$.summary", "contains": ["weekly", "launch"]}, 0.0),
    ({"path": "$.summary", "contains": ["weekly", "launch"], "partial_credit": True}, 0.5),
    ({"path": "$.summary", "contains": ["Weekly"], "case_sensitive": True}, 1.0),
    ({"path": "$.summary", "contains": ["weekly"], "case_sensitive": True}, 0.0),
])
async def test_json_path_checks(config: dict[str, Any], value: float) -> None:
    score = await grade("json_path", config)
    assert score.value == value
    assert score.passed is (value == 1.0)
    assert score.metadata["path"] == config["path"]


async def test_json_path_on_a_list_selecting_path() -> None:
    owners = "$.items[*].owner"
    got = await grade("json_path", {"path": owners, "contains": ["ana", "bob"]})
    assert got.value == 1.0
    got = await grade("json_path", {"path": owners, "contains": ["ana", "bob", "cy", "dee"],
                                    "partial_credit": True})
    assert got.value == 0.5 and not got.passed
    assert "'cy'" in got.rationale and "'dee'" in got.rationale
    got = await grade("json_path", {"path": owners, "contains": ["ana", "bob", "cy", "dee"],
                                    "partial_credit": True, "pass_threshold": 0.5})
    assert got.value == 0.5 and got.passed
    # equals a list: the whole selection; equals a value: every item
    assert (await grade("json_path", {"path": owners, "equals": ["ana", "bob", "ANA"]})).passed
    got = await grade("json_path", {"path": owners, "equals": "ana", "partial_credit": True})
    assert got.value == pytest.approx(2 / 3)
    assert "$.items[1].owner equals 'ana'" in got.rationale
    got = await grade("json_path", {"path": owners, "one_of": ["ana", "bob"]})
    assert got.value == 1.0 and len(got.assertions) == 3
    got = await grade("json_path", {"path": "$.items[*].due", "matches": r"^2026-", })
    assert got.value == 0.0  # the third due date is null
    # a path naming one list: contains looks inside its values
    assert (await grade("json_path", {"path": "$.items", "contains": ["release notes"]})).passed


async def test_json_path_missing_values_fail() -> None:
    got = await grade("json_path", {"path": "$.owner", "equals": "Ana"})
    assert (got.value, got.passed) == (0.0, False)
    assert "$.owner is not in the outcome" in got.rationale
    got = await grade("json_path", {"path": "$.people[*].name", "contains": ["x"]}, {"people": []})
    assert got.value == 0.0 and "selected no value" in got.rationale


@pytest.mark.parametrize(("config", "field"), [
    ({"path": "$.a"}, "equals, one_of, matches, contains"),
    ({"path": "$.a", "equals": 1, "matches": "x"}, "got equals, matches"),
    ({"path": "$.a", "matches": "("}, "'matches'"),
    ({"path": "$.a", "contains": []}, "'contains'"),
    ({"path": "$.a", "one_of": []}, "'one_of'"),
    ({"path": "$.a", "equals": 1, "pass_threshold": 2}, "'pass_threshold'"),
    ({"equals": 1}, "'path'"),
    ({"path": "$.a", "equals": 1, "partial_credit": "maybe"}, "'partial_credit'"),
])
def test_json_path_config_errors(config: dict[str, Any], field: str) -> None:
    assert field in config_error("json_path", config)


def test_unknown_config_keys_are_warned_about() -> None:
    assert config_warnings("json_path", {"path": "$", "equals": 1, "equal": 2}) == [
        "grader 'json_path': unknown config key 'equal' ignored (did you mean 'equals'?)"]
    assert config_warnings("json_schema", {"schema": {}, "path": "$"}) == []
    assert config_warnings("json_path", {"path": "$", "equals": 1, "zzz": 2}) == [
        "grader 'json_path': unknown config key 'zzz' ignored"]


def test_a_misspelt_key_behind_a_config_error_is_named() -> None:
    """A new-team trial wrote "equal" for "equals" and read only "give exactly one of equals,
    one_of, matches, contains (got none)"."""
    message = config_error("json_path", {"path": "$.owner", "equal": "Ivo"})
    assert message.endswith("; unknown config key 'equal' (did you mean 'equals'?)"), message


# --- json_schema -----------------------------------------------------------------------------

ITEM_SCHEMA = {
    "type": "object",
    "required": ["task", "owner", "due"],
    "properties": {
        "task": {"type": "string", "minLength": 1},
        "owner": {"type": "string"},
        "due": {"type": ["string", "null"], "format": "date"},
    },
}


async def test_json_schema_valid_and_invalid() -> None:
    whole = {"type": "object", "required": ["items"],
             "properties": {"items": {"type": "array", "items": ITEM_SCHEMA}}}
    got = await grade("json_schema", {"schema": whole})
    assert (got.value, got.passed) == (1.0, True)
    broken = {**OUTCOME, "items": [{"task": "", "owner": 7, "due": "next week"}, {}]}
    got = await grade("json_schema", {"schema": whole}, broken)
    assert (got.value, got.passed) == (0.0, False)
    assert got.metadata["violations"] == 6
    assert "$.items[0].owner: 7 is not of type 'string'" in got.rationale
    assert "$.items[0].due: 'next week' is not a 'date'" in " ".join(
        a.description for a in got.assertions)
    assert "$.items[1]: 'task' is a required property" in got.rationale


async def test_json_schema_at_a_path() -> None:
    assert (await grade("json_schema", {"schema": ITEM_SCHEMA, "path": "items.1"})).passed
    got = await grade("json_schema", {"schema": {"type": "array", "maxItems": 2},
                                      "path": "$.items[*].owner"})
    assert got.value == 0.0 and "is too long" in got.rationale
    got = await grade("json_schema", {"schema": ITEM_SCHEMA, "path": "$.result"})
    assert got.value == 0.0 and "$.result is not in the outcome" in got.rationale


def test_json_schema_config_errors() -> None:
    assert "'schema'" in config_error("json_schema", {})
    message = config_error("json_schema", {"schema": {"type": "objekt"}})
    assert "'schema'" in message and "not a valid JSON Schema" in message
    assert "'path'" in config_error("json_schema", {"schema": {}, "path": "$.["})


# --- rubric_judge ----------------------------------------------------------------------------

RUBRIC = "Every action item names an owner and a due date taken from the notes."


def judge_of(*texts: str) -> ScriptedModel:
    return ScriptedModel([reply(t) for t in texts], model_id="scripted:judge")


def rubric(**extra: Any) -> dict[str, Any]:
    return {"rubric": RUBRIC, "dimensions": ["owners", "dates"], **extra}


async def test_rubric_judge_scores_on_the_scale_and_keeps_dimensions() -> None:
    judge = judge_of('{"owners": 5, "dates": "3", "rationale": "one date is missing"}')
    got = await grade("rubric_judge", rubric(), judge=judge, content="Notes: Ana writes...")
    assert got.value == pytest.approx((1.0 + 0.5) / 2) and got.passed
    assert got.metadata["dimensions"] == {"owners": 1.0, "dates": 0.5}
    assert got.metadata["raw_dimensions"] == {"owners": 5, "dates": "3"}
    assert got.metadata["judge_model"] == "scripted:judge" and got.metadata["scale"] == [1.0, 5.0]
    assert got.rationale == "owners=5/5, dates=3/5; one date is missing"
    (asked,) = judge.calls
    assert asked.settings is not None and asked.settings.temperature == 0.0
    prompt = asked.messages[0].content
    assert RUBRIC in prompt and "Notes: Ana writes..." in prompt
    assert '"Write release notes"' in prompt  # the whole outcome by default
    assert "- `owners`\n- `dates`" in prompt and "from 1 (worst) to 5 (best)" in prompt
    assert "<transcript>" not in prompt and "{{" not in prompt


async def test_rubric_judge_pass_threshold_and_custom_scale() -> None:
    reply_text = '{"owners": 7, "dates": 10}'
    got = await grade("rubric_judge", rubric(scale=[0, 10], pass_threshold=0.9),
                      judge=judge_of(reply_text))
    assert got.value == pytest.approx(0.85) and not got.passed
    assert got.metadata["threshold"] == 0.9
    got = await grade("rubric_judge", rubric(scale=[0, 10], pass_threshold=0.8),
                      judge=judge_of(reply_text))
    assert got.passed
    # a grade off the rubric's scale is another scale's (a team's judge answered 40 and 30 on
    # a 1-5 rubric, "out of 100": clamped, they passed as 5/5 and optimize kept the patch)
    for text in ('{"owners": 9, "dates": 0}', '{"owners": 40, "dates": 3}'):
        off = await grade("rubric_judge", rubric(), judge=judge_of(text))
        assert off.value is None and off.passed is None, off
        assert off.metadata["judge_unusable"] is True
        assert "outside the rubric's scale 1-5" in off.rationale and "owners=" in off.rationale
    edge = await grade("rubric_judge", rubric(), judge=judge_of('{"owners": 5.0, "dates": 1}'))
    assert edge.metadata["dimensions"] == {"owners": 1.0, "dates": 0.0}


async def test_rubric_judge_unknown_and_unparseable_replies() -> None:
    got = await grade("rubric_judge", rubric(),
                      judge=judge_of('{"owners": "unknown", "dates": 4}'))
    assert got.value == pytest.approx(0.75)
    assert got.metadata["dimensions"] == {"owners": None, "dates": 0.75}
    for text, why in [('{"owners": "unknown", "dates": null}', "could not decide"),
                      ("five out of five", "not JSON"),
                      ('{"owners": 5, "dates": 5, "rationale": 3}', "`rationale` is a int")]:
        got = await grade("rubric_judge", rubric(), judge=judge_of(text))
        assert got.value is None and got.passed is None and why in got.rationale
        assert "error_type" not in got.metadata  # the judge answered: a null, not an error
        assert got.metadata["judge_unusable"] is True
        # ... and the trial is errored, never passed on the other graders alone (a team's
        # judge replied in another shape: every trial of its bucket "passed" at score 0)
        from promptloop.agents.transcript import Transcript
        from promptloop.graders.base import Score
        from promptloop.optimizer.run.trial import _Attempt, _decide

        attempt = _Attempt(scores=[Score(grader="json_path", value=1.0, passed=True,
                                         rationale="ok"), got])
        _decide(attempt, 1.0, Transcript())
        assert attempt.status == "errored" and "judge reply unusable (rubric_judge)" in (
            attempt.reason or "")
    decided = await grade("rubric_judge", rubric(),
                          judge=judge_of('{"owners": 5, "dates": 5}'))
    assert "judge_unusable" not in decided.metadata


async def test_rubric_judge_shows_only_the_named_parts() -> None:
    judge = judge_of('{"overall": 4}')
    transcript = Transcript(messages=[Message.system("SYSTEM PROMPT"),
                                      Message.user("the notes"),
                                      Message.assistant("Here are the items")],
                            tool_calls=[rec("save_items", "saved 3 items")])
    context = ctx(OUTCOME, agent="example", judge=judge)
    context = type(context)(**{**context.__dict__, "transcript": transcript})
    got = await run_grader("rubric_judge", {"rubric": RUBRIC, "show": ["$.items[*].owner",
                                                                       "$.absent"],
                                            "show_transcript": True}, context)
    assert got.value == 0.75
    prompt = judge.calls[0].messages[0].content
    assert '<value path="$.items[*].owner">' in prompt and '"Bob"' in prompt
    assert "Weekly sync" not in prompt and "Write release notes" not in prompt
    assert '<value path="$.absent">\n(not in the outcome)' in prompt
    assert "[assistant] Here are the items" in prompt and "saved 3 items" in prompt
    assert "SYSTEM PROMPT" not in prompt


async def test_rubric_judge_without_a_judge_or_with_a_broken_one() -> None:
    got = await grade("rubric_judge", rubric())
    assert got.value is None and got.rationale == NO_JUDGE

    def down(_: Request) -> ModelResponse:
        raise ProviderError("judge provider down", status=503)

    got = await grade("rubric_judge", rubric(), judge=ScriptedModel(down))
    # the runner reads this module as "judge failed": the trial is errored, not failed
    assert got.value is None
    assert got.metadata["error_module"] == ProviderError.__module__


@pytest.mark.parametrize(("config", "field"), [
    ({}, "'rubric'"),
    ({"rubric": "  "}, "'rubric'"),
    ({"rubric": "r", "dimensions": []}, "'dimensions'"),
    ({"rubric": "r", "dimensions": ["a b"]}, "'dimensions'"),
    ({"rubric": "r", "dimensions": ["rationale"]}, "'dimensions'"),
    ({"rubric": "r", "dimensions": ["a", "a"]}, "'dimensions'"),
    ({"rubric": "r", "scale": [5, 1]}, "'scale'"),
    ({"rubric": "r", "scale": [1]}, "'scale"),
    ({"rubric": "r", "pass_threshold": 1.5}, "'pass_threshold'"),
    ({"rubric": "r", "show": ["$.["]}, "'show'"),
])
def test_rubric_judge_config_errors(config: dict[str, Any], field: str) -> None:
    assert field in config_error("rubric_judge", config)


async def test_rubric_judge_is_calibrated_like_the_pkm_judges(tmp_path: Path) -> None:
    """Its scores carry the dimensions and judge model calibration joins human labels to."""
    from promptloop.optimizer.lifecycle.calibration import judge_grader, run_calibration
    from tests.optimizer.lifecycle.helpers import T0, run, save_all, trial

    replies = {"t-a": (5, 5), "t-b": (1, 2), "t-c": (4, 3), "t-d": (2, 1)}
    trials = []
    for task, (owners, dates) in replies.items():
        score = await grade("rubric_judge", rubric(),
                            judge=judge_of(json.dumps({"owners": owners, "dates": dates})))
        trials.append(trial(task, "items", 0, bool(score.passed), T0, scores=[score]))
    save_all(tmp_path, [run("ex-1", {}, trials=trials)])
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({
        "trial_id": f"ex-1/{task}#0", "grader": "rubric_judge",
        "scores": {"owners": (o - 1) / 4, "dates": (d - 1) / 4}}) + "\n"
        for task, (o, d) in replies.items()))
    assert judge_grader("rubric_judge") == 0.6
    report, _ = run_calibration(tmp_path, "rubric_judge", labels)
    assert report.overall.n == 4 and report.overall.mean_absolute_error == 0
    assert [d.name for d in report.dimensions] == ["owners", "dates"]
    # the id the run names (what run pages compare with), not the name the model answers with
    assert report.judge_models == ["scripted:judge"]
    from promptloop.optimizer.lifecycle.calibration import calibration_status
    used = calibration_status(tmp_path, "rubric_judge", judge_model="scripted:judge", min_items=4)
    assert used.state == "calibrated", used.message
    other = calibration_status(tmp_path, "rubric_judge", judge_model="scripted:other", min_items=4)
    assert other.state == "other_judge_model", other.message


# --- command ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_command_graders() -> Iterator[None]:
    set_command_graders({})
    yield
    set_command_graders({})


def script(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text("import json, os, sys\n" + body)
    return name


async def grade_command(tmp_path: Path, body: str, **config: Any) -> Score:
    set_command_graders({"check": [sys.executable, script(tmp_path, "check.py", body)]},
                        root=tmp_path)
    return await grade("command", {"grader": "check", **config})


async def test_command_grader_reads_the_trial_and_scores_it(tmp_path: Path) -> None:
    got = await grade_command(tmp_path, (
        "trial = json.load(sys.stdin)\n"
        "owners = [i['owner'] for i in trial['outcome']['items']]\n"
        "print(json.dumps({'score': 2 / 3, 'rationale': f\"{trial['task_id']}: {owners}\",\n"
        "                  'cwd': os.getcwd(), 'keys': sorted(trial)}))\n"))
    assert got.value == pytest.approx(2 / 3) and got.passed is False  # default threshold 1.0
    assert got.rationale == "t1: ['Ana', 'Bob', 'ana']"
    assert got.metadata["command_grader"] == "check"
    assert "error_type" not in got.metadata
    assert command_graders() == {"check": [sys.executable, "check.py"]}


async def test_command_grader_passed_and_threshold(tmp_path: Path) -> None:
    got = await grade_command(tmp_path, "print(json.dumps({'score': 0.4, 'passed': True}))")
    assert got.value == 0.4 and got.passed is True and got.rationale == "check scored 0.4"
    got = await grade_command(tmp_path, "print(json.dumps({'score': 0.7}))",
                              pass_threshold=0.5)
    assert got.passed is True
    got = await grade_command(tmp_path, "print('log line'); print(json.dumps({'score': 1}))")
    assert got.value == 1.0 and got.passed


async def test_command_runs_in_a_temp_dir_with_a_minimal_env(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-reach-the-grader")
    monkeypatch.setenv("LANG", "C.UTF-8")
    got = await grade_command(tmp_path, (
        "sys.stdin.read()\n"
        "print(json.dumps({'score': 1, 'rationale': json.dumps("
        "{'cwd': os.getcwd(), 'env': sorted(os.environ)})}))\n"))
    seen = json.loads(got.rationale)
    assert set(seen["env"]) <= {"PATH", "HOME", "LANG", "PROMPTLOOP_REPO", "LC_CTYPE"}
    assert "OPENAI_API_KEY" not in seen["env"] and "PROMPTLOOP_REPO" in seen["env"]
    cwd = Path(seen["cwd"])
    assert cwd.name.startswith("promptloop-grader-") and not cwd.exists()


@pytest.mark.parametrize(("body", "cause", "words"), [
    ("sys.stderr.write('boom'); sys.exit(3)", "exit", "exited with status 3; stderr: boom"),
    ("print('not json')", "json", "printed no JSON object"),
    ("print('[1, 2]')", "json", "not an object"),
    ("pass", "output", "printed nothing"),
    ("print(json.dumps({'rationale': 'x'}))", "score", "printed no 'score'"),
    ("print(json.dumps({'score': 1.5}))", "score", "from 0 to 1, got 1.5"),
    ("print(json.dumps({'score': True}))", "score", "from 0 to 1, got True"),
    ("print(json.dumps({'score': 1, 'passed': 'yes'}))", "passed", "'passed' must be"),
    ("print(json.dumps({'score': 1, 'rationale': 5}))", "rationale", "must be a string"),
    ("sys.stdout.write('x' * 3_000_000)", "output", "more than 1000000 bytes"),
])
async def test_bad_commands_give_errored_scores(tmp_path: Path, body: str, cause: str,
                                                words: str) -> None:
    got = await grade_command(tmp_path, body)
    assert got.value is None and got.passed is None
    assert got.metadata["error_type"] == "CommandGraderError"
    assert got.metadata["cause"] == cause
    assert words in got.rationale and "command grader 'check'" in got.rationale


def with_child(pid_file: Path, seconds: int, then: str) -> str:
    """A grading script that starts `sleep seconds`, writes its pid, then runs `then`."""
    return ("import subprocess\n"
            f"child = subprocess.Popen(['sleep', '{seconds}'])\n"
            f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n" + then)


async def test_a_hanging_command_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    got = await grade_command(tmp_path, with_child(pid_file, 30, "child.wait()\n"),
                              timeout_s=1)
    assert time.monotonic() - started < 10
    assert got.metadata["cause"] == "timeout" and "timed out after 1 s" in got.rationale
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (reaped by nobody in this namespace) counts as dead
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_unknown_or_unstartable_command(tmp_path: Path) -> None:
    set_command_graders({"word_count": ["python3", "count.py"]})
    got = await grade("command", {"grader": "word_cont"})
    assert got.metadata["error_type"] == "CommandGraderError"
    assert got.metadata["cause"] == "unknown"
    assert "Did you mean 'word_count'" in got.rationale and "Declared: word_count" in got.rationale
    set_command_graders({"gone": [str(tmp_path / "no-such-program")]})
    got = await grade("command", {"grader": "gone"})
    assert got.metadata["cause"] == "start" and "could not start" in got.rationale


def test_command_config_and_declaration_errors() -> None:
    assert "'grader'" in config_error("command", {})
    assert "'timeout_s'" in config_error("command", {"grader": "x", "timeout_s": 0})
    assert "'pass_threshold'" in config_error("command", {"grader": "x", "pass_threshold": -1})
    with pytest.raises(ValueError, match="'bad'"):
        set_command_graders({"bad": []})
    with pytest.raises(ValueError, match="'bad'"):
        set_command_graders({"bad": "python3 x.py"})


async def test_rubric_judge_shows_an_input_of_its_own_keys_as_json() -> None:
    """A generic task's input is an object of any keys (docs/suites.md): the judge sees it,
    not "(empty input)" because it has no `content`."""
    from dataclasses import replace as with_
    judge = judge_of('{"owners": 5, "dates": 5}')
    c = with_(ctx(OUTCOME, agent="example", judge=judge, content=""),
              input={"ingredients": ["2 cups flour"], "servings_to": 3})
    await run_grader("rubric_judge", rubric(), c)
    prompt = judge.calls[0].messages[0].content
    assert "(empty input)" not in prompt
    assert '"ingredients"' in prompt and "2 cups flour" in prompt and '"servings_to": 3' in prompt


def test_a_changed_grading_script_keys_other_trials(tmp_path: Path) -> None:
    """A team fixed its grading script (a score of 0.1 that should be 1.0) and eval served the
    old grades from the trial cache, committed or not: the trial cache's variant of a task
    holds its command graders' scripts (and the code beside them)."""
    from promptloop.graders.general import command_grader_digest
    from promptloop.optimizer.core.suites import load_suite
    from promptloop.optimizer.run.trial_input import trial_variant
    from tests.optimizer import suite_builder as sb

    (tmp_path / "graders").mkdir()
    grader = tmp_path / "graders" / "g.py"
    grader.write_text("print('{\"score\": 0.1}')\n")
    set_command_graders({"g": ["python3", "graders/g.py"]}, root=tmp_path)
    suite = load_suite(sb.suite(tmp_path / "s", [sb.task("t", "hi", 1, trials=1, graders=[
        {"name": "command", "config": {"grader": "g"}}])]))
    task = suite.tasks[0]
    before = trial_variant("base", suite, task)
    assert "graders=" in before and command_grader_digest(["g"])
    grader.write_text("print('{\"score\": 1.0}')\n")
    assert trial_variant("base", suite, task) != before
    (tmp_path / "graders" / "helper.py").write_text("X = 1\n")  # code beside it counts too
    third = trial_variant("base", suite, task)
    (tmp_path / "graders" / "helper.py").write_text("X = 22\n")
    assert trial_variant("base", suite, task) != third
    assert command_grader_digest(["not_declared"]) == ""


async def test_a_grader_that_leaves_a_process_running_is_graded_and_reaped(
        tmp_path: Path) -> None:
    """A team's grader started `sleep` and exited after printing its grade: the grade was
    blamed as a timeout 30 s later and the sleep was left running. Its exit ends it now, and
    what it left in its process group is killed."""
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    got = await grade_command(tmp_path, with_child(
        pid_file, 4242, "print(json.dumps({'score': 1.0, 'passed': True}))\n"), timeout_s=20)
    assert got.passed is True and got.value == 1.0, got.rationale
    assert time.monotonic() - started < 10
    pid = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        os.kill(pid, 9)
        raise AssertionError("the grader's child was left running")


async def test_a_failing_grading_script_is_the_teams_not_a_promptloop_bug(
        tmp_path: Path) -> None:
    """A team's grading script exited 3: the trial errored (never a pass), but read
    "promptloop bug: grader command failed"; it names the team's grader now."""
    from promptloop.agents.transcript import Transcript
    from promptloop.optimizer.run.trial import _Attempt, _decide

    got = await grade_command(tmp_path, "sys.exit(3)\n")
    attempt = _Attempt(scores=[Score(grader="json_path", value=1.0, passed=True,
                                     rationale="ok"), got])
    _decide(attempt, 1.0, Transcript())
    assert attempt.status == "errored"
    assert (attempt.reason or "").startswith("your command grader failed: command grader "
                                             "'check'"), attempt.reason
    assert "promptloop bug" not in (attempt.reason or "")
