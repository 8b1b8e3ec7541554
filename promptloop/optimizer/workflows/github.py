"""Posting the review comment on a pull request with the GitHub CLI (`gh`).

When gh is missing, unauthenticated or the PR cannot be found, nothing fails: the result says
what to run by hand. The PR is found from the branch behind the head ref. A PR's review
comment is one comment: a later review edits the one carrying `MARKER` (found through
`gh api`), or posts a new one where that fails.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from promptloop.optimizer.git import GitOps, GitOpsError
from promptloop.optimizer.report.fmt import short


@dataclass(frozen=True)
class PostResult:
    posted: bool
    message: str
    command: str
    """The `gh pr comment` command (to run by hand when posting was not possible)."""
    pr: int | None = None
    failed: bool = False
    """gh was usable but the comment could not be posted (an infrastructure failure)."""


def find_gh() -> str | None:
    return shutil.which("gh")


def head_branch(repo: Path, head_ref: str) -> str | None:
    """The branch name behind `head_ref` (local or remote-tracking), None for a bare commit."""
    try:
        with GitOps(repo) as git:
            return git.branch_of(head_ref)
    except GitOpsError:
        return None


GH_TIMEOUT = 120.0
"""Seconds any one gh command may take (a hung network call must not hang a night)."""


def run_gh(repo: Path, *args: str, gh: str = "gh") -> subprocess.CompletedProcess[str]:
    """The one way promptloop runs the GitHub CLI (review comments, nightly PRs): in `repo`,
    output captured, never raising on a failed exit; `subprocess.TimeoutExpired` after
    GH_TIMEOUT. git itself goes through optimizer.git."""
    return subprocess.run([gh, *args], cwd=repo, capture_output=True, text=True, check=False,
                          timeout=GH_TIMEOUT)


def detect_pr(gh: str, repo: Path, head_ref: str) -> int | None:
    """The number of the open PR whose head is `head_ref`'s branch (`gh pr view --json`)."""
    branch = head_branch(repo, head_ref)
    if branch is None:
        return None
    proc = run_gh(repo, "pr", "view", branch, "--json", "number", gh=gh)
    try:
        number = json.loads(proc.stdout).get("number") if proc.returncode == 0 else None
    except (json.JSONDecodeError, AttributeError):
        return None
    return number if isinstance(number, int) else None


MARKER = "<!-- promptloop-review -->"
"""The first line of every review comment: a later review of the same PR edits the comment
that carries it instead of adding another (a review runs on every push)."""


def own_comment(gh: str, repo: Path, pr: int) -> int | None:
    """The id of the newest comment on PR `pr` carrying `MARKER`; None when there is none or
    gh cannot list them (a new comment is posted then)."""
    proc = run_gh(repo, "api", f"repos/{{owner}}/{{repo}}/issues/{pr}/comments", "--paginate",
                  "--jq", f'.[] | select(.body | startswith("{MARKER}")) | .id', gh=gh)
    if proc.returncode != 0:
        return None
    ids = [line.strip() for line in proc.stdout.splitlines() if line.strip().isdigit()]
    return int(ids[-1]) if ids else None


def post_comment(body_file: Path, *, repo: Path, head_ref: str, pr: int | None) -> PostResult:
    """Comment `body_file` on the PR through gh; when gh is missing, unauthenticated or the PR
    is unknown, say what to run instead."""

    def command(number: int | None) -> str:
        return shlex.join(
            [
                "gh",
                "pr",
                "comment",
                str(number) if number else "<PR-number>",
                "--body-file",
                str(body_file),
            ]
        )

    gh = find_gh()
    if gh is None:
        return PostResult(
            False, "the gh CLI is not installed; post the comment with:", command(pr), pr
        )
    try:
        if run_gh(repo, "auth", "status", gh=gh).returncode != 0:
            return PostResult(
                False,
                "gh is not authenticated (run `gh auth login`); then post the comment with:",
                command(pr),
                pr,
            )
        if pr is None:
            pr = detect_pr(gh, repo, head_ref)
            if pr is None:
                return PostResult(
                    False,
                    f"no open pull request found for {head_ref!r}; pass "
                    "--pr N or post the comment with:",
                    command(None),
                    None,
                )
        earlier = own_comment(gh, repo, pr)
        if earlier is not None:  # the review of an earlier push: updated in place
            proc = run_gh(repo, "api", "-X", "PATCH",
                          f"repos/{{owner}}/{{repo}}/issues/comments/{earlier}",
                          "-F", f"body=@{body_file}", "--jq", ".html_url", gh=gh)
            if proc.returncode == 0:
                url = proc.stdout.strip()
                return PostResult(True, f"updated the review comment on PR #{pr}"
                                  + (f": {url}" if url else ""), command(pr), pr)
        proc = run_gh(repo, "pr", "comment", str(pr), "--body-file", str(body_file), gh=gh)
    except subprocess.TimeoutExpired:
        return PostResult(
            False, "gh timed out; post the comment with:", command(pr), pr, failed=True
        )
    if proc.returncode != 0:
        detail = short(proc.stderr or proc.stdout or f"exit {proc.returncode}", 300)
        return PostResult(
            False, f"gh pr comment failed: {detail}; retry with:", command(pr), pr, failed=True
        )
    url = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return PostResult(True, f"commented on PR #{pr}" + (f": {url}" if url else ""), command(pr), pr)
