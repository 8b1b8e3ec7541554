"""Run a suite: every planned trial (run/trial.py), concurrently, into one `RunResult`.

Trials run concurrently under a semaphore; each has a timeout that cancels the agent. A trial
that hits an infrastructure error (provider down, key rejected, replay miss) is `errored` and
never scored as an agent failure. Unchanged trials are served from the trial cache.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from promptloop.agents.base import load_prompt
from promptloop.agents.llm.batch_backends import backend_for
from promptloop.agents.llm.rounds import RoundBatchingClient
from promptloop.agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings, ToolSpec
from promptloop.graders.general import set_command_graders
from promptloop.graders.registry import is_judge
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.events import (
    EventSink,
    RunFinished,
    RunStarted,
    RunWarning,
    TrialFinished,
    TrialStarted,
    ignore,
)
from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.core.project import Agent, active_project
from promptloop.optimizer.core.prompt_target import open_target
from promptloop.optimizer.core.results import Provenance, RunResult, TaskInfo, TrialResult
from promptloop.optimizer.core.suites import LoadedTask, Suite
from promptloop.optimizer.run.adaptive import AdaptiveLimit, overloaded, provider_key
from promptloop.optimizer.run.agents import open_link
from promptloop.optimizer.run.batching import JudgeBatch
from promptloop.optimizer.run.cache import request_key, text_hash, trial_cache_key
from promptloop.optimizer.run.external import AgentLink, adapter_variant
from promptloop.optimizer.run.trial import RunOptions, grade_held, judge_salt, run_trial
from promptloop.optimizer.run.trial_input import trial_variant
from promptloop.optimizer.run.usage import MeteredClient
from promptloop.optimizer.run.workspaces import sweep_stale_trials

DEFAULT_CONCURRENCY = 4
"""Trials at once unless the agent's table says otherwise (`concurrency`, promptloop.toml)."""


class AllTrialsErroredError(Exception):
    """Every trial of a run errored: an infrastructure failure, not a 0% pass rate."""


def default_concurrency(agent_name: str, options: RunOptions) -> int:
    """Trials at once: `--concurrency`; else 1 on the embedded model (it serves one request at
    a time: more only queues); else the agent table's `concurrency`; else the default."""
    if options.concurrency:
        return options.concurrency
    if options.agent_model.startswith("local:"):
        return 1
    project = active_project()
    own = project.agents[agent_name].concurrency if agent_name in project.agents else None
    return own or DEFAULT_CONCURRENCY


def _working_tree_prompt(agent_name: str, prompts_dir: Path | None) -> str:
    """The agent's first prompt target as the working tree holds it (`prompts_dir`: the
    `<agent>.md` there; a Python caller's choice, e.g. a benchmark or a test)."""
    if prompts_dir is not None:
        return load_prompt(agent_name, prompts_dir)
    project = active_project()
    agent = project.agent(agent_name)
    target = agent.target()
    path = (project.root or Path.cwd()) / target.path
    if not path.is_file() and project.path is None:
        return load_prompt(agent_name)  # promptloop's own agent, outside its repository
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{project.where}: {agent.target_key(target)}: cannot read {path}: "
                          f"{err.strerror}") from None
    return open_target(agent, target, text).text


def agent_link(agent_name: str, concurrency: int) -> AgentLink:
    """The run's link to the agent (its adapter, whatever the kind), and the command graders
    its tasks may name."""
    project = active_project()
    agent = project.agent(agent_name)
    set_command_graders({k: g.command for k, g in agent.config.graders.items()},
                        project.root or Path.cwd())
    return open_link(agent_name, concurrency)


def run_variant(options: RunOptions, agent: Agent, root: Path) -> str:
    """The cache variant every trial of a run shares: the runtime limits, an adapter
    agent's table, files and sandbox (`adapter_variant`), and batch mode."""
    rt = options.runtime
    variant = f"turns={rt.max_turns},runs={rt.max_runs},first={rt.require_tool_first_turn}"
    if not agent.config.spec.in_process:  # its adapter table and agent files decide its trials
        variant += f",adapter={adapter_variant(agent, root)}"
    if options.batch:  # the trial timeout counts agent time only (a batched turn's wait
        variant += ",batch"  # in the provider's queue is off the clock): kept apart
    return variant


