"""`promptloop nightly`: baselines of every suite, bucket ranking, budgeted optimize iterations.

A night is a list of steps (one baseline per suite, then proposal+evaluation iterations on the
worst buckets). Before each step its spend and duration are estimated (nightly/estimates.py)
and the night stops cleanly when that would exceed a budget; after each step a checkpoint is
written, so a killed night resumes without redoing finished steps or losing an accepted branch.
Nothing here prints: progress goes to `on_event` as typed events, results come back as a
`NightResult`. Spend is the night's `ModelSet` meter, per role.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from promptloop.agents.llm.errors import CredentialsError, ModelConfigError, ModelError
from promptloop.agents.llm.types import ModelClient
from promptloop.optimizer.core.events import (
    BudgetStopped,
    Event,
    EventSink,
    IterationStarted,
    Phase,
    StepEstimated,
    TrialFinished,
    ignore,
)
from promptloop.optimizer.core.project import active_project
from promptloop.optimizer.core.prompt_target import open_target
from promptloop.optimizer.git import GitOps, GitOpsError, sanitize_ref_component
from promptloop.optimizer.lifecycle.errors import LifecycleError
from promptloop.optimizer.report.store import default_store_dir, load_run
from promptloop.optimizer.run.models import ModelSet
from promptloop.optimizer.run.runner import AllTrialsErroredError
from promptloop.optimizer.run.usage import Role
from promptloop.optimizer.workflows.nightly.budget import Estimate, over_budget
from promptloop.optimizer.workflows.nightly.config import (
    NightlyConfig,
    awaiting_review,
    rank_buckets,
)
from promptloop.optimizer.workflows.nightly.estimates import (
    estimate_baseline,
    estimate_iteration,
    observed_rate,
    per_trial,
)
from promptloop.optimizer.workflows.nightly.lifecycle import NightLifecycle, night_lifecycle
from promptloop.optimizer.workflows.nightly.publish import publish_accepted
from promptloop.optimizer.workflows.nightly.recover import recover_pending
from promptloop.optimizer.workflows.nightly.state import (
    BucketRank,
    Checkpoint,
    NightLock,
    Pending,
    StepRecord,
    checkpoint_path,
    latest_unfinished,
    new_night_id,
    save_checkpoint,
)
from promptloop.optimizer.workflows.nightly.steps import StepBook
from promptloop.optimizer.workflows.nightly.summary import NightSummary, write_summary
from promptloop.optimizer.workflows.optimize import Baseline, IterationResult, Optimizer
from promptloop.optimizer.workflows.profile import ProfileConfig, profile
from promptloop.optimizer.workflows.sweep import sweep_abandoned

MAX_ATTEMPTS = 3
"""Attempts of a night that failed (an infrastructure error) before `--resume` gives up on it
and starts a new night: a night failing on a configuration problem must not block every later
night of a cron line."""
RESUME_TAKES = ("base_url", "max_usd", "max_tokens", "max_wall_minutes")
"""Settings a resumed night takes from the command that resumes it (where the models are, how
much more may be spent); the rest (`RESUME_KEEPS`) stays the night's own."""
RESUME_KEEPS = ("agent_model", "judge_model", "proposer_model", "suites", "trials",
                "iterations_per_bucket", "max_buckets", "base")


CONFIG_FAILURE = "configuration error"
"""How a night stopped by the user's configuration begins its stop reason (exit 1)."""


@dataclass(frozen=True)
class NightResult:
    checkpoint: Checkpoint
    folder: Path
    summary: NightSummary
    paths: dict[str, Path]
    """summary.json / .md / .html"""

    @property
    def exit_code(self) -> int:
        """0 finished (patches accepted or not); 1 a configuration error stopped it (no key
        set, a model id or package wrong); 2 an infrastructure failure happened."""
        cp = self.checkpoint
        publish_failed = any(p.push_error or p.pr == "failed" for p in cp.published)
        if (cp.status == "failed" and not cp.infra_errors and not publish_failed
                and (cp.stop_reason or "").startswith(CONFIG_FAILURE)):
            return 1
        return 2 if cp.status == "failed" or cp.infra_errors or publish_failed else 0


