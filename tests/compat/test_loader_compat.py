"""Compatibility of the suite loader with the original harness.

Each row is one loading rule of docs/compat.md ("Loader") or section 2 (suite layout and
schemas) with the original's outcome: the suite loads with these values (and, where the
original silently ignores or converts something, a warning naming the file and the field), or
loading stops with the file and the field named. Every row goes through `load_suite` on a suite
written to disk in the original's layout. tests/optimizer/core/test_bad_suites_corpus.py runs the
refusals through the CLI; its tolerated-input test runs the loading rows there too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from promptloop.optimizer.core.suites import Suite, SuiteError, check_runnable, load_suite
from tests.optimizer import suite_builder as sb

CARD = [{"name": "card_completion", "config": {}}]


@dataclass(frozen=True)
class Rule:
    name: str
    spec: str
    """Where SPEC states the rule."""
    suite: dict[str, Any] = field(default_factory=dict)
    """suite.json changes; a value of `...` deletes the key."""
    task: dict[str, Any] = field(default_factory=dict)
    """task.json changes; `input.x` changes a key of `input`; `...` deletes."""
    values: dict[str, Any] = field(default_factory=dict)
    """For a rule that loads: `config.<attr>` of the suite or `task.<attr path>` of its task."""
    warns: tuple[str, ...] = ()
    """Texts that must appear in the suite's warnings (none may appear when empty)."""
    refused: str | None = None
    """For a rule that stops loading: the field named in the error."""
    file: str = "tasks/cases/t/task.json"


def _patch(data: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(data))
    for key, value in changes.items():
        target, name = (out["input"], key[6:]) if key.startswith("input.") else (out, key)
        if value is ...:
            target.pop(name, None)
        else:
            target[name] = value
    return out


def write_rule_suite(root: Path, rule: Rule) -> Path:
    """The one-task suite of `rule` on disk (used by the CLI corpus too)."""
    config = _patch({"name": "compat", "agent_name": "card_agent", "kind": "capability"},
                    rule.suite)
    sb.write_json(root / "suite.json", config)
    task = _patch(sb.task("t", "Coffee at Bean Bar $4.20", 1, trials=1, graders=CARD), rule.task)
    sb.write_json(root / "tasks" / "cases" / "t" / "task.json", task)
    return root


def _value(suite: Suite, path: str) -> Any:
    head, _, rest = path.partition(".")
    obj: Any = suite.config if head == "config" else suite.tasks[0].spec
    for part in rest.split("."):
        if isinstance(obj, dict):
            obj = obj[part]
        elif isinstance(obj, list):
            obj = obj[int(part)]
        else:
            obj = getattr(obj, part)
    return obj


WARN = "unknown key, ignored"
ROUTING = {"name": "pkm_routed_correctly", "config": {"expected_buckets": ["Areas"]}}