def trial_cache_path(suite: Suite, task: LoadedTask, index: int, options: RunOptions,
                     prompt_hash: str, judged: bool, variant: str) -> Path:
    """Where the trial cache keeps trial `index` of `task` (the one keying: the runner reads
    and writes it, estimates count what it already holds)."""
    key = trial_cache_key(
        task.content_hash,
        prompt_hash,
        options.agent_model,
        options.judge_model if judged else None,
        index,
        trial_variant(variant, suite, task, options.agent_options.key()),
    )
    return options.state_dir / "cache" / "trials" / f"{key}.json"


def uncached_trials(suite: Suite, options: RunOptions, prompt: str) -> int:
    """How many of the run's planned trials the trial cache cannot serve (these call the
    model): keyed exactly as `run_suite` keys them, judged when the suite has judge graders."""
    if not options.reuse or options.mode == "record":
        return len(_trial_plan(suite, options))
    project = active_project()
    variant = run_variant(options, project.agent(suite.agent_name), project.root or Path.cwd())
    phash = text_hash(prompt)
    judged = needs_judge(suite)
    return sum(not trial_cache_path(suite, t, i, options, phash, judged, variant).is_file()
               for t, i in _trial_plan(suite, options))


def needs_judge(suite: Suite) -> bool:
    return any(is_judge(g.name) for t in suite.tasks for g in t.spec.graders)


def make_run_name(suite_name: str) -> str:
    return f"{suite_name}-{datetime.now(UTC):%Y%m%dT%H%M%S%f}"[:-3]


def _trial_plan(suite: Suite, options: RunOptions) -> list[tuple[LoadedTask, int]]:
    plan: list[tuple[LoadedTask, int]] = []
    for task in suite.tasks:
        n = options.trials or task.spec.trials_per_run
        indices = (options.trial_indices or {}).get(task.id, list(range(n)))
        plan.extend((task, i) for i in indices)
    return plan


async def _warn_and_preflight(
    suite: Suite,
    options: RunOptions,
    agent: ModelClient | None,
    judge: ModelClient | None,
    emit: EventSink,
) -> None:
    judged = needs_judge(suite)
    if judge is None and judged and options.mode != "replay":
        emit(RunWarning(message="suite has judge graders but no judge model: they score null"))
    if judge is not None and judged and options.judge_model == options.agent_model:
        emit(
            RunWarning(
                message=f"the judge is the agent model itself ({options.agent_model}): judge "
                "scores are not independent; pass --judge-model for a stronger judge"
            )
        )
    if (options.batch and options.mode != "replay" and agent is not None
            and backend_for(agent) is not None and not batches_agent_turns(suite.agent_name)):
        emit(RunWarning(message=f"--batch: {suite.agent_name}'s model calls go direct (an "
                        "agent behind the gateway keeps its own time limit, which a batch's "
                        "hours would run out); its judge calls are batched"))
    if options.mode != "replay":
        assert agent is not None, "a live or record run needs an agent model"
        await agent.preflight()
        if judge is not None and judged:
            await judge.preflight()


