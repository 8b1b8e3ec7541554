"""Crash recovery for `nightly --resume`: settle the iteration a killed night was in.

The checkpoint names the iteration in progress and its branch. If the optimize loop had already
written the iteration's closing ledger record, the iteration finished and only its checkpoint
was lost: it is adopted from the ledger (an accepted branch is kept, not redone). Otherwise
(no closing record, or one the sweep wrote as `abandoned`) the half-made branch and its
temporary worktree are removed and the iteration runs again. Either way the
spend that was never metered is charged at the step's estimate, so budgets stay conservative.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from promptloop.optimizer.core.events import IterationAbandoned
from promptloop.optimizer.core.ledger import LedgerEntry
from promptloop.optimizer.git_sweep import Sweeper
from promptloop.optimizer.workflows.nightly.state import Checkpoint, StepRecord
from promptloop.optimizer.workflows.optimize import IterationResult
from promptloop.optimizer.workflows.sweep import ledger_of


def drop_branch(repo: Path, branch: str) -> bool:
    """Remove one of our half-made candidate branches and any worktree left holding it."""
    with Sweeper(repo) as git:
        return git.drop_branch(branch)


def iteration_from_ledger(entry: LedgerEntry) -> IterationResult:
    return IterationResult(
        iteration=entry.iteration,
        outcome=entry.outcome,
        hypothesis=entry.hypothesis,
        diff=entry.diff,
        reasons=entry.reasons,
        branch=entry.branch,
        commit=entry.commit,
        verdict_table=entry.verdict_table,
        package_path=entry.package_path,
        pr_body_path=entry.pr_body_path,
        tokens=entry.tokens.get("total", 0),
    )


def recover_pending(
    cp: Checkpoint, repo: Path, state: Path, say: Callable[[str], None],
    swept: Sequence[IterationAbandoned] = (),
) -> None:
    """Settle `cp.pending` (the iteration in progress at the crash); no-op when there is none.
    `swept` is what the crash sweep just cleaned (it may have removed the branch already)."""
    p = cp.pending
    if p is None:
        return
    ledger_id = f"{p.session}-{p.iteration}"
    closed = [e for e in ledger_of(state).entries()
              if e.id == ledger_id and e.outcome != "abandoned"]
    entry = closed[-1] if closed else None
    charged = p.metered if p.metered is not None else p.estimate
    cp.spend = cp.spend + charged
    if entry is not None:
        it = iteration_from_ledger(entry)
        cp.steps.append(
            StepRecord(
                id=p.step, kind="iteration", suite=p.suite, bucket=p.bucket,
                iteration=p.iteration, started_at=p.started_at, ended_at=entry.at,
                seconds=max(0.0, (entry.at - p.started_at).total_seconds()), spend=charged,
                estimate_tokens=p.estimate.tokens,
                estimate_basis=("charged as metered" if p.metered is not None
                                else "charged at its estimate"),
                outcome=it.outcome, evaluated=bool(it.verdict_table), result=it,
                note="finished just before the interruption; recovered from the ledger",
            )
        )
        say(f"{p.step} had finished before the interruption ({it.outcome}"
            f"{', branch ' + it.branch if it.branch else ''}); recovered it from the ledger")
    else:
        dropped = bool(p.branch) and (
            drop_branch(repo, p.branch or "")
            or any(e.branch == p.branch and e.branch_deleted for e in swept)
        )
        cp.notes.append(
            f"{p.step} was interrupted and runs again"
            + (f"; its unfinished branch {p.branch} was removed" if dropped else "")
            + (f"; its metered spend was charged ({charged.tokens} tokens)"
               if p.metered is not None else
               f"; its unmetered spend was charged at the estimate ({p.estimate.tokens} tokens)")
        )
        say(cp.notes[-1])
    cp.pending = None
