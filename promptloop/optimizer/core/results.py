"""Results of trials and runs: what the runner produces and the reports, gate and proposer read."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from promptloop.agents.transcript import Transcript
from promptloop.graders.base import Score

TrialStatus = Literal["passed", "failed", "errored", "timedOut", "skipped"]
RESULTS_VERSION = 1


class TrialResult(BaseModel):
    task_id: str
    bucket: str
    trial_index: int
    status: TrialStatus
    started_at: datetime
    ended_at: datetime
    failure_reason: str | None = None
    infra_error: str | None = None
    """Set when the trial errored for reasons outside the agent (provider, key, replay miss, a
    bug in promptloop named as "promptloop bug: ...")."""
    agent_error: str | None = None
    """Set when the trial failed because a tool or outcome capture raised on what the agent did
    (`tool Glob raised RecursionError: ...`): a failure of the agent, never an errored trial."""
    overloaded: bool = Field(default=False, exclude=True)
    """The trial errored because the provider pushed back (its HTTP status was 429 or 5xx).
    Known only to the run that made the calls: never saved."""
    transcript: Transcript = Field(default_factory=Transcript)
    outcome: dict[str, Any] = Field(default_factory=dict)
    scores: list[Score] = Field(default_factory=list)
    cached: bool = False
    seed: int | None = None
    """The seed sent with the agent's model calls (derived from task id and trial index, so
    both sides of a pair share it); None when the provider takes no seed or the trial predates
    seeding."""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def counts(self) -> bool:
        """Whether the trial counts toward rates (infrastructure errors never do)."""
        return self.status in ("passed", "failed", "timedOut")

    @property
    def score(self) -> float:
        """Mean of the decided grader values; 0 for a timed-out trial, one whose tool or outcome
        capture raised, or one with no decided value."""
        if self.status == "timedOut" or self.agent_error:
            return 0.0
        vals = [s.value for s in self.scores if s.value is not None]
        return sum(vals) / len(vals) if vals else 0.0


class ConcurrencyStats(BaseModel):
    """What a run's adaptive limit did."""

    configured: int
    peak: int = 0
    """Most trials that actually ran at once."""
    lowest_limit: int
    final_limit: int
    decreases: int = 0
    increases: int = 0


class TaskInfo(BaseModel):
    """What the original's trace shows of a task: its description and metadata; and its
    input as the task declares it (a text or any JSON; None in runs saved before it was kept),
    which the failure package shows."""

    description: str = ""
    metadata: dict[str, str] = Field(default_factory=dict)
    input: Any = None

    @classmethod
    def of(cls, description: str, metadata: Mapping[str, Any], input: Any = None) -> TaskInfo:
        if isinstance(input, BaseModel):  # the keys the task.json gave, as it gave them
            input = input.model_dump(mode="json", exclude_unset=True)
        return cls(description=description, metadata={k: str(v) for k, v in metadata.items()},
                   input=input)


class Provenance(BaseModel):
    git_commit: str | None = None
    git_dirty: bool | None = None
    prompt_hashes: dict[str, str] = Field(default_factory=dict)
    suite_hash: str = ""
    agent_model: str = ""
    judge_model: str | None = None
    mode: str = "live"
    sources: list[str] = Field(default_factory=list)
    """Where the prompt and the tasks were read (`prompt: prompts/x.md @ HEAD 1a2b3c4`)."""
    agent_batched: bool = False
    """The agent's turns went through provider batches, round by round (`--batch`)."""
    judge_batched: bool = False
    """The judge calls of this run's fresh trials went through a provider batch (`--batch`),
    billed at BATCH_PRICE_FACTOR of the list price."""
    role: str = ""
    """What the run was for (`RUN_ROLES`): eval, an optimize baseline or candidate, a
    review's base or head, or a profile's trials; empty for runs saved before roles were
    recorded."""
    branch: str | None = None
    """The branch holding the evaluated prompt: the candidate's branch, the ref a review or an
    optimize baseline read (None: the working tree or unknown)."""
    candidate_commit: str | None = None
    """A candidate run: the commit of the candidate's prompt on its branch, recorded once the
    verdict is committed (`git_commit` stays the base commit it was branched from)."""
    verdict: str | None = None
    """A candidate run: the iteration's outcome (accepted, rejected, inconclusive), recorded
    with `candidate_commit`; the viewer's trends plot only accepted candidates."""
    session: str | None = None
    """The command that made the run (an optimize session, a review, a profile, an eval; see
    `new_session`): its runs are one evaluation to suite health, however many rounds its gate
    ran. None for runs saved before sessions were recorded (a session each)."""


def new_session() -> str:
    """A fresh `Provenance.session` id (one per command run)."""
    return uuid.uuid4().hex[:12]


RUN_ROLES = ("eval", "baseline", "candidate", "review-base", "review-head", "profile")
"""The values of `Provenance.role`."""


class RunResult(BaseModel):
    version: int = RESULTS_VERSION
    run_name: str
    suite_name: str
    suite_kind: str
    agent_name: str
    suite_root: str
    task_ids: list[str]
    task_buckets: dict[str, str]
    task_info: dict[str, TaskInfo] = Field(default_factory=dict)
    """Task id -> description and metadata (empty for runs saved before it was recorded)."""
    task_pass_threshold: float = 1.0
    require_reference_solution: bool = False
    trials_per_task: dict[str, int] = Field(default_factory=dict)
    started_at: datetime
    ended_at: datetime
    provenance: Provenance = Field(default_factory=Provenance)
    trials: list[TrialResult] = Field(default_factory=list)
    concurrency: ConcurrencyStats | None = None
    """What the adaptive concurrency limit did during the run (None: no trial ran live)."""

    @property
    def all_errored(self) -> bool:
        return bool(self.trials) and all(t.status == "errored" for t in self.trials)

    def trials_of(self, task_id: str) -> list[TrialResult]:
        return sorted((t for t in self.trials if t.task_id == task_id), key=lambda t: t.trial_index)

    @property
    def seeded(self) -> bool:
        """Every trial that counts was sent a seed."""
        counted = [t for t in self.trials if t.counts]
        return bool(counted) and all(t.seed is not None for t in counted)


def seeded_pairing(base: Sequence[RunResult], cand: Sequence[RunResult]) -> bool:
    """Whether every trial paired across `base` and `cand` (same suite position, task id and
    trial index, both counted) was sent the same seed on both sides: common random numbers.
    False when nothing is paired."""
    paired = 0
    for b, c in zip(base, cand, strict=True):
        seeds = {(t.task_id, t.trial_index): t.seed for t in b.trials if t.counts}
        for t in c.trials:
            key = (t.task_id, t.trial_index)
            if not t.counts or key not in seeds:
                continue
            if t.seed is None or seeds[key] != t.seed:
                return False
            paired += 1
    return paired > 0


def pairing_label(seeded: bool) -> str:
    return "paired (seeded)" if seeded else "paired (unseeded)"


def pairing_text(seeded: bool) -> str:
    """How base and candidate trials were paired, as the verdict and reports say it."""
    if seeded:
        return (f"{pairing_label(True)}: trials of the same task and trial index sent the same "
                "seed to the model on both sides")
    return (f"{pairing_label(False)}: trials of the same task and trial index are paired, but "
            "not every pair was sent one seed (the provider takes none, or cached trials "
            "predate seeding), so their random draws are independent")
