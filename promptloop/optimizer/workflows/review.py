"""`promptloop review`: evaluate the prompts of two git refs and gate the change like optimize.

Works for any prompt change, a colleague's PR as well as promptloop's own branches. Prompts are
read from the git object database at both refs (the checkout is never touched, and no branch or
worktree is made, so a killed review leaves only saved runs behind), the agent's
suites run once per prompt (base-side trials come from the trial cache when that prompt was
evaluated before), trials are paired, suspected regressions are confirmed with extra trials,
harm detection runs on every bucket (`workflows.gating.run_harm`: the per-task rules of
optimize's gate, adding trials where a bucket's statement needs them), and the result is
written as a PR comment under `<state>/review/<id>/`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

from promptloop.agents.llm.types import ModelClient, Usage
from promptloop.optimizer.adapters.box import require_sandbox
from promptloop.optimizer.core.buckets import qualified
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.events import EventSink, Phase, RunWarning, TrialsEstimated, ignore
from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.core.killpoint import kill_point
from promptloop.optimizer.core.pricing import estimate_cost
from promptloop.optimizer.core.project import active_project, config_name, project_scope
from promptloop.optimizer.core.prompt_target import PromptSource, open_target
from promptloop.optimizer.core.results import (
    Provenance,
    RunResult,
    TrialResult,
    seeded_pairing,
)
from promptloop.optimizer.core.suites import Suite, is_jsonl_suite
from promptloop.optimizer.gate.compare import BucketComparison
from promptloop.optimizer.gate.policy import harm_method_text
from promptloop.optimizer.gate.sequential import TrialAsk
from promptloop.optimizer.gate.verdict import POOLED, ReviewVerdict, decide_review
from promptloop.optimizer.git import GitOps, GitOpsError
from promptloop.optimizer.git_read import tree_files
from promptloop.optimizer.report.plain import OUTSIDE_REASON
from promptloop.optimizer.report.store import default_store_dir, list_runs, load_run
from promptloop.optimizer.report.summary import summarize, wrote_outside
from promptloop.optimizer.run.models import ModelSet
from promptloop.optimizer.run.usage import scale_usage
from promptloop.optimizer.workflows.gating import (
    HarmRun,
    lineage_history,
    outside_writes,
    paired,
    run_harm,
)
from promptloop.optimizer.workflows.paired import (
    agent_suites,
    compare_suite_runs,
    confirm_suspects,
    run_and_save,
)
from promptloop.optimizer.workflows.review_guard import broken_message, guard_heads
from promptloop.optimizer.workflows.review_models import (
    REVIEW_VERSION,
    AgentReview,
    ReviewConfig,
    ReviewResult,
    TrialChange,
    combine,
    paired_count,
    trial_flips,
)
from promptloop.optimizer.workflows.review_trust import (
    ReviewProjects,
    review_projects,
    without_undeclared_graders,
)
from promptloop.optimizer.workflows.sources import RepoSource
from promptloop.optimizer.workflows.sweep import sweep_abandoned


class Reviewer:
    """One review on the clients of `models` (the caller closes them)."""

    def __init__(
        self, config: ReviewConfig, models: ModelSet, *, on_event: EventSink | None = None
    ) -> None:
        self.c = config
        self.models = models
        self._clients: tuple[ModelClient | None, ModelClient | None] = (None, None)
        """Injected agent and judge clients (tests), for an agent on its own models too."""
        self._own_tokens = 0
        self._agent_models: list[str] = []
        """Agent models of the agents reviewed on their own models."""
        self.repo = config.repo or Path.cwd()
        self.emit = on_event or ignore
        self.review_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.review_dir = config.state_dir / "review" / self.review_id
        self._commits: dict[str, str] = {}
        self._sides: dict[str, tuple[str, str]] = {}
        """Prompt text -> (run role, ref): review-base at --base, review-head at --head."""
        self._target: PromptSource | None = None
        """The prompt target of the agent under review (how its text reaches the agent)."""
        self._projects: ReviewProjects | None = None
        self._notes: list[str] = []
        """Notes found while reviewing an agent (graders ignored), for the comment."""
        self.source = RepoSource(self.repo, config.head, config.state_dir / "sources")
        """Tasks as the head ref holds them (prompts are read at both refs)."""

    # --- evaluation ---------------------------------------------------------------------
    async def _run(
        self, suite: Suite, prompt: str, label: str, indices: dict[str, list[int]] | None = None
    ) -> RunResult:
        options = self.c.run_options(
            self.c.agent_model, prompt, f"{label} {suite.name}", indices,
            run_name=f"{suite.name}-review-{self.review_id}-{label.replace(' ', '-')}",
            prompt_source=self._target)
        # the prompt is read at a ref: its commit is the provenance (the checkout is not used)
        role, ref = self._sides.get(prompt, ("", None))
        prov = Provenance(git_commit=self._commits.get(prompt), git_dirty=False, role=role,
                          branch=ref, session=self.review_id)
        saved = await run_and_save(suite, options, self.models, self.emit, prov,
                                   writes_decide=role == "review-head")
        return saved.run

    def _estimate(self, agent: str, suites: list[Suite]) -> TrialsEstimated:
        """The trials both prompts need (cached ones included; confirmation and harm
        detection may add some), and their tokens and cost from this agent model's last saved
        run of each suite, where there is one and the model's price is known."""
        trials = 2 * sum(self.c.trials or t.spec.trials_per_run for s in suites for t in s.tasks)
        store = default_store_dir(self.c.state_dir)
        latest: dict[str, str] = {}
        for e in list_runs(store):  # oldest first: the last one wins
            if e.agent_model == self.c.agent_model and e.num_trials:
                latest[e.suite_name] = e.run_name
        spend, measured = Usage(), 0
        for s in suites:
            if s.name not in latest:
                continue
            with contextlib.suppress(Exception):  # an unreadable run just leaves no figure
                run = load_run(store, latest[s.name])
                u = summarize(run).usage
                used = Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                             cache_read_tokens=u.cache_read_tokens,
                             cache_write_tokens=u.cache_write_tokens)
                per = 1 / max(1, len(run.trials))
                n = 2 * sum(self.c.trials or t.spec.trials_per_run for t in s.tasks)
                spend = spend + scale_usage(used, per * n)
                measured += 1
        if not measured:
            return TrialsEstimated(what=f"{agent}: review", trials=trials,
                                   basis="no earlier run of these suites to price them by; "
                                   "the gate may add trials")
        tokens = spend.input_tokens + spend.output_tokens
        usd = estimate_cost(self.c.agent_model, spend).usd
        return TrialsEstimated(what=f"{agent}: review", trials=trials, tokens=tokens, usd=usd,
                               basis=f"agent tokens per trial of the last run of {measured} of "
                               f"{len(suites)} suite(s), judges not counted; the gate may add "
                               "trials")

    def _decide(self, comps: list[BucketComparison], base: list[RunResult],
                head: list[RunResult], harm: HarmRun | None = None) -> ReviewVerdict:
        pooled = [x for pairs in paired(base, head).values() for x in pairs]
        if harm is None:
            return decide_review(comps, self.c.policy, pooled)
        h = harm.result
        why = [*h.reasons(), harm_method_text(self.c.policy)]
        return decide_review(comps, self.c.policy, pooled, h.buckets, h.pooled_rejected, why,
                             h.improved)

    async def _harm(self, suites: list[Suite], base: list[RunResult], head: list[RunResult],
                    prompts: tuple[str, str]) -> HarmRun:
        """Harm detection on every bucket, trials added where a statement needs them."""
        def stage(req: TrialAsk) -> None:
            n = sum(len(v) for v in req.indices.values())
            self.emit(Phase(message=f"harm detection: {n} more head trial(s); {req.reason}"))

        history = lineage_history(default_store_dir(self.c.state_dir), base)
        return await run_harm(suites, base, head, prompts, self.c.policy, self._run,
                              history=history, on_stage=stage)

    async def _review_agent(self, agent: str, base_text: str, head_text: str,
                            target: PromptSource | None = None) -> AgentReview:
        """One agent's review, on its own table's models where the agents declare different
        ones (`ReviewConfig.models_by_agent`): its own config and model clients meanwhile."""
        own = self.c.models_by_agent.get(agent, {})
        if all(getattr(self.c, k) == v for k, v in own.items()):
            return await self._review_one(agent, base_text, head_text, target)
        outer_c, outer_m = self.c, self.models
        self.c = self.c.model_copy(update=own)
        try:
            async with ModelSet(self.c.model_ids, agent=self._clients[0],
                                judge=self._clients[1]) as models:
                self.models = models
                got = await self._review_one(agent, base_text, head_text, target)
                self._own_tokens += models.usage.total_tokens
                self._agent_models.append(self.c.agent_model)
                return got
        finally:
            self.c, self.models = outer_c, outer_m

    async def _review_one(self, agent: str, base_text: str, head_text: str,
                          target: PromptSource | None = None) -> AgentReview:
        self._target = target
        if self._projects is not None and not self.c.no_sandbox:
            require_sandbox(self._projects.head.agents.get(agent), agent)
        untrusted = self._projects is not None and not self.c.trust_head
        suites = agent_suites(agent, self.c.kinds, self.source, command_graders=not untrusted)
        if self._projects is not None and not self.c.trust_head:
            suites, notes = without_undeclared_graders(suites, self._projects.base, agent)
            for note in notes:
                self._notes.append(note)
                self.emit(RunWarning(message=note))
        for item in self.source.take_new():
            self.emit(Phase(message=item.line()))
        self.emit(self._estimate(agent, suites))
        self.emit(Phase(message=f"{agent}: evaluating the base prompt"))
        base_runs = [await self._run(s, base_text, "base") for s in suites]
        kill_point("review")
        self.emit(Phase(message=f"{agent}: evaluating the head prompt"))
        head_runs = [await self._run(s, head_text, "head") for s in suites]
        comps = compare_suite_runs(base_runs, head_runs, self.c.policy)
        verdict: ReviewVerdict = self._decide(comps, base_runs, head_runs)
        base_final, head_final = base_runs, head_runs
        confirmed: list[str] = []
        harm_trials = 0
        wrote = regress_on_outside_writes(verdict, base_runs, head_runs)
        escaped = wrote is not verdict
        suspects = sorted({*verdict.regressed, *verdict.suspects} - {POOLED})
        if escaped:
            # the head's agent wrote outside its workspace: decided, and no more of its
            # trials are run (harm detection would only ask the errored tasks again)
            verdict = wrote
        elif suspects and self.c.confirm_trials:
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
        if not escaped:
            # the fixed-sample family decides on the trials above; harm detection may add more
            harm = await self._harm(suites, base_final, head_final, (base_text, head_text))
            verdict = self._decide(comps, base_final, head_final, harm)
            base_final, head_final = harm.base_runs, harm.head_runs
            harm_trials = harm.trials_run
            verdict = regress_on_outside_writes(verdict, base_final, head_final)
        self.emit(Phase(message=f"{agent}: {verdict.decision}"))
        broken: list[TrialChange] = []
        fixed: list[TrialChange] = []
        for b, h in zip(base_final, head_final, strict=True):
            nb, fx = trial_flips(b, h)
            broken += nb
            fixed += fx
        return AgentReview(
            agent=agent,
            prompt_path=target.path if target is not None else "",
            decision=verdict.decision,
            reasons=verdict.reasons,
            regressed=verdict.regressed,
            improved=verdict.improved,
            open=verdict.open,
            buckets=verdict.buckets,
            harm_trials=harm_trials,
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
            paired_trials=sum(paired_count(b, h)
                              for b, h in zip(base_final, head_final, strict=True)),
            seeded=seeded_pairing(base_final, head_final),
        )

    # --- the review ---------------------------------------------------------------------
    def _changed_prompts(
        self, git: GitOps, base_sha: str, head_sha: str, result: ReviewResult,
        skip: Collection[str] = (),
    ) -> list[tuple[str, str, str, PromptSource]]:
        """(agent, base text, head text, head target) of every prompt target to review; fills
        unchanged/notes. Each side's target is found with its own ref's promptloop.toml."""
        assert self._projects is not None
        changed: list[tuple[str, str, str, PromptSource]] = []
        head_project = self._projects.head
        for agent in [self.c.suite] if self.c.suite else list(head_project.agent_names()):
            if agent not in head_project.agents or agent in skip:
                continue  # skipped: its head failed the region guard (review_guard)
            found = self._target_texts(git, agent, base_sha, head_sha)
            if not found:
                result.notes.append(f"{agent}: no prompt target to compare")
                continue
            for path, base_text, head_text, target in found:
                self._one_prompt(agent, path, base_text, head_text, target, result, changed)
        return changed

    def _target_texts(self, git: GitOps, agent: str, base_sha: str, head_sha: str
                      ) -> list[tuple[str, str | None, str | None, PromptSource | None]]:
        """(path, base text, head text, head source) per prompt target of `agent`."""
        assert self._projects is not None
        head_agent = self._projects.head.agent(agent)
        base_agent = (self._projects.base.agent(agent)
                      if agent in self._projects.base.agents else head_agent)
        out: list[tuple[str, str | None, str | None, PromptSource | None]] = []
        for target in head_agent.targets():
            base_target = next((t for t in base_agent.targets() if t.name == target.name),
                               target)
            texts: list[str | None] = []
            head_source: PromptSource | None = None
            for sha, who, tgt in ((base_sha, base_agent, base_target),
                                  (head_sha, head_agent, target)):
                try:
                    src = open_target(who, tgt, git.read_file(sha, tgt.path))
                except GitOpsError:
                    texts.append(None)
                    continue
                texts.append(src.text)
                head_source = src if sha == head_sha else head_source
            out.append((target.path, texts[0], texts[1], head_source))
        return out

    def _one_prompt(self, agent: str, path: str, base_text: str | None,
                    head_text: str | None, target: PromptSource | None, result: ReviewResult,
                    changed: list[tuple[str, str, str, PromptSource]]) -> None:
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
            return
        if base_text == head_text:
            if agent not in result.unchanged:
                result.unchanged.append(agent)
        else:
            assert target is not None
            changed.append((agent, base_text, head_text, target))

    def _suite_changes(self, git: GitOps, agent: str, base_sha: str, head_sha: str
                       ) -> list[str]:
        """A note per suite of `agent` the head changes beside its prompt: the verdict grades
        the head on the head's tasks, so a PR that edits or removes tasks can loosen its own
        grading (a team's PR rewrote every expected answer to what its prompt now said, and
        review said "improves ... merge it" without a word about the tasks)."""
        assert self._projects is not None
        notes = []
        for entry in self._projects.head.agent(agent).config.suites:
            entry = entry.strip("/")
            if is_jsonl_suite(entry):
                texts: list[str | None] = []
                for sha in (base_sha, head_sha):
                    try:
                        texts.append(git.read_file(sha, entry))
                    except GitOpsError:
                        texts.append(None)
                if texts[0] == texts[1]:
                    continue
                if texts[0] is None:
                    notes.append(f"{agent}: the suite {entry} is new in the head")
                    continue
                old, new = (set((t or "").splitlines()) for t in texts)
                notes.append(f"{agent}: the head also changes its suite {entry} "
                             f"({len(new - old)} task line(s) added or edited, "
                             f"{len(old - new)} removed or edited): the verdict grades the "
                             "head on its own tasks; review the task changes with the prompt")
                continue
            before = tree_files(git, base_sha, entry) or {}
            after = tree_files(git, head_sha, entry) or {}
            if before == after:
                continue
            added = sorted({_task_folder(p) for p in after.keys() - before.keys()})
            removed = sorted({_task_folder(p) for p in before.keys() - after.keys()})
            edited = sorted({_task_folder(p) for p in before.keys() & after.keys()
                             if before[p] != after[p]} - set(added) - set(removed))
            parts = [f"{len(xs)} {what} ({', '.join(x.rsplit('/', 1)[-1] for x in xs[:5])}"
                     f"{', ...' if len(xs) > 5 else ''})"
                     for what, xs in (("edited", edited), ("removed", removed),
                                      ("added", added)) if xs]
            notes.append(f"{agent}: the head also changes its suite {entry}: "
                         + "; ".join(parts) + ": the verdict grades the head on its own "
                         "tasks; review the task changes with the prompt")
        return notes

    def _require_project(self, git: GitOps) -> None:
        """A ConfigError when this checkout declares agents in a project file neither ref
        holds (not committed yet, or under another name there): review would otherwise see
        promptloop's own agents only and say "nothing to review", exit 0, for any PR (a
        team's CI gate passed an uncommitted promptloop.toml's prompt change so)."""
        assert self._projects is not None
        if (self._projects.base.path is not None or self._projects.head.path is not None
                or active_project().path is None):
            return
        name = config_name(git.root)
        raise ConfigError(f"review reads {name} from the two commits it compares, and neither "
                          f"{self.c.base} nor {self.c.head} holds it: commit it first "
                          f"(git add {name} && git commit), then review the change")

    def _fork_point(self, git: GitOps, base: str, head: str) -> tuple[str, str] | None:
        """Where the head left the base, when the base moved on since (`--base origin/main` in
        CI is main's tip, with commits the PR never saw): (their merge base, the note saying
        so). Comparing with the tip would show main's newer prompt edits undone by the PR, as
        GitHub's own diff does not. None when the base is in the head's history, or no merge
        base is here (a shallow clone: the base is used as given, and the note says so)."""
        if base == head or git.is_ancestor(base, head):
            return None
        fork = git.merge_base(base, head)
        if fork is None:
            note = (f"{self.c.base} ({base[:10]}) is not in {self.c.head}'s history and no "
                    "common ancestor is in this clone (shallow?): the prompt is compared with "
                    f"{self.c.base} as it is now, so edits made there since the head branched "
                    "read as undone by the head; fetch more history to compare from their "
                    "merge base")
            return (base, note)
        if fork == head:  # the head is behind the base: compared as given
            return None
        return (fork, f"{self.c.base} ({base[:10]}) moved on since {self.c.head} branched "
                      f"from it: compared from their merge base {fork[:10]}, as the pull "
                      "request's own diff is (the base's newer commits are not the head's "
                      "doing)")

    async def review(self) -> ReviewResult:
        try:
            return await self._review()
        finally:
            self.source.close()

    def _announce(self, changed: list[tuple[str, str, str, PromptSource]],
                  result: ReviewResult) -> None:
        """Say what is compared and where it was read; warn about unevaluated edits."""
        base, head = (f"{r} {s[:7]}" for r, s in ((self.c.base, result.base_commit),
                                                  (self.c.head, result.head_commit)))
        for *_, target in changed:
            # the target, not its lines: those are the head's, and may differ on the base
            result.sources.append(f"prompt: {target.target.describe()} @ {base} vs {head}")
        self._warn_unevaluated([target.path for *_, target in changed], result)
        for line in result.sources:
            self.emit(Phase(message=line))

    def _warn_unevaluated(self, paths: list[str], result: ReviewResult) -> None:
        """Warn, as optimize does, about each prompt file whose working-tree text differs from
        the head ref's (an uncommitted edit review does not see); not when it is the base's
        (the checkout is the base of the review: both sides are evaluated)."""
        for path in dict.fromkeys(paths):
            if self._is_base_text(path, result.base_commit):
                continue
            warning = self.source.unevaluated_warning(path, "review")
            if warning:
                result.notes.append(warning)
                self.emit(RunWarning(message=warning))

    def _is_base_text(self, path: str, base_sha: str) -> bool:
        """The working tree's `path` is the base commit's text."""
        root, ops = self.source.root, self.source.ops
        if root is None or ops is None or not (root / path).is_file():
            return False
        try:
            return ops.read_file(base_sha, path) == (root / path).read_text(encoding="utf-8")
        except (GitOpsError, OSError, UnicodeDecodeError):
            return False

    async def _review(self) -> ReviewResult:
        sweep_abandoned(self.c.state_dir, self.emit)  # what killed optimize runs left behind
        with GitOps(self.repo) as git:
            base_sha, head_sha = git.resolve(self.c.base), git.resolve(self.c.head)
            moved = self._fork_point(git, base_sha, head_sha)
            if moved is not None:
                base_sha = moved[0]
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
            self._projects = review_projects(git, (self.c.base, base_sha),
                                             (self.c.head, head_sha), self.c.trust_head,
                                             cache=self.c.state_dir / "sources")
            self._require_project(git)
            for note in self._projects.ignored:
                result.notes.append(note)
                self.emit(RunWarning(message=note))
            if moved is not None:
                result.notes.append(moved[1])
                self.emit(RunWarning(message=moved[1]))
            if (self.c.suite and self.c.suite not in self._projects.head.agents
                    and self.c.suite not in self._projects.base.agents):
                declared = ", ".join(self._projects.base.agent_names()) or "none"
                raise ConfigError(
                    f"agent {self.c.suite!r} is not declared at the base ({self.c.base}): "
                    "review runs an agent's commands as the base declares them; declare it "
                    f"there first, or pass --trust-head. Agents at the base: {declared}")
            # the region guard, before any trial: a broken head is not evaluated
            guard = guard_heads(git, [self.c.suite] if self.c.suite else
                                list(self._projects.head.agent_names()), self._projects.base,
                                self._projects.head, base_sha, head_sha, self.emit)
            result.notes += guard.notes
            changed = self._changed_prompts(git, base_sha, head_sha, result, guard.broken)
            if not changed and not guard.broken:
                result.status = "nothing_to_review"
                which = (self._projects.head.agent(self.c.suite).prompt_path if self.c.suite
                         else "no agent prompt")
                new = [n.split("'")[1] for n in self._projects.ignored
                       if "is not declared at the base" in n and n.count("'") >= 2]
                result.message = (
                    f"nothing to review: {which} {'is unchanged' if self.c.suite else 'changed'}"
                    f" between {self.c.base} ({base_sha[:10]}) and {self.c.head} "
                    f"({head_sha[:10]})"
                    + (f" (new in the head, so with no base prompt to compare: "
                       f"{', '.join(new)}; evaluate it with `promptloop eval`, and review "
                       "its later prompt changes)" if new else "")
                )
                # nothing changed between the refs, but the working tree may: say so
                head_project = self._projects.head
                agents = [self.c.suite] if self.c.suite else list(head_project.agent_names())
                self._warn_unevaluated([t.path for a in agents if a in head_project.agents
                                        for t in head_project.agent(a).targets()], result)
                return result
            result.diff = git.diff_files(
                base_sha, head_sha, sorted({t.path for *_, t in changed} | {*guard.paths})
            )
            self._announce(changed, result)
            for agent in dict.fromkeys(a for a, *_ in changed):
                for note in self._suite_changes(git, agent, base_sha, head_sha):
                    result.notes.append(note)
                    self.emit(RunWarning(message=note))
        with project_scope(self._projects.head):
            for agent, base_text, head_text, target in changed:
                self._commits[base_text], self._commits[head_text] = base_sha, head_sha
                self._sides[base_text] = ("review-base", self.c.base)
                self._sides[head_text] = ("review-head", self.c.head)
                result.agents.append(
                    await self._review_agent(agent, base_text, head_text, target))
        result.agents[:0] = guard.reviews()
        result.notes += self._notes
        result.sources += [s.line() for s in self.source.served]
        result.decision = combine([a.decision for a in result.agents])
        result.tokens = self.models.usage.total_tokens + self._own_tokens
        if self._agent_models:
            used = list(dict.fromkeys([*self._agent_models,
                                       *([] if len(self._agent_models) == len(changed)
                                         else [self.c.agent_model])]))
            result.agent_model = ", ".join(used)
        regressed = result.regressed_buckets
        improved = [f"{a.agent}:{b}" for a in result.agents for b in a.improved]
        open_ = [f"{a.agent}:{b}" for a in result.agents for b in a.open]
        if regressed:
            detail = f"regressed bucket(s): {', '.join(regressed)}"
        elif open_:
            detail = f"harm not ruled out in bucket(s): {', '.join(open_)}"
        elif improved:
            detail = f"improved bucket(s): {', '.join(improved)}; no bucket regressed"
        else:
            detail = "no bucket changed beyond the thresholds; no bucket regressed"
        result.message = broken_message(guard) if guard.broken else \
            f"{result.decision}: {detail}"
        self._write(result)
        return result

    def _write(self, result: ReviewResult) -> None:
        from promptloop.optimizer.workflows.review_comment import render_comment

        self.review_dir.mkdir(parents=True, exist_ok=True)
        result.review_dir = str(self.review_dir)
        comment = self.review_dir / "comment.md"
        result.comment_path = str(comment)
        # redacted, as every state file: a comment is posted to the PR
        atomic_write_text(comment, render_comment(result))
        atomic_write_text(self.review_dir / "result.json", result.model_dump_json(indent=2))


