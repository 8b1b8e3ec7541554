"""`promptloop optimize`: baseline -> package -> proposal -> guards -> branch -> rerun -> gate.

The user's checkout is never touched: the base prompt is read from the git object database, each
candidate lives in a temporary worktree on its own branch, and state goes to the state folder.
One iteration (proposal to verdict) is `workflows/iteration.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from promptloop.agents.llm.types import ModelClient
from promptloop.optimizer.core.buckets import BucketError, BucketId, qualified, resolve_bucket
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.events import (
    BaselineReady,
    EventSink,
    Phase,
    RunWarning,
    TrialsEstimated,
    ignore,
)
from promptloop.optimizer.core.killpoint import kill_point
from promptloop.optimizer.core.ledger import Ledger
from promptloop.optimizer.core.project import project_scope
from promptloop.optimizer.core.prompt_target import PromptSource
from promptloop.optimizer.core.results import Provenance, RunResult
from promptloop.optimizer.core.suites import Suite
from promptloop.optimizer.gate.sequential import heldout_tasks, record_rates
from promptloop.optimizer.git import GitOps, provenance
from promptloop.optimizer.lifecycle.flaky import bucket_flakiness
from promptloop.optimizer.propose.literals import build_literal_index
from promptloop.optimizer.propose.sandbox import command_problem
from promptloop.optimizer.report.plain import session_headline
from promptloop.optimizer.report.store import default_store_dir, save_run
from promptloop.optimizer.run.adaptive import AdaptiveLimit
from promptloop.optimizer.run.models import ModelSet
from promptloop.optimizer.run.runner import needs_judge
from promptloop.optimizer.run.usage import Role
from promptloop.optimizer.workflows.estimate import estimate, suite_trials
from promptloop.optimizer.workflows.gating import bucket_tasks, lineage_history
from promptloop.optimizer.workflows.iteration import Iteration
from promptloop.optimizer.workflows.optimize_models import (
    Baseline,
    IterationResult,
    OptimizeConfig,
    OptimizeResult,
)
from promptloop.optimizer.workflows.paired import SavedRun, agent_suites, run_and_save
from promptloop.optimizer.workflows.review_trust import project_at
from promptloop.optimizer.workflows.sources import MANUAL, RepoSource
from promptloop.optimizer.workflows.sweep import sweep_abandoned


class Optimizer:
    """One optimize session on the clients of `models` (shared with the caller, who closes them).

    `before_iteration(n)` returning False ends the loop before iteration n (a nightly budget);
    `after_iteration(result)` runs after each iteration (a nightly checkpoint); `session` fixes
    the session id so a resumed session keeps its ledger ids and folders.
    """

    def __init__(
        self,
        config: OptimizeConfig,
        models: ModelSet,
        *,
        on_event: EventSink | None = None,
        before_iteration: Callable[[int], bool] | None = None,
        after_iteration: Callable[[IterationResult], None] | None = None,
        session: str | None = None,
        command: str = "optimize",
    ) -> None:
        self.c = config
        self.command = command
        """The command running the session, recorded in open ledger records."""
        self.models = models
        self.before_iteration = before_iteration
        self.after_iteration = after_iteration
        self.emit = on_event or ignore
        self.git = GitOps(config.repo or Path.cwd())
        self.ledger = Ledger(config.state_dir / "ledger.jsonl")
        self.session = session or f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.session_dir = config.state_dir / "optimize" / self.session
        self.heldout: frozenset[str] = frozenset()
        self.history: list[RunResult] = []
        """Earlier runs of the base prompt's lineage: each task's measured flakiness."""
        self.prompt_source: PromptSource | None = None
        """The prompt target's file at the base (set with the baseline)."""
        self._provenance: Provenance | None = None
        self.candidate_branches: dict[str, str] = {}
        """Candidate prompt text -> its branch (set by the iteration before its gate runs)."""
        self.candidate_runs: dict[str, list[SavedRun]] = {}
        """Branch -> the candidate runs saved so far (their commit is recorded after)."""
        """Target-bucket tasks the proposer never sees (the gate's held-out check)."""
        self.source = RepoSource(self.git.root, config.base, config.state_dir / "sources",
                                 ops=self.git)
        """Prompt, tasks and manual as the base ref holds them (never the working tree)."""

    # --- evaluation ---------------------------------------------------------------------
    def suites(self) -> list[Suite]:
        return agent_suites(self.c.suite, self.c.kinds, self.source)

    async def run(
        self, suite: Suite, prompt: str, label: str, indices: dict[str, list[int]] | None = None,
        *, limit: AdaptiveLimit | None = None,
    ) -> RunResult:
        """One run of `suite` under `prompt`; `limit` bounds it together with other runs going
        on at once (not in batch mode, where every trial of a run goes at once)."""
        options = self.c.run_options(self.c.agent_model, prompt, f"{label} {suite.name}",
                                     indices, limit=limit, prompt_source=self.prompt_source)
        if self._provenance is None:  # one git look per session, not one per gate stage
            # the session's runs carry its id: `view` lists them on the session's page
            prov = provenance(self.c.repo).model_copy(update={"session": self.session})
            if self.c.base != "HEAD":  # the base prompt is read at the base ref
                prov = prov.model_copy(update={"branch": self.c.base})
            if self.source.sha is not None:
                prov = prov.model_copy(update={"git_commit": self.source.sha,
                                               "git_dirty": False})
            self._provenance = prov
        branch = self.candidate_branches.get(prompt)
        if branch is not None or label.startswith(("candidate", "screen")):
            prov = self._provenance.model_copy(update={"role": "candidate", "branch": branch})
        else:
            prov = self._provenance.model_copy(update={"role": "baseline"})
        saved = await run_and_save(suite, options, self.models, self.emit, prov,
                                   writes_decide=prov.role == "candidate")
        if branch is not None:
            self.candidate_runs.setdefault(branch, []).append(saved)
        return saved.run

    def record_candidate(self, branch: str, commit: str | None, verdict: str) -> None:
        """Write the candidate's commit and verdict into the saved runs of its branch (the
        commit is made after its runs, with the verdict in its message)."""
        for saved in self.candidate_runs.pop(branch, []):
            prov = saved.run.provenance.model_copy(
                update={"candidate_commit": commit, "verdict": verdict})
            run = saved.run.model_copy(update={"provenance": prov})
            save_run(run, default_store_dir(self.c.state_dir), summary=saved.summary)

    # --- the loop -----------------------------------------------------------------------
    def _estimate(self, suites: list[Suite]) -> TrialsEstimated:
        """The baseline's trials and, per iteration, the fewest the gate runs (its first
        round on the target bucket), timed and priced by the last runs of these suites."""
        c = self.c
        _, where = bucket_tasks(suites)
        first = sum(c.trials or t.spec.trials_per_run
                    for i, s in enumerate(suites) for t in s.tasks
                    if (c.bucket, t.id) in where and where[(c.bucket, t.id)] == i)
        base = [(s, suite_trials(s, c.trials)) for s in suites]
        n = sum(t for _, t in base)
        per = 1 / max(1, n)
        screen = 0
        if c.candidates > 1:  # each candidate runs the visible target tasks at least once
            ids = [tid for bucket, tid in where if bucket == c.bucket]
            held = len(heldout_tasks(ids, c.policy))  # the gate's own count
            screen = c.candidates * max(1, len(ids) - held)
        each = first + screen
        rounds = [(s, round(t * per * each * c.iterations)) for s, t in base]
        most = f"{c.iterations} iteration{'s' if c.iterations > 1 else ''} at most"
        screening = (f" ({screen} screening {c.candidates} candidates, then the winner's "
                     "gate)" if screen else "")
        others = sum(1 for bucket, _ in where if bucket != c.bucket)
        clean = 3 if c.policy.harm_sensitivity == "half" else 2  # a reliable task's floor
        more = (f"{n} for the baseline, then at least {each} per iteration{screening} ({most}); "
                f"a candidate that improves its target then goes to harm detection, at least "
                f"{clean} trials for each of the {others} other task(s) that passes on its "
                f"record (about {clean * others:,} more per iteration if all pass, not in the "
                "figures above), more where the gate needs them; the proposer's time not "
                "counted")
        return estimate("optimize", c.agent_model, c.state_dir,
                        [(s, t + extra) for (s, t), (_, extra) in zip(base, rounds, strict=True)],
                        more=more)

    def _check_bucket(self, suites: list[Suite]) -> None:
        """Resolve `--bucket` in the one bucket namespace (`regression/x` always, `x` when
        unique); from here on `self.c.bucket` is the qualified name."""
        known = [qualified(s.config.kind, b) for s in suites for b in s.buckets]
        try:
            self.c = self.c.model_copy(update={"bucket": resolve_bucket(self.c.bucket, known)})
        except BucketError as err:
            raise ConfigError(f"{self.c.suite}: {err}") from None
        tasks, _ = bucket_tasks(suites)
        self.heldout = heldout_tasks(tasks[self.c.bucket], self.c.policy, salt=self.c.bucket)

    def _draw_heldout(self, baseline: Baseline) -> None:
        """Held-out tasks drawn among the target's failing tasks first: each task's pass rate
        over its record (lineage history and baseline)."""
        tasks, _ = bucket_tasks(baseline.suites)
        ids = tasks[self.c.bucket]
        rates = record_rates([*self.history, *baseline.runs], set(ids))
        self.heldout = heldout_tasks(ids, self.c.policy, salt=self.c.bucket, rates=rates)

    def target_runs(self, runs: list[RunResult]) -> tuple[RunResult, str]:
        """The run holding the target bucket, and the bucket's name inside that run's suite,
        without the held-out tasks (the proposer never sees them)."""
        target = BucketId.parse(self.c.bucket)
        for r in runs:
            if r.suite_kind == target.kind and any(t.bucket == target.name for t in r.trials):
                hidden = self.heldout
                return r.model_copy(update={
                    "trials": [t for t in r.trials if t.task_id not in hidden],
                    "task_ids": [t for t in r.task_ids if t not in hidden],
                    "task_buckets": {k: v for k, v in r.task_buckets.items() if k not in hidden},
                    "task_info": {k: v for k, v in r.task_info.items() if k not in hidden},
                    "trials_per_task": {k: v for k, v in r.trials_per_task.items()
                                        if k not in hidden},
                }), target.name
        raise ConfigError(f"no run holds bucket {self.c.bucket!r}")

    async def preflight(self, suites: list[Suite]) -> None:
        """Check every model the session will call, and `--proposer-cmd`'s program, so a bad
        key or a missing program fails before the baseline is paid for."""
        roles: list[Role] = ["agent"]
        if any(needs_judge(s) for s in suites):
            roles.append("judge")
        if not self.c.proposer_cmd:
            roles.append("proposer")
        elif self.source.sha is not None:
            problem = command_problem(self.c.proposer_cmd, self.git.root, self.source.sha)
            if problem:
                raise ConfigError(problem)
        await self.models.preflight(*roles)

    async def run_baseline(self) -> Baseline:
        """Evaluate the base prompt on every suite kind (cached trials are reused)."""
        c = self.c
        assert self.source.sha is not None
        base_sha = self.source.sha
        self.prompt_source = self.source.prompt(c.suite, c.prompt)
        base_prompt = self.prompt_source.text
        suites = self.suites()
        for item in self.source.take_new():
            self.emit(Phase(message=item.line()))
        warning = self.source.unevaluated_warning(c.prompt_path, "optimize")
        if warning:
            self.emit(RunWarning(message=warning))
        self.emit(Phase(message=f"baseline of {c.suite} at {base_sha[:12]}"))
        runs = []
        for s in suites:
            runs.append(await self.run(s, base_prompt, "baseline"))
            kill_point("baseline")
        return Baseline(base_sha, base_prompt, suites, runs, self.prompt_source)

    async def optimize(self, baseline: Baseline | None = None) -> OptimizeResult:
        """Run the session; `baseline` (from `run_baseline`) skips evaluating the base again."""
        c = self.c
        if baseline is None:
            suites = self.suites()
            self._check_bucket(suites)
            self.emit(self._estimate(suites))
            await self.preflight(suites)
            baseline = await self.run_baseline()
        else:
            self._check_bucket(baseline.suites)
            # a baseline made by another Optimizer (nightly's, one per bucket): its prompt
            # source too, or this session's trials would get the source text, not the value
            # (a YAML block's indentation, escapes)
            self.prompt_source = self.prompt_source or baseline.prompt_source
        result = self._result(baseline)
        self.history = lineage_history(default_store_dir(c.state_dir), baseline.runs)
        self._draw_heldout(baseline)
        target_run, local = self.target_runs(baseline.runs)
        failing = [t for t in target_run.trials
                   if t.bucket == local and t.status in ("failed", "timedOut")]
        if not failing:
            result.status = "nothing_to_do"
            result.message = (f"nothing to do: bucket '{c.bucket}' has no failing trials at "
                              f"{baseline.base_sha[:12]}")
            return result
        flaky = bucket_flakiness(baseline.runs, c.bucket)
        if flaky.mostly_flaky:
            result.warnings.append(flaky.message)
            self.emit(RunWarning(message=flaky.message))
        literals = build_literal_index(
            baseline.suites, baseline.base_prompt, self.source.read(MANUAL).text
        )
        for n in range(c.first_iteration, c.iterations + 1):
            if self.before_iteration is not None and not self.before_iteration(n):
                break
            it = await Iteration(self, n, baseline, literals).run()
            result.iterations.append(it)
            if self.after_iteration is not None:
                self.after_iteration(it)
            if it.outcome == "accepted" and it.branch:
                result.accepted_branches.append(it.branch)
                if c.stop_on_accept:
                    break
        result.message = session_headline(
            [(it.iteration, it.outcome, it.summary or "; ".join(it.reasons[:1]))
             for it in result.iterations], result.accepted_branches, c.iterations)
        return result

    def _result(self, baseline: Baseline) -> OptimizeResult:
        cached = sum(t.cached for r in baseline.runs for t in r.trials)
        total = sum(len(r.trials) for r in baseline.runs)
        self.emit(BaselineReady(cached=cached, total=total))
        return OptimizeResult(
            status="done",
            message="",
            suite=self.c.suite,
            bucket=self.c.bucket,
            base_commit=baseline.base_sha,
            baseline_runs=[r.run_name for r in baseline.runs],
            baseline_cached_trials=cached,
            baseline_trials=total,
            ledger_path=str(self.ledger.path),
            session_dir=str(self.session_dir),
            sources=[s.line() for s in self.source.served],
            warnings=[w for w in [self.source.unevaluated_warning(self.c.prompt_path,
                                                                  "optimize")] if w],
        )


async def optimize(
    config: OptimizeConfig,
    *,
    agent: ModelClient | None = None,
    judge: ModelClient | None = None,
    proposer: ModelClient | None = None,
    **kw: Any,
) -> OptimizeResult:
    """Run one session; clients may be injected (tests), the others are built from the ids.
    Keywords go to `Optimizer` (on_event, before_iteration, after_iteration, session).
    Iterations that killed runs left behind are cleaned up first (workflows/sweep.py)."""
    sweep_abandoned(config.state_dir, kw.get("on_event") or ignore)
    async with ModelSet(config.model_ids, agent=agent, judge=judge, proposer=proposer) as models:
        opt = Optimizer(config, models, **kw)
        try:
            # the agents, prompt targets and suites as promptloop.toml declares them at --base
            with project_scope(project_at(opt.git, opt.git.resolve(config.base), config.base)):
                return await opt.optimize()
        finally:
            opt.git.close()


__all__ = ["Baseline", "OptimizeConfig", "OptimizeResult", "Optimizer", "optimize"]
