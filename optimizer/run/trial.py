"""One trial: a fresh workspace -> the agent under a timeout -> outcome -> grades.

Errors split by cause (issue 19). A trial that hits an infrastructure error (provider down,
key rejected, rate limits after retries, replay miss, judge unreachable) or a bug in promptloop
itself (named loudly: "promptloop bug: ...") is `errored` and never scored as an agent failure.
An exception raised by a tool or by outcome capture is caused by what the agent did (its
arguments, the workspace it left), so it FAILS the trial, naming the tool and the exception:
an agent can never turn its own failure into an excluded trial.
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
from agents.llm.errors import ModelError, ProviderError
from agents.llm.registry import accepts_seed
from agents.llm.rounds import RoundBatchingClient
from agents.llm.types import ModelClient, ModelSettings
from agents.registry import AgentOptions
from agents.runtime import TOOL_EXCEPTION, RuntimeConfig, run_agent
from agents.transcript import Transcript
from graders.base import GradeContext, Score
from graders.registry import is_judge, run_grader, trial_passed
from optimizer.adapters.contract import TrialContext
from optimizer.adapters.runner import AdapterConfigError, AgentRaised
from optimizer.core.config import STATE_FOLDER
from optimizer.core.prompt_target import PromptSource
from optimizer.core.results import TrialResult
from optimizer.core.suites import LoadedTask, Suite
from optimizer.run.adaptive import AdaptiveLimit
from optimizer.run.agents import get_agent
from optimizer.run.batching import JudgeBatch
from optimizer.run.cache import Mode, RecordReplayClient
from optimizer.run.external import ExternalAgent
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
    state_dir: Path = Path(STATE_FOLDER)
    prompt_text: str | None = None
    """The system prompt to evaluate (a region's source text); None = read the agent's
    first prompt target from the working tree now."""
    prompt_source: PromptSource | None = None
    """Where `prompt_text` was read and how it becomes the text an agent runs with (a
    literal's escapes decoded); None: a whole file, used as it is."""
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
    batch: tuple[JudgeBatch, str] | None = None,
) -> list[Score]:
    """Every grader of `task` once (with `batch`: counted for the judge batch's rounds)."""
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
    calls = [run_grader(g.name, g.config, ctx) for g in task.spec.graders]
    if batch is not None:
        return list(await asyncio.gather(*batch[0].graders(batch[1], calls)))
    return list(await asyncio.gather(*calls))


def judged(task: LoadedTask) -> bool:
    """Whether `task` has an LLM-judge grader."""
    return any(is_judge(g.name) for g in task.spec.graders)


@dataclass
class _Attempt:
    """What one trial came to: status, why, the outcome and the grades."""

    status: str = "errored"
    reason: str | None = None
    infra: str | None = None
    agent: str | None = None
    """A tool or outcome capture raised on what the agent did: the trial fails."""
    overloaded: bool = False
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
    external: ExternalAgent | None = None,
) -> TrialResult:
    """Run one trial. With `batch` and a judge grader, the trial is held back ungraded (phase
    1 of batch mode: `grade_held` grades it once with the batch's judge replies). With
    `external`, the agent runs through its adapter (a command, worker, URL or function)."""
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
        clients = _recorded(suite, task, index, (agent, judge), seeded)
        held = batch is not None and judged(task)
        if external is not None:
            got = await _attempt_external(external, suite, task, index, prompt, clients, seeded,
                                          transcript, tmp, grade=not held)
        else:
            got = await _attempt(suite, task, index, prompt, clients, seeded, transcript, tmp,
                                 grade=not held)
        if held and got.infra is None and got.agent is None:
            assert batch is not None
            batch.hold(judge_salt(suite, task, index))
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
        agent_error=got.agent,
        overloaded=got.overloaded,
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
) -> tuple[ModelClient, ModelClient | None]:
    """The agent and judge behind record/replay, salted per trial."""
    agent, judge = clients
    salt = f"{suite.name}/{task.id}#{index}"
    calls = options.state_dir / "recordings"
    agent_c = RecordReplayClient(agent, calls, options.mode, salt, options.agent_model)
    judge_c: ModelClient | None = (
        RecordReplayClient(judge, calls, options.mode, salt + "/judge", options.judge_model or "")
        if judge is not None or options.mode == "replay"
        else None
    )
    return agent_c, judge_c


