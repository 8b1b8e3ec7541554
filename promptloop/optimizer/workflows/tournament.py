"""`optimize --candidates K`: K patches, screened on the target, one honest winner to the gate.

An iteration with K > 1 asks for K patches with distinct hypotheses (propose/several.py; an
external `--proposer-cmd` is simply run K times, each in a sandbox of its own beside its
worktree, propose/sandbox.py, as in the single-candidate loop). Each patch passes
the guards on its own; a duplicate of another candidate or of a ledger idea is dropped before
any trial. With two or more left, `gate/screen.Screening` runs successive halving over them on
the visible target tasks only (never the held-out ones): each round's candidates run at once,
under one concurrency bound, and a candidate's worktree and branch go as soon as it drops out.
After round 1, two candidates that fix different target tasks (and no candidate fixes both)
are merged by the proposer into one patch, which is guarded and screened like the others.

The winner goes through the full gate (`Iteration.conclude`, workflows/gating.run_gate)
unchanged. Screening trials use trial indices from `screen.SCREEN_INDEX_OFFSET` on, so their
seeds and trial-cache keys are their own: no screening trial is served to the gate or counts
toward the winner's verdict, which says so, and how many candidates were screened.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from promptloop.agents.llm.errors import ModelError
from promptloop.agents.llm.types import Usage
from promptloop.optimizer.core.buckets import BucketId
from promptloop.optimizer.core.events import (
    CandidateEvaluating,
    CandidateStopped,
    ProposalRefused,
    ProposalRequested,
    ScreeningRound,
    VerdictReached,
)
from promptloop.optimizer.core.isolation import OUTSIDE
from promptloop.optimizer.core.killpoint import kill_point
from promptloop.optimizer.core.ledger import (
    CandidateRecord,
    CandidateStatus,
    ScreenTrial,
    diff_hash,
)
from promptloop.optimizer.core.redact import redact
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.core.suites import Suite
from promptloop.optimizer.gate.screen import Screening, screen_indices, screen_pairs
from promptloop.optimizer.gate.verdict import Verdict
from promptloop.optimizer.git import Candidate
from promptloop.optimizer.propose.patch import PatchError
from promptloop.optimizer.propose.proposer import (
    Package,
    Proposal,
    ProposerError,
    UnusableProposalError,
    ask_model,
    build_package,
    hypothesis_from_output,
)
from promptloop.optimizer.propose.sandbox import run_sandboxed
from promptloop.optimizer.propose.several import ask_several, merge_request, several_request
from promptloop.optimizer.propose.watch import OutsideWriteError
from promptloop.optimizer.report.plain import error_headline, proposer_failure, refusal_headline
from promptloop.optimizer.run.adaptive import AdaptiveLimit
from promptloop.optimizer.run.runner import RunOptions, default_concurrency
from promptloop.optimizer.workflows.gating import outside_writes
from promptloop.optimizer.workflows.prompt_file import RegionRefusal, splice_prompt

if TYPE_CHECKING:
    from promptloop.optimizer.workflows.optimize_models import CandidateHost

_FINAL: dict[str, CandidateStatus] = {s: s for s in (
    "winner", "screened_out", "refused", "duplicate", "error")}
"""Entrant states that are final; any other (an interrupted tournament) is `abandoned`."""


@dataclass(frozen=True)
class Slot:
    """Where one candidate of an iteration lives: its branch and temporary folder."""

    branch: str
    folder: Path
    name: str


@dataclass
class Entrant:
    """One candidate of the tournament, from its proposal to why it stopped."""

    slot: Slot
    hypothesis: str = ""
    diff: str = ""
    new_text: str = ""
    status: str = "proposed"
    """proposed -> passed (guards) -> winner | screened_out; or refused, duplicate, error."""
    violations: list[dict[str, str]] = field(default_factory=list)
    stopped: str = ""
    merged_from: list[str] = field(default_factory=list)
    stack: contextlib.ExitStack | None = None
    cand: Candidate | None = None

    @property
    def name(self) -> str:
        return self.slot.name


class Tournament:
    """The candidates of iteration `it`, in `slots` (K of them, then the merge's)."""

    def __init__(self, it: CandidateHost, slots: Sequence[Slot]) -> None:
        self.i, self.opt, self.c = it, it.opt, it.c
        self.slots = list(slots)
        self.entrants: list[Entrant] = []
        self.screening: Screening | None = None
        self.folder = self.opt.session_dir / f"iter-{it.n}"
        options = RunOptions(agent_model=self.c.agent_model, concurrency=self.c.concurrency)
        self.limit = AdaptiveLimit(default_concurrency(self.c.suite, options))
        """One bound for every screening run going on at once."""

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            for e in self.entrants:
                self._close(e)
            self.i.candidates = [self._record(e) for e in self.entrants]
            self.i.screening = list(self.screening.log) if self.screening else []

    async def _run(self) -> None:
        try:
            proposals = await self._propose()
        except (ProposerError, ModelError) as err:
            why = proposer_failure(err)
            status = "refused" if isinstance(err, UnusableProposalError) else "error"
            for e in self.entrants:
                e.status, e.stopped = status, why
            self._fail(status, [why])
            return
        kill_point("proposal")
        for e, proposal in zip(self.entrants, proposals, strict=True):
            self._admit(e, proposal)
        kill_point("guards")
        live = [e for e in self.entrants if e.status == "passed"]
        if not live:
            self._fail("refused" if any(e.status != "error" for e in self.entrants)
                       else "error", [f"{e.name}: {self._why(e)}" for e in self.entrants])
            self.opt.emit(ProposalRefused(iteration=self.i.n, reasons=self.i.it.reasons))
            return
        for e in live:
            self._open(e)
        winner = live[0] if len(live) == 1 else await self._screen(live)
        if winner is None:
            self._no_winner()
            return
        winner.status = "winner"
        self._select(winner)
        assert winner.cand is not None
        self.opt.emit(CandidateEvaluating(iteration=self.i.n, branch=winner.cand.branch))
        await self.i.conclude(winner.cand, winner.new_text)
        fallback = self._fallback(winner)
        if fallback is not None:
            await self._gate_fallback(winner, fallback)

    # --- proposals --------------------------------------------------------------------------
    async def _propose(self) -> list[Proposal | Exception]:
        """K proposals (or why a slot has none); the package as the proposer saw it on disk."""
        c, k = self.c, self.c.candidates
        self.entrants = [Entrant(s) for s in self.slots[:k]]
        package = build_package(self.i.package_input())
        sent = package
        if not c.proposer_cmd and c.fmt == "diff":
            sent = Package(package.system, package.user + "\n\n" + several_request(k))
        path = sent.write(self.folder)
        self.i.it.package_path = str(path)
        kill_point("package")
        self.opt.emit(ProposalRequested(iteration=self.i.n, tokens=sent.tokens,
                                        package=str(path), command=bool(c.proposer_cmd)))
        if c.proposer_cmd:
            out: list[Proposal | Exception] = []
            for e in self.entrants:  # one after the other: the watch sees one at a time
                out.append(await self._command(e, path))
            return out
        several = await ask_several(self.opt.models.proposer, package, k, fmt=c.fmt,
                                    prompt_path=c.prompt_path, original=self.i.base.base_prompt,
                                    check=self._check)
        (self.folder / "reply.md").write_text(
            redact("\n\n<!-- next reply -->\n\n".join(several.replies)), encoding="utf-8")
        return list(several.proposals)

    def _check(self, diff: str) -> None:
        self.i.prepare(diff)

    async def _command(self, e: Entrant, package_path: Path) -> Proposal | Exception:
        """The external proposer run once for `e`, in a sandbox of its own (propose/sandbox.py)
        beside `e`'s worktree (so a killed run's sweep removes both), exactly as the
        single-candidate loop runs it (`Iteration._run_command`); its proposal is the diff
        from the base prompt to the prompt file it left there. Every other open candidate's
        worktree is watched too. stdout and stderr go to reply-<name>.md, redacted."""
        c = self.c
        cand = self._open(e)
        others = [o.cand.path for o in self.entrants if o is not e and o.cand is not None]
        try:
            done = await run_sandboxed(c.proposer_cmd or "", repo=self.opt.git.root,
                                       base_sha=self.i.base.base_sha, package=package_path,
                                       prompt_path=c.prompt_path, bucket=c.bucket,
                                       root=cand.path.parent / "sandbox", worktree=cand.path,
                                       others=others, env_names=c.proposer_env)
        except (OutsideWriteError, ProposerError) as err:
            return err
        reply = done.stdout + (f"\n<!-- stderr -->\n{done.stderr}" if done.stderr else "")
        (self.folder / f"reply-{e.name}.md").write_text(redact(reply), encoding="utf-8")
        try:  # a region target: only its lines may change, as in the single-candidate loop
            diff = self.i.command_diff(done.new_text)
        except OutsideWriteError as err:
            return err
        return Proposal(hypothesis_from_output(done.stdout), diff, reply, 1, Usage(), "command")

    def _admit(self, e: Entrant, proposal: Proposal | Exception) -> None:
        """Guards, then duplicates of earlier candidates and of ledger ideas."""
        if isinstance(proposal, OutsideWriteError):
            e.status = "refused"
            e.violations = [{"code": v.code, "message": v.message} for v in proposal.violations]
        elif isinstance(proposal, UnusableProposalError | PatchError):
            # a reply that could not be used is a refusal, as in the single-patch loop
            e.status, e.stopped = "refused", proposer_failure(proposal)
        elif isinstance(proposal, Exception):
            e.status = "error"
            e.stopped = proposer_failure(proposal)
        else:
            e.hypothesis = proposal.hypothesis
            try:
                prepared = self.i.prepare(proposal.diff)
            except PatchError as err:
                e.status, e.stopped = "refused", err.user
            else:
                e.diff, e.new_text = prepared.diff, prepared.new_text
                e.violations = self.i.violations(prepared)
                twin = next((o for o in self.entrants if o is not e and o.diff
                             and o.status in ("passed", "winner", "screened_out")
                             and diff_hash(o.diff) == diff_hash(e.diff)), None)
                if twin is not None and not e.violations:
                    e.violations = [{"code": "duplicate", "message":
                                     f"the same change as candidate {twin.name}"}]
                codes = {v["code"] for v in e.violations}
                e.status = ("passed" if not codes else "duplicate" if codes == {"duplicate"}
                            else "refused")
        if e.status != "passed":
            self._close(e)
            self.opt.emit(CandidateStopped(iteration=self.i.n, name=e.name, reason=self._why(e)))

    @staticmethod
    def _why(e: Entrant) -> str:
        return e.stopped or "; ".join(v["message"] for v in e.violations) or e.status

    # --- worktrees --------------------------------------------------------------------------
    def _open(self, e: Entrant) -> Candidate:
        """`e`'s branch in its own worktree (made once), holding its prompt when it has one."""
        if e.cand is None:
            stack = contextlib.ExitStack()
            e.cand = stack.enter_context(self.opt.git.candidate(
                self.i.base.base_sha, e.slot.branch, e.slot.folder))
            e.stack = stack
        if e.new_text:
            spliced = splice_prompt(self.i.base, e.cand.path, e.new_text)
            assert not isinstance(spliced, RegionRefusal), "checked when the entrant was guarded"
        return e.cand

    def _close(self, e: Entrant) -> None:
        """Remove `e`'s worktree; its branch too unless it is the winner (the iteration keeps
        or deletes that one with its verdict)."""
        if e.stack is not None:
            stack, e.stack = e.stack, None
            stack.close()
        if e.status != "winner" and self.opt.git.branch_exists(e.slot.branch):
            self.opt.git.delete_branch(e.slot.branch)

    # --- screening --------------------------------------------------------------------------
    def _target(self) -> tuple[Suite, RunResult, list[str]]:
        """The target's suite, its baseline run and its visible tasks (held-out ones never)."""
        target = BucketId.parse(self.c.bucket)
        base = self.i.base
        i = next(i for i, s in enumerate(base.suites) if s.config.kind == target.kind)
        suite = base.suites[i]
        tasks = [t.id for t in suite.tasks
                 if t.bucket == target.name and t.id not in self.opt.heldout]
        return suite, base.runs[i], tasks

    async def _screen(self, live: list[Entrant]) -> Entrant | None:
        suite, base_run, tasks = self._target()
        if not tasks:  # (the held-out share never takes every task)
            raise RuntimeError(f"bucket {self.c.bucket} has no visible task to screen on")
        screening = self.screening = Screening(
            [e.name for e in live], seed=f"{self.c.policy.seed}:{self.opt.session_dir.name}:"
            f"{self.i.n}")
        by_name = {e.name: e for e in live}
        sub = suite.select(task_ids=tasks)
        while (req := screening.request()) is not None:
            names = list(req.slots)
            self.opt.emit(ScreeningRound(iteration=self.i.n, round=req.round, candidates=names,
                                         trials=len(tasks) * req.trials_per_task))
            runs = await asyncio.gather(*(
                self.opt.run(sub, by_name[n].new_text, f"screen {n}",
                             {t: screen_indices(req.slots[n]) for t in tasks}, limit=self.limit)
                for n in names))
            kill_point("screen")
            stopped = []
            for n, r in zip(names, runs, strict=True):
                if wrote := outside_writes([r]):
                    # the prompt drove the agent to touch what it must not: out for good, as
                    # the gate refuses such a candidate (workflows/gating.refuse_outside_writes)
                    stopped.append(screening.disqualify(n, (
                        f"{len(wrote)} screening trial(s) {OUTSIDE}, first: "
                        f"{wrote[0].infra_error or wrote[0].failure_reason or OUTSIDE}")))
            stopped += screening.feed({n: screen_pairs(base_run, r, tasks)
                                       for n, r in zip(names, runs, strict=True)
                                       if n in screening.pending_names})
            wanted = screening.merge_wanted()
            if wanted is not None:
                merged = await self._merge(wanted)
                if merged is None:
                    stopped += screening.decline_merge()
                else:
                    by_name[merged.name] = merged
                    screening.add(merged.name, wanted)
            for s in stopped:  # their worktrees and branches go now
                self._drop(by_name[s.name], s.stopped)
        return by_name[screening.winner] if screening.winner else None

    def _drop(self, e: Entrant, why: str) -> None:
        e.status, e.stopped = "screened_out", why
        self._close(e)
        self.opt.emit(CandidateStopped(iteration=self.i.n, name=e.name, reason=why))

    async def _merge(self, pair: tuple[str, str]) -> Entrant | None:
        """Ask the proposer for one patch stating the rules of both candidates of `pair`."""
        assert self.screening is not None
        by_name = {e.name: e for e in self.entrants}
        a, b = by_name[pair[0]], by_name[pair[1]]
        fixed = {n: sorted(self.screening.standings[n].fixed_tasks) for n in pair}
        text = merge_request((a.hypothesis, a.diff, fixed[a.name]),
                             (b.hypothesis, b.diff, fixed[b.name]))
        base = build_package(self.i.package_input())
        asked = Package(base.system, base.user + "\n\n" + text)
        path = asked.write(self.folder / "merge")
        e = Entrant(self.slots[-1], merged_from=list(pair))
        self.entrants.append(e)
        proposal: Proposal | Exception
        if self.c.proposer_cmd:
            proposal = await self._command(e, path)
        else:
            try:
                proposal = await ask_model(
                    self.opt.models.proposer, asked, fmt=self.c.fmt,
                    prompt_path=self.c.prompt_path, original=self.i.base.base_prompt,
                    check=self._check)
                (path.parent / "reply.md").write_text(redact(proposal.raw_reply),
                                                      encoding="utf-8")
            except (ProposerError, ModelError) as err:
                proposal = err
        self._admit(e, proposal)
        if e.status != "passed":
            return None
        self._open(e)
        return e

    # --- the outcome ------------------------------------------------------------------------
    def _harm_rejected(self) -> bool:
        """The gate rejected the winner for harm elsewhere (a bucket regressed, or all other
        tasks together), not for its target."""
        it = self.i.it
        return it.outcome == "rejected" and (
            any(h.startswith("[regressed]") for h in it.harm)
            or any(r.startswith("all other tasks together") for r in it.reasons))

    def _fallback(self, winner: Entrant) -> Entrant | None:
        """The next candidate that fixed the target in screening, when the winner was
        rejected for harm (once per iteration: one more gate, on the same baseline)."""
        if self.screening is None or not self._harm_rejected():
            return None
        by_name = {e.name: e for e in self.entrants}
        for name in self.screening.fallbacks(exclude=[winner.name]):
            e = by_name.get(name)
            if e is not None and e.status == "screened_out" and e.new_text:
                return e
        return None

    async def _gate_fallback(self, winner: Entrant, e: Entrant) -> None:
        """Gate `e` after the winner's harm rejection. The winner's verdict stays in the
        reasons; `e`'s verdict is the iteration's (its own fresh trials, its own error rates:
        two gates at most, each at the policy's levels)."""
        it = self.i.it
        first = next((h for h in it.harm if h.startswith("[regressed]")),
                     next((r for r in it.reasons if r.startswith("all other tasks")), ""))
        winner.status = "screened_out"
        winner.stopped = f"rejected for harm by the gate: {first}"
        e.status, e.stopped = "winner", ""
        e.cand = None  # its worktree went when it was screened out: a fresh one
        self._open(e)
        self._select(e)
        note = (f"fallback: the screened winner {winner.name} was rejected for harm "
                f"({first}); {e.name}, the next candidate that fixed the target in screening, "
                "was gated on the same baseline with fresh trials")
        chosen = self.i.selection

        def annotate(v: Verdict) -> Verdict:
            v = chosen(v) if chosen is not None else v
            return v.model_copy(update={"reasons": [*v.reasons, note]})

        self.i.selection = annotate
        assert e.cand is not None
        self.opt.emit(CandidateEvaluating(iteration=self.i.n, branch=e.cand.branch))
        await self.i.conclude(e.cand, e.new_text)

    def _select(self, winner: Entrant) -> None:
        """The winner becomes the iteration's proposal; its verdict will say how it was
        picked (`Iteration.selection`) and the PR body names the runners-up."""
        it = self.i.it
        it.hypothesis, it.diff = winner.hypothesis, winner.diff
        screened = len(self.screening.standings) if self.screening else 1
        spent = self.screening.slots_run if self.screening else 0
        if screened > 1:
            note = (f"selection: candidate {winner.name} won the screening of {screened} "
                    "candidates (successive halving on the visible target tasks); its verdict "
                    f"rests on fresh trials only: none of the {spent} screening trials counts")
            test = f"selection among {screened} candidates paid by fresh trials"
        else:
            note = (f"selection: candidate {winner.name} was the only one of "
                    f"{self.c.candidates} to pass the guards, so nothing was selected or "
                    "screened")
            test = ""
        self.i.runners_up = [f"{e.name}: {e.hypothesis} ({e.stopped})"
                             for e in self.entrants if e.status == "screened_out"]

        def annotate(v: Verdict) -> Verdict:
            return v.model_copy(update={"reasons": [*v.reasons, note],
                                        "test": "; ".join(x for x in (v.test, test) if x)})

        self.i.selection = annotate

    def _no_winner(self) -> None:
        reasons = ["no candidate fixed a visible target trial in screening"]
        reasons += [f"{e.name}: {self._why(e)}" for e in self.entrants]
        self._fail("rejected", reasons)
        self.opt.emit(VerdictReached(iteration=self.i.n, decision="reject", reasons=reasons,
                                     branch=None, summary=self.i.it.summary))

    def _fail(self, outcome: str, reasons: list[str]) -> None:
        it = self.i.it
        it.outcome, it.reasons = outcome, reasons
        it.summary = (error_headline(reasons[0]) if outcome == "error" and reasons
                      else refusal_headline(reasons) if outcome == "refused"
                      else f"none of the {self.c.candidates} candidates fixed a target trial "
                      "in screening, so none went to the gate; the next iteration asks again")
        self.i.entry = {"outcome": outcome, "reasons": reasons}

    def _record(self, e: Entrant) -> CandidateRecord:
        standing = self.screening.standings.get(e.name) if self.screening else None
        pairs = standing.pairs if standing else []
        status = _FINAL.get(e.status, "abandoned")
        return CandidateRecord(
            name=e.name, hypothesis=e.hypothesis, diff=e.diff,
            diff_hash=diff_hash(e.diff) if e.diff else "", status=status,
            guard_violations=e.violations,
            branch=e.slot.branch if e.status == "winner" else None,
            screening=[ScreenTrial(task_id=p.task_id, trial_index=p.trial_index,
                                   base_passed=p.base_passed, cand_passed=p.cand_passed,
                                   base_score=p.base_score, cand_score=p.cand_score)
                       for p in pairs],
            rounds=standing.rounds if standing else 0, stopped=e.stopped,
            merged_from=e.merged_from)


__all__ = ["Entrant", "Slot", "Tournament"]
