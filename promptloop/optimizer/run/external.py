"""One run's link to an agent, whatever its adapter kind: `AgentLink` (one road for every
trial; run/trial.py times, grades and classifies what it answers).

`AgentLink` holds the agent's adapter, built once per run from its table's settings through the
adapter registry (optimizer/adapters/registry.py: `command`, `worker`, `http`, `python`,
`session`), and, for the kinds that call the model over HTTP, the loopback model gateway in
front of the run's model client (so record/replay, seeds, metering and the trial transcript
work as for the bundled agents, and no provider key reaches the agent). `attempt` makes the
trial's workspace from the task's fixtures, builds the contract request (`TrialRequest`) and
the in-process context (`TrialContext`), and answers the adapter's `AdapterOutcome`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
from pathlib import Path

from promptloop.agents import trees
from promptloop.agents.base import AgentInput
from promptloop.agents.llm.types import ModelClient
from promptloop.agents.registry import AgentOptions
from promptloop.agents.runtime import RuntimeConfig
from promptloop.agents.transcript import Transcript
from promptloop.optimizer.adapters import box
from promptloop.optimizer.adapters.contract import (
    ModelEndpoint,
    PromptInfo,
    TrialContext,
    TrialInfo,
    TrialRequest,
    TrialResultDoc,
)
from promptloop.optimizer.adapters.gateway import ModelGateway
from promptloop.optimizer.adapters.outcome import AdapterOutcome
from promptloop.optimizer.adapters.registry import Adapter, AdapterSetup, open_adapter
from promptloop.optimizer.core.project import Agent, PromptTarget
from promptloop.optimizer.core.prompt_target import PromptSource, region_spec
from promptloop.optimizer.core.regions import RegionError, locate
from promptloop.optimizer.core.suites import LoadedTask, Suite
from promptloop.optimizer.run.record import merge_result
from promptloop.optimizer.run.trial_input import published_at_for

WORKSPACE = "workspace"
"""The agent's folder inside the trial's own temporary folder (nothing else may appear)."""


def adapter_variant(agent: Agent, root: Path) -> str:
    """What else decides the trials of an agent that runs outside promptloop's agent loop, for
    the trial cache: its table, the files its command names (a changed agent script is
    never served from cache) and the files and folders its `code` key names (an `http`
    agent without one: every code file of the repository), the values of the variables its
    `env` passes (hashed: a trial made with another value is another trial) and, for a
    command or worker, whether it runs in a sandbox (a boxed trial cannot write outside; an
    unboxed one is checked for it). An in-process (`session`) agent has none: its trials are
    keyed as they always were."""
    c = agent.config
    flat = {k: v for k, v in c.flat().items() if k != "description"}
    h = hashlib.sha256(json.dumps(flat, sort_keys=True).encode())
    passed = getattr(c.spec, "env", None) or []
    h.update(json.dumps({n: os.environ.get(n) for n in passed}, sort_keys=True).encode())
    if c.spec.adapter in ("command", "worker"):
        try:
            mechanism: str = box.for_trials()
        except box.SandboxUnavailable:  # no trial runs: each errors, keyed apart
            mechanism = "unavailable"
        h.update(f"box={mechanism}".encode())
    top = root.resolve()
    folders: set[Path] = set()
    for arg in getattr(c.spec, "command", None) or []:
        path = (root / arg).resolve()
        if path.is_relative_to(top) and path.is_file():  # the agent's own files, not python3
            h.update(arg.encode())
            h.update(path.read_bytes())
            folders.add(path.parent)
    for target in agent.targets():
        h.update(_code_around(target, root).encode())
    for rel in c.code:  # declared: the files and folders whose change makes trials stale
        path = (root / rel).resolve()
        if path.is_dir():
            folders.add(path)
        elif path.is_file():
            h.update(f"{rel}\0".encode())
            h.update(path.read_bytes())
        else:
            h.update(f"{rel}\0missing".encode())
    if c.spec.adapter == "http" and not c.code:
        # a service promptloop only calls: its source is somewhere in the repository, unseen
        # from the table (a team's changed and reverted service was served from cache both
        # times): every code file counts, until the table's `code` names the service's own
        folders.add(top)
    skip = {(root / t.path).resolve() for t in agent.targets()}
    skip |= {(root / s).resolve() for s in c.suites}
    for rel, digest in _code_beside(sorted(folders), top, skip):
        h.update(f"{rel}\0{digest}".encode())
    return h.hexdigest()[:16]


CODE_SUFFIXES = frozenset({".py", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx",
                           ".dart", ".rb", ".go", ".rs", ".java", ".kt", ".php", ".pl", ".lua",
                           ".sh", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg"})
"""Files beside an agent's command that may change what it does (its modules, its config)."""
BESIDE_MAX_FILES, BESIDE_MAX_BYTES = 2000, 2 << 20
SKIPPED_DIRS = frozenset({".git", ".promptloop", "node_modules", "__pycache__", ".venv", "venv",
                          ".dart_tool", "build", "dist", ".mypy_cache", ".ruff_cache"})


