"""One trial: a fresh workspace -> the agent under a timeout -> outcome -> grades.

A trial that hits an infrastructure error (provider down, key rejected, replay miss, judge
unreachable) is `errored` and never scored as an agent failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agents.base import AgentInput, OutcomeSession, prepare_workspace
from agents.llm.errors import ModelError
from agents.llm.registry import accepts_seed
from agents.llm.rounds import RoundBatchingClient
from agents.llm.types import ModelClient, ModelSettings
from agents.registry import AgentOptions, get_agent
from agents.runtime import RuntimeConfig, run_agent
from agents.transcript import Transcript
from graders.base import GradeContext, Score
from graders.registry import run_grader, trial_passed
from optimizer.core.results import TrialResult
from optimizer.core.suites import LoadedTask, Suite
from optimizer.run.adaptive import AdaptiveLimit
from optimizer.run.batching import JudgeBatch
from optimizer.run.cache import Mode, RecordReplayClient
from optimizer.run.trial_input import agent_input_for
from optimizer.run.workspaces import build_workspace, new_trial_dir, remove_tree


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
    label: str = ""
    """What the run is for (`baseline pkm_agent_capability`), for progress displays."""
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    judge_settings: ModelSettings = field(
        default_factory=lambda: ModelSettings(temperature=0.0, max_tokens=600)
    )
    trial_indices: dict[str, list[int]] | None = None
    """Run only these trial indices per task id (confirmatory reruns)."""
    agent_options: AgentOptions = field(default_factory=AgentOptions.from_env)
    """Our opt-in agent checks (default: none, as the original; $PROMPTLOOP_AGENT_OPTIONS)."""
    batch: bool = False
    """Send the judge calls of the run as one provider batch (run/batching.py), and the
    agent turns as one batch per round (agents/llm/rounds.py) on Anthropic/OpenAI models."""
    limit: AdaptiveLimit | None = None
    """A concurrency limit shared with other runs going on at once (screening candidates run
    side by side under one bound); None: the run has its own."""


def trial_seed(task_id: str, index: int) -> int:
    """The seed of trial `index` of `task_id`: a stable 31-bit hash, the same for every prompt,
    so the base and the candidate trial of a pair share their random draws (common random
    numbers) wherever the provider takes a seed."""
    digest = hashlib.blake2b(f"{task_id}#{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


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


@dataclass
class _Attempt:
    """What one trial came to: status, why, the outcome and the grades."""

    status: str = "errored"
    reason: str | None = None
    infra: str | None = None
    outcome: dict[str, Any] = field(default_factory=dict)
    scores: list[Score] = field(default_factory=list)


async def run_trial(
    suite: Suite,
    task: LoadedTask,
    index: int,
    prompt: str,
    agent: ModelClient,
    judge: ModelClient | None,
    options: RunOptions,
    batch: JudgeBatch | None = None,
) -> TrialResult:
    """Run one trial. With `batch`, its judge requests are only noted (phase 1 of batch
    mode: `regrade` finishes the trial once the batch has answered)."""
    started = datetime.now(UTC)
    transcript = Transcript()
    tmp = new_trial_dir()
    seed = trial_seed(task.id, index)
    seeded = replace(
        options,
        runtime=replace(
            options.runtime,
            settings=options.runtime.settings.model_copy(update={"seed": seed}),
        ),
    )
    try:
        clients = _recorded(suite, task, index, (agent, judge), seeded, batch)
        got = await _attempt(suite, task, index, prompt, clients, seeded, transcript, tmp)
    finally:
        await remove_tree(tmp)
    return TrialResult(
        task_id=task.id,
        bucket=task.bucket,
        trial_index=index,
        status=got.status,  # type: ignore[arg-type]
        started_at=started,
        ended_at=datetime.now(UTC),
        failure_reason=got.reason,
        infra_error=got.infra,
        transcript=transcript,
        outcome=got.outcome,
        scores=got.scores,
        seed=seed if accepts_seed(options.agent_model) else None,
    )


def _recorded(
    suite: Suite,
    task: LoadedTask,
    index: int,
    clients: tuple[ModelClient, ModelClient | None],
    options: RunOptions,
    batch: JudgeBatch | None = None,
) -> tuple[ModelClient, ModelClient | None]:
    """The agent and judge behind record/replay, salted per trial (in batch mode the judge
    only notes its requests)."""
    agent, judge = clients
    salt = f"{suite.name}/{task.id}#{index}"
    calls = options.state_dir / "recordings"
    agent_c = RecordReplayClient(agent, calls, options.mode, salt, options.agent_model)
    judge_c: ModelClient | None = (
        RecordReplayClient(judge, calls, options.mode, salt + "/judge", options.judge_model or "")
        if judge is not None or options.mode == "replay"
        else None
    )
    if batch is not None:
        judge_c = batch.for_trial(judge_salt(suite, task, index))
    return agent_c, judge_c


def judge_salt(suite: Suite, task: LoadedTask, index: int) -> str:
    """What keys the judge requests of one trial apart from the same request elsewhere."""
    return f"{suite.name}/{task.id}#{index}/judge"


async def regrade(
    suite: Suite, task: LoadedTask, result: TrialResult, batch: JudgeBatch, options: RunOptions
) -> TrialResult:
    """Phase 2 of batch mode: grade a held-back trial again with the batch's judge replies
    and decide its status as `_attempt` does (a timed-out trial stays timedOut)."""
    salt = judge_salt(suite, task, result.trial_index)
    judge_c = RecordReplayClient(batch.resolved(salt), options.state_dir / "recordings",
                                 options.mode, salt, options.judge_model or "")
    got = _Attempt(status=result.status, reason=result.failure_reason, outcome=result.outcome)
    try:
        got.scores = await _grade(task, result.outcome, result.transcript, judge_c,
                                  options.judge_settings)
        if result.status != "timedOut":
            _decide(got, suite.config.task_pass_threshold)
    except Exception as err:  # a harness bug must not kill the whole run
        got.status, got.infra = "errored", f"harness error {type(err).__name__}: {err}"
        got.reason = got.infra
    return result.model_copy(update={
        "status": got.status, "failure_reason": got.reason, "infra_error": got.infra,
        "scores": got.scores, "ended_at": datetime.now(UTC),
    })


async def _attempt(
    suite: Suite,
    task: LoadedTask,
    index: int,
    prompt: str,
    clients: tuple[ModelClient, ModelClient | None],
    options: RunOptions,
    transcript: Transcript,
    tmp: Path,
) -> _Attempt:
    agent_c, judge_c = clients
    agent_input = agent_input_for(suite, task)
    got = _Attempt()
    session: OutcomeSession | None = None
    timeout = options.timeout_s or task.spec.timeout_seconds
    rounds = rounds_of(agent_c)
    try:
        with (rounds.trial(f"{suite.name}/{task.id}#{index}") if rounds is not None
              else contextlib.nullcontext()):
            # File work (fixture copy, snapshots) runs in a worker thread so the event loop
            # keeps serving the other trials' model calls meanwhile.
            session = await asyncio.to_thread(
                _open_session, suite, task, tmp, agent_input, prompt, options.agent_options
            )
            # batch rounds wait in the provider's queue (minutes to hours): no trial timeout
            async with asyncio.timeout(None if rounds is not None else timeout):
                await run_agent(agent_c, session, options.runtime, transcript)
        got.outcome = plain_outcome(await asyncio.to_thread(session.outcome, transcript))
        got.scores = await _grade(task, got.outcome, transcript, judge_c, options.judge_settings)
        _decide(got, suite.config.task_pass_threshold)
    except TimeoutError:
        got.status, got.reason = "timedOut", f"trial exceeded {timeout:g}s"
        transcript.event("timeout", got.reason)
        if session is not None:
            got.outcome = plain_outcome(await asyncio.to_thread(session.outcome, transcript))
            # SPEC section 8: a timed-out trial is still graded (its scores count in grader
            # means); it stays timedOut, never passed
            got.scores = await _grade(task, got.outcome, transcript, judge_c,
                                      options.judge_settings)
    except ModelError as err:
        got.status, got.infra = "errored", f"{type(err).__name__}: {err}"
        got.reason = got.infra
    except Exception as err:  # a harness bug must not kill the whole run
        got.status, got.infra = "errored", f"harness error {type(err).__name__}: {err}"
        got.reason = got.infra
        transcript.event("exception", got.infra)
    return got


def rounds_of(client: object) -> RoundBatchingClient | None:
    """The RoundBatchingClient behind `client`'s wrappers (`.inner`), if any."""
    for _ in range(10):
        if isinstance(client, RoundBatchingClient):
            return client
        client = getattr(client, "inner", None)
        if client is None:
            return None
    return None


def _decide(got: _Attempt, threshold: float) -> None:
    """passed / failed from the grades, or errored when the judge could not be reached or a
    grader raised."""
    judge_errors = [
        s for s in got.scores if s.metadata.get("error_module") == ModelError.__module__
    ]
    broken = [s for s in got.scores if s.metadata.get("error_type")]
    if judge_errors:
        # the judge could not be reached: infrastructure, not a 0 score for the agent
        got.status = "errored"
        got.infra = got.reason = f"judge failed: {judge_errors[0].rationale}"
    elif broken:
        # a grader that raised decides nothing: the original counts the trial as passed on its
        # other scores; we report it errored (a harness or task-spec fault, never a pass)
        got.status = "errored"
        got.infra = got.reason = f"grader {broken[0].grader} failed: {broken[0].rationale}"
    elif trial_passed(got.scores, threshold):
        got.status = "passed"
    else:
        got.status = "failed"
        got.reason = _failure_reason(got.outcome, got.scores)


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
