"""What a review is given and what it finds: `ReviewConfig`, `ReviewResult` (+ per agent), and
the paired trials whose pass/fail flipped between the refs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from promptloop.optimizer.core.buckets import bucket_prefix
from promptloop.optimizer.core.names import AgentName
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.gate.compare import BucketComparison, GatePolicy
from promptloop.optimizer.gate.pairing import pair_runs
from promptloop.optimizer.gate.verdict import BucketVerdict, ReviewDecision
from promptloop.optimizer.propose.package import FailingTrial, export_failing
from promptloop.optimizer.run.models import AgentJudgeModels
from promptloop.optimizer.run.settings import RunSettings

REVIEW_VERSION = 1

ReviewOutcome = ReviewDecision | Literal["broken"]
"""An agent's or a review's verdict: the gate's decision, or "broken" when the head's prompt
source fails the region guard (no trial is run for that agent)."""


class ReviewConfig(AgentJudgeModels, RunSettings):
    """Everything one review needs; the CLI flags map onto these fields one to one."""

    model_config = ConfigDict(extra="forbid")

    base: str
    head: str = "HEAD"
    suite: AgentName | None = None
    """Review only this agent; None = every agent whose prompt differs."""
    confirm_trials: int = Field(2, ge=0)
    kinds: tuple[str, ...] = ("capability", "regression")
    policy: GatePolicy = Field(default_factory=GatePolicy)
    repo: Path | None = None
    trust_head: bool = False
    """Run the head's promptloop.toml commands (adapters, command graders); by default the
    base's are used, so a PR cannot run code in the reviewer's CI (unsafe for forks)."""
    no_sandbox: bool = False
    """Run command and worker agents without a sandbox where none works (unsafe for forks)."""
    models_by_agent: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Agent -> its table's `agent_model` / `judge_model`, where the agents declare different
    ones and no flag chose one: each agent under review runs on its own (the CLI fills it)."""


class TrialChange(BaseModel):
    """A paired trial whose pass/fail flipped between base and head."""

    bucket: str
    task_id: str
    trial_index: int
    status: str
    failure_reason: str | None = None
    detail: FailingTrial | None = None
    """For newly failing trials: input, grader verdicts with rationales, tool trace."""


class HeadBreak(BaseModel):
    """A prompt target whose head version fails the region guard (`region_guard.HeadCheck`)."""

    path: str
    region: str
    """The region as the base holds it, e.g. 'triple-quoted string X (lines 6-25)'."""
    line: int | None = None
    """The head file's line where it breaks."""
    code: Literal["breaks_literal", "outside_region"]
    reason: str

    @property
    def where(self) -> str:
        """'lib/p.dart line 14' (the file and line a reader opens)."""
        return self.path + (f" line {self.line}" if self.line else "")


class AgentReview(BaseModel):
    agent: str
    prompt_path: str
    decision: ReviewOutcome
    reasons: list[str]
    regressed: list[str]
    improved: list[str]
    comparisons: list[BucketComparison]
    open: list[str] = Field(default_factory=list)
    """Buckets whose harm was not ruled out (the review is inconclusive for them)."""
    buckets: list[BucketVerdict] = Field(default_factory=list)
    """Every bucket's harm statement: no harm, harm not ruled out, or regressed."""
    harm_trials: int = 0
    """Trials harm detection ran on top of the base, head and confirmation trials."""
    confirmed_buckets: list[str] = Field(default_factory=list)
    """Buckets that looked regressed and were re-run with extra trials before the verdict."""
    base_runs: list[str]
    head_runs: list[str]
    base_trials: int
    base_cached_trials: int
    head_trials: int
    head_cached_trials: int
    newly_failing: list[TrialChange] = Field(default_factory=list)
    fixed: list[TrialChange] = Field(default_factory=list)
    paired_trials: int = 0
    """Counted trials paired base/head over the final runs (the first round and every trial
    harm detection added): what `fixed` and `newly_failing` are counted out of."""
    seeded: bool = False
    """Every paired trial was sent the same seed on both sides (`results.seeded_pairing`)."""
    head_breaks: list[HeadBreak] = Field(default_factory=list)
    """Why the verdict is "broken": the head's prompt targets that fail the region guard."""


class ReviewResult(BaseModel):
    version: int = REVIEW_VERSION
    status: Literal["reviewed", "nothing_to_review"]
    decision: ReviewOutcome | None = None
    message: str
    review_id: str
    base_ref: str
    head_ref: str
    base_commit: str
    head_commit: str
    agent_model: str
    policy: GatePolicy = Field(default_factory=GatePolicy)
    confirm_trials: int = 0
    agents: list[AgentReview] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    """Agents whose prompt is identical at both refs."""
    notes: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    """What was compared and where it was read (`tasks: tasks/x/capability @ HEAD 1a2b3c4`)."""
    diff: str = ""
    tokens: int = 0
    review_dir: str = ""
    comment_path: str | None = None

    @property
    def regressed_buckets(self) -> list[str]:
        return [f"{a.agent}:{b}" for a in self.agents for b in a.regressed]


def combine(decisions: list[ReviewOutcome]) -> ReviewOutcome:
    """Overall decision over agents, with the same rule as for buckets; a broken head first."""
    if "broken" in decisions:
        return "broken"
    if "regresses" in decisions:
        return "regresses"
    if "inconclusive" in decisions:
        return "inconclusive"
    return "improves" if "improves" in decisions else "neutral"


def paired_count(base: RunResult, head: RunResult) -> int:
    """The trials the gate pairs between the two runs (`gate.pairing.pair_runs`)."""
    return sum(len(pairs) for pairs in pair_runs(base, head).values())


def trial_flips(base: RunResult, head: RunResult) -> tuple[list[TrialChange], list[TrialChange]]:
    """(newly failing, fixed) trials, in task order; errored trials are not evidence. A head
    trial is compared with the base's trial of the same index; one without (harm detection's
    later trials) with the task's base trials when they all agree: a failure of a task that
    always passed on the base is newly failing, a pass of one that always failed is fixed."""
    prefix = bucket_prefix(base.suite_kind)
    before = {(t.task_id, t.trial_index): t for t in base.trials if t.counts}
    record: dict[str, set[bool]] = {}
    for t in base.trials:
        if t.counts:
            record.setdefault(t.task_id, set()).add(t.passed)
    rank = {tid: i for i, tid in enumerate(head.task_ids)}
    broken: list[TrialChange] = []
    fixed: list[TrialChange] = []
    for t in sorted(head.trials, key=lambda t: (rank.get(t.task_id, 1 << 30), t.trial_index)):
        if not t.counts:
            continue
        b = before.get((t.task_id, t.trial_index))
        was = {b.passed} if b is not None else record.get(t.task_id, set())
        if len(was) != 1 or t.passed in was:
            continue
        change = TrialChange(
            bucket=prefix + head.task_buckets.get(t.task_id, t.bucket),
            task_id=t.task_id,
            trial_index=t.trial_index,
            status=t.status,
            failure_reason=t.failure_reason,
        )
        (fixed if t.passed else broken).append(change)
    if broken:
        details: dict[tuple[str, int], FailingTrial] = {}
        for bucket in sorted({c.bucket[len(prefix) :] for c in broken}):
            export = export_failing(head, bucket, max_trials=len(head.trials))
            details.update({(f.task_id, f.trial_index): f for f in export.trials})
        broken = [
            c.model_copy(update={"detail": details.get((c.task_id, c.trial_index))}) for c in broken
        ]
    return broken, fixed
