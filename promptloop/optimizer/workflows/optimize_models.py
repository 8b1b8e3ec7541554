"""Configuration and results of an optimize session (re-exported by workflows.optimize)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from pydantic import BaseModel, Field

from promptloop.optimizer.core.names import AgentName
from promptloop.optimizer.core.project import active_project
from promptloop.optimizer.core.prompt_target import PromptSource
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.core.suites import Suite
from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.run.models import CommandModels
from promptloop.optimizer.run.settings import RunSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    from promptloop.optimizer.core.events import EventSink
    from promptloop.optimizer.core.ledger import CandidateRecord, Ledger
    from promptloop.optimizer.gate.verdict import Verdict
    from promptloop.optimizer.git import Candidate, GitOps
    from promptloop.optimizer.propose.guards import PreparedPatch
    from promptloop.optimizer.propose.proposer import PackageInput
    from promptloop.optimizer.run.adaptive import AdaptiveLimit
    from promptloop.optimizer.run.models import ModelSet
    from promptloop.optimizer.workflows.sources import RepoSource


@dataclass(frozen=True)
class Baseline:
    """The evaluated starting point of a session; one baseline serves every bucket of a suite."""

    base_sha: str
    base_prompt: str
    """The prompt target's text at the base (a region's source text)."""
    suites: list[Suite]
    runs: list[RunResult]
    prompt_source: PromptSource | None = None
    """The target's file at the base: how a new text is checked and spliced into it."""


class OptimizeConfig(CommandModels, RunSettings):
    suite: AgentName
    bucket: str
    iterations: int = Field(3, ge=1)
    candidates: int = Field(1, ge=1, le=16)
    """Patches asked per iteration; with more than one they are screened on the visible
    target tasks (successive halving) and only the winner goes to the gate."""
    base: str = "HEAD"
    max_changed_lines: int = Field(40, ge=1)
    max_removed_share: float = Field(0.3, gt=0, le=1)
    keep_rejected: bool = False
    proposer_cmd: str | None = None
    proposer_env: tuple[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ...] = ()
    """Environment variables passed to `proposer_cmd` besides PATH and the locale (none by
    default: no provider key unless named here)."""
    proposer_format: Literal["auto", "diff", "edits"] = "auto"
    token_budget: int | None = None
    confirm_trials: int = Field(2, ge=0)
    kinds: tuple[str, ...] = ("capability", "regression")
    """Suite folders under tasks/<agent>/ that make up the gate (the target bucket's suite and
    every suite whose buckets must not regress)."""
    policy: GatePolicy = Field(default_factory=GatePolicy)
    repo: Path | None = None
    stop_on_accept: bool = True
    first_iteration: int = Field(1, ge=1)
    """Number of the first iteration to run (a resumed session skips finished ones)."""

    prompt: str | None = None
    """The agent's prompt target to patch (`--prompt`; default: its first)."""

    @property
    def prompt_path(self) -> str:
        """The file of the prompt target being optimized (relative to the repository)."""
        return active_project().agent(self.suite).target(self.prompt).path

    @property
    def fmt(self) -> Literal["diff", "edits"]:
        if self.proposer_format != "auto":
            return self.proposer_format
        return "edits" if self.proposer_id.startswith("local:") else "diff"


class IterationResult(BaseModel):
    iteration: int
    outcome: str
    hypothesis: str = ""
    diff: str = ""
    file_diff: str = ""
    """For a prompt inside a source file: the change as a diff of the whole file (its own line
    numbers, what the branch commits); `diff` is numbered from the region's first line."""
    reasons: list[str] = Field(default_factory=list)
    branch: str | None = None
    commit: str | None = None
    verdict_table: list[dict[str, Any]] = Field(default_factory=list)
    movement: list[str] = Field(default_factory=list)
    """The target's visible and held-out movement (`report.markdown.movement_lines`)."""
    harm: list[str] = Field(default_factory=list)
    """Every other bucket's harm statement and their summary (`report.markdown.harm_lines`)."""
    summary: str = ""
    """The outcome in one plain sentence a user can act on (`report/plain.py`)."""
    method: str = ""
    """How the gate decided (`gate/policy.gate_method_text`): for --verbose, the report, JSON."""
    package_path: str | None = None
    pr_body_path: str | None = None
    tokens: int = 0


class OptimizeResult(BaseModel):
    status: Literal["done", "nothing_to_do"]
    message: str
    suite: str
    bucket: str
    base_commit: str
    baseline_runs: list[str] = Field(default_factory=list)
    baseline_cached_trials: int = 0
    baseline_trials: int = 0
    iterations: list[IterationResult] = Field(default_factory=list)
    accepted_branches: list[str] = Field(default_factory=list)
    ledger_path: str = ""
    session_dir: str = ""
    sources: list[str] = Field(default_factory=list)
    """What was evaluated and where it was read (`prompt: prompts/x.md @ HEAD 1a2b3c4`)."""
    warnings: list[str] = Field(default_factory=list)


class IterationHost(Protocol):
    """What one iteration (workflows/iteration.py) needs of the optimize session running it:
    the session's config, clients, repository, ledger and runs. `Optimizer` is one; the
    iteration never imports it."""

    c: OptimizeConfig
    command: str
    """The command running the session (optimize | nightly), recorded in open ledger records."""
    emit: EventSink
    git: GitOps
    ledger: Ledger
    models: ModelSet
    session: str
    session_dir: Path
    source: RepoSource
    heldout: frozenset[str]
    history: list[RunResult]
    candidate_branches: dict[str, str]
    """Candidate prompt text -> its branch: the runs of that text record role and branch."""

    def record_candidate(self, branch: str, commit: str | None, verdict: str) -> None: ...

    async def run(self, suite: Suite, prompt: str, label: str,
                  indices: dict[str, list[int]] | None = None, *,
                  limit: AdaptiveLimit | None = None) -> RunResult: ...

    def target_runs(self, runs: list[RunResult]) -> tuple[RunResult, str]: ...


class CandidateHost(Protocol):
    """What the tournament (workflows/tournament.py) needs of the iteration running it: its
    number, result, baseline and session, the records it fills, and the four public steps a
    candidate goes through. `Iteration` is one; the tournament never imports it."""

    n: int
    it: IterationResult
    base: Baseline
    opt: IterationHost
    c: OptimizeConfig
    entry: dict[str, Any]
    candidates: list[CandidateRecord]
    screening: list[str]
    selection: Callable[[Verdict], Verdict] | None
    runners_up: list[str]

    def package_input(self) -> PackageInput: ...

    def prepare(self, diff: str) -> PreparedPatch: ...

    def command_diff(self, new_text: str) -> str: ...

    def violations(self, prepared: PreparedPatch) -> list[dict[str, str]]: ...

    async def conclude(self, cand: Candidate, new_prompt: str) -> None: ...
