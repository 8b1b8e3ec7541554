"""`nightly --push / --open-pr`: push accepted branches and open PRs with the GitHub CLI.

Pushes are plain `git push <remote> <branch>` through optimizer.git (never forced: no `--force`,
no `+` refspec). PRs are opened with `gh pr create` only when `gh` is on PATH and `gh auth
status` succeeds; otherwise the exact commands to run are recorded instead. Results go into
the checkpoint, so a resumed night does not push or open the same PR twice.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from promptloop.optimizer.git import GitOps, GitOpsError
from promptloop.optimizer.workflows.github import GH_TIMEOUT, run_gh
from promptloop.optimizer.workflows.nightly.state import Checkpoint, PublishRecord, StepRecord


def accepted_steps(cp: Checkpoint) -> list[StepRecord]:
    return [s for s in cp.steps if s.outcome == "accepted" and s.result and s.result.branch]


def _gh(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`github.run_gh` for a command spelled out (`args` starts with "gh"); a timeout is a
    failed command whose stderr says so."""
    assert args[0] == "gh"
    try:
        return run_gh(cwd, *args[1:])
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 1, "", f"gh timed out after {GH_TIMEOUT:g} s")


def pr_title(repo: Path, branch: str) -> str:
    """The accepted commit's subject; a generic title when the repository cannot say (moved,
    or a summary rebuilt elsewhere from the checkpoint)."""
    try:
        with GitOps(repo) as git:
            return git.subject(branch) or f"promptloop: {branch}"
    except GitOpsError:
        return f"promptloop: {branch}"


def push_command(branch: str, remote: str = "origin") -> list[str]:
    return ["git", "push", remote, branch]


def pr_command(branch: str, title: str, body_path: str) -> list[str]:
    return ["gh", "pr", "create", "--head", branch, "--title", title, "--body-file", body_path]


def gh_ready(repo: Path) -> str | None:
    """None when `gh` can open PRs here, else why not."""
    if shutil.which("gh") is None:
        return "the GitHub CLI (gh) is not installed"
    status = _gh(["gh", "auth", "status"], repo)
    if status.returncode != 0:
        return "gh is not authenticated (run `gh auth login`)"
    return None


def manual_commands(repo: Path, step: StepRecord, remote: str = "origin") -> list[str]:
    """The commands a person would run to publish an accepted branch."""
    assert step.result is not None and step.result.branch
    branch = step.result.branch
    body = step.result.pr_body_path or "PR.md"
    return [shlex.join(push_command(branch, remote)),
            shlex.join(pr_command(branch, pr_title(repo, branch), body))]


def publish_accepted(
    cp: Checkpoint,
    repo: Path,
    *,
    open_pr: bool,
    say: Callable[[str], None],
    remote: str = "origin",
) -> list[PublishRecord]:
    """Push every accepted branch of the night (and open PRs if asked); updates `cp.published`."""
    records = {r.branch: r for r in cp.published}
    gh_problem: str | None = None
    if open_pr and accepted_steps(cp):
        gh_problem = gh_ready(repo)
    for step in accepted_steps(cp):
        assert step.result is not None and step.result.branch
        branch = step.result.branch
        rec = records.get(branch) or PublishRecord(branch=branch)
        commands = manual_commands(repo, step, remote)
        rec.commands = []
        if not rec.pushed:
            with GitOps(repo) as git:
                rec.push_error = git.push(remote, branch)
            rec.pushed = rec.push_error is None
            say(f"pushed {branch} to {remote}" if rec.pushed
                else f"could not push {branch}: {rec.push_error}")
        if not rec.pushed:
            rec.commands.append(commands[0])
        if open_pr and rec.pr != "opened":
            if not rec.pushed:
                rec.pr = "manual"
                rec.commands.append(commands[1])
            elif gh_problem is not None:
                rec.pr, rec.pr_error = "manual", gh_problem
                rec.commands.append(commands[1])
                say(f"{gh_problem}; to open the PR run: {commands[1]}")
            else:
                body = step.result.pr_body_path or ""
                made = _gh(pr_command(branch, pr_title(repo, branch), body), repo)
                if made.returncode == 0:
                    rec.pr, rec.pr_error = "opened", None
                    lines = made.stdout.strip().splitlines()
                    rec.pr_url = lines[-1] if lines else None
                    say(f"opened a PR for {branch}: {rec.pr_url}")
                else:
                    rec.pr = "failed"
                    rec.pr_error = made.stderr.strip() or "gh pr create failed"
                    rec.commands.append(commands[1])
                    say(f"could not open a PR for {branch}: {rec.pr_error}")
        records[branch] = rec
    cp.published = list(records.values())
    return cp.published