async def run_suite(
    suite: Suite,
    options: RunOptions,
    agent: ModelClient | None,
    judge: ModelClient | None = None,
    emit: EventSink | None = None,
    provenance: Provenance | None = None,
) -> RunResult:
    """Run every planned trial of `suite` and return the run (not yet written to disk).

    Reports `RunStarted`, `TrialStarted`/`TrialFinished` per trial and `RunFinished` to `emit`.
    """
    emit = emit or ignore
    prompt = (
        options.prompt_text
        if options.prompt_text is not None
        else _working_tree_prompt(suite.agent_name, options.prompts_dir)
    )
    await _warn_and_preflight(suite, options, agent, judge, emit)
    sweep_stale_trials()
    plan = _trial_plan(suite, options)
    run_name = options.run_name or make_run_name(suite.name)
    started = datetime.now(UTC)
    emit(RunStarted(run=run_name, label=options.label, suite=suite.name, total=len(plan)))
    agent = _agent_rounds(options, agent, len(plan), suite.agent_name)
    trial = _TrialRunner(suite, options, prompt, agent, judge, run_name, emit, len(plan))
    try:
        trials = await trial.finish(await asyncio.gather(*(trial(t, i) for t, i in plan)))
    finally:
        await trial.link.aclose()
    run = RunResult(
        run_name=run_name,
        suite_name=suite.name,
        suite_kind=suite.config.kind,
        agent_name=suite.agent_name,
        suite_root=str(suite.root),
        task_ids=[t.id for t in suite.tasks],
        task_buckets={t.id: t.bucket for t in suite.tasks},
        task_info={t.id: TaskInfo.of(t.spec.description, t.spec.metadata, t.spec.input)
                   for t in suite.tasks},
        task_pass_threshold=suite.config.task_pass_threshold,
        require_reference_solution=suite.config.require_reference_solution,
        trials_per_task={t.id: options.trials or t.spec.trials_per_run for t in suite.tasks},
        started_at=started,
        ended_at=datetime.now(UTC),
        provenance=(provenance or Provenance()).model_copy(
            update={
                "prompt_hashes": {suite.agent_name: trial.prompt_hash},
                "suite_hash": suite.content_hash,
                "agent_model": options.agent_model,
                "judge_model": options.judge_model,
                "mode": options.mode,
                "judge_batched": (trial.batch is not None
                                  and trial.batch.report.batch_id is not None),
                "agent_batched": (isinstance(agent, RoundBatchingClient)
                                  and any(r.batch_id for r in agent.reports)),
            }
        ),
        trials=list(trials),
        concurrency=trial.limit.stats if trial.live else None,
    )
    emit(RunFinished(run=run_name, suite=suite.name))
    return run


class _TrialRunner:
    """Runs one planned trial of a suite: from the trial cache when it holds it, else for real
    under the run's concurrency bound (and caches a decided result)."""

    def __init__(
        self,
        suite: Suite,
        options: RunOptions,
        prompt: str,
        agent: ModelClient | None,
        judge: ModelClient | None,
        run_name: str,
        emit: EventSink,
        planned: int = 1,
    ) -> None:
        self.suite, self.options, self.prompt = suite, options, prompt
        self.agent, self.judge = agent, judge
        self.run_name, self.emit = run_name, emit
        self.prompt_hash = text_hash(prompt)
        # batch mode: every trial at once, so a round holds every live trial (its requests
        # wait in the provider's queue, not on our connections)
        concurrency = (max(1, planned) if isinstance(agent, RoundBatchingClient)
                       else default_concurrency(suite.agent_name, options))
        self.limit = options.limit or AdaptiveLimit(concurrency,
                                                     provider=provider_key(options.agent_model))
        self.live = False
        self.batch = _judge_batch(suite, options, judge)
        self.held: dict[int, tuple[LoadedTask, Path]] = {}
        """Batch mode: trials (by id) whose judge replies are still to come."""
        self.link = agent_link(suite.agent_name, concurrency)
        self.variant = run_variant(options, self.link.agent, self.link.root)

    def _cache_path(self, task: LoadedTask, index: int) -> Path:
        return trial_cache_path(self.suite, task, index, self.options, self.prompt_hash,
                                self.judge is not None, self.variant)

    async def __call__(self, task: LoadedTask, index: int) -> TrialResult:
        path = self._cache_path(task, index)
        # a record run calls the models to record them: a cached trial would record nothing
        # (a team's record run served every trial from cache, and the replay then missed)
        if self.options.reuse and self.options.mode != "record" and path.is_file():
            result = TrialResult.model_validate_json(path.read_text(encoding="utf-8"))
            result = result.model_copy(update={"cached": True})
        else:
            slot = await self.limit.acquire()
            self.live = True
            result = None
            try:
                self.emit(TrialStarted(run=self.run_name, task=task.id, trial=index))
                t0 = time.perf_counter()
                result = await run_trial(
                    self.suite,
                    task,
                    index,
                    self.prompt,
                    self.agent,  # type: ignore[arg-type]  # None only in replay: never called
                    self.judge,
                    self.options,
                    self.batch,
                    self.link,
                )
                result.transcript.event("timing", f"{time.perf_counter() - t0:.3f}s")
            finally:
                await self.limit.release(slot, overloaded=result is not None and overloaded(result))
            if self.batch is not None and self.batch.is_held(judge_salt(self.suite, task, index)):
                self.held[id(result)] = (task, path)
                return result
            if result.status in ("passed", "failed"):
                atomic_write_text(path, result.model_dump_json())
        self._finished(task, result)
        return result

    def _finished(self, task: LoadedTask, result: TrialResult) -> None:
        self.emit(
            TrialFinished(
                run=self.run_name,
                task=task.id,
                trial=result.trial_index,
                bucket=task.bucket,
                status=result.status,
                cached=result.cached,
            )
        )

    async def finish(self, trials: list[TrialResult]) -> list[TrialResult]:
        """Batch mode: grade the held-back trials together, once each, their judge requests
        answered by one batch (run/batching.py); other trials are returned as they are."""
        if self.batch is None or not self.held:
            return trials
        batch = self.batch
        batch.expect()

        async def graded(result: TrialResult) -> TrialResult:
            if id(result) not in self.held:
                return result
            task, path = self.held[id(result)]
            result = await grade_held(self.suite, task, result, batch, self.options)
            if result.status in ("passed", "failed"):
                atomic_write_text(path, result.model_dump_json())
            self._finished(task, result)
            return result

        out = list(await asyncio.gather(*(graded(r) for r in trials)))
        if batch.report.direct:
            self.emit(RunWarning(message=f"--batch: {batch.report.note}; the judge was called "
                                 "directly"))
        return out