RULES = [
    # --- unknown keys are ignored, listed as warnings, never errors (section 8) --------------
    Rule("unknown suite.json key", "§8 Loader", suite={"owner": "me"},
         values={"config.name": "compat"}, warns=("field 'owner': " + WARN,)),
    Rule("unknown task.json key", "§8 Loader", task={"difficulty": "hard"},
         values={"task.id": "t"}, warns=("field 'difficulty': " + WARN,)),
    Rule("unknown input key", "§8 Loader", task={"input.locale": "en"},
         values={"task.input.content": "Coffee at Bean Bar $4.20"},
         warns=("field 'input.locale': " + WARN,)),
    Rule("unknown grader config key", "§8 Loader",
         task={"graders": [{"name": "card_completion", "config": {"strict": True}}]},
         values={"task.graders.0.config": {"strict": True}},
         warns=("field 'graders.0.config': grader 'card_completion': unknown config key "
                "'strict' ignored",)),
    Rule("unknown grader entry key (ours: same rule)", "§8 Loader",
         task={"graders": [{"name": "card_completion", "weight": 2}]},
         warns=("field 'graders.0.weight': " + WARN,)),
    Rule("unknown reference_solution key (ours: same rule)", "§8 Loader",
         task={"reference_solution": {"expected_outcome": {}, "notes": "x"}},
         warns=("field 'reference_solution.notes': " + WARN,)),
    Rule("camelCase task key is not an alias: ignored with a hint", "§8 Loader, §2",
         task={"trialsPerRun": 5}, values={"task.trials_per_run": 1},
         warns=("field 'trialsPerRun': unknown key, ignored. Did you mean 'trials_per_run'?",)),
    # --- camelCase suite keys (section 2) -----------------------------------------------------
    Rule("taskPassThreshold", "§2 suite.json", suite={"taskPassThreshold": 0.5},
         values={"config.task_pass_threshold": 0.5}),
    Rule("requireReferenceSolution", "§2 suite.json", suite={"requireReferenceSolution": True},
         task={"reference_solution": {"expected_outcome": {"terminal_path": "persist"}}},
         values={"config.require_reference_solution": True}),
    Rule("snake_case wins over camelCase (ours: with a warning)", "§2 suite.json",
         suite={"task_pass_threshold": 0.8, "taskPassThreshold": 0.2},
         values={"config.task_pass_threshold": 0.8},
         warns=("field 'taskPassThreshold': ignored, 'task_pass_threshold' is also set",)),
    # --- defaults (section 2) ----------------------------------------------------------------
    Rule("kind missing is mixed", "§2 suite.json", suite={"kind": ...},
         values={"config.kind": "mixed"}),
    Rule("kind null is mixed", "§2 suite.json", suite={"kind": None},
         values={"config.kind": "mixed"}),
    Rule("threshold default 1.0", "§2 suite.json", values={"config.task_pass_threshold": 1.0}),
    Rule("require_reference_solution default false", "§2 suite.json",
         values={"config.require_reference_solution": False}),
    Rule("trials_per_run default 1, timeout 300", "§2 task.json",
         task={"trials_per_run": ...},
         values={"task.trials_per_run": 1, "task.timeout_seconds": 300}),
    Rule("content may be empty", "§2 task.json", task={"input.content": ""},
         values={"task.input.content": ""}),
    # --- conversions (section 8) -------------------------------------------------------------
    Rule("metadata values stringified", "§8 Loader",
         task={"metadata": {"failure_bucket": "b", "priority": 3, "flaky": True, "w": 0.5,
                            "none": None, "tags": ["a", 1]}},
         values={"task.metadata": {"failure_bucket": "b", "priority": "3", "flaky": "true",
                                   "w": "0.5", "none": "null", "tags": "[a, 1]"}}),
    Rule("metadata null is empty", "§8 Loader (null is missing)", task={"metadata": None},
         values={"task.metadata": {}, "task.bucket": "unbucketed"}),
    Rule("config null is {}", "§8 Loader",
         task={"graders": [{"name": "card_completion", "config": None}]},
         values={"task.graders.0.config": {}}),
    Rule("config missing is {}", "§8 Loader", task={"graders": [{"name": "card_completion"}]},
         values={"task.graders.0.config": {}}),
    Rule("unknown source is manual", "§8 Loader",
         task={"reference_solution": {"expected_outcome": {}, "source": "llm"}},
         values={"task.reference_solution.source": "manual"},
         warns=("field 'reference_solution.source': unknown source \"llm\" read as 'manual'",)),
    Rule("missing source is manual", "§2 task.json",
         task={"reference_solution": {"expected_outcome": {"a": 1}}},
         values={"task.reference_solution.source": "manual"}),
    Rule("trials_per_run '3' is 3", "§8 Loader", task={"trials_per_run": "3"},
         values={"task.trials_per_run": 3}, warns=("field 'trials_per_run': \"3\" read as 3",)),
    Rule("trials_per_run 2.0 is 2", "§8 Loader", task={"trials_per_run": 2.0},
         values={"task.trials_per_run": 2}, warns=("field 'trials_per_run': 2.0 read as 2",)),
    Rule("trials_per_run 2.9 is 2 (Dart toInt truncates)", "§8 Loader",
         task={"trials_per_run": 2.9}, values={"task.trials_per_run": 2},
         warns=("field 'trials_per_run': 2.9 read as 2",)),
    Rule("any non-empty agent_name loads", "§8 Loader", suite={"agent_name": "mail_agent"},
         values={"config.agent_name": "mail_agent"}),
    # --- grader configs the original accepts (section 8) ------------------------------------
    Rule("empty expected_template_ids loads", "§8 Loader",
         task={"graders": [{"name": "card_template_choice",
                            "config": {"expected_template_ids": []}}]},
         values={"task.graders.0.config": {"expected_template_ids": []}}),
    Rule("empty substrings loads", "§8 Loader",
         task={"graders": [{"name": "card_must_contain", "config": {"substrings": []}}]}),
    Rule("expected_files null loads", "§8 Loader", suite={"agent_name": "pkm_agent"},
         task={"graders": [{"name": "pkm_routed_correctly",
                            "config": {"expected_buckets": ["Areas"], "expected_files": None}}]}),
    Rule("empty seed_marker loads", "§8 Loader", suite={"agent_name": "pkm_agent"},
         task={"graders": [{"name": "pkm_no_overwrite", "config": {"seed_marker": ""}}]}),
    Rule("pkm_routed_correctly needs expected_buckets", "§8 Loader",
         suite={"agent_name": "pkm_agent"},
         task={"graders": [{"name": "pkm_routed_correctly", "config": {}}]},
         refused="field 'graders.0.config'"),
    # --- errors that stop loading (section 2) ------------------------------------------------
    Rule("missing id", "§2 errors", task={"id": ...}, refused="field 'id'"),
    Rule("missing description", "§2 errors", task={"description": ...},
         refused="field 'description'"),
    Rule("empty graders", "§2 errors", task={"graders": []}, refused="field 'graders'"),
    Rule("unknown grader, with the known ones", "§2 errors",
         task={"graders": [{"name": "card_colour"}]},
         refused="for the bundled card_agent only: card_completion"),
    Rule("unknown kind", "§2 suite.json", suite={"kind": "nightly"}, refused="field 'kind'",
         file="suite.json"),
    Rule("missing agent_name", "§2 suite.json", suite={"agent_name": ...},
         refused="field 'agent_name'", file="suite.json"),
    Rule("empty agent_name", "§8 Loader (non-empty)", suite={"agent_name": ""},
         refused="field 'agent_name'", file="suite.json"),
    Rule("threshold above 1", "§2 suite.json", suite={"task_pass_threshold": 1.01},
         refused="field 'task_pass_threshold'", file="suite.json"),
]


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_loader_rule(tmp_path: Path, rule: Rule) -> None:
    root = write_rule_suite(tmp_path / "suite", rule)
    if rule.refused is not None:
        with pytest.raises(SuiteError) as info:
            load_suite(root)
        message = str(info.value)
        assert message.startswith(f"{(root / rule.file).resolve()}: "), message
        assert rule.refused in message
        return
    suite = load_suite(root)
    for path, expected in rule.values.items():
        assert _value(suite, path) == expected, path
    for text in rule.warns:
        assert any(text in w for w in suite.warnings), suite.warnings
    if not rule.warns:
        assert suite.warnings == ()
    for warning in suite.warnings:
        assert warning.startswith(f"{root.resolve()}/") and ": field '" in warning