def _code_beside(folders: list[Path], top: Path, skip: set[Path]) -> list[tuple[str, str]]:
    """(path, content digest) of the code and config files under the folders of the agent's
    command files (a module its script imports, the YAML it reads): a change there is another
    trial, not a cached one. Prompt files are left to the prompt hash and `_code_around`,
    suite folders to the tasks' hashes; dependency and build folders are skipped; at most
    BESIDE_MAX_FILES files of at most BESIDE_MAX_BYTES each. A file is read again only when its
    size or mtime changed (every run of a session asks: `_digest`)."""
    out: dict[str, str] = {}
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS
                                 and not d.startswith(".") and (here / d).resolve() not in skip)
            for name in sorted(filenames):
                path = (here / name).resolve()
                if path.suffix not in CODE_SUFFIXES or path in skip:
                    continue
                rel = path.relative_to(top).as_posix() if path.is_relative_to(top) else str(path)
                try:
                    st = path.stat()
                except OSError:
                    continue
                if rel in out or st.st_size > BESIDE_MAX_BYTES:
                    continue
                digest = _digest(path, st.st_mtime_ns, st.st_size)
                if digest is not None:
                    out[rel] = digest
                if len(out) >= BESIDE_MAX_FILES:
                    return sorted(out.items())
    return sorted(out.items())


@functools.lru_cache(maxsize=4096)
def _digest(path: Path, mtime_ns: int, size: int) -> str | None:
    """sha256 of a file's bytes, once per version of the file (its mtime and size)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _code_around(target: PromptTarget, root: Path) -> str:
    """For a prompt inside a source file: the file's text outside the region (code the agent
    may import beside its prompt: a changed constant there is another trial; the region's own
    text is the prompt, keyed by its hash). '' for a whole-file prompt or a missing file."""
    if target.variable is None and target.begin is None:
        return ""
    path = root / target.path
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    try:
        region = locate(region_spec(target), text)
    except RegionError:
        return f"{target.path}\0{text}"
    return f"{target.path}\0{text[:region.start]}\0{text[region.end:]}"


def copy_fixtures(task: LoadedTask, workspace: Path) -> None:
    """A fresh workspace from the task's fixtures (base, then its own)."""
    workspace.mkdir()
    for src in (task.base_fixture, task.fixture_dir):
        if src is not None:
            trees.copy_tree(src, workspace)


