"""`promptloop review`: gate a prompt change between two git refs and write a PR comment."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from optimizer.cli import ui
from optimizer.cli.util import EXIT_INFRA, guarded, option_errors
from optimizer.core.config import DEFAULT_AGENT_MODEL, ConfigError
from optimizer.gate.compare import BucketComparison

if TYPE_CHECKING:
    from optimizer.workflows.github import PostResult

EXIT_REGRESSION = 3
"""With --fail-on-regression: the review completed and some bucket regresses."""


def review(
    base: Annotated[
        str,
        typer.Option(
            "--base",
            envvar="PROMPTLOOP_REVIEW_BASE",
            help="Git ref of the base (e.g. origin/main).",
        ),
    ],
    head: Annotated[
        str,
        typer.Option(
            "--head", envvar="PROMPTLOOP_REVIEW_HEAD", help="Git ref of the change (the PR head)."
        ),
    ] = "HEAD",
    suite: Annotated[
        str | None,
        typer.Option(
            "--suite",
            envvar="PROMPTLOOP_SUITE",
            help="card_agent or pkm_agent (default: every agent whose prompt changed).",
        ),
    ] = None,
    trials: Annotated[
        int | None,
        typer.Option(
            min=1, envvar="PROMPTLOOP_TRIALS", help="Trials per task (default: task's own)."
        ),
    ] = None,
    agent_model: Annotated[
        str, typer.Option(envvar="PROMPTLOOP_AGENT_MODEL", help="Agent model id.")
    ] = DEFAULT_AGENT_MODEL,
    judge_model: Annotated[
        str | None,
        typer.Option(envvar="PROMPTLOOP_JUDGE_MODEL", help="Judge model for LLM-judge graders."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(envvar="OPENAI_BASE_URL", help="Base URL of an OpenAI-compatible server."),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, envvar="PROMPTLOOP_CONCURRENCY", help="Trials at once.")
    ] = None,
    confirm_trials: Annotated[
        int,
        typer.Option(
            min=0,
            envvar="PROMPTLOOP_CONFIRM_TRIALS",
            help="Extra trials per task to confirm a suspected regression.",
        ),
    ] = 2,
    min_improvement: Annotated[
        float,
        typer.Option(envvar="PROMPTLOOP_MIN_IMPROVEMENT", help="Mean-score gain for 'improved'."),
    ] = 0.05,
    regression_tolerance: Annotated[
        float,
        typer.Option(
            envvar="PROMPTLOOP_REGRESSION_TOLERANCE", help="Largest drop not called a regression."
        ),
    ] = 0.35,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            envvar="PROMPTLOOP_FAIL_ON_REGRESSION",
            help=f"Exit {EXIT_REGRESSION} when a bucket regresses (for CI checks).",
        ),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            envvar="PROMPTLOOP_REVIEW_OUTPUT",
            help="Also write the comment Markdown here.",
        ),
    ] = None,
    post: Annotated[
        bool,
        typer.Option(
            "--post", envvar="PROMPTLOOP_REVIEW_POST", help="Comment on the PR with the gh CLI."
        ),
    ] = False,
    pr: Annotated[
        int | None,
        typer.Option(
            "--pr",
            min=1,
            envvar="PROMPTLOOP_PR",
            help="PR number for --post (default: the open PR of the head branch).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "--state-dir",
            envvar="PROMPTLOOP_HOME",
            help="State folder for reports, caches and reviews (default: <repo>/.promptloop).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")
    ] = False,
) -> None:
    """Review a prompt change (any PR, human-written too): evaluate both refs and gate it.

    Reads prompts/<agent>.md at --base and --head from git (your checkout is never touched),
    runs the changed agent's capability and regression suites for both prompts (base-side
    trials come from the trial cache when that prompt was evaluated before), pairs the trials
    and applies the optimize gate to every bucket. Suspected regressions are confirmed with
    extra trials. The verdict is `regresses` (some bucket regressed), `improves` (some bucket
    improved, none regressed) or `neutral`. A PR comment (verdict, per-bucket table, prompt
    diff, newly failing trials with grader rationales, trials fixed) is written to
    <state>/review/<id>/comment.md; --post comments it with `gh pr comment`.

    Exit codes: 0 review completed whatever the verdict (also: no prompt changed), 1 usage or
    configuration error, 2 infrastructure failure (provider, every trial errored, gh failed to
    post), 3 with --fail-on-regression when a bucket regresses."""
    from optimizer.core.config import repo_root, state_dir
    from optimizer.gate.compare import GatePolicy
    from optimizer.workflows.review import ReviewConfig
    from optimizer.workflows.review import review as run_review

    def body() -> int:
        root = repo_root()
        if root is None:
            raise ConfigError("review needs a git repository (run it inside your prompt repo)")
        try:
            config = ReviewConfig.model_validate(
                {
                    "base": base,
                    "head": head,
                    "suite": suite,
                    "agent_model": agent_model,
                    "judge_model": judge_model,
                    "base_url": base_url,
                    "trials": trials,
                    "concurrency": concurrency,
                    "confirm_trials": confirm_trials,
                    "policy": GatePolicy(
                        min_improvement=min_improvement, regression_tolerance=regression_tolerance
                    ),
                    "repo": root,
                    "state_dir": state_dir(out),
                }
            )
        except ValidationError as err:
            raise ConfigError(option_errors(err)) from None
        with ui.LoopDisplay(enabled=not as_json) as display:
            result = asyncio.run(
                run_review(config, on_event=display.on_event, progress=display.progress_for)
            )
        data: dict[str, Any] = result.model_dump(mode="json")
        code = 0
        if result.comment_path and output is not None:
            output.write_text(Path(result.comment_path).read_text(encoding="utf-8"), "utf-8")
            data["output"] = str(output)
        if post and result.comment_path:
            posted = _post(Path(result.comment_path), root, head, pr)
            data["post"] = {
                "posted": posted.posted,
                "message": posted.message,
                "command": posted.command,
                "pr": posted.pr,
            }
            if posted.failed:
                code = EXIT_INFRA
        elif post:
            data["post"] = {"posted": False, "message": "nothing to post", "command": "", "pr": pr}
        if fail_on_regression and result.decision == "regresses" and code == 0:
            code = EXIT_REGRESSION
        data["exit_code"] = code
        if as_json:
            ui.print_json(data)
        else:
            _show(data)
        return code

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def _post(path: Path, root: Path, head: str, pr: int | None) -> PostResult:
    from optimizer.workflows.github import post_comment

    return post_comment(path, repo=root, head_ref=head, pr=pr)


def _show(data: dict[str, Any]) -> None:
    if data["status"] == "nothing_to_review":
        ui.out.print(data["message"], markup=False)
        for note in data["notes"]:
            ui.out.print(f"note: {note}", markup=False)
        return
    ui.out.rule(f"review {data['base_ref']}..{data['head_ref']}: {data['decision']}")
    for note in data["notes"]:
        ui.out.print(f"note: {note}", markup=False)
    for a in data["agents"]:
        ui.comparison_rows(
            f"{a['agent']}: {a['decision']} (base {a['base_trials']} trials, "
            f"{a['base_cached_trials']} cached; head {a['head_trials']}, "
            f"{a['head_cached_trials']} cached)",
            [BucketComparison.model_validate(c) for c in a["comparisons"]],
            cand="Head",
        )
        for reason in a["reasons"]:
            ui.out.print(f"  - {reason}", markup=False)
        if a["newly_failing"]:
            ui.out.print(
                f"  newly failing: {', '.join(_trial(c) for c in a['newly_failing'][:10])}"
                + (" ..." if len(a["newly_failing"]) > 10 else ""),
                markup=False,
            )
        if a["fixed"]:
            ui.out.print(f"  fixed: {len(a['fixed'])} trial(s)", markup=False)
    ui.out.print(f"\n{data['message']}", markup=False)
    ui.out.print(f"comment: {data['comment_path']}", markup=False)
    if data.get("output"):
        ui.out.print(f"also written to: {data['output']}", markup=False)
    post = data.get("post")
    if post:
        if post["posted"]:
            ui.out.print(post["message"], markup=False)
        else:
            ui.warn(post["message"])
            if post["command"]:
                ui.out.print(f"  {post['command']}", markup=False)
    if data["exit_code"] == EXIT_REGRESSION:
        ui.info(f"exit {EXIT_REGRESSION}: a bucket regresses (--fail-on-regression)")


def _trial(c: dict[str, Any]) -> str:
    return f"{c['task_id']}#{c['trial_index']} ({c['bucket']})"


def register(app: typer.Typer) -> None:
    app.command("review")(review)
