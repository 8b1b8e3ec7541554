"""`promptloop review`: evaluate the prompts of two git refs and gate the change like optimize.

Works for any prompt change, a colleague's PR as well as promptloop's own branches. Prompts are
read from the git object database at both refs (the checkout is never touched), the agent's
suites run once per prompt (base-side trials come from the trial cache when that prompt was
evaluated before), trials are paired, suspected regressions are confirmed with extra trials,
and the result is written as a PR comment under `<state>/review/<id>/`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agents.llm.types import ModelClient, Usage
from optimizer.core.config import DEFAULT_AGENT_MODEL, ConfigError, default_judge, make_client
from optimizer.core.config import provenance as git_provenance
from optimizer.core.results import RunResult
from optimizer.core.suites import AGENT_NAMES, Suite
from optimizer.gate.compare import BucketComparison, GatePolicy
from optimizer.gate.policy import POOLED, ReviewDecision, ReviewVerdict, decide_review
from optimizer.git import GitOps, GitOpsError
from optimizer.propose.package import FailingTrial, export_failing
from optimizer.run.runner import ProgressFn, RunOptions, needs_judge
from optimizer.workflows.gating import paired
from optimizer.workflows.paired import (
    agent_suites,
    bucket_prefix,
    compare_suite_runs,
    confirm_suspects,
    run_and_save,
)

REVIEW_VERSION = 1
Event = Callable[[str, dict[str, Any]], None]


class ReviewConfig(BaseModel):
    """Everything one review needs; the CLI flags map onto these fields one to one."""

    model_config = ConfigDict(extra="forbid")

    base: str
    head: str = "HEAD"
    suite: Literal["card_agent", "pkm_agent"] | None = None
    """Review only this agent; None = every agent whose prompt differs."""
    agent_model: str = DEFAULT_AGENT_MODEL
    judge_model: str | None = None
    base_url: str | None = None
    trials: int | None = Field(None, ge=1)
    concurrency: int | None = Field(None, ge=1)
    confirm_trials: int = Field(2, ge=0)
    kinds: tuple[str, ...] = ("capability", "regression")
    policy: GatePolicy = Field(default_factory=GatePolicy)
    repo: Path | None = None
    state_dir: Path = Path(".promptloop")


class TrialChange(BaseModel):
    """A paired trial whose pass/fail flipped between base and head."""

    bucket: str
    task_id: str
    trial_index: int
    status: str
    failure_reason: str | None = None
    detail: FailingTrial | None = None
    """For newly failing trials: input, grader verdicts with rationales, tool trace."""


class AgentReview(BaseModel):
    agent: str
    prompt_path: str
    decision: ReviewDecision
    reasons: list[str]
    regressed: list[str]
    improved: list[str]
    comparisons: list[BucketComparison]
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


class ReviewResult(BaseModel):
    version: int = REVIEW_VERSION
    status: Literal["reviewed", "nothing_to_review"]
    decision: ReviewDecision | None = None
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
    diff: str = ""
    tokens: int = 0
    review_dir: str = ""
    comment_path: str | None = None

    @property
    def regressed_buckets(self) -> list[str]:
        return [f"{a.agent}:{b}" for a in self.agents for b in a.regressed]


def combine(decisions: list[ReviewDecision]) -> ReviewDecision:
    """Overall decision over agents, with the same rule as for buckets."""
    if "regresses" in decisions:
        return "regresses"
    return "improves" if "improves" in decisions else "neutral"


def trial_flips(base: RunResult, head: RunResult) -> tuple[list[TrialChange], list[TrialChange]]:
    """(newly failing, fixed) paired trials, in task order; errored trials are not evidence."""
    prefix = bucket_prefix(base.suite_kind)
    before = {(t.task_id, t.trial_index): t for t in base.trials if t.counts}
    rank = {tid: i for i, tid in enumerate(head.task_ids)}
    broken: list[TrialChange] = []
    fixed: list[TrialChange] = []
    for t in sorted(head.trials, key=lambda t: (rank.get(t.task_id, 1 << 30), t.trial_index)):
        b = before.get((t.task_id, t.trial_index))
        if b is None or not t.counts or b.passed == t.passed:
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


class Reviewer:
    """One review. Clients may be injected (tests); otherwise they are built from model ids."""

    def __init__(
        self,
        config: ReviewConfig,
        *,
        agent: ModelClient | None = None,
        judge: ModelClient | None = None,
        on_event: Event | None = None,
        progress: Callable[[str], ProgressFn] | None = None,
    ) -> None:
        self.c = config
        self.repo = config.repo or Path.cwd()
        self._agent, self._judge = agent, judge
        self._owned: list[ModelClient] = []
        self.emit = on_event or (lambda _k, _p: None)
        self.progress = progress or (lambda _label: lambda _k, _p: None)
        self.review_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.review_dir = config.state_dir / "review" / self.review_id
        self.usage = Usage()
        self._commits: dict[str, str] = {}

    # --- models -------------------------------------------------------------------------
    def _agent_client(self) -> ModelClient:
        if self._agent is None:
            self._agent = make_client(self.c.agent_model, self.c.base_url)
            self._owned.append(self._agent)
        return self._agent

    @property
    def judge_id(self) -> str:
        return self.c.judge_model or default_judge(self.c.agent_model)

    def _judge_client(self) -> ModelClient:
        if self._judge is None:
            if self.judge_id == self.c.agent_model:
                self._judge = self._agent_client()
            else:
                self._judge = make_client(self.judge_id, self.c.base_url)
                self._owned.append(self._judge)
        return self._judge

    async def aclose(self) -> None:
        for client in self._owned:
            await client.aclose()

    # --- evaluation ---------------------------------------------------------------------
    async def _run(
        self, suite: Suite, prompt: str, label: str, indices: dict[str, list[int]] | None = None
    ) -> RunResult:
        judge = self._judge_client() if needs_judge(suite) else None
        options = RunOptions(
            agent_model=self.c.agent_model,
            judge_model=self.judge_id if judge else None,
            trials=self.c.trials,
            concurrency=self.c.concurrency,
            state_dir=self.c.state_dir,
            prompt_text=prompt,
            trial_indices=indices,
            run_name=f"{suite.name}-review-{self.review_id}-{label.replace(' ', '-')}",
        )
        prov = git_provenance(self.repo).model_copy(
            update={"git_commit": self._commits.get(prompt), "git_dirty": False}
        )
        saved = await run_and_save(
            suite,
            options,
            self._agent_client(),
            judge,
            self.progress(f"{label} {suite.name}"),
            prov,
        )
        self.usage = self.usage + saved.usage
        return saved.run

    def _decide(self, comps: list[BucketComparison], base: list[RunResult],
                head: list[RunResult]) -> ReviewVerdict:
        pooled = [x for pairs in paired(base, head).values() for x in pairs]
        return decide_review(comps, self.c.policy, pooled)

    async def _review_agent(self, agent: str, base_text: str, head_text: str) -> AgentReview:
        suites = agent_suites(agent, self.c.kinds, self.repo)
        self.emit("phase", {"message": f"{agent}: evaluating the base prompt"})
        base_runs = [await self._run(s, base_text, "base") for s in suites]
        self.emit("phase", {"message": f"{agent}: evaluating the head prompt"})
        head_runs = [await self._run(s, head_text, "head") for s in suites]
        comps = compare_suite_runs(base_runs, head_runs, self.c.policy)
        verdict: ReviewVerdict = self._decide(comps, base_runs, head_runs)
        base_final, head_final = base_runs, head_runs
        confirmed: list[str] = []
        suspects = sorted({*verdict.regressed, *verdict.suspects} - {POOLED})
        if suspects and self.c.confirm_trials:
            confirmed = suspects
            base_final, head_final = await confirm_suspects(
                suites,
                base_runs,
                head_runs,
                (base_text, head_text),
                confirmed,
                extra_trials=self.c.confirm_trials,
                run=self._run,
                emit=self.emit,
                labels=("confirm base", "confirm head"),
            )
            comps = compare_suite_runs(base_final, head_final, self.c.policy)
            verdict = self._decide(comps, base_final, head_final)
        self.emit("phase", {"message": f"{agent}: {verdict.decision}"})
        broken: list[TrialChange] = []
        fixed: list[TrialChange] = []
        for b, h in zip(base_final, head_final, strict=True):
            nb, fx = trial_flips(b, h)
            broken += nb
            fixed += fx
        return AgentReview(
            agent=agent,
            prompt_path=f"prompts/{agent}.md",
            decision=verdict.decision,
            reasons=verdict.reasons,
            regressed=verdict.regressed,
            improved=verdict.improved,
            comparisons=comps,
            confirmed_buckets=confirmed,
            base_runs=[r.run_name for r in base_final],
            head_runs=[r.run_name for r in head_final],
            base_trials=sum(len(r.trials) for r in base_runs),
            base_cached_trials=sum(t.cached for r in base_runs for t in r.trials),
            head_trials=sum(len(r.trials) for r in head_runs),
            head_cached_trials=sum(t.cached for r in head_runs for t in r.trials),
            newly_failing=broken,
            fixed=fixed,
        )

    # --- the review ---------------------------------------------------------------------
    def _changed_prompts(
        self, git: GitOps, base_sha: str, head_sha: str, result: ReviewResult
    ) -> list[tuple[str, str, str]]:
        """(agent, base text, head text) of every agent to review; fills unchanged/notes."""
        changed = []
        for agent in [self.c.suite] if self.c.suite else list(AGENT_NAMES):
            path = f"prompts/{agent}.md"
            texts: list[str | None] = []
            for sha in (base_sha, head_sha):
                try:
                    texts.append(git.read_file(sha, path))
                except GitOpsError:
                    texts.append(None)
            base_text, head_text = texts
            if base_text is None or head_text is None:
                where = (
                    "either ref"
                    if base_text is None and head_text is None
                    else "the base"
                    if base_text is None
                    else "the head"
                )
                if self.c.suite:
                    raise ConfigError(f"{path} does not exist at {where}: nothing to compare")
                if base_text is not None or head_text is not None:
                    result.notes.append(f"{path} does not exist at {where}: not reviewed")
                continue
            if base_text == head_text:
                result.unchanged.append(agent)
            else:
                changed.append((agent, base_text, head_text))
        return changed

    async def review(self) -> ReviewResult:
        with GitOps(self.repo) as git:
            base_sha, head_sha = git.resolve(self.c.base), git.resolve(self.c.head)
            result = ReviewResult(
                status="reviewed",
                message="",
                review_id=self.review_id,
                base_ref=self.c.base,
                head_ref=self.c.head,
                base_commit=base_sha,
                head_commit=head_sha,
                agent_model=self.c.agent_model,
                policy=self.c.policy,
                confirm_trials=self.c.confirm_trials,
            )
            changed = self._changed_prompts(git, base_sha, head_sha, result)
            if not changed:
                result.status = "nothing_to_review"
                which = f"prompts/{self.c.suite}.md" if self.c.suite else "no agent prompt"
                result.message = (
                    f"nothing to review: {which} {'is unchanged' if self.c.suite else 'changed'}"
                    f" between {self.c.base} ({base_sha[:10]}) and {self.c.head} "
                    f"({head_sha[:10]})"
                )
                return result
            result.diff = git.diff_files(
                base_sha, head_sha, [f"prompts/{a}.md" for a, *_ in changed]
            )
        for agent, base_text, head_text in changed:
            self._commits[base_text], self._commits[head_text] = base_sha, head_sha
            result.agents.append(await self._review_agent(agent, base_text, head_text))
        result.decision = combine([a.decision for a in result.agents])
        result.tokens = self.usage.total_tokens
        regressed = result.regressed_buckets
        improved = [f"{a.agent}:{b}" for a in result.agents for b in a.improved]
        if regressed:
            detail = f"regressed bucket(s): {', '.join(regressed)}"
        elif improved:
            detail = f"improved bucket(s): {', '.join(improved)}; none regressed"
        else:
            detail = "no bucket changed beyond the thresholds"
        result.message = f"{result.decision}: {detail}"
        self._write(result)
        return result

    def _write(self, result: ReviewResult) -> None:
        from optimizer.workflows.review_comment import render_comment

        self.review_dir.mkdir(parents=True, exist_ok=True)
        result.review_dir = str(self.review_dir)
        comment = self.review_dir / "comment.md"
        result.comment_path = str(comment)
        comment.write_text(render_comment(result), encoding="utf-8")
        (self.review_dir / "result.json").write_text(
            result.model_dump_json(indent=2), encoding="utf-8"
        )


async def review(config: ReviewConfig, **kw: Any) -> ReviewResult:
    """Run one review (see `Reviewer` for the injectable clients and callbacks)."""
    reviewer = Reviewer(config, **kw)
    try:
        return await reviewer.review()
    finally:
        await reviewer.aclose()


__all__ = [
    "AgentReview",
    "ReviewConfig",
    "ReviewResult",
    "Reviewer",
    "TrialChange",
    "combine",
    "review",
    "trial_flips",
]
