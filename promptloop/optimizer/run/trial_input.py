"""What one trial's agent is given, and what else keys its cached result (docs/compat.md).

The publish time of a task, for every agent (the bundled ones' AgentInput and an adapter
request's `published_at` alike, `published_at_for`): the task's own `published_at` where it
gives one; else, in a suite that sets `clock` (suite.json or a JSONL header), that clock;
else, for a task with a fact id, its fact entry's time as the original harness has it: the date
from the fact id and the time from the `## <id:ts_N> HH:MM:SS` header in the fixture's daily
fact file, so "tomorrow" resolves against the fixture (without such a header, the suite clock's
time of day on the fact id's date); else the suite clock. The time carries its UTC offset: a
naive time is read in the machine's zone, as the original harness reads the device's local
time.

Kept apart from runner.py so the trial code only calls these few functions.
"""

from __future__ import annotations

import functools
from datetime import date, datetime, time
from pathlib import Path

from promptloop.agents.base import AgentInput
from promptloop.agents.workspace import FactId, FactIdError, entry_time
from promptloop.graders.general import command_grader_digest
from promptloop.optimizer.core.suites import LoadedTask, Suite


def suite_clock_pinned(suite: Suite) -> bool:
    """True when suite.json sets its own `clock` (not the loader's default)."""
    return "clock" in suite.config.model_fields_set


def _with_zone(at: datetime, zone_from: datetime) -> datetime:
    if at.tzinfo is not None:
        return at
    return at.replace(tzinfo=zone_from.tzinfo) if zone_from.tzinfo else at.astimezone()


def fixture_fact_file(task: LoadedTask, fact: FactId) -> Path | None:
    """The daily fact file a trial workspace gets for `fact`: the overlay's copy replaces the
    base fixture's (the workspace is the base with the overlay copied on top)."""
    for folder in (task.fixture_dir, task.base_fixture):
        if folder is not None and (folder / fact.fact_file).is_file():
            return folder / fact.fact_file
    return None


def task_published_at(suite: Suite, task: LoadedTask) -> datetime:
    """The publish time of `task`, with its UTC offset (see the module docstring)."""
    clock = suite.published_at
    own = task.spec.own_published_at
    if own is not None:
        given = datetime.fromisoformat(own)
        return _with_zone(given, given)
    if suite_clock_pinned(suite) or task.spec.input.fact_id is None:
        return _with_zone(clock, clock)
    try:
        fact = FactId.parse(task.spec.input.fact_id)
        day = date(int(fact.year), int(fact.month), int(fact.day))
    except (FactIdError, ValueError):
        return _with_zone(clock, clock)
    path = fixture_fact_file(task, fact)
    at = _entry_time_in(path, path.stat().st_mtime_ns, fact.ts) if path is not None else None
    return _with_zone(datetime.combine(day, at or clock.time()), clock)


@functools.lru_cache(maxsize=1024)
def _entry_time_in(path: Path, _mtime_ns: int, ts: str) -> time | None:
    """The fact header's time in a fixture file, read once per file version (every trial of
    a task asks twice: for its cache key and for its input)."""
    return entry_time(path.read_text(encoding="utf-8"), ts)


def published_at_for(suite: Suite, task: LoadedTask) -> str:
    """The publish time any agent is given for `task` (ISO 8601 with its UTC offset): the
    bundled agents' AgentInput and an adapter request's `published_at` are the same."""
    return task_published_at(suite, task).isoformat()


def agent_input_for(suite: Suite, task: LoadedTask) -> AgentInput:
    """The input one trial's bundled agent gets: fact id, content, publish time, user
    language. A task without a fact id gets the first entry of its publish day (the bundled
    agents file every input under one)."""
    published = task_published_at(suite, task)
    return AgentInput(
        fact_id=task.spec.input.fact_id or f"{published:%Y/%m/%d}.md#ts_1",
        content=task.spec.input.content,
        published_at=published,
        user_language=task.spec.metadata.get("user_language", "English"),
    )


def trial_variant(base: str, suite: Suite, task: LoadedTask, agent_options: str = "") -> str:
    """The cache variant of one task's trials: the runtime limits (`base`), plus what else
    decides its result: the publish time, the suite's pass threshold (a trial's pass is decided
    with it), the agent options and the command graders it names (their scripts' bytes)."""
    published = task_published_at(suite, task).isoformat()
    threshold = suite.config.task_pass_threshold
    variant = f"{base},published={published},threshold={threshold:g},agent={agent_options}"
    graders = command_grader_digest([str(g.config.get("grader", "")) for g in task.spec.graders
                                     if g.name == "command"])
    return f"{variant},graders={graders}" if graders else variant
