"""`promptloop nightly`: baselines of every suite, bucket ranking, budgeted optimize iterations.

A night is a list of steps (one baseline per suite, then proposal+evaluation iterations on the
worst buckets). Before each step its spend and duration are estimated and the night stops
cleanly when that would exceed a budget; after each step a checkpoint is written, so a killed
night resumes without redoing finished steps or losing an accepted branch. Nothing here prints:
progress goes to `on_event`, results come back as a `NightResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from agents.llm.errors import ModelError
from agents.llm.types import ModelClient, Usage
from optimizer.core.config import ConfigError, make_client
from optimizer.core.pricing import price_for
from optimizer.core.results import RunResult
from optimizer.git import GitOps, sanitize_ref_component
from optimizer.report.store import default_store_dir, load_run
from optimizer.report.summary import summarize
from optimizer.run.runner import AllTrialsErroredError, ProgressFn
from optimizer.workflows.nightly.budget import (
    TRIAL_ROLES,
    Estimate,
    Meter,
    MeteredClient,
    Role,
    Spend,
    TrialRate,
    assumed_trial,
    over_budget,
)
from optimizer.workflows.nightly.config import (
    NightlyConfig,
    proposer_guess,
    rank_buckets,
    uncached_trials,
)
from optimizer.workflows.nightly.publish import publish_accepted
from optimizer.workflows.nightly.recover import recover_pending
from optimizer.workflows.nightly.state import (
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
from optimizer.workflows.nightly.summary import NightSummary, write_summary
from optimizer.workflows.optimize import Baseline, IterationResult, Optimizer
from optimizer.workflows.paired import agent_suites

Event = Callable[[str, dict[str, Any]], None]


def observed_rate(runs: list[RunResult], fresh: int, seconds: float) -> TrialRate:
    """Token use recorded in every trial of `runs` (cached ones too), timed by the fresh ones."""
    spend, n = Spend(), 0
    for run in runs:
        s = summarize(run)
        n += sum(t.status != "skipped" for t in run.trials)
        for role, u in (("agent", s.usage), ("judge", s.judge_usage)):
            spend = spend + Spend(usage={role: Usage(
                input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens)})
    return TrialRate(trials=n, spend=spend, timed_trials=fresh, seconds=seconds)


@dataclass(frozen=True)
class NightResult:
    checkpoint: Checkpoint
    folder: Path
    summary: NightSummary
    paths: dict[str, Path]
    """summary.json / .md / .html"""

    @property
    def exit_code(self) -> int:
        """0 finished (patches accepted or not); 2 an infrastructure failure happened."""
        cp = self.checkpoint
        publish_failed = any(p.push_error or p.pr == "failed" for p in cp.published)
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
        on_event: Event | None = None,
        progress: Callable[[str], ProgressFn] | None = None,
        resume: bool = False,
        push: bool = False,
        open_pr: bool = False,
    ) -> None:
        self.c = config
        self._given: dict[Role, ModelClient | None] = {
            "agent": agent, "judge": judge, "proposer": proposer}
        self.emit = on_event or (lambda _k, _p: None)
        self._progress_for = progress or (lambda _label: lambda _k, _p: None)
        self.resume = resume
        self.push, self.open_pr = push or open_pr, open_pr
        self.meter = Meter()
        self.clients: dict[Role, ModelClient] = {}
        self._owned: list[ModelClient] = []
        self.fresh = 0
        self._wall0, self._t0 = 0.0, time.monotonic()
        self.cp: Checkpoint | None = None
        self._est: Estimate | None = None
        self._mark: tuple[float, datetime, Spend, int] = (0.0, datetime.now(UTC), Spend(), 0)

    # --- plumbing -----------------------------------------------------------------------
    @property
    def state(self) -> Path:
        return self.c.state_dir

    @property
    def repo(self) -> Path:
        return self.c.repo or Path.cwd()

    def say(self, message: str) -> None:
        self.emit("phase", {"message": message})

    def _cp(self) -> Checkpoint:
        assert self.cp is not None
        return self.cp

    def save(self) -> None:
        cp = self._cp()
        cp.wall_seconds = self.wall_used()
        save_checkpoint(self.state, cp)

    def wall_used(self) -> float:
        return self._wall0 + time.monotonic() - self._t0

    def _build_clients(self) -> None:
        c = self.c
        built: dict[str, ModelClient] = {}

        def make(model: str) -> ModelClient:
            if model not in built:
                built[model] = make_client(model, c.base_url)
                self._owned.append(built[model])
            return built[model]

        agent = self._given["agent"] or make(c.agent_model)
        built.setdefault(c.agent_model, agent)
        judge = self._given["judge"] or make(c.judge_id)
        proposer = self._given["proposer"] or make(c.proposer_id)
        self.clients = {
            "agent": MeteredClient(agent, self.meter, "agent"),
            "judge": MeteredClient(judge, self.meter, "judge"),
            "proposer": MeteredClient(proposer, self.meter, "proposer"),
        }

    def _check_prices(self) -> None:
        if self.c.max_usd is None:
            return
        for model in dict.fromkeys(self.c.models.values()):
            if price_for(model, self.c.prices) is None:
                raise ConfigError(
                    f"max_usd is set but no price is known for {model}; add "
                    f'[nightly.prices."{model}"] with input = and output = (USD per million '
                    "tokens) to promptloop.toml"
                )

    def _progress(self, label: str) -> ProgressFn:
        inner = self._progress_for(label)

        def on(kind: str, payload: dict[str, Any]) -> None:
            if kind == "trial_end" and not payload.get("cached"):
                self.fresh += 1
            inner(kind, payload)

        return on

    def _on_optimizer_event(self, kind: str, payload: dict[str, Any]) -> None:
        cp = self.cp
        if kind == "candidate" and cp is not None and cp.pending is not None:
            cp.pending.branch = payload["branch"]
            self.save()
        self.emit(kind, payload)

    # --- the night ----------------------------------------------------------------------
    async def run(self) -> NightResult:
        lock = NightLock(self.state / "nightly.lock")
        stale = lock.acquire()
        try:
            if stale is not None:
                self.say(f"took over a stale lock of pid {stale.pid} on {stale.host} (started "
                         f"{stale.started_at}); that process is no longer running")
            cp = self._open()
            self._check_prices()  # configuration problems end the run before any state is
            self._build_clients()  # written or any money is spent
            self._wall0, self._t0 = cp.wall_seconds, time.monotonic()
            try:
                recover_pending(cp, self.repo, self.state, self.say)
                self.save()
                await self._night()
                cp.status = "finished"
            except (ModelError, AllTrialsErroredError) as err:
                cp.status = "failed"
                message = f"{type(err).__name__}: {err}"
                cp.infra_errors.append(message)
                cp.stop_reason = f"infrastructure failure: {message}"
            finally:
                self.save()  # a crash or Ctrl-C leaves status "running": resumable
            if self.push and cp.status != "running":
                publish_accepted(cp, self.repo, open_pr=self.open_pr, say=self.say)
                self.save()
            folder = checkpoint_path(self.state, cp.night_id).parent
            summary, paths = write_summary(cp, folder, self.repo, self.c.models, self.c.prices)
            return NightResult(cp, folder, summary, paths)
        finally:
            for client in self._owned:
                await client.aclose()
            lock.release()

    def _open(self) -> Checkpoint:
        cp = latest_unfinished(self.state) if self.resume else None
        if self.resume and cp is None:
            self.say("no unfinished night to resume; starting a new night")
        if cp is not None:
            keep = {"repo": self.c.repo, "state_dir": self.c.state_dir}
            self.c = NightlyConfig.model_validate({**cp.config, **keep})
            cp.attempts += 1
            cp.status = "running"
            if cp.infra_errors:
                cp.notes += [f"attempt {cp.attempts - 1}: {e}" for e in cp.infra_errors]
                cp.infra_errors = []
            cp.stop_reason = None
            self.say(f"resuming night {cp.night_id} (attempt {cp.attempts}, "
                     f"{len(cp.steps)} step(s) already done)")
        else:
            with GitOps(self.repo) as git:
                base = git.resolve(self.c.base)
            now = datetime.now(UTC)
            cp = Checkpoint(night_id=new_night_id(now), started_at=now, updated_at=now,
                            config=self.c.model_dump(mode="json", exclude={"repo", "state_dir"}),
                            base_commit=base)
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
        if cp.ranking is None:
            cp.ranking, cp.skipped_buckets = rank_buckets(baselines, self.c.max_buckets)
            self.save()
        if not cp.ranking:
            self.say("no bucket has failing trials; nothing to optimize tonight")
        for rank in cp.ranking:
            if not await self._bucket_steps(rank, baselines[rank.suite]):
                return

    def _optimizer(self, suite: str, bucket: str, first: int = 1, **hooks: Any) -> Optimizer:
        return Optimizer(
            self.c.optimize_config(suite, bucket, self._cp().base_commit, first),
            agent=self.clients["agent"], judge=self.clients["judge"],
            proposer=self.clients["proposer"], on_event=self._on_optimizer_event,
            progress=self._progress, **hooks,
        )

    def _begin(self, estimate: Estimate) -> None:
        self._est = estimate
        self._mark = (time.monotonic(), datetime.now(UTC), self.meter.spend, self.fresh)

    def _record(self, step_id: str, kind: Literal["baseline", "iteration"], suite: str,
                observed: TrialRate | None = None, **fields: Any) -> StepRecord:
        """Append the step that just ended, with its metered spend; `observed` overrides the
        trial rate learnt from it (default: the trials it ran and their metered spend)."""
        cp, est = self._cp(), self._est or Estimate(Spend(), 0.0, "")
        t0, started, before, fresh0 = self._mark
        spend, fresh = self.meter.spend - before, self.fresh - fresh0
        seconds = time.monotonic() - t0
        models, prices = self.c.models, self.c.prices
        rec = StepRecord(
            id=step_id, kind=kind, suite=suite, started_at=started, ended_at=datetime.now(UTC),
            seconds=seconds, fresh_trials=fresh, spend=spend, usd=spend.usd(models, prices),
            estimate_tokens=est.spend.tokens, estimate_usd=est.spend.usd(models, prices),
            estimate_basis=est.basis, **fields,
        )
        cp.steps.append(rec)
        cp.spend = cp.spend + spend
        if observed is None:
            observed = TrialRate(trials=fresh, spend=spend.only(TRIAL_ROLES),
                                 timed_trials=fresh, seconds=seconds)
        if observed.trials:
            cp.rates[suite] = cp.rates.get(suite, TrialRate()) + observed
        return rec

    def _stop(self, step_id: str, estimate: Estimate) -> bool:
        cp = self._cp()
        hit = over_budget(self.c.budget, cp.spend, self.wall_used(), estimate, self.c.models,
                          self.c.prices)
        if hit is None:
            return False
        which, detail = hit
        cp.stop_reason = f"stopped: budget {which} before {step_id} ({detail})"
        self.say(cp.stop_reason)
        self.save()
        return True

    # --- estimates ----------------------------------------------------------------------
    def _per_trial(self, suite: str) -> tuple[Spend, float, str]:
        rates = self._cp().rates
        own = rates[suite].per_trial() if suite in rates else None
        if own is not None:
            return own[0], own[1], f"{suite} average per trial"
        pooled = sum(rates.values(), TrialRate()).per_trial()
        if pooled is not None:
            return pooled[0], pooled[1], "average per trial of the other suite"
        guess = self.c.assumed_tokens_per_trial
        return assumed_trial(guess), 0.0, f"assumed {guess} tokens per trial"

    def _estimate_baseline(self, suite: str) -> Estimate:
        with GitOps(self.repo) as git:
            prompt = git.read_file(self._cp().base_commit, f"prompts/{suite}.md")
        n = uncached_trials(agent_suites(suite, self.c.kinds, self.repo), prompt, self.c)
        per, secs, basis = self._per_trial(suite)
        m = self.c.estimate_margin
        return Estimate(per.scaled(n * m), secs * n * m, f"{n} uncached trial(s) x {basis}")

    def _estimate_iteration(self, suite: str, baseline: Baseline) -> Estimate:
        steps = self._cp().steps
        m = self.c.estimate_margin
        last = next((s for s in reversed(steps) if s.evaluated and s.suite == suite), None)
        if last is not None:
            return Estimate(last.spend.scaled(m), last.seconds * m,
                            f"last evaluated iteration {last.id} x {m:g}")
        per, secs, basis = self._per_trial(suite)
        n = sum(len(r.trials) for r in baseline.runs)
        n += 2 * self.c.confirm_trials * sum(len(s.tasks) for s in baseline.suites)
        seen = next((s.spend.usage["proposer"] for s in reversed(steps)
                     if "proposer" in s.spend.usage), None)
        proposer = seen or proposer_guess(self.c.proposer_id)
        spend = (per.scaled(n) + Spend(usage={"proposer": proposer})).scaled(m)
        return Estimate(spend, secs * n * m,
                        f"proposal + {n} trial(s) incl. confirmations x {basis} x {m:g}")

    # --- steps --------------------------------------------------------------------------
    async def _baseline_step(self, suite: str) -> Baseline | None:
        cp, step_id = self._cp(), f"baseline:{suite}"
        opt = self._optimizer(suite, "*")
        try:
            done = cp.step(step_id)
            if done is not None:
                return self._load_baseline(opt, done)
            estimate = self._estimate_baseline(suite)
            if self._stop(step_id, estimate):
                return None
            self._begin(estimate)
            baseline = await opt.run_baseline()
            trials = [t for r in baseline.runs for t in r.trials]
            errored = [t for t in trials if t.status == "errored"]
            failing = sum(t.status in ("failed", "timedOut") for t in trials)
            fresh = self.fresh - self._mark[3]
            observed = observed_rate(baseline.runs, fresh, time.monotonic() - self._mark[0])
            self._record(step_id, "baseline", suite, observed,
                         runs=[r.run_name for r in baseline.runs],
                         outcome=f"{failing} failing, {len(errored)} errored of {len(trials)}")
            if errored:
                cp.notes.append(f"{step_id}: {len(errored)} errored trial(s), e.g. "
                                f"{errored[0].infra_error or errored[0].failure_reason}")
            self.save()
            return baseline
        finally:
            opt.git.close()

    def _load_baseline(self, opt: Optimizer, done: StepRecord) -> Baseline:
        """A finished baseline step, rebuilt from the saved runs (no trial is run again)."""
        cp = self._cp()
        runs = [load_run(default_store_dir(self.state), name) for name in done.runs]
        prompt = opt.git.read_file(cp.base_commit, opt.c.prompt_path)
        return Baseline(cp.base_commit, prompt, agent_suites(opt.c.suite, self.c.kinds, self.repo),
                        runs)

    async def _bucket_steps(self, rank: BucketRank, baseline: Baseline) -> bool:
        """Iterations on one bucket; False when a budget stopped the night."""
        cp, key = self._cp(), f"{rank.suite}/{rank.bucket}"
        done = [s for s in cp.steps
                if s.kind == "iteration" and s.suite == rank.suite and s.bucket == rank.bucket]
        if any(s.outcome == "accepted" for s in done) or len(done) >= self.c.iterations_per_bucket:
            return True
        session = cp.sessions.setdefault(
            key, f"{cp.night_id}-{sanitize_ref_component(rank.suite)}-"
                 f"{sanitize_ref_component(rank.bucket)}")
        stopped = False

        def before(n: int) -> bool:
            nonlocal stopped
            step_id = f"iterate:{key}/{n}"
            estimate = self._estimate_iteration(rank.suite, baseline)
            if self._stop(step_id, estimate):
                stopped = True
                return False
            self._begin(estimate)
            cp.pending = Pending(step=step_id, suite=rank.suite, bucket=rank.bucket,
                                 session=session, iteration=n, estimate=estimate.spend,
                                 started_at=datetime.now(UTC))
            self.say(f"{step_id}: estimated ~{estimate.spend.tokens} tokens ({estimate.basis})")
            self.save()
            return True

        def after(it: IterationResult) -> None:
            self.finish_iteration(it)

        first = max((s.iteration or 0 for s in done), default=0) + 1
        opt = self._optimizer(rank.suite, rank.bucket, first, before_iteration=before,
                              after_iteration=after, session=session)
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
        self._record(p.step, "iteration", p.suite, bucket=p.bucket, iteration=it.iteration,
                     outcome=it.outcome, evaluated=bool(it.verdict_table), result=it)
        if it.outcome == "error":
            cp.infra_errors.append(f"{p.step}: {'; '.join(it.reasons)}")
        cp.pending = None
        self.save()


async def run_nightly(config: NightlyConfig, **kw: Any) -> NightResult:
    """Run (or with resume=True continue) one night; see `NightlyEngine` for the keywords."""
    return await NightlyEngine(config, **kw).run()


__all__ = ["NightResult", "NightlyConfig", "NightlyEngine", "run_nightly"]
