"""One optimize iteration: package -> proposal -> guards -> candidate branch -> rerun -> verdict.

Refused proposals cost no evaluation. The candidate lives on its own branch in a temporary
worktree; the branch is kept only when accepted (or with --keep-rejected). Before the branch
or the worktree exists, an open ledger record names them and this process; after the verdict
a closing record says what happened and what it cost. An iteration cut short by an exception
or a signal is closed as `abandoned` on the way out; one whose process was killed outright is
closed by the next run's sweep (workflows/sweep.py).
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from promptloop.agents.llm.errors import ModelError
from promptloop.agents.llm.types import Usage
from promptloop.optimizer.core.buckets import BucketId
from promptloop.optimizer.core.events import (
    CandidateEvaluating,
    GateStage,
    IterationFinished,
    IterationStarted,
    ProposalRefused,
    ProposalRequested,
    ProposerReplied,
    VerdictReached,
)
from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.core.killpoint import kill_point
from promptloop.optimizer.core.ledger import (
    CandidateRecord,
    CandidateSlot,
    LedgerEntry,
    LedgerOpen,
    diff_hash,
)
from promptloop.optimizer.core.prompt_target import region_spec
from promptloop.optimizer.core.redact import redact
from promptloop.optimizer.core.regions import RegionError, writing_rules
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.gate.compare import BucketComparison
from promptloop.optimizer.gate.sequential import TrialAsk
from promptloop.optimizer.gate.verdict import Verdict
from promptloop.optimizer.git import Candidate, candidate_folder
from promptloop.optimizer.propose.apply import render_unified
from promptloop.optimizer.propose.guards import PreparedPatch, prepare_patch
from promptloop.optimizer.propose.literals import LiteralIndex
from promptloop.optimizer.propose.package import export_failing, render_failing_markdown
from promptloop.optimizer.propose.patch import PatchError
from promptloop.optimizer.propose.proposer import (
    PackageInput,
    Proposal,
    ProposerError,
    Reply,
    UnusableProposalError,
    ask_model,
    build_package,
    counter_examples,
    hypothesis_from_output,
)
from promptloop.optimizer.propose.region_guard import prepare_region_patch, region_diff_from_edit
from promptloop.optimizer.propose.sandbox import run_sandboxed
from promptloop.optimizer.propose.watch import OutsideWriteError
from promptloop.optimizer.report.markdown import harm_lines, movement_lines
from promptloop.optimizer.report.plain import (
    agree_with_harm,
    error_headline,
    interrupted,
    optimize_headline,
    proposer_failure,
    refusal_headline,
    trials_error_headline,
)
from promptloop.optimizer.report.table import verdict_table
from promptloop.optimizer.run.runner import AllTrialsErroredError
from promptloop.optimizer.workflows.gating import run_gate
from promptloop.optimizer.workflows.judges import judge_notes, judge_statuses
from promptloop.optimizer.workflows.optimize_models import Baseline, IterationHost, IterationResult
from promptloop.optimizer.workflows.pr import commit_message, pr_body, trial_changes
from promptloop.optimizer.workflows.prompt_file import RegionRefusal, splice_prompt
from promptloop.optimizer.workflows.sources import MANUAL
from promptloop.optimizer.workflows.tournament import Slot, Tournament


class Iteration:
    """Iteration `n` of the session `opt`, against its evaluated `baseline`."""

    def __init__(self, opt: IterationHost, n: int, baseline: Baseline,
                 literals: LiteralIndex) -> None:
        self.opt, self.c, self.n = opt, opt.c, n
        self.base = baseline
        self.literals = literals
        self.it = IterationResult(iteration=n, outcome="error")
        self.entry: dict[str, Any] = {}
        """Ledger fields of the outcome; empty until the iteration concluded."""
        self.keep = False
        self.candidates: list[CandidateRecord] = []
        """With --candidates K > 1: every candidate's record (see workflows/tournament.py)."""
        self.screening: list[str] = []
        self.selection: Callable[[Verdict], Verdict] | None = None
        """Notes on the winner's verdict how it was selected (K > 1)."""
        self.runners_up: list[str] = []
        self.file_diff = ""
        """A region's change as a diff of its whole file (file line numbers), for the PR."""
        usage = opt.models.usage
        self._tokens0, self._usd0 = usage.total_tokens, opt.models.usd()

    # --- accounting -----------------------------------------------------------------------
    def tokens(self) -> int:
        return self.opt.models.usage.total_tokens - self._tokens0

    def usd(self) -> float | None:
        now = self.opt.models.usd()
        return None if now is None or self._usd0 is None else now - self._usd0

    # --- the iteration --------------------------------------------------------------------
    @property
    def ledger_id(self) -> str:
        return f"{self.opt.session}-{self.n}"

    def _slots(self) -> list[Slot]:
        """The branch and folder of each candidate: one, or K and a merge with --candidates."""
        c, short = self.c, uuid.uuid4().hex[:8]
        if c.candidates == 1:
            return [Slot(self.opt.git.unique_branch_name(c.suite, c.bucket, short),
                         candidate_folder(), "c1")]
        names = [f"c{i}" for i in range(1, c.candidates + 1)] + ["merge"]
        return [Slot(self.opt.git.unique_branch_name(c.suite, c.bucket, f"{short}-{name}"),
                     candidate_folder(), name) for name in names]

    async def run(self) -> IterationResult:
        opt, c, it = self.opt, self.c, self.it
        slots = self._slots()
        branch, folder = slots[0].branch, slots[0].folder
        opt.ledger.append(self._open_record(slots))
        opt.emit(IterationStarted(iteration=self.n, branch=branch))
        try:
            if c.candidates > 1:
                await Tournament(self, slots).run()
            else:
                with opt.git.candidate(self.base.base_sha, branch, folder) as cand:
                    await self._in_candidate(cand)
            return it
        except BaseException as err:
            if not self.entry:  # cut short before the verdict: cleaned up on the way out
                self.entry = {"outcome": "abandoned", "reasons": [interrupted(err)]}
                it.outcome, it.reasons = "abandoned", self.entry["reasons"]
                it.summary = f"{it.reasons[0]}; the candidate branch was removed"
            raise
        finally:
            abandoned = self.entry["outcome"] == "abandoned"
            for slot in slots:  # only a recorded verdict keeps a branch
                kept = self.keep and slot.branch == it.branch
                if (abandoned or not kept) and opt.git.branch_exists(slot.branch):
                    opt.git.delete_branch(slot.branch)
            it.tokens = self.tokens()
            opt.ledger.append(self._ledger_entry())
            if not abandoned:
                opt.emit(
                    IterationFinished(
                        iteration=self.n, outcome=it.outcome, branch=it.branch, tokens=it.tokens
                    )
                )

    async def _in_candidate(self, cand: Candidate) -> None:
        it = self.it
        try:
            proposal, it.package_path = await self._propose(cand.path)
            kill_point("proposal")
            it.hypothesis = proposal.hypothesis
            prepared = self.prepare(proposal.diff)
        except OutsideWriteError as err:
            self._refuse([{"code": v.code, "message": v.message} for v in err.violations])
            return
        except (ProposerError, PatchError, ModelError) as err:
            unusable = isinstance(err, PatchError | UnusableProposalError)
            it.outcome = "refused" if unusable else "error"
            # in words for a person: the retry instructions meant for the model stay in the
            # saved replies, and no class name is shown
            it.reasons = [proposer_failure(err)]
            it.summary = (refusal_headline(it.reasons) if unusable
                          else error_headline(it.reasons[0]))
            self.entry = {"outcome": it.outcome, "reasons": it.reasons, "hypothesis": it.hypothesis}
            return
        it.diff = prepared.diff
        violations = self.violations(prepared)
        kill_point("guards")
        if violations:
            self._refuse(violations, prepared.diff, prepared.new_text)
            return
        spliced = splice_prompt(self.base, cand.path, prepared.new_text)
        if isinstance(spliced, RegionRefusal):
            self._refuse([{"code": "breaks_literal", "message": spliced.why}], prepared.diff)
            return
        self.opt.emit(CandidateEvaluating(iteration=self.n, branch=cand.branch))
        await self.conclude(cand, prepared.new_text)

    def _refuse(self, violations: list[dict[str, str]], diff: str = "",
                new_text: str | None = None) -> None:
        """Refuse the proposal before any evaluation, for the guards' `violations`; with the
        region's `new_text`, its diff with the file's own line numbers too (where it splices:
        a text the literal refuses has none)."""
        it = self.it
        it.outcome = "refused"
        source = self.base.prompt_source
        if new_text is not None and source is not None and source.region is not None:
            with contextlib.suppress(RegionError):
                self.file_diff = it.file_diff = render_unified(
                    source.file_text, source.splice(new_text), source.path)
        it.reasons = [v["message"] for v in violations]
        it.summary = refusal_headline(it.reasons)
        self.entry = {
            "outcome": "refused",
            "reasons": it.reasons,
            "guard_violations": violations,
            "hypothesis": it.hypothesis,
            "diff": diff,
            "diff_hash": diff_hash(diff) if diff else "",
            "file_diff": self.file_diff,
        }
        self.opt.emit(ProposalRefused(iteration=self.n, reasons=it.reasons))

    async def conclude(self, cand: Candidate, new_prompt: str) -> None:
        """Evaluate the candidate, commit it with the verdict, and keep or drop the branch."""
        c, it = self.c, self.it
        source = self.base.prompt_source
        if source is not None and source.region is not None:  # the PR shows the file's lines
            self.file_diff = it.file_diff = render_unified(
                source.file_text, (cand.path / source.path).read_bytes().decode("utf-8"),
                source.path)
        self.opt.candidate_branches[new_prompt] = cand.branch  # its runs record the branch
        try:
            verdict, comps, base_for_pr, cand_runs = await self._evaluate(new_prompt)
        except AllTrialsErroredError as err:
            # the provider (or the agent's infrastructure) failed under the candidate: no
            # verdict; the idea is kept in the ledger (not a repeat: it was never evaluated)
            it.outcome, it.reasons = "error", [str(err)]
            it.summary = trials_error_headline(str(err))
            self.entry = {"outcome": "error", "reasons": it.reasons,
                          "hypothesis": it.hypothesis, "diff": it.diff,
                          "diff_hash": diff_hash(it.diff) if it.diff else "",
                          "file_diff": self.file_diff}
            return
        kill_point("gate")
        message = commit_message(c.suite, c.bucket, it.hypothesis, verdict, comps,
                                 branch=cand.branch, ledger_id=self.ledger_id)
        it.commit = self.opt.git.commit(cand, [c.prompt_path], message)
        kill_point("branch_commit")
        it.outcome = {"accept": "accepted", "reject": "rejected"}.get(
            verdict.decision, "inconclusive"
        )
        self.opt.record_candidate(cand.branch, it.commit, it.outcome)
        it.reasons = list(verdict.reasons) + self._judge_notes(base_for_pr)
        it.summary, it.method = optimize_headline(verdict), verdict.test
        it.verdict_table = agree_with_harm(verdict_table(comps, verdict.target_bucket), verdict)
        it.movement, it.harm = movement_lines(verdict), harm_lines(verdict)
        self.keep = it.outcome == "accepted" or c.keep_rejected
        it.branch = cand.branch if self.keep else None
        it.tokens = self.tokens()
        if it.outcome == "accepted":
            it.pr_body_path = str(
                self._write_pr(cand.branch, verdict, comps, base_for_pr, cand_runs)
            )
        self.entry = {
            "outcome": it.outcome,
            "reasons": it.reasons,
            "hypothesis": it.hypothesis,
            "diff": it.diff,
            "diff_hash": diff_hash(it.diff),
            "file_diff": self.file_diff,
            "verdict_table": it.verdict_table,
            "branch": it.branch,
            "commit": it.commit,
            "pr_body_path": it.pr_body_path,
        }
        self.opt.emit(
            VerdictReached(
                iteration=self.n,
                decision=verdict.decision,
                reasons=list(verdict.reasons),
                branch=it.branch,
                summary=it.summary,
            )
        )

    def _judge_notes(self, runs: list[RunResult]) -> list[str]:
        """Judges that drive the target bucket's scores without a calibration to trust."""
        target = BucketId.parse(self.c.bucket)
        mine = [r for r in runs if r.suite_kind == target.kind]
        return judge_notes(judge_statuses(self.c.state_dir, mine, {target.name}))

    # --- proposal -------------------------------------------------------------------------
    def package_input(self) -> PackageInput:
        c, runs = self.c, self.base.runs
        target_run, local = self.opt.target_runs(runs)
        export = export_failing(target_run, local)
        budget = c.token_budget or (2500 if c.proposer_id.startswith("local:") else 12_000)
        return PackageInput(
            prompt_path=c.prompt_path,
            prompt_text=self.base.base_prompt,
            bucket=c.bucket,
            failing_md=render_failing_markdown(export),
            counter_md=counter_examples(
                [target_run if r.run_name == target_run.run_name else r for r in runs], local),
            manual=self.opt.source.read(MANUAL).text,
            rejected=self.opt.ledger.rejected(c.suite, c.bucket),
            max_changed_lines=c.max_changed_lines,
            token_budget=budget,
            fmt=c.fmt,
            writing_rules=(writing_rules(source.region) if (source := self.base.prompt_source)
                           is not None and source.region is not None else None),
            external=bool(c.proposer_cmd),
        )

    def prepare(self, diff: str) -> PreparedPatch:
        """Parse, apply and guard `diff`; for a region target, against the region's text, a
        diff that does not apply named with the region and a text that would break the literal
        refused (`breaks_literal`), by `region_guard.prepare_region_patch`."""
        source = self.base.prompt_source
        if source is not None and source.region is not None:
            return prepare_region_patch(
                diff, spec=region_spec(source.target), file_text=source.file_text,
                protected_literals=self.literals, max_changed_lines=self.c.max_changed_lines,
                max_removed_share=self.c.max_removed_share).prepared
        return prepare_patch(
            diff,
            target_path=self.c.prompt_path,
            original=self.base.base_prompt,
            protected_literals=self.literals,
            max_changed_lines=self.c.max_changed_lines,
            max_removed_share=self.c.max_removed_share,
        )

    async def _propose(self, worktree: Path) -> tuple[Proposal, str]:
        """The proposal and the path of the package it was made from."""
        c = self.c
        package_input = self.package_input()
        package = build_package(package_input)
        folder = self.opt.session_dir / f"iter-{self.n}"
        path = package.write(folder)
        self.it.package_path = str(path)  # also when no usable proposal comes back
        kill_point("package")
        self.opt.emit(ProposalRequested(iteration=self.n, tokens=package.tokens, package=str(path),
                                        command=bool(c.proposer_cmd)))
        if c.proposer_cmd:
            return await self._run_command(c.proposer_cmd, worktree, path, folder), str(path)

        def heard(reply: Reply) -> None:
            # every attempt's raw reply is kept (redacted), usable or not
            saved = folder / f"reply-attempt-{reply.attempt}.md"
            saved.write_text(redact(reply.text), encoding="utf-8")
            self.opt.emit(ProposerReplied(
                iteration=self.n, attempt=reply.attempt, seconds=round(reply.seconds, 1),
                input_tokens=reply.usage.input_tokens, output_tokens=reply.usage.output_tokens,
                problem=reply.problem, saved=str(saved)))

        proposal = await ask_model(
            self.opt.models.proposer,
            package,
            fmt=package_input.fmt,
            prompt_path=c.prompt_path,
            original=self.base.base_prompt,
            check=lambda d: _discard(self.prepare(d)),
            on_reply=heard,
        )
        (folder / "reply.md").write_text(redact(proposal.raw_reply), encoding="utf-8")
        return proposal, str(path)

    async def _run_command(self, cmd: str, worktree: Path, package: Path,
                           folder: Path) -> Proposal:
        """The external proposer, run in a sandbox (propose/sandbox.py) beside the candidate
        worktree (so a killed run's sweep removes both); its proposal is the diff from the base
        prompt to the prompt file it left there. stdout and stderr go to reply.md, redacted."""
        c = self.c
        done = await run_sandboxed(cmd, repo=self.opt.git.root, base_sha=self.base.base_sha,
                                   package=package, prompt_path=c.prompt_path, bucket=c.bucket,
                                   root=worktree.parent / "sandbox", worktree=worktree,
                                   env_names=c.proposer_env)
        reply = done.stdout + (f"\n<!-- stderr -->\n{done.stderr}" if done.stderr else "")
        (folder / "reply.md").write_text(redact(reply), encoding="utf-8")
        source = self.base.prompt_source
        if done.new_text == (source.file_text if source is not None else self.base.base_prompt):
            raise UnusableProposalError(
                f"the proposer command left {c.prompt_path} unchanged: it proposes by editing "
                "that file ($PROMPTLOOP_PROMPT_FILE) in place, not by printing a diff")
        diff = self.command_diff(done.new_text)
        return Proposal(hypothesis_from_output(done.stdout), diff, reply, 1, Usage(), "command")

    def command_diff(self, new_text: str) -> str:
        """The proposal of an external proposer that left `new_text` as the prompt file: the
        diff from the base prompt; for a region (a literal, markers), the region-relative diff
        of its edit of the whole file (only the region's lines may change). One home for the
        single-candidate loop and the tournament's candidates."""
        source = self.base.prompt_source
        if source is not None and source.region is not None:
            return region_diff_from_edit(region_spec(source.target), source.file_text, new_text)
        return render_unified(self.base.base_prompt, new_text, self.c.prompt_path)

    def violations(self, prepared: PreparedPatch) -> list[dict[str, str]]:
        """Guard refusals of a prepared patch, plus a repeat of an idea already in the ledger."""
        out = [{"code": v.code, "message": v.message} for v in prepared.violations]
        seen = self.opt.ledger.seen_diff(self.c.suite, self.c.bucket, diff_hash(prepared.diff),
                                         prepared.diff)
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

    # --- evaluation -----------------------------------------------------------------------
    async def _evaluate(
        self, new_prompt: str
    ) -> tuple[Verdict, list[BucketComparison], list[RunResult], list[RunResult]]:
        """The sequential gate (optimizer/gate/sequential.py) over real runs: the target's
        tasks first, rounds of trials only where the decision needs them, then the rest.
        Returns the verdict, the comparisons and the pooled base and candidate runs."""
        opt = self.opt

        def stage(req: TrialAsk) -> None:
            kill_point("candidate")  # from the second stage on, candidate trials have run
            opt.emit(GateStage(iteration=self.n, stage=req.stage, reason=req.reason,
                               trials=sum(len(v) for v in req.indices.values())))

        gated = await run_gate(self.base.suites, self.base.runs,
                               (self.base.base_prompt, new_prompt), self.c.bucket,
                               self.c.policy, opt.run, heldout=opt.heldout, on_stage=stage,
                               history=opt.history)
        verdict = gated.verdict if self.selection is None else self.selection(gated.verdict)
        return verdict, gated.comparisons, gated.base_runs, gated.cand_runs

    # --- records --------------------------------------------------------------------------
    def _open_record(self, slots: list[Slot]) -> LedgerOpen:
        return LedgerOpen(
            **self._record_fields(),
            command=self.opt.command,
            pid=os.getpid(),
            host=socket.gethostname(),
            repo=str(self.opt.git.root),
            branch=slots[0].branch,
            worktree=str(slots[0].folder / "worktree"),
            more=[CandidateSlot(branch=s.branch, worktree=str(s.folder / "worktree"))
                  for s in slots[1:]],
        )

    def _record_fields(self) -> dict[str, Any]:
        """What both ledger records of the iteration say about it (`ledger._Record`)."""
        c = self.c
        return {"id": self.ledger_id, "suite": c.suite, "agent": c.suite, "bucket": c.bucket,
                "iteration": self.n, "base_commit": self.base.base_sha,
                "prompt_path": c.prompt_path, "proposer": c.proposer_cmd or c.proposer_id}

    def _ledger_entry(self) -> LedgerEntry:
        return LedgerEntry(
            **self._record_fields(),
            tokens={"total": self.it.tokens},
            cost_usd=self.usd(),
            package_path=self.it.package_path,
            candidates=self.candidates,
            screening=self.screening,
            **self.entry,
        )

    def _write_pr(
        self,
        branch: str,
        verdict: Verdict,
        comps: list[BucketComparison],
        base: list[RunResult],
        cand: list[RunResult],
    ) -> Path:
        it = self.it
        body = pr_body(
            suite=self.c.suite,
            bucket=self.c.bucket,
            branch=branch,
            hypothesis=it.hypothesis,
            diff=self.file_diff or it.diff,
            verdict=verdict,
            comparisons=comps,
            changes=[trial_changes(b, c) for b, c in zip(base, cand, strict=True)],
            tokens=it.tokens,
            cost_usd=self.usd(),
            base_commit=self.base.base_sha,
            runners_up=self.runners_up,
            notes=self._judge_notes(base),  # a reviewer weighs an uncalibrated judge's say
        )
        path = self.opt.session_dir / f"iter-{self.n}" / "PR.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, body)  # redacted: a PR body is posted
        return path


def _discard(_value: object) -> None:
    return None


__all__ = ["Iteration"]
