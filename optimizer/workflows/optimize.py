"""`promptloop optimize`: baseline -> package -> proposal -> guards -> branch -> rerun -> gate.

The user's checkout is never touched: the base prompt is read from the git object database, each
candidate lives in a temporary worktree on its own branch, and state goes to the state folder.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agents.llm.errors import ModelError
from agents.llm.types import ModelClient, Usage
from agents.runtime import RuntimeConfig
from optimizer.core.buckets import BucketError, BucketId, qualified, resolve_bucket
from optimizer.core.config import ConfigError, default_judge, make_client, provenance
from optimizer.core.ledger import Ledger, LedgerEntry, diff_hash
from optimizer.core.pricing import estimate_cost
from optimizer.core.results import RunResult
from optimizer.core.suites import Suite
from optimizer.gate.compare import BucketComparison
from optimizer.gate.policy import Verdict
from optimizer.gate.sequential import TrialRequest, heldout_tasks
from optimizer.git import GitOps
from optimizer.propose.guards import PreparedPatch, prepare_patch
from optimizer.propose.literals import LiteralIndex, build_literal_index
from optimizer.propose.package import export_failing, render_failing_markdown
from optimizer.propose.patch import PatchError
from optimizer.propose.proposer import (
    PackageInput,
    Proposal,
    ProposerError,
    UnusableProposalError,
    ask_model,
    build_package,
    counter_examples,
    hypothesis_from_output,
    run_command,
)
from optimizer.run.runner import ProgressFn, RunOptions, needs_judge
from optimizer.workflows.gating import bucket_tasks, run_gate
from optimizer.workflows.optimize_models import (
    Baseline,
    IterationResult,
    OptimizeConfig,
    OptimizeResult,
)
from optimizer.workflows.paired import agent_suites, run_and_save
from optimizer.workflows.pr import commit_message, pr_body, trial_changes

MANUAL = Path(__file__).resolve().parents[2] / "manuals" / "prompt_engineering.md"
Event = Callable[[str, dict[str, Any]], None]


class Optimizer:
    """One optimize session. Clients may be injected (tests); otherwise built from model ids.

    `before_iteration(n)` returning False ends the loop before iteration n (a nightly budget);
    `after_iteration(result)` runs after each iteration (a nightly checkpoint); `session` fixes
    the session id so a resumed session keeps its ledger ids and folders.
    """

    def __init__(
        self,
        config: OptimizeConfig,
        *,
        agent: ModelClient | None = None,
        judge: ModelClient | None = None,
        proposer: ModelClient | None = None,
        on_event: Event | None = None,
        progress: Callable[[str], ProgressFn] | None = None,
        before_iteration: Callable[[int], bool] | None = None,
        after_iteration: Callable[[IterationResult], None] | None = None,
        session: str | None = None,
    ) -> None:
        self.c = config
        self.before_iteration = before_iteration
        self.after_iteration = after_iteration
        self._agent, self._judge, self._proposer = agent, judge, proposer
        self.emit = on_event or (lambda _k, _p: None)
        self.progress = progress or (lambda _label: lambda _k, _p: None)
        self.git = GitOps(config.repo or Path.cwd())
        self.ledger = Ledger(config.state_dir / "ledger.jsonl")
        self.session = session or f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.session_dir = config.state_dir / "optimize" / self.session
        self.usage = Usage()
        self.cost_usd: float | None = 0.0
        """Estimated dollars spent so far (None once a model's price is unknown)."""
        self._owned: list[ModelClient] = []
        self.heldout: frozenset[str] = frozenset()

    # --- models -------------------------------------------------------------------------
    def _client(self, which: str) -> ModelClient:
        c = self.c
        if which == "agent":
            if self._agent is None:
                self._agent = make_client(c.agent_model, c.base_url)
                self._owned.append(self._agent)
            return self._agent
        if which == "judge":
            if self._judge is None:
                jid = c.judge_model or default_judge(c.agent_model)
                self._judge = (
                    self._client("agent") if jid == c.agent_model else make_client(jid, c.base_url)
                )
                if self._judge is not self._agent:
                    self._owned.append(self._judge)
            return self._judge
        if self._proposer is None:
            self._proposer = (
                self._client("agent")
                if c.proposer_id == c.agent_model
                else make_client(c.proposer_id, c.base_url)
            )
            if self._proposer is not self._agent:
                self._owned.append(self._proposer)
        return self._proposer

    def _spend(self, usage: Usage, usd: float | None) -> None:
        self.usage = self.usage + usage
        self.cost_usd = None if usd is None or self.cost_usd is None else self.cost_usd + usd

    async def aclose(self) -> None:
        for client in self._owned:
            await client.aclose()

    # --- evaluation ---------------------------------------------------------------------
    def _suites(self) -> list[Suite]:
        return agent_suites(self.c.suite, self.c.kinds, self.c.repo or Path.cwd())

    async def _run(
        self, suite: Suite, prompt: str, label: str, indices: dict[str, list[int]] | None = None
    ) -> RunResult:
        judge = self._client("judge") if needs_judge(suite) else None
        options = RunOptions(
            agent_model=self.c.agent_model,
            judge_model=(self.c.judge_model or default_judge(self.c.agent_model))
            if judge
            else None,
            trials=self.c.trials,
            concurrency=self.c.concurrency,
            state_dir=self.c.state_dir,
            prompt_text=prompt,
            trial_indices=indices,
            runtime=RuntimeConfig(max_turns=self.c.max_turns, max_runs=self.c.max_runs),
        )
        saved = await run_and_save(
            suite,
            options,
            self._client("agent"),
            judge,
            self.progress(f"{label} {suite.name}"),
            provenance(self.c.repo),
        )
        self._spend(saved.usage, saved.usd)
        return saved.run

    # --- the loop -----------------------------------------------------------------------
    def _check_bucket(self, suites: list[Suite]) -> None:
        """Resolve `--bucket` in the one bucket namespace (`regression/x` always, `x` when
        unique); from here on `self.c.bucket` is the qualified name."""
        known = [qualified(s.config.kind, b) for s in suites for b in s.buckets]
        try:
            self.c = self.c.model_copy(update={"bucket": resolve_bucket(self.c.bucket, known)})
        except BucketError as err:
            raise ConfigError(f"{self.c.suite}: {err}") from None
        self.heldout = heldout_tasks(self._target_tasks(suites), self.c.policy,
                                     salt=self.c.bucket)

    def _target_tasks(self, suites: list[Suite]) -> list[str]:
        tasks, _ = bucket_tasks(suites)
        return tasks[self.c.bucket]

    def _target_runs(self, runs: list[RunResult]) -> tuple[RunResult, str]:
        """The run holding the target bucket, and the bucket's name inside that run's suite,
        without the held-out tasks (the proposer never sees them)."""
        target = BucketId.parse(self.c.bucket)
        for r in runs:
            if r.suite_kind == target.kind and any(t.bucket == target.name for t in r.trials):
                visible = [t for t in r.trials if t.task_id not in self.heldout]
                return r.model_copy(update={"trials": visible}), target.name
        raise ConfigError(f"no run holds bucket {self.c.bucket!r}")

    async def run_baseline(self) -> Baseline:
        """Evaluate the base prompt on every suite kind (cached trials are reused)."""
        c = self.c
        base_sha = self.git.resolve(c.base)
        base_prompt = self.git.read_file(base_sha, c.prompt_path)
        suites = self._suites()
        self.emit("phase", {"message": f"baseline of {c.suite} at {base_sha[:12]}"})
        runs = [await self._run(s, base_prompt, "baseline") for s in suites]
        return Baseline(base_sha, base_prompt, suites, runs)

    async def optimize(self, baseline: Baseline | None = None) -> OptimizeResult:
        """Run the session; `baseline` (from `run_baseline`) skips evaluating the base again."""
        c = self.c
        if baseline is None:
            self._check_bucket(self._suites())
            if not c.proposer_cmd:
                # a bad proposer key must fail before the baseline is paid for
                await self._client("proposer").preflight()
            baseline = await self.run_baseline()
        else:
            self._check_bucket(baseline.suites)
        base_sha, base_prompt = baseline.base_sha, baseline.base_prompt
        suites, base_runs = baseline.suites, baseline.runs
        cached = sum(t.cached for r in base_runs for t in r.trials)
        total = sum(len(r.trials) for r in base_runs)
        result = OptimizeResult(
            status="done",
            message="",
            suite=c.suite,
            bucket=c.bucket,
            base_commit=base_sha,
            baseline_runs=[r.run_name for r in base_runs],
            baseline_cached_trials=cached,
            baseline_trials=total,
            ledger_path=str(self.ledger.path),
            session_dir=str(self.session_dir),
        )
        self.emit("baseline", {"cached": cached, "total": total})
        target_run, local = self._target_runs(base_runs)
        failing = [t for t in target_run.trials
                   if t.bucket == local and t.status in ("failed", "timedOut")]
        if not failing:
            result.status = "nothing_to_do"
            result.message = f"bucket '{c.bucket}' has no failing trials at {base_sha[:12]}"
            return result
        literals = build_literal_index(suites, base_prompt, MANUAL.read_text(encoding="utf-8"))
        for iteration in range(c.first_iteration, c.iterations + 1):
            if self.before_iteration is not None and not self.before_iteration(iteration):
                break
            it = await self._iteration(
                iteration, suites, base_runs, base_sha, base_prompt, literals
            )
            result.iterations.append(it)
            if self.after_iteration is not None:
                self.after_iteration(it)
            if it.outcome == "accepted" and it.branch:
                result.accepted_branches.append(it.branch)
                if c.stop_on_accept:
                    break
        n_acc = len(result.accepted_branches)
        result.message = (
            f"{n_acc} accepted branch(es): {', '.join(result.accepted_branches)}"
            if n_acc
            else "no proposal was accepted; the base prompt stays"
        )
        return result

    def _entry(self, iteration: int, base_sha: str, **kw: Any) -> LedgerEntry:
        return LedgerEntry(
            id=f"{self.session}-{iteration}",
            suite=self.c.suite,
            agent=self.c.suite,
            bucket=self.c.bucket,
            iteration=iteration,
            base_commit=base_sha,
            prompt_path=self.c.prompt_path,
            proposer=self.c.proposer_cmd or self.c.proposer_id,
            **kw,
        )

    def _package(self, base_runs: list[RunResult], base_prompt: str) -> PackageInput:
        c = self.c
        target_run, local = self._target_runs(base_runs)
        export = export_failing(target_run, local)
        budget = c.token_budget or (2500 if c.proposer_id.startswith("local:") else 12_000)
        return PackageInput(
            prompt_path=c.prompt_path,
            prompt_text=base_prompt,
            bucket=c.bucket,
            failing_md=render_failing_markdown(export),
            counter_md=counter_examples(
                [r if r.run_name != target_run.run_name else target_run for r in base_runs],
                local),
            manual=MANUAL.read_text(encoding="utf-8"),
            rejected=self.ledger.rejected(c.suite, c.bucket),
            max_changed_lines=c.max_changed_lines,
            token_budget=budget,
            fmt=c.fmt,
        )

    def _prepare(self, diff: str, base_prompt: str, literals: LiteralIndex) -> PreparedPatch:
        return prepare_patch(
            diff,
            target_path=self.c.prompt_path,
            original=base_prompt,
            protected_literals=literals,
            max_changed_lines=self.c.max_changed_lines,
            max_removed_share=self.c.max_removed_share,
        )

    async def _propose(
        self,
        iteration: int,
        package_input: PackageInput,
        base_prompt: str,
        literals: LiteralIndex,
        worktree: Path | None,
    ) -> tuple[Proposal, str]:
        """Returns the proposal and the package path."""
        package = build_package(package_input)
        folder = self.session_dir / f"iter-{iteration}"
        path = package.write(folder)
        self.emit(
            "proposing", {"iteration": iteration, "tokens": package.tokens, "package": str(path)}
        )
        if self.c.proposer_cmd:
            assert worktree is not None
            out = await run_command(
                self.c.proposer_cmd, worktree, path, self.c.prompt_path, self.c.bucket
            )
            diff = worktree_diff(worktree)
            (folder / "reply.md").write_text(out, encoding="utf-8")
            return Proposal(hypothesis_from_output(out), diff, out, 1, Usage(), "command"), str(
                path
            )
        proposal = await ask_model(
            self._client("proposer"),
            package,
            fmt=package_input.fmt,
            prompt_path=self.c.prompt_path,
            original=base_prompt,
            check=lambda d: _discard(self._prepare(d, base_prompt, literals)),
        )
        (folder / "reply.md").write_text(proposal.raw_reply, encoding="utf-8")
        self._spend(proposal.usage, estimate_cost(self.c.proposer_id, proposal.usage).usd)
        return proposal, str(path)

    def _violations(self, prepared: PreparedPatch) -> list[dict[str, str]]:
        """Guard refusals of a prepared patch, plus a repeat of an idea already in the ledger."""
        out = [{"code": v.code, "message": v.message} for v in prepared.violations]
        seen = self.ledger.seen_diff(self.c.suite, self.c.bucket, diff_hash(prepared.diff))
        if seen is not None and not out:
            out.append(
                {
                    "code": "duplicate",
                    "message": (
                        f"the same change was already evaluated as {seen.id} ({seen.outcome})"
                    ),
                }
            )
        return out

    async def _evaluate(
        self, suites: list[Suite], base_runs: list[RunResult], base_prompt: str, new_prompt: str
    ) -> tuple[Verdict, list[BucketComparison], list[RunResult], list[RunResult]]:
        """The sequential gate (optimizer/gate/sequential.py) over real runs: the target's
        tasks first, rounds of trials only where the decision needs them, then the rest."""

        def stage(req: TrialRequest) -> None:
            self.emit("phase", {"message": f"gate {req.stage}: {req.reason}"})

        gated = await run_gate(suites, base_runs, (base_prompt, new_prompt), self.c.bucket,
                               self.c.policy, self._run, heldout=self.heldout, on_stage=stage)
        return gated.verdict, gated.comparisons, gated.base_runs, gated.cand_runs

    async def _iteration(
        self,
        iteration: int,
        suites: list[Suite],
        base_runs: list[RunResult],
        base_sha: str,
        base_prompt: str,
        literals: LiteralIndex,
    ) -> IterationResult:
        c = self.c
        it = IterationResult(iteration=iteration, outcome="error")
        tokens_before, usd_before = self.usage.total_tokens, self.cost_usd
        branch = self.git.unique_branch_name(c.suite, c.bucket, uuid.uuid4().hex[:8])
        keep = False
        entry: dict[str, Any] = {}
        self.emit("candidate", {"iteration": iteration, "branch": branch})
        try:
            with self.git.candidate(base_sha, branch) as cand:
                try:
                    proposal, it.package_path = await self._propose(
                        iteration,
                        self._package(base_runs, base_prompt),
                        base_prompt,
                        literals,
                        cand.path,
                    )
                    it.hypothesis = proposal.hypothesis
                    prepared = self._prepare(proposal.diff, base_prompt, literals)
                except (ProposerError, PatchError, ModelError) as err:
                    unusable = isinstance(err, PatchError | UnusableProposalError)
                    it.outcome = "refused" if unusable else "error"
                    it.reasons = [f"{type(err).__name__}: {err}"]
                    entry = {
                        "outcome": it.outcome,
                        "reasons": it.reasons,
                        "hypothesis": it.hypothesis,
                    }
                    return it
                it.diff = prepared.diff
                violations = self._violations(prepared)
                if violations:
                    it.outcome = "refused"
                    it.reasons = [v["message"] for v in violations]
                    entry = {
                        "outcome": "refused",
                        "reasons": it.reasons,
                        "guard_violations": violations,
                        "hypothesis": it.hypothesis,
                        "diff": prepared.diff,
                        "diff_hash": diff_hash(prepared.diff),
                    }
                    self.emit("refused", {"iteration": iteration, "reasons": it.reasons})
                    return it
                (cand.path / c.prompt_path).write_text(prepared.new_text, encoding="utf-8")
                self.emit("evaluating", {"iteration": iteration, "branch": branch})
                verdict, comps, base_for_pr, cand_runs = await self._evaluate(
                    suites, base_runs, base_prompt, prepared.new_text
                )
                it.commit = self.git.commit(
                    cand,
                    [c.prompt_path],
                    commit_message(c.suite, c.bucket, it.hypothesis, verdict, comps),
                )
                it.outcome = {"accept": "accepted", "reject": "rejected"}.get(
                    verdict.decision, "inconclusive"
                )
                it.reasons = list(verdict.reasons)
                it.verdict_table = _table(verdict, comps)
                keep = it.outcome == "accepted" or c.keep_rejected
                it.branch = branch if keep else None
                it.tokens = self.usage.total_tokens - tokens_before
                if it.outcome == "accepted":
                    it.pr_body_path = str(
                        self._write_pr(
                            it,
                            branch,
                            verdict,
                            comps,
                            base_for_pr,
                            cand_runs,
                            base_sha,
                            _delta_usd(self.cost_usd, usd_before),
                        )
                    )
                entry = {
                    "outcome": it.outcome,
                    "reasons": it.reasons,
                    "hypothesis": it.hypothesis,
                    "diff": it.diff,
                    "diff_hash": diff_hash(it.diff),
                    "verdict_table": it.verdict_table,
                    "branch": it.branch,
                    "commit": it.commit,
                    "pr_body_path": it.pr_body_path,
                }
                self.emit(
                    "verdict",
                    {
                        "iteration": iteration,
                        "verdict": verdict,
                        "comparisons": comps,
                        "branch": it.branch,
                    },
                )
                return it
        finally:
            if not keep and self.git.branch_exists(branch):
                self.git.delete_branch(branch)
            if entry:
                it.tokens = self.usage.total_tokens - tokens_before
                cost = _delta_usd(self.cost_usd, usd_before)
                self.ledger.append(
                    self._entry(
                        iteration,
                        base_sha,
                        tokens={"total": it.tokens},
                        cost_usd=cost,
                        package_path=it.package_path,
                        **entry,
                    )
                )

    def _write_pr(
        self,
        it: IterationResult,
        branch: str,
        verdict: Verdict,
        comps: list[BucketComparison],
        base: list[RunResult],
        cand: list[RunResult],
        base_sha: str,
        cost_usd: float | None,
    ) -> Path:
        body = pr_body(
            suite=self.c.suite,
            bucket=self.c.bucket,
            branch=branch,
            hypothesis=it.hypothesis,
            diff=it.diff,
            verdict=verdict,
            comparisons=comps,
            changes=[trial_changes(b, c) for b, c in zip(base, cand, strict=True)],
            tokens=it.tokens,
            cost_usd=cost_usd,
            base_commit=base_sha,
        )
        path = self.session_dir / f"iter-{it.iteration}" / "PR.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        return path


def worktree_diff(worktree: Path) -> str:
    """Everything an external proposer changed in the candidate worktree, as one diff."""
    subprocess.run(["git", "add", "-A"], cwd=worktree, check=True, capture_output=True)
    return subprocess.run(
        ["git", "diff", "--cached", "--no-color"],
        cwd=worktree,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _delta_usd(now: float | None, before: float | None) -> float | None:
    return None if now is None or before is None else now - before


def _discard(_value: object) -> None:
    return None


def _table(verdict: Verdict, comps: list[BucketComparison]) -> list[dict[str, Any]]:
    from optimizer.report.table import verdict_table

    return verdict_table(comps, verdict.target_bucket)


async def optimize(config: OptimizeConfig, **kw: Any) -> OptimizeResult:
    opt = Optimizer(config, **kw)
    try:
        return await opt.optimize()
    finally:
        await opt.aclose()


__all__ = ["Baseline", "OptimizeConfig", "OptimizeResult", "Optimizer", "optimize"]