def judge_salt(suite: Suite, task: LoadedTask, index: int) -> str:
    """What keys the judge requests of one trial apart from the same request elsewhere."""
    return f"{suite.name}/{task.id}#{index}/judge"


async def grade_held(
    suite: Suite, task: LoadedTask, result: TrialResult, batch: JudgeBatch, options: RunOptions
) -> TrialResult:
    """Phase 2 of batch mode: grade a held-back trial once, its judge answered from the run's
    batch, and decide its status as `_attempt` does (a timed-out trial stays timedOut)."""
    salt = judge_salt(suite, task, result.trial_index)
    timed_out = result.status == "timedOut"
    got = _Attempt(status=result.status, reason=result.failure_reason if timed_out else None,
                   outcome=result.outcome, agent=result.agent_error)
    try:
        if got.agent is not None and not got.outcome:
            return result  # outcome capture raised: nothing to grade, the trial stays failed
        judge_c = RecordReplayClient(batch.for_trial(salt), options.state_dir / "recordings",
                                     options.mode, salt, options.judge_model or "")
        got.scores = await _grade(task, result.outcome, result.transcript, judge_c,
                                  options.judge_settings, (batch, salt))
        if not timed_out:
            _decide(got, suite.config.task_pass_threshold, result.transcript)
    except Exception as err:  # a bug in promptloop must not kill the whole run
        _bug(got, err, result.transcript)
    finally:
        batch.done_with(salt)
    return result.model_copy(update={
        "status": got.status, "failure_reason": got.reason, "infra_error": got.infra,
        "agent_error": got.agent, "scores": got.scores, "ended_at": datetime.now(UTC),
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
    grade: bool = True,
) -> _Attempt:
    """Run the agent under the trial timeout (agent time only: a batched turn's wait in the
    provider's queue is off the clock), then grade unless `grade` is False (held back)."""
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
            async with asyncio.timeout(timeout) as clock:
                with (rounds.clock(clock) if rounds is not None
                      else contextlib.nullcontext()):
                    await run_agent(agent_c, session, options.runtime, transcript)
        if await _capture(got, session, transcript) and grade:
            got.scores = await _grade(task, got.outcome, transcript, judge_c,
                                      options.judge_settings)
            _decide(got, suite.config.task_pass_threshold, transcript)
    except TimeoutError:
        reason = f"trial exceeded {timeout:g}s"
        transcript.event("timeout", reason)
        if session is not None and await _capture(got, session, transcript):
            # docs/compat.md: a timed-out trial is still graded (its scores count in grader
            # means); it stays timedOut, never passed
            if grade:
                got.scores = await _grade(task, got.outcome, transcript, judge_c,
                                          options.judge_settings)
        got.status = "timedOut"
        got.reason = f"{reason}; {got.agent}" if got.agent else reason
    except ModelError as err:
        _model_failed(got, err)
    except Exception as err:  # a bug in promptloop must not kill the whole run
        _bug(got, err, transcript)
    return got


def _model_failed(got: _Attempt, err: ModelError) -> None:
    """The model could not answer (provider, key, replay miss): infrastructure, errored."""
    # the provider's message says what failed; promptloop's class names are not for users
    got.status, got.infra = "errored", str(err) or "the model gave no answer"
    got.reason = got.infra
    got.overloaded = isinstance(err, ProviderError) and err.overloaded


async def _attempt_external(
    external: ExternalAgent,
    suite: Suite,
    task: LoadedTask,
    index: int,
    prompt: str,
    clients: tuple[ModelClient, ModelClient | None],
    options: RunOptions,
    transcript: Transcript,
    tmp: Path,
    grade: bool = True,
) -> _Attempt:
    """One trial through the agent's adapter, graded when it gave an outcome (unless `grade`
    is False: held back for the run's judge batch, as `_attempt` does). An adapter
    that could not run the agent (exit code, time limit, bad or missing result) is errored; a
    result whose error the agent caused, or files written outside the workspace, fail it."""
    agent_c, judge_c = clients
    got = _Attempt()
    timeout = (options.timeout_s or external.agent.config.timeout
               or task.spec.timeout_seconds)
    seed = options.runtime.settings.seed or trial_seed(task.id, index)
    context = TrialContext(model=agent_c, transcript=transcript, runtime=options.runtime,
                           workspace=tmp, agent_options=options.agent_options)
    try:
        done = await external.attempt(suite, task, index, seed, prompt, options.prompt_source,
                                      agent_c, options.agent_model, transcript, tmp, timeout,
                                      context)
    except ModelError as err:
        _model_failed(got, err)
        return got
    except TimeoutError:
        got.status, got.reason = "timedOut", f"trial exceeded {timeout:g}s"
        return got
    except AgentRaised as err:  # a python adapter's function raised: the agent's code failed
        got.status = "failed"
        got.agent = got.reason = f"agent raised {err}"
        transcript.event("exception", got.agent)
        return got
    except AdapterConfigError as err:  # an entry that does not import: configuration
        got.status, got.infra = "errored", str(err)
        got.reason = got.infra
        return got
    except Exception as err:  # workspace, gateway, promptloop itself: never the agent's fault
        _bug(got, err, transcript)
        return got
    got.outcome = plain_outcome(done.outcome)
    if done.status == "ok" and not grade:
        pass  # held back ungraded, as `_attempt` leaves it: grade_held decides
    elif done.status == "ok":
        try:
            got.scores = await _grade(task, got.outcome, transcript, judge_c,
                                      options.judge_settings)
            _decide(got, suite.config.task_pass_threshold, transcript)
        except Exception as err:  # a bug in promptloop must not kill the whole run
            _bug(got, err, transcript)
    elif done.status == "timedOut":
        got.status, got.reason = "timedOut", done.message
    elif done.status == "failed":
        got.status, got.agent, got.reason = "failed", done.message, done.message
        transcript.event("agent_error", done.message or "")
    else:
        got.status, got.infra, got.reason = "errored", done.message, done.message
        transcript.event("infra_error", done.message or "")
    return got


async def _capture(got: _Attempt, session: OutcomeSession, transcript: Transcript) -> bool:
    """Capture the outcome into `got`; False when capture raised. The workspace is what the
    agent left, so that fails the trial (named), as a raising tool does."""
    try:
        got.outcome = plain_outcome(await asyncio.to_thread(session.outcome, transcript))
    except Exception as err:
        got.status = "failed"
        got.agent = got.reason = f"outcome capture raised {type(err).__name__}: {err}"
        transcript.event("outcome_exception", got.agent)
        return False
    return True


def _bug(got: _Attempt, err: Exception, transcript: Transcript) -> None:
    """An exception outside the agent's reach (workspace setup, grading code, the runner):
    a bug in promptloop, named loudly; the trial is errored."""
    got.status, got.agent = "errored", None
    got.infra = got.reason = f"promptloop bug: {type(err).__name__}: {err}"
    transcript.event("exception", got.infra)


def tool_fault(transcript: Transcript) -> str | None:
    """What the first tool that raised during the trial raised (`tool Glob raised ...`)."""
    return next((e.detail for e in transcript.events if e.kind == TOOL_EXCEPTION), None)


def rounds_of(client: object) -> RoundBatchingClient | None:
    """The RoundBatchingClient behind `client`'s wrappers (`.inner`), if any."""
    for _ in range(10):
        if isinstance(client, RoundBatchingClient):
            return client
        client = getattr(client, "inner", None)
        if client is None:
            return None
    return None


def _decide(got: _Attempt, threshold: float, transcript: Transcript) -> None:
    """passed / failed from the grades; failed whatever the grades when a tool raised on what
    the agent sent; errored when the judge could not be reached or a grader raised."""
    judge_errors = [
        s for s in got.scores if s.metadata.get("error_module") == ModelError.__module__
    ]
    broken = [s for s in got.scores if s.metadata.get("error_type")]
    fault = tool_fault(transcript)
    if fault is not None:
        # caused by the agent: a failure, never an excluded (errored) trial
        got.status, got.agent, got.reason = "failed", fault, fault
    elif judge_errors:
        # the judge could not be reached: infrastructure, not a 0 score for the agent
        got.status = "errored"
        got.infra = got.reason = f"judge failed: {judge_errors[0].rationale}"
    elif broken:
        # a grader that raised decides nothing: the original counts the trial as passed on its
        # other scores; we report it errored (a bug in promptloop or the task spec, never a pass)
        got.status = "errored"
        got.infra = got.reason = (
            f"promptloop bug: grader {broken[0].grader} failed: {broken[0].rationale}"
        )
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
    if "is_complete" in outcome and not outcome.get("is_complete"):
        missing = outcome.get("missing_requirements") or []
        return "incomplete: " + (", ".join(missing) or "agent did not finish")
    failed = [s.grader for s in scores if s.passed is False]
    return "failed graders: " + ", ".join(failed) if failed else "no grader decided"
