"""`promptloop agent NAME` for any agent: one trial through the same road as `eval` (the
agent's adapter, the model gateway, its graders), on one task of its suites or on an input
given on the command line, and what came of it: the outcome, the grades and the conversation.
Nothing is stored in the run store (it is a look at one trial, not a run)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from promptloop.agents.runtime import DEFAULT_MAX_TURNS, RuntimeConfig
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.events import EventSink, Phase, ignore
from promptloop.optimizer.core.project import active_project
from promptloop.optimizer.core.suites import Suite, check_runnable, load_suite
from promptloop.optimizer.run.agents import in_process
from promptloop.optimizer.run.models import ModelIds, ModelSet
from promptloop.optimizer.run.runner import RunOptions, needs_judge, run_suite
from promptloop.optimizer.workflows.sources import RepoSource

ADHOC_GRADERS = [{"name": "json_schema", "config": {"schema": {"type": "object"}}}]
"""The one grader of an input given on the command line: the outcome is a JSON object."""


@dataclass(frozen=True)
class AgentTrialRequest:
    agent: str
    state_dir: Path
    models: ModelIds = field(default_factory=ModelIds)
    task_id: str | None = None
    """A task of the agent's suites (default: the first task of `suite`)."""
    suite: str | None = None
    """One of its suites (a name, or a path); default: its first."""
    content: str | None = None
    """Run this input (a task's `input.content`) instead of a task."""
    published_at: str | None = None
    max_turns: int = DEFAULT_MAX_TURNS


class ShownMessage(BaseModel):
    role: str
    content: str
    tool_calls: list[dict[str, Any]] = []


class AgentTrialResult(BaseModel):
    agent: str
    suite: str
    task_id: str
    input: dict[str, Any]
    status: str
    failure_reason: str | None = None
    outcome: dict[str, Any]
    scores: list[dict[str, Any]]
    messages: list[ShownMessage]
    events: list[str]
    summary: str


def is_in_process(agent: str) -> bool:
    """Whether `agent` runs inside promptloop's agent loop (the bundled card and PKM agents),
    whose `promptloop agent --content` shows their card or PKM diff."""
    return in_process(active_project().agent(agent))


def _adhoc(agent: str, content: str, published_at: str | None, folder: Path) -> Suite:
    """A one-task JSONL suite for an input given on the command line."""
    task: dict[str, Any] = {"id": "cli-input", "input": {"content": content},
                            "graders": ADHOC_GRADERS}
    if published_at:
        task["published_at"] = published_at
    path = folder / "input.jsonl"
    header = {"suite": {"name": f"{agent}_cli", "agent_name": agent}}
    path.write_text(json.dumps(header) + "\n" + json.dumps(task) + "\n", encoding="utf-8")
    return load_suite(path, agent)


def _task_suite(req: AgentTrialRequest, source: RepoSource) -> Suite:
    folders = source.suite_folders(req.agent)
    if not folders and req.suite is None:
        raise ConfigError(source.missing_suite(req.agent, "capability"))
    which = req.suite or next(iter(folders))
    if req.task_id is not None and req.suite is None:  # the suite holding the task
        for name in folders:
            found = source.suite(req.agent, name)
            if found is not None and found.folder is not None:
                suite = load_suite(found.folder, req.agent)
                if any(t.id == req.task_id for t in suite.tasks):
                    which = name
                    break
    found = source.suite(req.agent, which)
    head, _, rest = which.partition("/")
    if (found is None or found.folder is None) and head == req.agent and rest:
        found = source.suite(req.agent, rest)  # AGENT/SUITE, as every command takes it
    if found is None or found.folder is None:
        raise ConfigError(source.missing_suite(req.agent, which))
    suite = load_suite(found.folder, req.agent)
    check_runnable(suite)
    task_id = req.task_id or suite.tasks[0].id
    return suite.select(task_ids=[task_id])


async def run_agent_trial(req: AgentTrialRequest, emit: EventSink | None = None
                          ) -> AgentTrialResult:
    """One trial of `req.agent` through its adapter, graded as in `eval`."""
    emit = emit or ignore
    with tempfile.TemporaryDirectory(prefix="promptloop-agent-") as tmp:
        with RepoSource.find(None, req.state_dir) as source:
            suite = (_adhoc(req.agent, req.content, req.published_at, Path(tmp))
                     if req.content is not None else _task_suite(req, source))
            prompt = source.prompt(req.agent)
        for item in source.served:
            emit(Phase(message=item.line()))
        options = RunOptions(agent_model=req.models.agent, state_dir=req.state_dir,
                             prompt_text=prompt.text, prompt_source=prompt, trials=1,
                             reuse=False, label=f"agent {req.agent}",
                             runtime=RuntimeConfig(max_turns=req.max_turns))
        async with ModelSet(req.models) as models:
            judged = needs_judge(suite)
            await models.preflight("agent", *(("judge",) if judged else ()))
            judge = models.judge if judged else None
            options = replace(options, agent_model=models.ids.agent,
                              judge_model=models.ids.judge_id if judge is not None else None)
            run = await run_suite(suite, options, models.agent, judge, emit)
    [task] = suite.tasks
    trial = run.trials[0]
    messages = [ShownMessage(role=m.role, content=m.content,
                             tool_calls=[{"name": c.name, "arguments": c.arguments}
                                         for c in m.tool_calls])
                for m in trial.transcript.messages]
    return AgentTrialResult(
        agent=req.agent, suite=suite.name, task_id=task.id, input=task.spec.input.declared(),
        status=trial.status, failure_reason=trial.failure_reason, outcome=trial.outcome,
        scores=[s.model_dump(mode="json", exclude={"assertions"}) for s in trial.scores],
        messages=messages, events=[f"{e.kind}: {e.detail}" for e in trial.transcript.events],
        summary=trial.transcript.summary())


__all__ = ["AgentTrialRequest", "AgentTrialResult", "is_in_process", "run_agent_trial"]
