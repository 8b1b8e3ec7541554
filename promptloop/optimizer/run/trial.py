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
import hashlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from promptloop.agents.llm.errors import ModelError, ProviderError
from promptloop.agents.llm.registry import accepts_seed
from promptloop.agents.llm.types import ModelClient, ModelSettings
from promptloop.agents.registry import AgentOptions
from promptloop.agents.runtime import TOOL_EXCEPTION, RuntimeConfig
from promptloop.agents.transcript import Transcript
from promptloop.graders.base import GradeContext, Score
from promptloop.graders.general import COMMAND_ERROR, JUDGE_UNUSABLE
from promptloop.graders.registry import is_judge, run_grader, trial_passed
from promptloop.optimizer.adapters.outcome import (
    AdapterConfigError,
    AgentRaised,
    plain_outcome,
)
from promptloop.optimizer.core.config import STATE_FOLDER
from promptloop.optimizer.core.prompt_target import PromptSource
from promptloop.optimizer.core.results import TrialResult
from promptloop.optimizer.core.suites import LoadedTask, Suite
from promptloop.optimizer.run.adaptive import AdaptiveLimit
from promptloop.optimizer.run.agents import open_link
from promptloop.optimizer.run.batching import JudgeBatch
from promptloop.optimizer.run.cache import Mode, RecordReplayClient
from promptloop.optimizer.run.external import AgentLink
from promptloop.optimizer.run.trial_input import agent_input_for
from promptloop.optimizer.run.workspaces import new_trial_dir, remove_tree


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
        input=task.spec.input.declared(),
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
    link: AgentLink | None = None,
) -> TrialResult:
    """Run one trial through the agent's adapter (`link`: the run's link to it; None: one is
    opened for this trial alone). With `batch` and a judge grader, the trial is held back
    ungraded (phase 1 of batch mode: `grade_held` grades it once with the batch's judge
    replies)."""
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
    own = link is None
    road = link if link is not None else open_link(suite.agent_name, 1)
    try:
        clients = _recorded(suite, task, index, (agent, judge), seeded)
        held = batch is not None and judged(task)
        got = await attempt(road, suite, task, index, prompt, clients, seeded, transcript, tmp,
                            grade=not held)
        if held and got.infra is None and got.agent is None:
            assert batch is not None
            batch.hold(judge_salt(suite, task, index))
    finally:
        await remove_tree(tmp)
        if own:
            await road.aclose()
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
    batch, and decide its status as `attempt` does (a timed-out trial stays timedOut)."""
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


BACKSTOP_S = 15.0
"""How long past the time limit an adapter that keeps its own clock (a process it kills, an
HTTP call it abandons) may take to answer before the trial is stopped here."""


async def attempt(
    link: AgentLink,
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
    """One trial of any agent, whatever its adapter kind: the one place that times it, grades
    it and classifies what went wrong.

    The time limit (the run's `--timeout`, else the table's `timeout`, else the task's) goes in
    the request; the adapter keeps it (an in-process session counts agent time only: a batched
    turn's wait in the provider's queue is off its clock) and an adapter with a clock of its
    own gets `BACKSTOP_S` more before it is stopped here. Then: an outcome is graded unless
    `grade` is False (held back for the run's judge batch); a trial that reached its limit is
    timedOut, still graded when it left an outcome (docs/compat.md); a model that could not
    answer, an adapter that could not run the agent or a configuration error make it errored
    (never counted); what the agent caused (its own exception, an error it reported, files
    written outside its workspace, a raising tool) fails it; anything else is a promptloop
    bug, named, errored.
    """
    agent_c, judge_c = clients
    got = _Attempt()
    timeout = link.timeout(task, options.timeout_s)
    seed = options.runtime.settings.seed or trial_seed(task.id, index)
    agent_input = agent_input_for(suite, task) if link.in_process else None
    try:
        async with asyncio.timeout(None if link.in_process else timeout + BACKSTOP_S):
            done = await link.attempt(suite, task, index, seed, prompt, options.prompt_source,
                                      agent_c, options.agent_model, transcript, tmp, timeout,
                                      options.runtime, options.agent_options, agent_input)
    except ModelError as err:
        _model_failed(got, err)
        return got
    except TimeoutError:
        got.status, got.reason = "timedOut", f"trial exceeded {timeout:g}s"
        return got
    except AgentRaised as err:  # an in-process agent's own code raised: the trial fails
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
    doc = done.result
    got.outcome = plain_outcome(dict(doc.outcome)) if doc is not None else {}
    limit = f"trial exceeded {timeout:g}s"
    try:
        if done.timed_out:
            got.status = "timedOut"
            if done.status == "failed":  # the limit, then capturing the outcome raised
                got.agent = done.message
                got.reason = f"{limit}; {done.message}" if done.message else limit
            else:
                got.reason = done.message if done.status == "errored" and done.message else limit
            if doc is not None and grade:  # graded all the same; it stays timedOut
                got.scores = await _grade(task, got.outcome, transcript, judge_c,
                                          options.judge_settings)
        elif done.status == "ok":
            if grade:  # else held back ungraded: grade_held decides
                got.scores = await _grade(task, got.outcome, transcript, judge_c,
                                          options.judge_settings)
                _decide(got, suite.config.task_pass_threshold, transcript)
        elif done.status == "failed":
            got.status, got.agent, got.reason = "failed", done.message, done.message
            transcript.event("agent_error", done.message or "")
        else:
            got.status, got.infra, got.reason = "errored", done.message, done.message
            transcript.event("infra_error", done.message or "")
    except Exception as err:  # a bug in promptloop must not kill the whole run
        _bug(got, err, transcript)
    return got


def _model_failed(got: _Attempt, err: ModelError) -> None:
    """The model could not answer (provider, key, replay miss): infrastructure, errored."""
    # the provider's message says what failed; promptloop's class names are not for users
    got.status, got.infra = "errored", str(err) or "the model gave no answer"
    got.reason = got.infra
    got.overloaded = isinstance(err, ProviderError) and err.overloaded


def _bug(got: _Attempt, err: Exception, transcript: Transcript) -> None:
    """An exception outside the agent's reach (workspace setup, grading code, the runner):
    a bug in promptloop, named loudly; the trial is errored."""
    got.status, got.agent = "errored", None
    got.infra = got.reason = f"promptloop bug: {type(err).__name__}: {err}"
    transcript.event("exception", got.infra)


def tool_fault(transcript: Transcript) -> str | None:
    """What the first tool that raised during the trial raised (`tool Glob raised ...`)."""
    return next((e.detail for e in transcript.events if e.kind == TOOL_EXCEPTION), None)


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
    elif unusable := [s for s in got.scores if s.metadata.get(JUDGE_UNUSABLE)]:
        # the judge answered, but not a score: the trial's grade is unknown, not a pass on
        # the other graders alone (`rubric_judge`; a reply in another shape, a model too weak)
        got.status = "errored"
        got.infra = got.reason = (f"judge reply unusable ({unusable[0].grader}): "
                                  f"{unusable[0].rationale}")
    elif broken:
        # a grader that raised decides nothing: the original counts the trial as passed on its
        # other scores; we report it errored (a bug in promptloop or the task spec, never a pass)
        got.status = "errored"
        first = broken[0]
        if first.metadata.get("error_type") == COMMAND_ERROR:
            # the team's own grading script failed (exit, timeout, no score): theirs to fix,
            # no bug of promptloop's (a team read "promptloop bug" for its grader's exit 3)
            got.infra = got.reason = f"your command grader failed: {first.rationale}"
        else:
            got.infra = got.reason = f"promptloop bug: grader {first.grader} failed: " \
                                     f"{first.rationale}"
    elif trial_passed(got.scores, threshold):
        got.status = "passed"
    else:
        got.status = "failed"
        got.reason = _failure_reason(got.outcome, got.scores)


def _failure_reason(outcome: dict[str, Any], scores: list[Score]) -> str:
    if "is_complete" in outcome and not outcome.get("is_complete"):
        missing = outcome.get("missing_requirements") or []
        return "incomplete: " + (", ".join(missing) or "agent did not finish")
    failed = [s.grader for s in scores if s.passed is False]
    return "failed graders: " + ", ".join(failed) if failed else "no grader decided"
