"""Run a suite: one temporary workspace per trial -> agent -> outcome -> grades.

Trials run concurrently under a semaphore; each has a timeout that cancels the agent. A trial
that hits an infrastructure error (provider down, key rejected, replay miss) is `errored` and
never scored as an agent failure. Unchanged trials are served from the trial cache.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agents.base import AgentInput, OutcomeSession, load_prompt, prepare_workspace
from agents.llm.errors import ModelError
from agents.llm.types import ModelClient, ModelSettings
from agents.registry import AgentOptions, get_agent
from agents.runtime import RuntimeConfig, run_agent
from agents.transcript import Transcript
from agents.workspace import Workspace
from graders.base import GradeContext, Score
from graders.registry import get_grader, run_grader, trial_passed
from optimizer.core.results import Provenance, RunResult, TaskInfo, TrialResult
from optimizer.core.suites import LoadedTask, Suite
from optimizer.run.cache import (
    Mode,
    RecordReplayClient,
    atomic_write_text,
    text_hash,
    trial_cache_key,
)
from optimizer.run.trial_input import agent_input_for, trial_variant

DEFAULT_CONCURRENCY = {"card_agent": 6, "pkm_agent": 4}
ProgressFn = Callable[[str, dict[str, Any]], None]


class AllTrialsErroredError(Exception):
    """Every trial of a run errored: an infrastructure failure, not a 0% pass rate."""


@dataclass(frozen=True)
class RunOptions:
    agent_model: str
    judge_model: str | None = None
    trials: int | None = None
    """Override of trials_per_run for every task (None = the task's own)."""
    concurrency: int | None = None
    mode: Mode = "live"
    state_dir: Path = Path(".promptloop")
    prompt_text: str | None = None
    """The system prompt to evaluate; None = read prompts/<agent>.md now."""
    prompts_dir: Path | None = None
    reuse: bool = True
    timeout_s: float | None = None
    run_name: str | None = None
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    judge_settings: ModelSettings = field(
        default_factory=lambda: ModelSettings(temperature=0.0, max_tokens=600)
    )
    trial_indices: dict[str, list[int]] | None = None
    """Run only these trial indices per task id (confirmatory reruns)."""
    agent_options: AgentOptions = field(default_factory=AgentOptions.from_env)
    """Our opt-in agent checks (default: none, as the original; $PROMPTLOOP_AGENT_OPTIONS)."""


def default_concurrency(agent_name: str, options: RunOptions) -> int:
    """The embedded model serves one request at a time: more concurrency only queues."""
    if options.concurrency:
        return options.concurrency
    if options.agent_model.startswith("local:"):
        return 1
    return DEFAULT_CONCURRENCY.get(agent_name, 4)


def needs_judge(suite: Suite) -> bool:
    return any(get_grader(g.name).kind == "model" for t in suite.tasks for g in t.spec.graders)


def make_run_name(suite_name: str) -> str:
    return f"{suite_name}-{datetime.now(UTC):%Y%m%dT%H%M%S%f}"[:-3]


async def _grade(
    task: LoadedTask,
    outcome: dict[str, Any],
    transcript: Transcript,
    judge: ModelClient | None,
    settings: ModelSettings,
) -> list[Score]:
    ctx = GradeContext(
        task_id=task.id,
        agent_name="",
        fact_id=task.spec.input.fact_id,
        input_content=task.spec.input.content,
        outcome=outcome,
        transcript=transcript,
        expected_outcome=(
            task.spec.reference_solution.expected_outcome if task.spec.reference_solution else None
        ),
        judge=judge,
        judge_settings=settings,
    )
    return list(
        await asyncio.gather(*(run_grader(g.name, g.config, ctx) for g in task.spec.graders))
    )


TRIAL_DIR_VAR = "PROMPTLOOP_TRIAL_DIR"
_SHM = Path("/dev/shm")
_SHM_MIN_FREE = 4 << 30


@functools.cache
def trial_root() -> str | None:
    """Where trial workspaces are made: $PROMPTLOOP_TRIAL_DIR, else /dev/shm when it is a large
    enough tmpfs (a trial's file work is mostly metadata syscalls, several times cheaper in
    memory than on a virtual disk), else the system temp folder."""
    explicit = os.environ.get(TRIAL_DIR_VAR, "").strip()
    if explicit:
        return explicit
    try:
        if (
            _SHM.is_dir()
            and os.access(_SHM, os.W_OK)
            and shutil.disk_usage(_SHM).free >= _SHM_MIN_FREE
        ):
            return str(_SHM)
    except OSError:
        pass
    return None


TRIAL_PREFIX = "promptloop-trial-"


@functools.cache
def sweep_stale_trials() -> int:
    """Remove trial workspaces left by processes that died (kill -9 skips every cleanup;
    on tmpfs they would hold memory until reboot). Returns how many were removed."""
    base = Path(trial_root() or tempfile.gettempdir())
    removed = 0
    for path in base.glob(f"{TRIAL_PREFIX}*"):
        pid = path.name[len(TRIAL_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def build_workspace(task: LoadedTask, dest: Path) -> Workspace:
    for src in (task.base_fixture, task.fixture_dir):
        if src is not None:
            shutil.copytree(src, dest, dirs_exist_ok=True, symlinks=True)
    (dest / "PKM").mkdir(exist_ok=True)
    return Workspace(dest, durable=False)


async def run_trial(
    suite: Suite,
    task: LoadedTask,
    index: int,
    prompt: str,
    agent: ModelClient,
    judge: ModelClient | None,
    options: RunOptions,
) -> TrialResult:
    started = datetime.now(UTC)
    transcript = Transcript()
    outcome: dict[str, Any] = {}
    status: str
    reason: str | None = None
    infra: str | None = None
    scores: list[Score] = []
    salt = f"{suite.name}/{task.id}#{index}"
    calls = options.state_dir / "recordings"
    agent_c = RecordReplayClient(agent, calls, options.mode, salt, options.agent_model)
    judge_c = (
        RecordReplayClient(judge, calls, options.mode, salt + "/judge", options.judge_model or "")
        if judge is not None or options.mode == "replay"
        else None
    )
    agent_input = agent_input_for(suite, task)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TRIAL_PREFIX}{os.getpid()}-", dir=trial_root()))
    session: OutcomeSession | None = None
    try:
        try:
            # File work (fixture copy, snapshots) runs in a worker thread so the event loop
            # keeps serving the other trials' model calls meanwhile.
            session = await asyncio.to_thread(
                _open_session, suite, task, tmp, agent_input, prompt, options.agent_options
            )
            timeout = options.timeout_s or task.spec.timeout_seconds
            async with asyncio.timeout(timeout):
                await run_agent(agent_c, session, options.runtime, transcript)
            outcome = plain_outcome(await asyncio.to_thread(session.outcome, transcript))
            scores = await _grade(task, outcome, transcript, judge_c, options.judge_settings)
            judge_errors = [
                s for s in scores if s.metadata.get("error_module") == ModelError.__module__
            ]
            if judge_errors:
                # the judge could not be reached: infrastructure, not a 0 score for the agent
                status = "errored"
                infra = reason = f"judge failed: {judge_errors[0].rationale}"
            elif trial_passed(scores, suite.config.task_pass_threshold):
                status = "passed"
            else:
                status = "failed"
                reason = _failure_reason(outcome, scores)
        except TimeoutError:
            status, reason = (
                "timedOut",
                f"trial exceeded {options.timeout_s or task.spec.timeout_seconds:g}s",
            )
            transcript.event("timeout", reason)
            if session is not None:
                outcome = plain_outcome(await asyncio.to_thread(session.outcome, transcript))
                # SPEC section 8: a timed-out trial is still graded (its scores count in
                # grader means); it stays timedOut, never passed
                scores = await _grade(task, outcome, transcript, judge_c, options.judge_settings)
        except ModelError as err:
            status, infra = "errored", f"{type(err).__name__}: {err}"
            reason = infra
        except Exception as err:  # a harness bug must not kill the whole run
            status, infra = "errored", f"harness error {type(err).__name__}: {err}"
            reason = infra
            transcript.event("exception", infra)
    finally:
        await _remove_tree(tmp)
    return TrialResult(
        task_id=task.id,
        bucket=task.bucket,
        trial_index=index,
        status=status,  # type: ignore[arg-type]
        started_at=started,
        ended_at=datetime.now(UTC),
        failure_reason=reason,
        infra_error=infra,
        transcript=transcript,
        outcome=outcome,
        scores=scores,
    )


def _open_session(
    suite: Suite,
    task: LoadedTask,
    dest: Path,
    agent_input: AgentInput,
    prompt: str,
    agent_options: AgentOptions,
) -> OutcomeSession:
    ws = build_workspace(task, dest)
    prepare_workspace(ws, agent_input)
    return get_agent(suite.agent_name, agent_options)(ws, agent_input, prompt)


async def _remove_tree(path: Path) -> None:
    """Delete a trial workspace off the event loop (many small deletes are slow I/O)."""
    try:
        await asyncio.to_thread(shutil.rmtree, path, ignore_errors=True)
    except asyncio.CancelledError:
        shutil.rmtree(path, ignore_errors=True)
        raise


def plain_outcome(outcome: dict[str, Any]) -> dict[str, Any]:
    """Outcome values as plain JSON data, so cached and saved trials load back identically."""
    return {
        k: (v.model_dump(mode="json") if isinstance(v, BaseModel) else v)
        for k, v in outcome.items()
    }


def _failure_reason(outcome: dict[str, Any], scores: list[Score]) -> str:
    if not outcome.get("is_complete"):
        missing = outcome.get("missing_requirements") or []
        return "incomplete: " + (", ".join(missing) or "agent did not finish")
    failed = [s.grader for s in scores if s.passed is False]
    return "failed graders: " + ", ".join(failed) if failed else "no grader decided"


def _trial_plan(suite: Suite, options: RunOptions) -> list[tuple[LoadedTask, int]]:
    plan: list[tuple[LoadedTask, int]] = []
    for task in suite.tasks:
        n = options.trials or task.spec.trials_per_run
        indices = (options.trial_indices or {}).get(task.id, list(range(n)))
        plan.extend((task, i) for i in indices)
    return plan


async def run_suite(
    suite: Suite,
    options: RunOptions,
    agent: ModelClient | None,
    judge: ModelClient | None = None,
    progress: ProgressFn | None = None,
    provenance: Provenance | None = None,
) -> RunResult:
    """Run every planned trial of `suite` and return the run (not yet written to disk)."""
    notify = progress or (lambda _k, _p: None)
    prompt = (
        options.prompt_text
        if options.prompt_text is not None
        else load_prompt(suite.agent_name, options.prompts_dir)
    )
    phash = text_hash(prompt)
    if judge is None and needs_judge(suite) and options.mode != "replay":
        notify(
            "warning", {"message": "suite has judge graders but no judge model: they score null"}
        )
    if judge is not None and needs_judge(suite) and options.judge_model == options.agent_model:
        notify(
            "warning",
            {
                "message": f"the judge is the agent model itself ({options.agent_model}): judge "
                "scores are not independent; pass --judge-model for a stronger judge"
            },
        )
    if options.mode != "replay":
        assert agent is not None, "a live or record run needs an agent model"
        await agent.preflight()
        if judge is not None and needs_judge(suite):
            await judge.preflight()
    sweep_stale_trials()
    plan = _trial_plan(suite, options)
    cache_dir = options.state_dir / "cache" / "trials"
    sem = asyncio.Semaphore(default_concurrency(suite.agent_name, options))
    started = datetime.now(UTC)
    notify("run_start", {"suite": suite.name, "total": len(plan)})

    rt = options.runtime
    variant = f"turns={rt.max_turns},runs={rt.max_runs},first={rt.require_tool_first_turn}"

    async def one(task: LoadedTask, index: int) -> TrialResult:
        key = trial_cache_key(
            task.content_hash,
            phash,
            options.agent_model,
            options.judge_model if judge is not None else None,
            index,
            trial_variant(variant, suite, task, options.agent_options.key()),
        )
        path = cache_dir / f"{key}.json"
        if options.reuse and path.is_file():
            result = TrialResult.model_validate_json(path.read_text(encoding="utf-8"))
            result = result.model_copy(update={"cached": True})
        else:
            async with sem:
                notify("trial_start", {"task": task.id, "trial": index})
                t0 = time.perf_counter()
                result = await run_trial(suite, task, index, prompt, agent, judge, options)  # type: ignore[arg-type]
                result.transcript.event("timing", f"{time.perf_counter() - t0:.3f}s")
            if result.status in ("passed", "failed"):
                atomic_write_text(path, result.model_dump_json())
        notify(
            "trial_end",
            {
                "task": task.id,
                "trial": index,
                "status": result.status,
                "cached": result.cached,
                "bucket": task.bucket,
            },
        )
        return result

    trials = await asyncio.gather(*(one(t, i) for t, i in plan))
    run = RunResult(
        run_name=options.run_name or make_run_name(suite.name),
        suite_name=suite.name,
        suite_kind=suite.config.kind,
        agent_name=suite.agent_name,
        suite_root=str(suite.root),
        task_ids=[t.id for t in suite.tasks],
        task_buckets={t.id: t.bucket for t in suite.tasks},
        task_info={t.id: TaskInfo.of(t.spec.description, t.spec.metadata) for t in suite.tasks},
        task_pass_threshold=suite.config.task_pass_threshold,
        require_reference_solution=suite.config.require_reference_solution,
        trials_per_task={t.id: options.trials or t.spec.trials_per_run for t in suite.tasks},
        started_at=started,
        ended_at=datetime.now(UTC),
        provenance=(provenance or Provenance()).model_copy(
            update={
                "prompt_hashes": {suite.agent_name: phash},
                "suite_hash": suite.content_hash,
                "agent_model": options.agent_model,
                "judge_model": options.judge_model,
                "mode": options.mode,
            }
        ),
        trials=list(trials),
    )
    notify("run_end", {"suite": suite.name})
    return run