def test_an_agent_we_cannot_run_fails_by_name_when_run(tmp_path: Path) -> None:
    """§8: the suite loads; running it is refused before any trial, naming the agent."""
    root = write_rule_suite(tmp_path / "s", Rule("x", "§8", suite={"agent_name": "mail_agent"}))
    suite = load_suite(root)
    with pytest.raises(SuiteError, match=r"unknown agent 'mail_agent'.*card_agent, pkm_agent"):
        check_runnable(suite)


def test_every_json_under_tasks_in_full_path_order(tmp_path: Path) -> None:
    """§2: every *.json under tasks/ recursively, sorted by full path, is a task (whatever its
    file name); ours skips the files of a task's workspace/ overlay, which are fixture data."""
    root = tmp_path / "s"
    sb.suite(root, [])
    for rel, task_id in [("b/one/task.json", "b1"), ("a/two/case.json", "a2"),
                         ("a/one/task.json", "a1"), ("a/one/workspace/PKM/x.json", None)]:
        body = {"note": "fixture"} if task_id is None else sb.task(task_id, "x", 1, graders=CARD)
        sb.write_json(root / "tasks" / rel, body)
    assert [t.id for t in load_suite(root).tasks] == ["a1", "a2", "b1"]


def test_fixture_paths_are_relative_to_the_suite_root(tmp_path: Path) -> None:
    """§2: `fixture_dir` and `base_fixture` are relative to the suite root, and the shared
    base fixtures live in `_<name>_pkm` inside it."""
    root = tmp_path / "s"
    (root / "_demo_pkm" / "PKM" / "Areas").mkdir(parents=True)
    overlay = root / "tasks" / "cases" / "t" / "workspace" / "PKM"
    overlay.mkdir(parents=True)
    (overlay / "note.md").write_text("# note\n", encoding="utf-8")
    rule = Rule("x", "§2", task={"input.base_fixture": "_demo_pkm",
                                 "input.fixture_dir": "tasks/cases/t/workspace"})
    task = load_suite(write_rule_suite(root, rule)).tasks[0]
    assert task.base_fixture == (root / "_demo_pkm").resolve()
    assert task.fixture_dir == (root / "tasks" / "cases" / "t" / "workspace").resolve()


def test_our_suites_load_without_warnings() -> None:
    """Every suite we ship loads under these rules and needs none of the leniency."""
    from promptloop.optimizer.core.suites import TASKS_DIR

    suites = [load_suite(p.parent) for p in sorted(TASKS_DIR.glob("*/*/suite.json"))]
    assert len(suites) == 6 and sum(len(s.tasks) for s in suites) == 117
    for s in suites:
        check_runnable(s)
        assert s.warnings == ()