def batches_agent_turns(agent_name: str) -> bool:
    """Whether `--batch` batches this agent's turns: only an agent on promptloop's own loop
    (the `session` adapter, the bundled agents), whose trial clock stops while a turn waits
    in a batch. An agent behind the gateway (command, worker, http, python) keeps its own time
    limit, which hours in a provider's queue would run out, and its calls carry no trial
    identity to key them apart: it calls its model directly (its judge calls are batched)."""
    project = active_project()
    declared = project.agents.get(agent_name)
    return declared is None or declared.spec.adapter == "session"


def _agent_rounds(options: RunOptions, agent: ModelClient | None, planned: int,
                  agent_name: str = "") -> ModelClient | None:
    """The agent behind a RoundBatchingClient when `options.batch` applies (a live or record
    run of an Anthropic or OpenAI model, an agent on promptloop's loop), else `agent`."""
    if (not options.batch or agent is None or options.mode == "replay" or planned < 1
            or backend_for(agent) is None
            or (agent_name and not batches_agent_turns(agent_name))):
        return agent

    def key(messages: Sequence[Message], tools: Sequence[ToolSpec],
            settings: ModelSettings | None, salt: str) -> str:
        return request_key(options.agent_model, messages, tools, settings, salt + "/round")

    on_batched = None
    if isinstance(agent, MeteredClient):
        metered = agent

        def on_batched(response: ModelResponse) -> None:
            metered.meter.add(metered.role, response.usage, batched=True)

    return RoundBatchingClient(agent, options.state_dir / "batches", key, on_batched=on_batched)


def _judge_batch(suite: Suite, options: RunOptions, judge: ModelClient | None
                 ) -> JudgeBatch | None:
    """The run's judge batch when `options.batch` applies (a judge that is called for real)."""
    if not options.batch or judge is None or options.mode == "replay" or not needs_judge(suite):
        return None
    from promptloop.agents.llm.batch import BatchJudge

    return JudgeBatch(judge, BatchJudge(judge, options.state_dir / "batches"))


__all__ = [
    "AllTrialsErroredError",
    "RunOptions",
    "default_concurrency",
    "make_run_name",
    "needs_judge",
    "run_suite",
    "run_variant",
    "trial_cache_path",
    "uncached_trials",
]
