"""Trials of an agent that runs outside promptloop's agent loop: a command, a worker, a URL or
a python function speaking the trial contract (optimizer/adapters, docs/agents.md).

`ExternalAgent` is one run's link to such an agent: the adapter spec from promptloop.toml, the
loopback model gateway the agent calls (in front of the run's model client, so record/replay,
seeds, metering and the trial transcript work as for the bundled agents, and no provider key
reaches the agent), and the worker pool. `attempt` runs one trial and says what it came to in
the runner's terms: an outcome to grade, an agent failure, or an errored trial.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents import trees
from agents.llm.types import Message, ModelClient, ToolCall, Usage
from agents.transcript import Transcript
from optimizer.adapters.contract import (
    ModelEndpoint,
    PromptInfo,
    TrialContext,
    TrialInfo,
    TrialRequest,
    TrialResultDoc,
)
from optimizer.adapters.gateway import ModelGateway
from optimizer.adapters.outcome import AdapterOutcome
from optimizer.adapters.runner import run_adapter_trial
from optimizer.adapters.spec import AdapterSpec
from optimizer.adapters.worker import WorkerPool
from optimizer.core.project import Agent
from optimizer.core.prompt_target import PromptSource
from optimizer.core.suites import LoadedTask, Suite
from optimizer.run.trial_input import published_at_for

WORKSPACE = "workspace"
"""The agent's folder inside the trial's own temporary folder (nothing else may appear)."""


def adapter_spec(agent: Agent, concurrency: int) -> AdapterSpec:
    c = agent.config
    return AdapterSpec(kind=c.adapter, command=list(c.command or []), request=c.request,
                       result=c.result, url=c.url, entry=c.entry, env=list(c.env),
                       timeout=c.timeout, max_output_bytes=c.max_output_bytes,
                       workers=max(1, c.concurrency or concurrency))


def adapter_variant(agent: Agent, root: Path) -> str:
    """What else decides an external agent's trials, for the trial cache: its adapter table
    and the files its command names (a changed agent script is never served from cache)."""
    c = agent.config
    h = hashlib.sha256(json.dumps(c.model_dump(mode="json", exclude={"description"}),
                                  sort_keys=True).encode())
    top = root.resolve()
    for arg in c.command or []:
        path = (root / arg).resolve()
        if path.is_relative_to(top) and path.is_file():  # the agent's own files, not python3
            h.update(arg.encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class Attempted:
    """One external trial in the runner's terms."""

    status: str
    """ok (grade the outcome) | failed | errored | timedOut"""
    outcome: dict[str, Any]
    message: str | None = None
    infra: bool = False


def copy_fixtures(task: LoadedTask, workspace: Path) -> None:
    """A fresh workspace from the task's fixtures (base, then its own)."""
    workspace.mkdir()
    for src in (task.base_fixture, task.fixture_dir):
        if src is not None:
            trees.copy_tree(src, workspace)


class ExternalAgent:
    """One suite run's adapter, gateway and workers for a declared agent."""

    def __init__(self, agent: Agent, root: Path, concurrency: int) -> None:
        self.agent = agent
        self.root = root
        self.spec = adapter_spec(agent, concurrency)
        self.gateway = ModelGateway()
        self.pool: WorkerPool | None = (
            WorkerPool(self.spec, repo_root=root, agent=agent.name)
            if self.spec.kind == "worker" else None)
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self.gateway.start()
            self._started = True

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
        if self._started:
            await self.gateway.aclose()

    async def attempt(self, suite: Suite, task: LoadedTask, index: int, seed: int, prompt: str,
                      source: PromptSource | None, model: ModelClient, model_id: str,
                      transcript: Transcript, tmp: Path, timeout: float,
                      context: TrialContext | None = None) -> Attempted:
        """Run one trial in a fresh workspace `tmp/workspace` made from the task's fixture."""
        await self.start()
        workspace = tmp / WORKSPACE
        # file work off the event loop, as the in-process path does (other trials' calls wait)
        await asyncio.to_thread(copy_fixtures, task, workspace)
        token = self.gateway.register(model, transcript)
        target = source.target if source is not None else self.agent.target()
        request = TrialRequest(
            agent=self.agent.name,
            task=task.spec.model_dump(mode="json", by_alias=False),
            prompt=PromptInfo(name=target.name, text=source.value(prompt) if source else prompt,
                              path=target.path,
                              ref=source.ref if source is not None else None,
                              region=source.describe() if source is not None else None),
            workspace=str(workspace),
            model=ModelEndpoint(base_url=self.gateway.base_url_for(token), model=model_id,
                                api_key=token),
            trial=TrialInfo(index=index, seed=seed),
            published_at=published_at_for(suite, task),
            timeout_s=timeout,
        )
        try:
            if context is not None:
                context.workspace = workspace
            got = await run_adapter_trial(self.spec, request, repo_root=self.root,
                                          agent=self.agent.name, context=context,
                                          pool=self.pool)
        finally:
            model_errors = self.gateway.unregister(token)
        return _attempted(got, model_errors, transcript)


def _attempted(got: AdapterOutcome, model_errors: list[str],
               transcript: Transcript) -> Attempted:
    if got.stderr_tail:
        transcript.event("agent_stderr", got.stderr_tail[-2000:])
    doc = got.result
    outcome = dict(doc.outcome) if doc is not None else {}
    if doc is not None:
        _record(doc, transcript)
    if model_errors:  # the model behind the gateway failed: infrastructure, never the agent
        return Attempted("errored", outcome, f"model call failed: {model_errors[0]}", True)
    if got.timed_out:
        return Attempted("timedOut", outcome, got.message)
    if got.status == "ok":
        return Attempted("ok", outcome)
    return Attempted(got.status, outcome, got.message, infra=got.status == "errored")


def _record(doc: TrialResultDoc, transcript: Transcript) -> None:
    """The agent's own transcript and usage into the trial's (the gateway already recorded
    the model calls that went through it)."""
    if not transcript.messages:
        for m in doc.transcript:
            calls = tuple(ToolCall(id=c.id or f"call_{i}", name=c.name,
                                   arguments=c.arguments if isinstance(c.arguments, dict)
                                   else {}) for i, c in enumerate(m.tool_calls or []))
            role = m.role if m.role in ("system", "user", "assistant", "tool") else "assistant"
            transcript.messages.append(Message(role=role, content=m.content or "",  # type: ignore[arg-type]
                                               tool_calls=calls if role == "assistant" else ()))
    if doc.usage is not None and transcript.metrics.usage.total_tokens == 0:
        transcript.metrics.usage = transcript.metrics.usage + Usage(
            input_tokens=doc.usage.input_tokens, output_tokens=doc.usage.output_tokens)
    transcript.completed = doc.error is None


__all__ = ["Attempted", "ExternalAgent", "adapter_spec", "adapter_variant"]
