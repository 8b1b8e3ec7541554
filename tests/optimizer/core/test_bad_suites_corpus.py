"""An adversarial corpus of malformed suites, run through the real CLI (`promptloop eval --suite
<folder>`). Every case must end with exit code 1, one error line naming the file and the field,
no traceback, and nothing written to the state folder (no partial run).

Where the original harness accepts an input (docs/compat.md, "Loader"), the corpus must not
demand its refusal: the rows below that sit next to a section 8 rule say which rule decides, and
`test_tolerated_inputs_run` runs the accepting side of those rules through the same CLI.
tests/compat/test_loader_compat.py holds the full table of the original's loading rules.

Size limits (ours; the original has none): a suite or task file larger than
`MAX_JSON_BYTES` is refused unread, and a string value longer than `MAX_STRING_CHARS`
characters is refused with its field named (see optimizer/core/suite_files.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from tests.compat.test_loader_compat import RULES, Rule, write_rule_suite
from tests.optimizer import suite_builder as sb

runner = CliRunner()
TASK = "tasks/cases/t/task.json"
SUITE = "suite.json"
FIFTY_MB = 50 * 1024 * 1024


def _task(**changes: Any) -> dict[str, Any]:
    """One valid card task (one trial, the completion grader) with `changes` applied; a value
    of `...` deletes the key."""
    data = sb.task("t", "Coffee at Bean Bar $4.20", 1, trials=1,
                   graders=[{"name": "card_completion", "config": {}}])
    for key, value in changes.items():
        target, name = (data["input"], key[6:]) if key.startswith("input_") else (data, key)
        if value is ...:
            del target[name]
        else:
            target[name] = value
    return data


def _write(root: Path, *, suite: dict[str, Any] | None = None, task: Any = None,
           raw_task: bytes | None = None, raw_suite: bytes | None = None) -> None:
    """A one-task card suite at `root`, with the given suite.json / task.json contents."""
    config = {"name": "bad", "agent_name": "card_agent", "kind": "capability"}
    config |= suite or {}
    config = {k: v for k, v in config.items() if v is not ...}
    sb.write_json(root / SUITE, config)
    sb.write_json(root / TASK, _task() if task is None else task)
    if raw_task is not None:
        (root / TASK).write_bytes(raw_task)
    if raw_suite is not None:
        (root / SUITE).write_bytes(raw_suite)


Build = Callable[[Path], None]


@dataclass(frozen=True)
class Case:
    name: str
    build: Build
    file: str
    """The file the message must name, relative to the suite root."""
    field: str
    """Text naming the field (or, for a file that is not JSON, the place) of the problem."""
    also: tuple[str, ...] = field(default=())
    """More text the message must hold (the list of known names, a limit...)."""


def _suite(**changes: Any) -> Build:
    return lambda root: _write(root, suite=changes)


def _with(**changes: Any) -> Build:
    return lambda root: _write(root, task=_task(**changes))


def _raw_task(data: bytes) -> Build:
    return lambda root: _write(root, raw_task=data)


def _duplicate_ids(root: Path) -> None:
    _write(root)
    sb.write_json(root / "tasks" / "cases" / "u" / "task.json", _task())


def _outside(root: Path) -> str:
    """A real folder next to the suite root (so only the escape check can refuse it)."""
    out = root.parent / "outside"
    (out / "Facts").mkdir(parents=True, exist_ok=True)
    (out / "Facts" / "secret.md").write_text("host data\n", encoding="utf-8")
    return str(out)


def _fixture_escape(key: str, absolute: bool) -> Build:
    def build(root: Path) -> None:
        out = _outside(root)
        _write(root, task=_task(**{f"input_{key}": out if absolute else "../outside"}))
    return build


def _symlink_out(root: Path) -> None:
    out = Path(_outside(root))
    overlay = root / "tasks" / "cases" / "t" / "workspace" / "PKM"
    overlay.mkdir(parents=True)
    os.symlink(out / "Facts" / "secret.md", overlay / "leak.md")
    _write(root, task=_task(input_fixture_dir="tasks/cases/t/workspace"))


def _no_tasks(root: Path) -> None:
    sb.write_json(root / SUITE, {"name": "bad", "agent_name": "card_agent"})


def _needs_reference(root: Path) -> None:
    _write(root, suite={"require_reference_solution": True})


def _fifty_mb(root: Path) -> None:
    _write(root)
    body = json.dumps(_task()).replace('"Coffee at Bean Bar $4.20"', '"' + "x" * FIFTY_MB + '"')
    (root / TASK).write_text(body, encoding="utf-8")


def _huge_file(root: Path) -> None:
    _write(root)
    with (root / TASK).open("ab") as f:
        f.truncate(70 * 1024 * 1024)  # sparse: refused by its size, never read


KNOWN = ("Known graders: general (any agent): command, json_path",
         "for the bundled card_agent only: card_completion, card_must_contain")

CASES = [
    # --- files that are not a JSON object (docs/suites.md: errors stop loading) ----------------
    Case("task not JSON", _raw_task(b'{"id": "t", "description": '), TASK, "line 1 column"),
    Case("suite not JSON", lambda r: _write(r, raw_suite=b"{name: bad}"), SUITE, "line 1 column"),
    Case("task is a list", _raw_task(b"[]"), TASK, "(root)", ("JSON object",)),
    Case("suite is a list", lambda r: _write(r, raw_suite=b'["bad"]'), SUITE, "(root)"),
    Case("task is empty", _raw_task(b""), TASK, "line 1 column"),
    Case("byte order mark", _raw_task(b"\xef\xbb\xbf" + json.dumps(_task()).encode()),
         TASK, "byte order mark"),
    Case("not UTF-8", _raw_task(json.dumps(_task()).encode().replace(b"Bean", b"B\xe9an")),
         TASK, "UTF-8"),
    Case("nested 100k deep", _raw_task(b"[" * 100_000 + b"]" * 100_000), TASK, "(root)",
         ("nested",)),
    # --- required fields and their types ------------------------------------------------------
    Case("missing id", _with(id=...), TASK, "field 'id'", ("required",)),
    Case("null id", _with(id=None), TASK, "field 'id'"),
    Case("numeric id", _with(id=7), TASK, "field 'id'", ("string",)),
    Case("empty id", _with(id=""), TASK, "field 'id'"),
    # issue 19: a whitespace-only id is as empty as "" (it used to load)
    Case("blank id", _with(id=" \t "), TASK, "field 'id'", ("blank",)),
    Case("missing description", _with(description=...), TASK, "field 'description'"),
    Case("duplicate ids", _duplicate_ids, "tasks/cases/u/task.json", "field 'id'",
         ("duplicate task id 't'",)),
    Case("missing input", _with(input=...), TASK, "field 'input'"),
    Case("content is a number", _with(input_content=42), TASK, "field 'input.content'"),
    # docs/suites.md gives the fact id format and section 8 relaxes nothing about it.
    Case("malformed fact id", _with(input_fact_id="2026-03-14#1"), TASK, "field 'input.fact_id'",
         ("YYYY/MM/DD.md#ts_N",)),
    Case("impossible fact date", _with(input_fact_id="2026/02/30.md#ts_1"), TASK,
         "field 'input.fact_id'", ("calendar",)),
    Case("metadata is a list", _with(metadata=["a"]), TASK, "field 'metadata'"),
    Case("reference solution is text", _with(reference_solution="persist"), TASK,
         "field 'reference_solution'"),
    Case("reference required by the suite", _needs_reference, TASK, "field 'reference_solution'"),
    # --- graders ------------------------------------------------------------------------------
    Case("empty graders", _with(graders=[]), TASK, "field 'graders'"),
    Case("graders is an object", _with(graders={"name": "card_completion"}), TASK,
         "field 'graders'"),
    Case("unknown grader", _with(graders=[{"name": "card_completoin"}]), TASK,
         "field 'graders.0.name'", ("Did you mean 'card_completion'?", *KNOWN)),
    Case("grader name with markup", _with(graders=[{"name": "[/bold]x"}]), TASK,
         "field 'graders.0.name'", ("'[/bold]x'", *KNOWN)),
    Case("grader entry is a string", _with(graders=["card_completion"]), TASK,
         "field 'graders.0'"),
    # docs/compat.md: `config: null` means {} (tolerated); a string is not a config.
    Case("config is a string", _with(graders=[{"name": "card_completion", "config": "x"}]),
         TASK, "field 'graders.0.config'"),
    Case("config value of the wrong type",
         _with(graders=[{"name": "card_must_contain", "config": {"substrings": "coffee"}}]),
         TASK, "field 'graders.0.config'", ("substrings",)),
    Case("config without a required key",
         _with(graders=[{"name": "card_template_choice", "config": {}}]),
         TASK, "field 'graders.0.config'", ("expected_template_ids",)),
    # --- numbers: docs/compat.md coerces trials_per_run to int; none of these has one ---------
    Case("trials 0", _with(trials_per_run=0), TASK, "field 'trials_per_run'"),
    Case("trials negative", _with(trials_per_run=-2), TASK, "field 'trials_per_run'"),
    Case("trials not a number", _with(trials_per_run="many"), TASK, "field 'trials_per_run'"),
    Case("trials a boolean", _with(trials_per_run=True), TASK, "field 'trials_per_run'"),
    Case("trials beyond the limit", _with(trials_per_run=10**12), TASK,
         "field 'trials_per_run'", ("1000",)),
    Case("timeout NaN", _raw_task(json.dumps(_task(timeout_seconds=float("nan"))).encode()),
         TASK, "field 'timeout_seconds'"),
    Case("timeout negative", _with(timeout_seconds=-1), TASK, "field 'timeout_seconds'"),
    # --- suite.json ---------------------------------------------------------------------------
    Case("threshold NaN", lambda r: _write(r, raw_suite=b'{"name": "bad", "agent_name": '
                                                        b'"card_agent", "task_pass_threshold": '
                                                        b"NaN}"),
         SUITE, "field 'task_pass_threshold'"),
    Case("threshold above 1", _suite(task_pass_threshold=1.5), SUITE,
         "field 'task_pass_threshold'"),
    Case("camelCase threshold text", _suite(taskPassThreshold="high"), SUITE,
         "field 'taskPassThreshold'"),
    # docs/suites.md: missing kind -> mixed, unknown kind -> error.
    Case("unknown kind", _suite(kind="nightly"), SUITE, "field 'kind'"),
    Case("missing name", _suite(name=...), SUITE, "field 'name'"),
    # The name starts every run's file name: these ran every trial, then could not be saved.
    Case("suite name with a slash", _suite(name="card/v2"), SUITE, "field 'name'", ("'/'",)),
    Case("suite name with a leading dot", _suite(name=".card"), SUITE, "field 'name'"),
    Case("suite name with a NUL", _suite(name="card\u0000"), SUITE, "field 'name'"),
    Case("suite name of 300 characters", _suite(name="n" * 300), SUITE, "field 'name'",
         ("200 bytes",)),
    # docs/compat.md: any non-empty agent_name loads; empty is still refused.
    Case("empty agent name", _suite(agent_name=""), SUITE, "field 'agent_name'"),
    # ...and an agent we cannot run fails when the suite is run, by name, before any trial.
    Case("agent we cannot run", _suite(agent_name="pkm_agnet"), SUITE, "field 'agent_name'",
         ("unknown agent 'pkm_agnet'", "Did you mean 'pkm_agent'?", "card_agent, pkm_agent")),
    Case("no task files", _no_tasks, "tasks", "no task.json files"),
    # --- fixtures: relative to the suite root and inside it ----------------------------------
    Case("missing fixture", _with(input_fixture_dir="tasks/cases/t/workspace"), TASK,
         "field 'input.fixture_dir'", ("not found",)),
    Case("fixture_dir escapes the root", _fixture_escape("fixture_dir", False), TASK,
         "field 'input.fixture_dir'", ("outside the suite root",)),
    Case("fixture_dir absolute", _fixture_escape("fixture_dir", True), TASK,
         "field 'input.fixture_dir'", ("outside the suite root",)),
    Case("base_fixture escapes the root", _fixture_escape("base_fixture", False), TASK,
         "field 'input.base_fixture'", ("outside the suite root",)),
    Case("symlink out of the fixture", _symlink_out, TASK, "field 'input.fixture_dir'",
         ("symlink",)),
    # --- size limits (ours) -------------------------------------------------------------------
    Case("50 MB content string", _fifty_mb, TASK, "field 'input.content'", ("100000",)),
    Case("70 MB task file", _huge_file, TASK, "(file)", ("64 MiB",)),
]


def _eval(root: Path, state: Path) -> Any:
    return runner.invoke(
        app, ["eval", "--suite", str(root), "--out", str(state), "--agent-model", "scripted:card"]
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_suite_is_refused_whole(tmp_path: Path, case: Case) -> None:
    root, state = tmp_path / "suite", tmp_path / "state"
    case.build(root)
    started = time.monotonic()
    result = _eval(root, state)
    elapsed = time.monotonic() - started
    output = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in output, output
    assert result.exit_code == 1, output
    lines = [x for x in output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), output
    line = lines[0]
    named = (root / case.file).resolve()
    assert f"{named}: " in line, output
    for text in (case.field, *case.also):
        assert text in line, f"{text!r} not in {output}"
    written = [p for p in state.rglob("*") if p.is_file()] if state.exists() else []
    assert written == [], f"partial run left {written}"
    assert elapsed < 20, f"took {elapsed:.1f}s"


def test_corpus_size() -> None:
    assert len(CASES) >= 20
    assert len({c.name for c in CASES}) == len(CASES)


# --- what the original accepts must run (docs/compat.md decides) --------------------------------

TOLERATED = [r for r in RULES if r.refused is None and "agent_name" not in r.suite]


@pytest.mark.parametrize("rule", TOLERATED, ids=[r.name for r in TOLERATED])
def test_tolerated_inputs_run(tmp_path: Path, rule: Rule) -> None:
    """The loading rows of the compatibility table run through the same CLI: exit 0, a saved
    run, and each warning of the loader shown as a warning."""
    root, state = write_rule_suite(tmp_path / "suite", rule), tmp_path / "state"
    result = _eval(root, state)
    assert result.exit_code == 0, result.output
    assert (state / "runs" / "index.jsonl").is_file()
    shown = " ".join(result.output.split())
    for text in rule.warns:
        assert "Warning:" in shown and text in shown, result.output