class NightlyEngine:
    """One night. Clients may be injected (tests); otherwise they are built from the model ids."""

    def __init__(
        self,
        config: NightlyConfig,
        *,
        agent: ModelClient | None = None,
        judge: ModelClient | None = None,
        proposer: ModelClient | None = None,
        on_event: EventSink | None = None,
        resume: bool = False,
        push: bool = False,
        open_pr: bool = False,
    ) -> None:
        self.c = config
        self._given: dict[Role, ModelClient | None] = {
            "agent": agent,
            "judge": judge,
            "proposer": proposer,
        }
        self.emit = on_event or ignore
        self.resume = resume
        self.push, self.open_pr = push or open_pr, open_pr
        self._models: ModelSet | None = None
        self._book: StepBook | None = None
        self.fresh = 0
        self._wall0, self._t0 = 0.0, time.monotonic()
        self.cp: Checkpoint | None = None

    # --- plumbing -----------------------------------------------------------------------
    @property
    def state(self) -> Path:
        return self.c.state_dir

    @property
    def repo(self) -> Path:
        return self.c.repo or Path.cwd()

    @property
    def models(self) -> ModelSet:
        assert self._models is not None, "the night's models are built in run()"
        return self._models

    @property
    def book(self) -> StepBook:
        assert self._book is not None, "the step book is opened in run()"
        return self._book

    def say(self, message: str) -> None:
        self.emit(Phase(message=message))

    def _cp(self) -> Checkpoint:
        assert self.cp is not None
        return self.cp

    def save(self) -> None:
        cp = self._cp()
        cp.wall_seconds = self.wall_used()
        save_checkpoint(self.state, cp)

    def wall_used(self) -> float:
        return self._wall0 + time.monotonic() - self._t0

    def _on_event(self, event: Event) -> None:
        """Everything the optimize loop and the runner report passes through here: fresh
        trials are counted for the step's rate, and a new candidate branch is checkpointed
        (so a killed night can remove it)."""
        if isinstance(event, TrialFinished) and not event.cached:
            self.fresh += 1
        cp = self.cp
        if isinstance(event, IterationStarted) and cp is not None and cp.pending is not None:
            cp.pending.branch = event.branch
            self.save()
        self.emit(event)

    # --- the night ----------------------------------------------------------------------
    async def run(self) -> NightResult:
        lock = NightLock(self.state / "nightly.lock")
        stale = lock.acquire()
        try:
            if stale is not None:
                self.say(
                    f"took over a stale lock of pid {stale.pid} on {stale.host} (started "
                    f"{stale.started_at}); that process is no longer running"
                )
            cp = self._open()
            self.c.check_prices()  # configuration problems end the run before any state is
            async with ModelSet(self.c.model_ids, **self._given, prices=self.c.prices) as models:
                models.build()  # written or any money is spent
                self._models = models
                self._book = StepBook(self.c, models, lambda: self.fresh)
                self._wall0, self._t0 = cp.wall_seconds, time.monotonic()
                try:
                    await self._attempt(cp)
                except (KeyboardInterrupt, asyncio.CancelledError):
                    self._summarise_stop(cp)
                    raise
            if self.push and cp.status != "running":
                publish_accepted(cp, self.repo, open_pr=self.open_pr, say=self.say)
                failed = [p for p in cp.published if p.push_error or p.pr == "failed"]
                if failed and cp.status == "finished":  # resumable: --resume publishes again
                    p = failed[0]
                    cp.status = "failed"
                    cp.stop_reason = (f"publishing {p.branch} failed: "
                                      f"{p.push_error or p.pr_error}; `promptloop nightly "
                                      "--resume` publishes again")
                self.save()
            folder = checkpoint_path(self.state, cp.night_id).parent
            life = self._lifecycle(cp)
            summary, paths = write_summary(cp, folder, self.repo, self.c.models, self.c.prices,
                                           life)
            return NightResult(cp, folder, summary, paths)
        finally:
            lock.release()

    def _summarise_stop(self, cp: Checkpoint) -> None:
        """A night stopped by Ctrl-C or SIGTERM still writes its summary (what it did so far,
        status "stopped"; suite health is not refreshed): a scheduler that stops it reads the
        same files as after a finished night. Never masks the stop."""
        folder = checkpoint_path(self.state, cp.night_id).parent
        try:
            write_summary(cp, folder, self.repo, self.c.models, self.c.prices, None)
        except (OSError, ValueError, GitOpsError) as err:
            self.say(f"the stopped night's summary could not be written: {err}")

    def _lifecycle(self, cp: Checkpoint) -> NightLifecycle | None:
        """Suite health and graduation proposals; a failure here never fails the night."""
        try:
            return night_lifecycle(self.state, self.repo, cp.config.get("suites", []))
        except (LifecycleError, GitOpsError, OSError, ValueError) as err:
            cp.notes.append(f"suite health not refreshed: {err}")
            return None

    async def _attempt(self, cp: Checkpoint) -> None:
        try:
            swept = sweep_abandoned(self.state, self.emit)
            recover_pending(cp, self.repo, self.state, self.say, swept)
            self.save()
            await self._night()
            if cp.infra_errors:  # an iteration's provider failed: resumable, to retry it
                cp.status = "failed"
                cp.stop_reason = (f"infrastructure failure: {cp.infra_errors[0]}; "
                                  "`promptloop nightly --resume` retries what failed")
            else:
                cp.status = "finished"
        except (CredentialsError, ModelConfigError) as err:
            if isinstance(err, CredentialsError) and not err.missing:
                cp.status = "failed"  # a key the provider rejects: as any provider failure
                cp.infra_errors.append(f"{type(err).__name__}: {err}")
                cp.stop_reason = f"infrastructure failure: {err}"
            else:  # no key set, a model id or package wrong: the user's to fix (exit 1)
                cp.status = "failed"
                cp.stop_reason = f"{CONFIG_FAILURE}: {err}"
        except (ModelError, AllTrialsErroredError) as err:
            cp.status = "failed"
            message = f"{type(err).__name__}: {err}"
            cp.infra_errors.append(message)
            cp.stop_reason = f"infrastructure failure: {message}"
        except (KeyboardInterrupt, asyncio.CancelledError):
            cp.status = "stopped"
            cp.stop_reason = ("stopped by Ctrl-C or SIGTERM; `promptloop nightly --resume` "
                              "continues it")
            raise
        finally:
            if (cp.status in ("running", "stopped", "failed") and cp.pending is not None
                    and self._book is not None):
                cp.pending.metered = self._book.spent  # stopped or failed, not killed: spent
            self.save()  # a crash leaves status "running", a stop "stopped": resumable

    def _open(self) -> Checkpoint:
        cp = latest_unfinished(self.state) if self.resume else None
        if self.resume and cp is None:
            self.say("no unfinished night to resume; starting a new night")
        if cp is not None and cp.status == "failed" and cp.attempts >= MAX_ATTEMPTS:
            self.say(f"night {cp.night_id} failed {cp.attempts} times ({cp.stop_reason}); "
                     "not resuming it again: starting a new night")
            cp = None
        if cp is not None:
            # this command's endpoint and budgets apply (a night that failed on a wrong
            # --base-url resumes with the right one); what the night measures stays its own
            keep = {"repo": self.c.repo, "state_dir": self.c.state_dir}
            given = self.c.model_dump(mode="json", include=set(RESUME_TAKES))
            stored = {k: cp.config.get(k) for k in RESUME_TAKES}
            taken = [k for k in RESUME_TAKES if given.get(k) != stored.get(k)]
            resumed = NightlyConfig.model_validate({**cp.config, **given, **keep})
            kept = [k for k in RESUME_KEEPS
                    if getattr(self.c, k) != getattr(resumed, k)]
            if taken:
                self.say("resuming with this command's " + ", ".join(
                    f"{k} {given.get(k)} (was {stored.get(k)})" for k in taken))
            if kept:
                self.say("the night keeps its own " + ", ".join(
                    f"{k} {getattr(resumed, k)} (this command's: {getattr(self.c, k)})"
                    for k in kept) + "; run without --resume to start a night with them")
            self.c = resumed
            cp.config = self.c.model_dump(mode="json", exclude={"repo", "state_dir"})
            cp.attempts += 1
            cp.status = "running"
            if cp.infra_errors:
                cp.notes += [f"attempt {cp.attempts - 1}: {e}" for e in cp.infra_errors]
                cp.infra_errors = []
            cp.stop_reason = None
            self.say(
                f"resuming night {cp.night_id} (attempt {cp.attempts}, "
                f"{len(cp.steps)} step(s) already done)"
            )
        else:
            with GitOps(self.repo) as git:
                base = git.resolve(self.c.base)
            now = datetime.now(UTC)
            cp = Checkpoint(
                night_id=new_night_id(now),
                started_at=now,
                updated_at=now,
                config=self.c.model_dump(mode="json", exclude={"repo", "state_dir"}),
                base_commit=base,
            )
            self.say(f"night {cp.night_id} at {base[:12]}")
        self.cp = cp
        return cp

    async def _night(self) -> None:
        cp = self._cp()
        baselines: dict[str, Baseline] = {}
        for suite in self.c.suites:
            baseline = await self._baseline_step(suite)
            if baseline is None:
                return
            baselines[suite] = baseline
        for suite in self.c.suites:
            if not await self._profile_step(suite, baselines[suite]):
                return
        if cp.ranking is None:
            cp.ranking, cp.skipped_buckets = rank_buckets(baselines, self.c.max_buckets,
                                                          awaiting_review(self.c, cp.base_commit))
            self.save()
        if not cp.ranking and cp.skipped_buckets:
            self.say(f"nothing to optimize tonight: {len(cp.skipped_buckets)} bucket(s) with "
                     "failing trials left out: " + "; ".join(cp.skipped_buckets))
        elif not cp.ranking:
            self.say("no bucket has failing trials; nothing to optimize tonight")
        for rank in cp.ranking:
            if not await self._bucket_steps(rank, baselines[rank.suite]):
                return

    def _optimizer(self, suite: str, bucket: str, first: int = 1, last: int | None = None,
                   **hooks: Any) -> Optimizer:
        return Optimizer(
            self.c.optimize_config(suite, bucket, self._cp().base_commit, first, last),
            self.models,
            on_event=self._on_event,
            command="nightly",
            **hooks,
        )

    def _stop(self, step_id: str, estimate: Estimate) -> bool:
        cp = self._cp()
        hit = over_budget(
            self.c.budget, cp.spend, self.wall_used(), estimate, self.c.models, self.c.prices
        )
        if hit is None:  # announced before its trials start: what it should cost
            self.emit(StepEstimated(step=step_id, tokens=estimate.spend.tokens,
                                    basis=estimate.basis, seconds=estimate.seconds,
                                    usd=estimate.spend.usd(self.c.models, self.c.prices)))
            return False
        which, detail = hit
        cp.stop_reason = f"stopped: budget {which} before {step_id} ({detail})"
        self.emit(BudgetStopped(step=step_id, budget=which, detail=detail))
        self.save()
        return True

    # --- steps --------------------------------------------------------------------------
    async def _baseline_step(self, suite: str) -> Baseline | None:
        cp, step_id = self._cp(), f"baseline:{suite}"
        opt = self._optimizer(suite, "*")
        try:
            done = cp.step(step_id)
            if done is not None:
                return self._load_baseline(opt, done)
            estimate = estimate_baseline(cp, self.c, self.repo, suite, self.models.ids)
            if self._stop(step_id, estimate):
                return None
            self.book.begin(estimate)
            self._pending(step_id, suite, estimate)
            baseline = await opt.run_baseline()
            trials = [t for r in baseline.runs for t in r.trials]
            errored = [t for t in trials if t.status == "errored"]
            failing = sum(t.status in ("failed", "timedOut") for t in trials)
            observed = observed_rate(baseline.runs, self.book.fresh, self.book.seconds)
            self.book.record(
                cp,
                step_id,
                "baseline",
                suite,
                observed,
                runs=[r.run_name for r in baseline.runs],
                outcome=f"{failing} failing, {len(errored)} errored of {len(trials)}",
            )
            if errored:
                cp.notes.append(
                    f"{step_id}: {len(errored)} errored trial(s), e.g. "
                    f"{errored[0].infra_error or errored[0].failure_reason}"
                )
            cp.pending = None
            self.save()
            return baseline
        finally:
            opt.git.close()

    def profile_trials(self, baseline: Baseline) -> int:
        """The profile step's trials: `profile_share` of the night's planned iteration trials
        on this suite (max_buckets x iterations_per_bucket x the baseline's trials)."""
        planned = (self.c.max_buckets * self.c.iterations_per_bucket
                   * sum(len(r.trials) for r in baseline.runs))
        return int(self.c.profile_share * planned)

    async def _profile_step(self, suite: str, baseline: Baseline) -> bool:
        """Grow the least decided records (`promptloop profile`) with the night's stated
        share; False when the budget stops the night before it."""
        cp, step_id = self._cp(), f"profile:{suite}"
        trials = self.profile_trials(baseline)
        if trials <= 0 or cp.step(step_id) is not None:
            return True
        per, secs, basis = per_trial(cp, self.c, suite)
        m = self.c.estimate_margin
        estimate = Estimate(per.scaled(trials * m), secs * trials * m,
                            f"profile: {trials} trial(s) ({self.c.profile_share:g} of the "
                            f"night's planned trials) x {basis} x {m:g}")
        if self._stop(step_id, estimate):
            return False
        self.book.begin(estimate)
        self._pending(step_id, suite, estimate)
        shared = self.c.model_dump(include={"agent_model", "judge_model", "base_url",
                                            "concurrency", "kinds", "policy", "state_dir"})
        config = ProfileConfig.model_validate(shared | {
            "agent": suite, "budget": trials, "ref": cp.base_commit, "repo": self.repo})
        try:
            result = await profile(config, self._on_event, models=self.models)
        except (OSError, ValueError, KeyError) as exc:  # a night goes on without it
            cp.notes.append(f"{step_id}: not run ({exc})")
            cp.pending = None
            self.save()
            return True
        self.book.record(cp, step_id, "profile", suite, runs=result.run_names,
                         outcome=f"{result.trials_run} trial(s) on {len(result.rows)} task(s)")
        cp.pending = None
        self.save()
        return True

    def _pending(self, step_id: str, suite: str, estimate: Estimate) -> None:
        """Checkpoint a baseline or profile step as in progress: a kill -9 during it is
        charged at its estimate when the night resumes (`recover_pending`), as an
        iteration's is (a team's four kills during baselines spent unmetered)."""
        cp = self._cp()
        cp.pending = Pending(step=step_id, suite=suite, bucket="*", session="", iteration=0,
                             estimate=estimate.spend, started_at=datetime.now(UTC))
        self.save()

    def _load_baseline(self, opt: Optimizer, done: StepRecord) -> Baseline:
        """A finished baseline step, rebuilt from the saved runs (no trial is run again)."""
        cp = self._cp()
        runs = [load_run(default_store_dir(self.state), name) for name in done.runs]
        agent = active_project().agent(opt.c.suite)
        target = agent.target(opt.c.prompt)
        source = open_target(agent, target, opt.git.read_file(cp.base_commit, target.path))
        opt.prompt_source = source
        return Baseline(cp.base_commit, source.text, opt.suites(), runs, source)

    async def _bucket_steps(self, rank: BucketRank, baseline: Baseline) -> bool:
        """Iterations on one bucket; False when a budget stopped the night."""
        cp, key = self._cp(), f"{rank.suite}/{rank.bucket}"
        done = [
            s
            for s in cp.steps
            if s.kind == "iteration" and s.suite == rank.suite and s.bucket == rank.bucket
        ]
        # an iteration that ended in error (its provider failed) is not a try: a resumed
        # night runs it again, as an iteration of its own
        tries = sum(s.outcome != "error" for s in done)
        if any(s.outcome == "accepted" for s in done) or tries >= self.c.iterations_per_bucket:
            return True
        session = cp.sessions.setdefault(
            key,
            f"{cp.night_id}-{sanitize_ref_component(rank.suite)}-"
            f"{sanitize_ref_component(rank.bucket)}",
        )
        stopped = False

        def before(n: int) -> bool:
            nonlocal stopped
            step_id = f"iterate:{key}/{n}"
            estimate = estimate_iteration(cp, self.c, rank.suite, baseline)
            if self._stop(step_id, estimate):
                stopped = True
                return False
            self.book.begin(estimate)
            cp.pending = Pending(
                step=step_id,
                suite=rank.suite,
                bucket=rank.bucket,
                session=session,
                iteration=n,
                estimate=estimate.spend,
                started_at=datetime.now(UTC),
            )
            self.save()
            return True

        def after(it: IterationResult) -> None:
            self.finish_iteration(it)

        first = max((s.iteration or 0 for s in done), default=0) + 1
        opt = self._optimizer(
            rank.suite,
            rank.bucket,
            first,
            first - 1 + self.c.iterations_per_bucket - tries,
            before_iteration=before,
            after_iteration=after,
            session=session,
        )
        try:
            await opt.optimize(baseline)
        finally:
            opt.git.close()
        return not stopped

    def finish_iteration(self, it: IterationResult) -> None:
        """Record the iteration that just ended and checkpoint it."""
        cp = self._cp()
        assert cp.pending is not None
        p = cp.pending
        self.book.record(
            cp,
            p.step,
            "iteration",
            p.suite,
            bucket=p.bucket,
            iteration=it.iteration,
            outcome=it.outcome,
            evaluated=bool(it.verdict_table),
            result=it,
        )
        if it.outcome == "error":
            cp.infra_errors.append(f"{p.step}: {'; '.join(it.reasons)}")
        cp.pending = None
        self.save()


async def run_nightly(config: NightlyConfig, **kw: Any) -> NightResult:
    """Run (or with resume=True continue) one night; see `NightlyEngine` for the keywords."""
    return await NightlyEngine(config, **kw).run()


__all__ = ["NightResult", "NightlyConfig", "NightlyEngine", "run_nightly"]
