"""Issue 26, point 7: a run records what it was for (its role), the branch of its prompt and,
for a candidate, the candidate's commit and verdict; the viewer's trend plots only the
lineage's prompts (never a rejected candidate)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from promptloop.optimizer.report.store import RunIndexEntry, list_runs
from promptloop.optimizer.run.models import ModelIds
from promptloop.optimizer.run.runner import RunOptions
from promptloop.optimizer.view.app import ViewApp
from promptloop.optimizer.view.trend import suite_runs
from promptloop.optimizer.workflows.evaluate import EvalRequest, evaluate
from tests.optimizer.workflows.test_optimize import BROAD, GOOD, _git, run
from tests.optimizer.workflows.test_review import GOOD_LINE, api, human_branch

SUITE = "pkm_agent_capability"


def _entries(state: Path) -> list[RunIndexEntry]:
    return list_runs(state / "runs")


def test_optimize_runs_record_role_branch_and_the_candidates_commit(
    repo: Path, state: Path
) -> None:
    base = _git(repo, "rev-parse", "HEAD").strip()
    rejected = run(repo, state, [BROAD], keep_rejected=True)[0].iterations[0]
    assert rejected.outcome == "rejected" and rejected.branch
    accepted = run(repo, state, [GOOD])[0].iterations[0]
    assert accepted.outcome == "accepted" and accepted.branch and accepted.commit
    entries = _entries(state)
    baselines = [e for e in entries if e.role == "baseline"]
    assert baselines and all(e.branch == "main" and e.git_commit == base for e in baselines)
    for it, verdict in ((rejected, "rejected"), (accepted, "accepted")):
        mine = [e for e in entries if e.role == "candidate" and e.branch == it.branch]
        assert mine, [(e.run_name, e.role, e.branch) for e in entries]
        assert all(e.candidate_commit == it.commit and e.verdict == verdict for e in mine)
        assert all(e.git_commit == base for e in mine)  # the commit it was branched from
    assert {e.role for e in entries} == {"baseline", "candidate"}

    # the trend plots the baselines: no candidate, the accepted one neither (its branch is
    # not merged; the next baseline or eval measures it once it is)
    plotted = suite_runs(entries, SUITE, 200)
    assert {e.role for e in plotted} == {"baseline"}
    assert all(e.branch not in (rejected.branch, accepted.branch) for e in plotted)
    page = ViewApp(state).handle(f"/trend?suite={SUITE}&limit=200")
    assert page.status == 200
    text = page.body.decode()
    shown = [e for e in entries if e.suite_name == SUITE and e.run_name in text]
    assert shown and all(e.branch != rejected.branch for e in shown)


def test_eval_and_review_runs_record_their_role_and_ref(repo: Path, state: Path) -> None:
    request = EvalRequest(suite="pkm_agent", kind="regression", repo=repo,
                          models=ModelIds(agent="scripted:pkm"),
                          options=RunOptions(agent_model="scripted:pkm", trials=1))
    asyncio.run(evaluate(request, state))
    [evaluated] = _entries(state)
    assert evaluated.role == "eval" and evaluated.branch == "main"
    human_branch(repo, "human/greetings", GOOD_LINE)
    api(repo, state, "human/greetings")
    roles = {(e.role, e.branch) for e in _entries(state)}
    assert {("review-base", "main"), ("review-head", "human/greetings")} <= roles
