"""`promptloop review` on human-written prompt branches in temporary git repos, scripted models."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from promptloop.optimizer.gate.compare import BucketComparison
from promptloop.optimizer.gate.verdict import decide_review
from promptloop.optimizer.workflows.review import ReviewConfig, ReviewResult, review
from tests import policies
from tests.cli_json import cli_result
from tests.optimizer.workflows.test_optimize import PROMPT, _git, checkout_state

GOOD_LINE = (
    "If the input is only a greeting, filler or emoji, call skip_pkm_organization "
    "and write nothing."
)
BROAD_LINE = "Call skip_pkm_organization for every input with fewer than 80 characters."

runner = CliRunner()


def human_branch(repo: Path, branch: str, line: str | None = None) -> None:
    """A colleague commits a change on `branch` (prompt rule and/or an unrelated file)."""
    _git(repo, "checkout", "-q", "-b", branch)
    if line is None:
        (repo / "NOTES.md").write_text("Unrelated documentation change.\n")
    else:
        (repo / "prompts" / "pkm_agent.md").write_text(
            PROMPT.replace("## Skipping\n", f"## Skipping\n{line}\n")
        )
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", f"human change on {branch}")
    _git(repo, "checkout", "-q", "main")


@dataclass
class Reviewer:
    """`promptloop review` in the test repository: the agent model, state folder and base
    given once, so a test names only what differs."""

    repo: Path
    state: Path
    monkeypatch: pytest.MonkeyPatch

    def run(self, head: str | None, *args: str, base: str = "main") -> Any:
        self.monkeypatch.chdir(self.repo)
        refs = ["--base", base] + (["--head", head] if head is not None else [])
        return runner.invoke(
            app, ["review", "--agent-model", "scripted:pkm", "--out", str(self.state), *refs,
                  *args])

    def json(self, head: str, *args: str) -> tuple[int, dict[str, Any]]:
        result = self.run(head, "--json", *args)
        assert result.exit_code in (0, 3), result.output
        return result.exit_code, cli_result(result.stdout)


@pytest.fixture
def reviewer(repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> Reviewer:
    return Reviewer(repo, state, monkeypatch)


def api(repo: Path, state: Path, head: str, **kw: Any) -> ReviewResult:
    config = ReviewConfig(
        base="main", head=head, agent_model="scripted:pkm", repo=repo, state_dir=state, **kw
    )
    return asyncio.run(review(config, agent=policies.pkm_model()))


def test_broad_rule_regresses_and_comment_names_the_bucket(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, reviewer: Reviewer
) -> None:
    human_branch(repo, "human/short-skip", BROAD_LINE)
    code, data = reviewer.json("human/short-skip")
    assert code == 0
    assert data["status"] == "reviewed" and data["decision"] == "regresses"
    agent = data["agents"][0]
    assert agent["agent"] == "pkm_agent"
    assert "short_fact" in agent["regressed"] and "regression/plain" in agent["regressed"]
    assert "long_fact" not in agent["regressed"]
    # the broad rule does fix skip_trivial (trivial inputs are short): the sequential
    # efficacy test shows it, and the harm elsewhere still makes the verdict "regresses"
    assert agent["improved"] == ["skip_trivial"]
    assert "short_fact" in data["message"]
    rows = {c["bucket"]: c for c in agent["comparisons"]}
    assert set(rows) == {"skip_trivial", "short_fact", "long_fact", "regression/plain"}
    # the suspected regression was confirmed with extra trials before the verdict
    assert "short_fact" in agent["confirmed_buckets"] and rows["short_fact"]["n_pairs"] == 8
    broken = {(c["task_id"], c["trial_index"]) for c in agent["newly_failing"]}
    assert ("dentist", 0) in broken and ("greet-hi", 0) not in broken
    assert {(c["task_id"], c["trial_index"]) for c in agent["fixed"]} >= {("greet-hi", 0)}

    comment = Path(data["comment_path"]).read_text()
    assert Path(data["comment_path"]) == state / "review" / data["review_id"] / "comment.md"
    assert "Verdict: regresses" in comment
    assert "- paired (seeded): trials of the same task and trial index" in comment
    assert all(a["seeded"] for a in data["agents"])
    assert any(s.startswith("prompt: prompts/pkm_agent.md @ main ") for s in data["sources"])
    assert any(s.startswith("tasks: tasks/pkm_agent/capability @ ") for s in data["sources"])
    assert "| Bucket | n | Base pass | Head pass |" in comment
    for bucket in rows:
        assert f"| `{bucket}` |" in comment
    assert "| `short_fact` | 8 | 100% | 0% |" in comment and "**regressed**" in comment
    assert "```diff" in comment and f"+{BROAD_LINE}" in comment
    assert "<code>dentist</code>" in comment
    # the newly failing trial comes with its grader rationale and failing assertion
    assert "intended persist, but the agent's run looks like skip" in comment
    assert "✗ wrote to PARA with the fact id" in comment
    assert "### Trials fixed" in comment and "`greet-hi` (`skip_trivial`)" in comment
    saved = json.loads((state / "review" / data["review_id"] / "result.json").read_text())
    assert saved["decision"] == "regresses"

    # as a CI check: exit 3, and the second review is served from the trial cache
    code, again = reviewer.json("human/short-skip", "--fail-on-regression")
    assert code == 3 and again["decision"] == "regresses" and again["exit_code"] == 3
    a2 = again["agents"][0]
    assert a2["base_cached_trials"] == a2["base_trials"] == 16
    assert a2["head_cached_trials"] == a2["head_trials"] == 16


def test_good_rule_improves(repo: Path, reviewer: Reviewer) -> None:
    human_branch(repo, "human/greetings", GOOD_LINE)
    out_file = repo.parent / "comment-copy.md"
    code, data = reviewer.json(
        "human/greetings", "--suite", "pkm_agent", "--trials", "4", "--output", str(out_file),
        "--fail-on-regression")
    assert code == 0 and data["decision"] == "improves"
    agent = data["agents"][0]
    assert agent["improved"] == ["skip_trivial"] and agent["regressed"] == []
    assert agent["newly_failing"] == [] and agent["confirmed_buckets"] == []
    fixed = {(c["task_id"], c["trial_index"]) for c in agent["fixed"]}
    # every trial of the two fixed tasks, the suite's 4 and those the efficacy looks added
    assert {t for t, _ in fixed} == {"greet-hi", "emoji-thumb"}
    assert {(t, i) for t in ("greet-hi", "emoji-thumb") for i in range(4)} <= fixed
    comment = out_file.read_text()
    assert comment == Path(data["comment_path"]).read_text()
    assert "Verdict: improves" in comment and "### Newly failing trials (0)" in comment


def test_unchanged_prompt_has_nothing_to_review(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, reviewer: Reviewer
) -> None:
    human_branch(repo, "human/docs")
    result = reviewer.run("human/docs")
    assert result.exit_code == 0, result.output
    assert "nothing to review" in result.output and "no agent prompt changed" in result.output
    code, data = reviewer.json("human/docs", "--suite", "pkm_agent")
    assert code == 0 and data["status"] == "nothing_to_review"
    assert data["unchanged"] == ["pkm_agent"] and data["comment_path"] is None
    assert "prompts/pkm_agent.md is unchanged" in data["message"]
    assert not (state / "review").exists()
    # --output still writes a comment: a CI job reading or uploading it finds why (it wrote
    # nothing, a team simulating the review workflow)
    out = repo.parent / "review-comment.md"
    code, data = reviewer.json("human/docs", "--suite", "pkm_agent", "--output", str(out))
    assert code == 0 and data["output"] == str(out)
    assert "nothing to review" in out.read_text() and "unchanged" in out.read_text()


def test_usage_errors_exit_1(repo: Path, reviewer: Reviewer) -> None:
    result = reviewer.run(None, base="no-such-branch")
    assert result.exit_code == 1 and "unknown git ref" in result.output
    result = reviewer.run(None, "--suite", "card")
    assert result.exit_code == 1 and "--suite" in result.output
    # the card agent has no prompt file in this repo: nothing to compare
    human_branch(repo, "human/x", GOOD_LINE)
    result = reviewer.run("human/x", "--suite", "card_agent")
    assert result.exit_code == 1 and "prompts/card_agent.md does not exist" in result.output


def test_checkout_untouched_and_committed_prompts_reviewed(repo: Path, state: Path) -> None:
    human_branch(repo, "human/greetings", GOOD_LINE)
    # the user's checkout has an uncommitted over-broad edit, an untracked and a staged file
    (repo / "prompts" / "pkm_agent.md").write_text(PROMPT + f"\n{BROAD_LINE}\n")
    (repo / "scratch.txt").write_text("untracked")
    (repo / "staged.txt").write_text("staged")
    _git(repo, "add", "staged.txt")
    before = checkout_state(repo)
    worktrees = _git(repo, "worktree", "list")
    result = api(repo, state, "human/greetings", trials=4)  # enough pairs for exact tests
    # the committed refs were reviewed, not the working copy (which would regress)
    assert result.decision == "improves", result.message
    assert any(n.startswith("your uncommitted edit to prompts/pkm_agent.md is not evaluated: "
                            "review uses human/greetings ") for n in result.notes), result.notes
    assert checkout_state(repo) == before
    assert _git(repo, "worktree", "list") == worktrees
    assert _git(repo, "branch", "--list", "promptloop/*").strip() == ""


def test_a_checkout_at_the_base_is_not_called_unevaluated(repo: Path, state: Path) -> None:
    """A new-team trial reviewed its checkout's branch (the base) against a PR branch and was
    told "agent/prompt.js of your checkout (HEAD) is not evaluated", in the PR comment too:
    the checkout is the base, evaluated. Only an edit that is neither side is named."""
    human_branch(repo, "human/greetings", GOOD_LINE)
    result = api(repo, state, "human/greetings", trials=1)
    assert not any("is not evaluated" in n for n in result.notes), result.notes


def test_base_side_reused_from_the_trial_cache(repo: Path, state: Path) -> None:
    human_branch(repo, "human/greetings", GOOD_LINE)
    human_branch(repo, "human/short-skip", BROAD_LINE)
    first = api(repo, state, "human/greetings")
    a1 = first.agents[0]
    assert a1.base_cached_trials == 0 and a1.head_cached_trials == 0
    second = api(repo, state, "human/short-skip")
    a2 = second.agents[0]
    assert a2.base_cached_trials == a2.base_trials == 16
    assert a2.head_cached_trials == 0
    assert second.decision == "regresses" and "short_fact" in a2.regressed
    # runs are saved under the review's own names, base and head provenance per ref
    assert any(name.endswith("-base") for name in a2.base_runs)
    assert first.review_id != second.review_id


def _fake_gh(bin_dir: Path, log: Path, *, authenticated: bool = True,
             earlier: int | None = None) -> None:
    """A `gh` logging its arguments; `earlier`: the id of a promptloop comment already on the
    PR (listed by `gh api .../comments`, edited by `gh api -X PATCH`)."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "gh"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{log}"\n'
        'if [ "$1" = auth ]; then exit ' + ("0" if authenticated else "1") + "; fi\n"
        'if [ "$1 $2" = "pr view" ]; then echo \'{"number": 42}\'; exit 0; fi\n'
        'if [ "$1 $2" = "pr comment" ]; then cp "$5" "' + str(log) + '.body"; '
        "echo https://github.example/o/r/pull/$3#comment; exit 0; fi\n"
        + ("" if earlier is None else
           f'if [ "$1 $2" = "api -X" ]; then cp "${{6#body=@}}" "{log}.body"; '
           f"echo https://github.example/o/r/pull/42#issuecomment-{earlier}; exit 0; fi\n"
           f'if [ "$1" = api ]; then echo 11; echo {earlier}; exit 0; fi\n')
        + "exit 9\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_post_detects_the_pr_of_the_head_branch(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, reviewer: Reviewer, tmp_path: Path
) -> None:
    human_branch(repo, "human/greetings", GOOD_LINE)
    log = tmp_path / "gh.log"
    _fake_gh(tmp_path / "bin", log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    code, data = reviewer.json("human/greetings", "--post", "--trials", "1")
    assert code == 0 and data["post"]["posted"] is True and data["post"]["pr"] == 42
    calls = log.read_text().splitlines()
    assert calls[0] == "auth status"
    assert calls[1] == "pr view human/greetings --json number"
    assert calls[2].startswith("api repos/{owner}/{repo}/issues/42/comments --paginate")
    assert calls[3] == f"pr comment 42 --body-file {data['comment_path']}"
    assert Path(f"{log}.body").read_text() == Path(data["comment_path"]).read_text()

    # an explicit --pr skips the detection
    log.unlink()
    code, data = reviewer.json("human/greetings", "--post", "--pr", "7", "--trials", "1")
    assert code == 0 and data["post"]["pr"] == 7
    assert log.read_text().splitlines()[2].startswith("pr comment 7 --body-file ")


def test_a_later_review_edits_its_comment_instead_of_adding_one(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, reviewer: Reviewer, tmp_path: Path
) -> None:
    """A team's CI reviewed on every push and each run added a full comment to the PR: the
    comment carrying promptloop's marker is edited in place."""
    human_branch(repo, "human/greetings", GOOD_LINE)
    log = tmp_path / "gh.log"
    _fake_gh(tmp_path / "bin", log, earlier=77)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    code, data = reviewer.json("human/greetings", "--post", "--pr", "42", "--trials", "1")
    assert code == 0 and data["post"]["posted"] is True
    assert "updated the review comment on PR #42" in data["post"]["message"]
    calls = log.read_text().splitlines()
    assert not any(c.startswith("pr comment") for c in calls), calls
    assert calls[-1].startswith("api -X PATCH repos/{owner}/{repo}/issues/comments/77 -F body=@")
    body = Path(f"{log}.body").read_text()
    assert body == Path(data["comment_path"]).read_text()
    assert body.startswith("<!-- promptloop-review -->\n")


def test_post_without_usable_gh_says_what_to_run(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, reviewer: Reviewer, tmp_path: Path
) -> None:
    human_branch(repo, "human/greetings", GOOD_LINE)
    monkeypatch.setattr("promptloop.optimizer.workflows.github.find_gh", lambda: None)
    result = reviewer.run("human/greetings", "--post", "--pr", "5", "--trials", "1")
    # asked to post and nothing was posted: a CI check must not go green without its comment
    # (review -h: "2 infrastructure failure (... gh failed to post)")
    assert result.exit_code == 2, result.output
    assert "not installed" in result.output and "--post: nothing was posted" in result.output
    assert "the review's verdict is" in result.output  # a regression is not hidden by it
    joined = " ".join(result.output.replace(" \\\n", " ").split())  # a command may continue
    assert "gh pr comment 5 --body-file" in joined and "comment.md" in result.output

    monkeypatch.undo()
    _fake_gh(tmp_path / "bin", tmp_path / "gh.log", authenticated=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    result = reviewer.run("human/greetings", "--json", "--post", "--trials", "1")
    code, data = result.exit_code, cli_result(result.stdout)
    assert code == 2 and data["post"]["posted"] is False
    assert "not authenticated" in data["post"]["message"]
    assert Path(data["comment_path"]).is_file()  # the comment is kept, to post by hand
    assert data["post"]["command"].startswith("gh pr comment '<PR-number>' --body-file ")


def _comp(bucket: str, status: str) -> BucketComparison:
    """A comparison whose exact p-values say `status` (the review verdict reads the tests)."""
    delta = {"improved": 0.5, "regressed": -0.5}.get(status, 0.0)
    return BucketComparison(
        bucket=bucket, n_pairs=12, base_mean=0.5, cand_mean=0.5 + delta, delta=delta,
        base_pass_rate=0.5, cand_pass_rate=0.5 + delta, pass_delta=delta,
        p_improve=0.0005 if status == "improved" else 1.0,
        p_regress=0.0005 if status == "regressed" else 1.0,
        status=status,  # type: ignore[arg-type]
    )


def test_decide_review_rule() -> None:
    # the verdict comes from the Holm-corrected exact tests, not from the status labels
    both = decide_review([_comp("a", "improved"), _comp("b", "regressed")])
    assert both.decision == "regresses" and both.regressed == ["b"] and both.improved == ["a"]
    up = decide_review([_comp("a", "improved"), _comp("b", "unchanged")])
    assert up.decision == "improves"
    flat = decide_review([_comp("a", "inconclusive"), _comp("b", "unchanged")])
    assert flat.decision == "neutral" and "no bucket changed" in flat.reasons[0]
    assert decide_review([]).reasons[0] == "no bucket has paired trials"


def test_uncommitted_prompt_edit_is_warned_when_nothing_changed_between_refs(
    repo: Path, reviewer: Reviewer
) -> None:
    """`review --base HEAD` with an edited prompt in the working tree: the refs agree, so
    there is nothing to review, but the edit is named as not evaluated (as optimize does)."""
    (repo / "prompts" / "pkm_agent.md").write_text(PROMPT + "\nAnswer briefly.\n")
    head = _git(repo, "rev-parse", "HEAD").strip()[:7]
    result = reviewer.run(None, base="HEAD")
    assert result.exit_code == 0, result.output
    assert "nothing to review" in result.output
    assert ("your uncommitted edit to prompts/pkm_agent.md is not evaluated: review uses "
            f"HEAD {head}") in " ".join(result.output.split())
    code, data = reviewer.json("HEAD", "--suite", "pkm_agent")
    assert code == 0 and data["status"] == "nothing_to_review"
    assert any("uncommitted edit to prompts/pkm_agent.md" in n for n in data["notes"])


def test_fixed_bucket_improves_within_fewer_head_trials(
    repo: Path, reviewer: Reviewer
) -> None:
    """Issue 31: a head that fixes a bucket 0% -> 100% with nothing else changed is called
    "improves" by the sequential efficacy test (the suite's 2 trials per task give 4 pairs,
    which no fixed-sample test at 0.05 can call), with fewer head trials than the 40 the
    harm run-out used to spend, and the comment says how many it took."""
    human_branch(repo, "human/greetings", GOOD_LINE)
    code, data = reviewer.json("human/greetings", "--suite", "pkm_agent")
    assert code == 0 and data["decision"] == "improves", data["message"]
    agent = data["agents"][0]
    assert agent["improved"] == ["skip_trivial"] and agent["open"] == []
    said = [r for r in agent["reasons"] if r.startswith("decided on ")]
    assert len(said) == 1, agent["reasons"]
    head = int(said[0].split()[2])
    assert agent["head_trials"] < head < 40, said  # the suite's 16 and a few looks' more
    assert any(r.startswith("bucket 'skip_trivial' improved at look") and "Fisher p=" in r
               for r in agent["reasons"]), agent["reasons"]
    comment = Path(data["comment_path"]).read_text()
    assert said[0] in comment and "Ruled out:" in comment


def test_an_output_in_a_missing_folder_is_refused_before_any_trial(
    repo: Path, state: Path, reviewer: Reviewer, tmp_path: Path
) -> None:
    """A team's `--output nodir/x.md` ran every trial, then failed with a raw errno, exit 2,
    the verdict unprinted and nothing posted: a user error now, before anything runs."""
    human_branch(repo, "human/greetings", GOOD_LINE)
    result = reviewer.run("human/greetings", "--output", str(tmp_path / "nodir" / "x.md"))
    assert result.exit_code == 1, result.output
    assert "does not exist (create it first)" in result.output
    assert not (state / "review").exists()  # no review was started


def test_a_base_that_moved_on_is_compared_from_the_merge_base(repo: Path, state: Path) -> None:
    """CI's `--base origin/main` is main's tip: a team's PR, branched before main changed the
    prompt, was shown deleting main's newer line (a change it never made). The prompt is now
    compared from their merge base, as the pull request's own diff is, and a note says so."""
    fork = _git(repo, "rev-parse", "HEAD").strip()
    human_branch(repo, "human/greetings", GOOD_LINE)
    newer = "Never answer in French."
    (repo / "prompts" / "pkm_agent.md").write_text(PROMPT + f"\n{newer}\n")
    _git(repo, "commit", "-qam", "main moves on")
    result = api(repo, state, "human/greetings", trials=1)
    assert result.base_commit == fork
    assert newer not in result.diff and GOOD_LINE in result.diff
    assert any("compared from their merge base" in n for n in result.notes), result.notes


def test_a_head_that_also_changes_its_suite_is_named_in_the_comment(
        repo: Path, state: Path) -> None:
    """A team's PR changed the prompt and rewrote its tasks' expected answers to match; the
    verdict graded the head on its own tasks and the comment said nothing of them. It still
    grades the head's tasks (docs/agents.md), and now says which the head changed."""
    import shutil

    _git(repo, "checkout", "-q", "-b", "human/and-tasks")
    (repo / "prompts" / "pkm_agent.md").write_text(
        PROMPT.replace("## Skipping\n", f"## Skipping\n{GOOD_LINE}\n"))
    skip = repo / "tasks" / "pkm_agent" / "capability" / "tasks" / "skip_trivial"
    edited = skip / "greet-hi" / "task.json"
    edited.write_text(edited.read_text().replace("skip_trivial: greet-hi", "edited", 1))
    shutil.rmtree(skip / "emoji-thumb")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "prompt and tasks")
    _git(repo, "checkout", "-q", "main")
    result = api(repo, state, "human/and-tasks", trials=1)
    [note] = [n for n in result.notes if "also changes its suite" in n]
    assert "its suite tasks/pkm_agent" in note
    assert "1 edited (greet-hi)" in note and "1 removed (emoji-thumb)" in note
    from promptloop.optimizer.workflows.review_comment import render_comment

    assert "also changes its suite" in render_comment(result)
    human_branch(repo, "human/greetings", GOOD_LINE)  # the prompt alone: no such note
    alone = api(repo, state, "human/greetings", trials=1)
    assert not any("also changes its suite" in n for n in alone.notes)