async def review(
    config: ReviewConfig,
    *,
    agent: ModelClient | None = None,
    judge: ModelClient | None = None,
    on_event: EventSink | None = None,
) -> ReviewResult:
    """Run one review; clients may be injected (tests), the others are built from the ids."""
    async with ModelSet(config.model_ids, agent=agent, judge=judge) as models:
        reviewer = Reviewer(config, models, on_event=on_event)
        reviewer._clients = (agent, judge)
        return await reviewer.review()


__all__ = [
    "REVIEW_VERSION",
    "AgentReview",
    "ReviewConfig",
    "ReviewResult",
    "Reviewer",
    "TrialChange",
    "combine",
    "review",
    "trial_flips",
]


def regress_on_outside_writes(verdict: ReviewVerdict, base: list[RunResult],
                              head: list[RunResult]) -> ReviewVerdict:
    """`verdict`, or "regresses" when a head trial wrote outside its workspace on a task
    whose base trials never did. Such a trial is errored, so it only drops out of the pairs
    and the tests never see it; when only some head trials do it the rest could still call
    the head "improves" or "neutral". The head's prompt drove its agent to touch what it must
    not: no score makes up for that (optimize refuses such a candidate the same way)."""
    def keyed(runs: list[RunResult]) -> list[tuple[str, TrialResult]]:
        """(namespaced bucket, trial) of each trial that wrote outside."""
        return [(qualified(r.suite_kind, t.bucket), t) for r in runs
                for t in outside_writes([r])]

    before = {(b, t.task_id) for b, t in keyed(base)}
    wrote = [(b, t) for b, t in keyed(head) if (b, t.task_id) not in before]
    if not wrote:
        return verdict
    first = wrote[0][1].infra_error or wrote[0][1].failure_reason or ""
    how = (f"{OUTSIDE_REASON} (the write undone where possible"
           if any(wrote_outside(t) for _, t in wrote)
           else "tried to write outside their workspace (refused by the sandbox")
    reason = (f"regresses: {len(wrote)} head trial(s) {how}; whatever the scores say), "
              f"first: {wrote[0][1].task_id}: {first}")
    buckets = sorted({*verdict.regressed, *(b for b, _ in wrote)})
    hit = {b for b, _ in wrote}
    # the bucket table says it too (it read "inconclusive", its writing trials dropped)
    states = [bv.model_copy(update={"state": "regressed", "statement": f"bucket {bv.bucket!r}: "
                                    f"regressed: {reason.removeprefix('regresses: ')}"})
              if bv.bucket in hit else bv for bv in verdict.buckets]
    return verdict.model_copy(update={"decision": "regresses", "regressed": buckets,
                                      "open": [b for b in verdict.open if b not in hit],
                                      "buckets": states,
                                      "reasons": [reason, *verdict.reasons]})


def _task_folder(path: str) -> str:
    """The task folder a suite file is in (`.../tasks/<bucket>/<id>/...`), else the path."""
    parts = path.split("/")
    at = parts.index("tasks") if "tasks" in parts else -1
    return "/".join(parts[:at + 3]) if 0 <= at < len(parts) - 3 else path