class AgentLink:
    """One suite run's adapter (and gateway, when its kind calls the model over HTTP) for a
    declared agent."""

    def __init__(self, agent: Agent, root: Path, concurrency: int) -> None:
        self.agent = agent
        self.root = root
        self.spec = agent.config.spec
        self.adapter: Adapter = open_adapter(self.spec, AdapterSetup(
            repo_root=root, agent=agent.name,
            workers=max(1, agent.config.concurrency or concurrency)))
        self.gateway: ModelGateway | None = (
            ModelGateway() if self.adapter.uses_gateway else None)
        self._started = False

    @property
    def in_process(self) -> bool:
        """The agent runs in promptloop's agent loop (the table says `adapter = "session"`)."""
        return self.spec.in_process

    async def start(self) -> None:
        if not self._started and self.gateway is not None:
            await self.gateway.start()
            self._started = True

    async def aclose(self) -> None:
        await self.adapter.aclose()
        if self._started and self.gateway is not None:
            await self.gateway.aclose()

    def timeout(self, task: LoadedTask, override: float | None = None) -> float:
        """A trial's time limit: the run's override, else the table's `timeout`, else the
        task's `timeout_seconds`."""
        return override or self.spec.timeout or task.spec.timeout_seconds

    async def attempt(self, suite: Suite, task: LoadedTask, index: int, seed: int, prompt: str,
                      source: PromptSource | None, model: ModelClient, model_id: str,
                      transcript: Transcript, tmp: Path, timeout: float,
                      runtime: RuntimeConfig, agent_options: AgentOptions,
                      agent_input: AgentInput | None = None) -> AdapterOutcome:
        """Run one trial in a fresh workspace `tmp/workspace` made from the task's fixtures.
        Raises what the adapter raises (run/trial.py classifies it)."""
        await self.start()
        workspace = tmp / WORKSPACE
        make = functools.partial(copy_fixtures, task, workspace)
        if not self.in_process:  # file work off the event loop (other trials' calls wait);
            await asyncio.to_thread(make)  # an in-process kind does it with its own, at once
        gateway = self.gateway
        token = gateway.register(model, transcript) if gateway is not None else ""
        target = source.target if source is not None else self.agent.target()
        request = TrialRequest(
            agent=self.agent.name,
            task=task.spec.model_dump(mode="json", by_alias=False, exclude_unset=True),
            prompt=PromptInfo(name=target.name, text=source.value(prompt) if source else prompt,
                              path=target.path,
                              ref=source.ref if source is not None else None,
                              region=(source.describe() if source is not None
                                      and source.region is not None else None)),
            workspace=str(workspace),
            model=ModelEndpoint(base_url=gateway.base_url_for(token) if gateway else "",
                                model=model_id, api_key=token),
            trial=TrialInfo(index=index, seed=seed),
            published_at=published_at_for(suite, task),
            timeout_s=timeout,
        )
        context = TrialContext(model=model, transcript=transcript, runtime=runtime,
                               workspace=workspace, agent_options=agent_options,
                               agent_input=agent_input,
                               trial_key=f"{suite.name}/{task.id}#{index}",
                               make_workspace=make if self.in_process else None)
        model_errors: list[str] = []
        try:
            got = await self.adapter.attempt(request, context)
        finally:
            if gateway is not None:
                model_errors = gateway.unregister(token)
        return _attempted(got, model_errors, transcript, record=not self.in_process)


ExternalAgent = AgentLink
"""The former name (one road now runs every agent, the in-process ones too)."""


def _attempted(got: AdapterOutcome, model_errors: list[str], transcript: Transcript,
               record: bool = True) -> AdapterOutcome:
    """The agent's own record into the trial's transcript (`record`: not for an in-process
    agent, whose transcript the agent loop filled); a model that failed behind the gateway
    makes the trial errored (infrastructure, never the agent)."""
    if got.stderr_tail:
        transcript.event("agent_stderr", got.stderr_tail[-2000:])
    doc = got.result
    if doc is not None and record:
        _record(doc, transcript)
    if model_errors:
        return AdapterOutcome(status="errored", result=doc,
                              message=f"model call failed: {model_errors[0]}",
                              stderr_tail=got.stderr_tail)
    return got


def _record(doc: TrialResultDoc, transcript: Transcript) -> None:
    """The agent's own transcript and usage merged into the trial's, which holds the
    conversation the gateway recorded (optimizer/run/record.py): the richer record, nothing
    dropped."""
    merge_result(doc, transcript)


__all__ = ["AgentLink", "ExternalAgent", "adapter_variant", "copy_fixtures"]
