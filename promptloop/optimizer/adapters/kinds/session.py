"""`adapter = "session"`: an agent built into promptloop's own agent loop, as the bundled card
and PKM agents are. `entry` names a `@session_factory` (agents/base.py); the session it builds
in the trial's workspace is run by `agents/runtime.run_agent` with the trial's model client
(`TrialContext.model`: no gateway, no process), transcript and turn limits, under the request's
time limit. A trial that reaches the limit still has its outcome captured (docs/compat.md: it
is graded and stays timed out); an exception while capturing the outcome is the agent's (the
workspace is what it left): the trial fails, naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from promptloop.agents.base import AgentFactory, AgentInput, OutcomeSession, prepare_workspace
from promptloop.agents.llm.rounds import RoundBatchingClient
from promptloop.agents.registry import EntryError, session_builder
from promptloop.agents.runtime import run_agent
from promptloop.agents.transcript import Transcript
from promptloop.agents.workspace import Workspace
from promptloop.optimizer.adapters.contract import TrialContext, TrialRequest, TrialResultDoc
from promptloop.optimizer.adapters.outcome import AdapterConfigError, AdapterOutcome, plain_outcome
from promptloop.optimizer.adapters.registry import Adapter, adapter, settings_of
from promptloop.optimizer.core.adapter_settings import SessionSettings


def rounds_of(client: object) -> RoundBatchingClient | None:
    """The RoundBatchingClient behind `client`'s wrappers (`.inner`), if any."""
    for _ in range(10):
        if isinstance(client, RoundBatchingClient):
            return client
        client = getattr(client, "inner", None)
        if client is None:
            return None
    return None


def input_of(request: TrialRequest) -> AgentInput:
    """A session's input read from the request (when the caller gave none)."""
    given = request.task.get("input") or {}
    meta = request.task.get("metadata") or {}
    return AgentInput(fact_id=str(given.get("fact_id", "")),
                      content=str(given.get("content", "")),
                      published_at=datetime.fromisoformat(request.published_at),
                      user_language=str(meta.get("user_language", "English")))


def open_session(factory: AgentFactory, workspace: Path, agent_input: AgentInput,
                 prompt: str, make_workspace: Callable[[], None] | None = None
                 ) -> OutcomeSession:
    """The session in the trial's workspace (`make_workspace`: fill it from the task's
    fixtures first, when the caller left that to us)."""
    if make_workspace is not None:
        make_workspace()
    ws = Workspace(workspace, durable=False)
    prepare_workspace(ws, agent_input)
    return factory(ws, agent_input, prompt)


async def capture(session: OutcomeSession, transcript: Transcript,
                  timed_out: bool = False) -> AdapterOutcome:
    """The session's outcome; failed (named) when capturing it raised."""
    try:
        outcome = plain_outcome(await asyncio.to_thread(session.outcome, transcript))
    except Exception as err:
        why = f"outcome capture raised {type(err).__name__}: {err}"
        transcript.event("outcome_exception", why)
        return AdapterOutcome(status="failed", message=why, timed_out=timed_out)
    return AdapterOutcome(status="ok", result=TrialResultDoc.model_construct(
        outcome=outcome, transcript=[], usage=None, error=None), timed_out=timed_out)


@adapter("session")
class SessionAdapter(Adapter):
    uses_gateway = False
    _factory: AgentFactory | None = None

    def factory(self, context: TrialContext) -> AgentFactory:
        if self._factory is None:  # loaded once per run, on its first trial
            entry = settings_of(self, SessionSettings).entry
            try:
                self._factory = session_builder(entry, context.agent_options,
                                                self.setup.repo_root)
            except EntryError as err:
                raise AdapterConfigError(f"session adapter {err}") from None
        return self._factory

    async def attempt(self, request: TrialRequest, context: TrialContext | None
                      ) -> AdapterOutcome:
        if context is None:
            raise AdapterConfigError("the session adapter runs in promptloop's agent loop: "
                                     "it needs the trial's context")
        factory = self.factory(context)
        agent_input = context.agent_input or input_of(request)
        transcript = context.transcript
        rounds = rounds_of(context.model)
        limit = request.timeout_s
        session: OutcomeSession | None = None
        try:
            with (rounds.trial(context.trial_key) if rounds is not None
                  else contextlib.nullcontext()):
                # file work (fixture snapshot, first message) off the event loop: the other
                # trials' model calls go on meanwhile
                session = await asyncio.to_thread(open_session, factory,
                                                  Path(request.workspace), agent_input,
                                                  request.prompt.text, context.make_workspace)
                async with asyncio.timeout(limit) as clock:
                    with (rounds.clock(clock) if rounds is not None
                          else contextlib.nullcontext()):
                        await run_agent(context.model, session, context.runtime, transcript)
        except TimeoutError:
            transcript.event("timeout", f"trial exceeded {limit:g}s")
            if session is None:
                raise
            return await capture(session, transcript, timed_out=True)
        return await capture(session, transcript)
