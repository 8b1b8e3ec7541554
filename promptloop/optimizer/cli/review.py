"""`promptloop review`: gate a prompt change between two git refs and write a PR comment."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from promptloop.agents.runtime import DEFAULT_MAX_TURNS
from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import (
    GATE,
    PUBLISH,
    AgentModelOpt,
    AllOpt,
    BaseUrlOpt,
    BatchOpt,
    ConcurrencyOpt,
    EventsOpt,
    HarmSensitivity,
    HarmSensitivityOpt,
    JsonOpt,
    JudgeModelOpt,
    MaxRunsOpt,
    MaxTurnsOpt,
    MinImprovementOpt,
    RegressionToleranceOpt,
    RunLog,
    StateOpt,
    TrialsOpt,
    VerboseOpt,
    agent_models,
    listening,
    models_by_agent,
)
from promptloop.optimizer.cli.common import AgentOpt as AgentNameOpt
from promptloop.optimizer.cli.report import compare_command
from promptloop.optimizer.cli.util import EXIT_INFRA, guarded, option_errors, require_repo
from promptloop.optimizer.gate.policy import GatePolicy
from promptloop.optimizer.workflows.context import DEFAULT_AGENT_MODEL, ConfigError, split_suite

if TYPE_CHECKING:
    from promptloop.optimizer.workflows.github import PostResult
    from promptloop.optimizer.workflows.review import ReviewConfig, ReviewResult

EXIT_REGRESSION = 3
"""With --fail-on-regression: the review completed and some bucket regresses, or the head
breaks a prompt's source file (verdict "broken")."""
EXIT_INCONCLUSIVE = 4
"""With --fail-on-regression: no bucket regressed, but some bucket's harm was not ruled out."""

POLICY = GatePolicy()
"""Every gate default of the options below (`tests` check they equal GatePolicy's)."""
SENSITIVITY = HarmSensitivity(POLICY.harm_sensitivity)


Opt = typer.Option

BaseRefOpt = Annotated[str, Opt(
    "--base", envvar=["PROMPTLOOP_BASE", "PROMPTLOOP_REVIEW_BASE"], metavar="REF",
    help="Git ref of the base (e.g. origin/main).")]
HeadRefOpt = Annotated[str, Opt(
    "--head", envvar="PROMPTLOOP_REVIEW_HEAD", metavar="REF",
    help="Git ref of the change (the PR head).")]
AgentOpt = Annotated[str | None, Opt(
    "--suite", envvar="PROMPTLOOP_SUITE", metavar="AGENT",
    help="The agent to review, as --agent (default: every agent whose prompt changed).")]
TrustHeadOpt = Annotated[bool, Opt(
    "--trust-head", rich_help_panel=GATE,
    help="Run the adapters and command graders of the head's promptloop.toml. By default the "
    "base's are used, so a PR cannot run its own code in your CI: unsafe for PRs from forks.")]
NoSandboxOpt = Annotated[bool, Opt(
    "--no-sandbox", envvar="PROMPTLOOP_REVIEW_NO_SANDBOX", rich_help_panel=GATE,
    help="Run command and worker agents although neither bwrap nor unshare can box them here "
    "(docs/sandbox.md). Unsafe for PRs from forks: the head's prompt then drives an agent that "
    "can read and write what this user can.")]
ConfirmTrialsOpt = Annotated[int, Opt(
    "--confirm-trials", min=0, envvar="PROMPTLOOP_CONFIRM_TRIALS", rich_help_panel=GATE,
    help="Extra trials per task to confirm a suspected regression, once (0: no "
    "confirmation); optimize's trials per round of its gate are another setting.")]
FailOnRegressionOpt = Annotated[bool, Opt(
    envvar="PROMPTLOOP_FAIL_ON_REGRESSION", rich_help_panel=GATE,
    help=f"Exit {EXIT_REGRESSION} when a bucket regresses or the head breaks a prompt's source "
    f"file, {EXIT_INCONCLUSIVE} when no bucket regressed but some bucket's harm was not ruled "
    "out (inconclusive), for CI checks.")]
OutputOpt = Annotated[Path | None, Opt(
    "--output", "-o", envvar="PROMPTLOOP_REVIEW_OUTPUT", metavar="FILE",
    rich_help_panel=PUBLISH, help="Also write the comment Markdown here (when no prompt "
    "changed, a line saying so).")]
PostOpt = Annotated[bool, Opt(
    "--post", envvar="PROMPTLOOP_REVIEW_POST", rich_help_panel=PUBLISH,
    help="Comment on the PR with the gh CLI.")]
PrOpt = Annotated[int | None, Opt(
    "--pr", min=1, envvar="PROMPTLOOP_PR", rich_help_panel=PUBLISH,
    help="PR number for --post (default: the open PR of the head branch).")]


CONFIG_OPTIONS = ("base", "head", "agent_model", "judge_model", "base_url", "trust_head",
                  "no_sandbox",
                  "trials", "concurrency", "batch", "max_turns", "max_runs")
"""Options passed to ReviewConfig's field of the same name (tests/optimizer/cli checks each
is a field and that every other option is read by name)."""


def review(
    base: BaseRefOpt,
    head: HeadRefOpt = "HEAD",
    suite: AgentOpt = None,
    agent: AgentNameOpt = None,
    trust_head: TrustHeadOpt = False,
    no_sandbox: NoSandboxOpt = False,
    agent_model: AgentModelOpt = DEFAULT_AGENT_MODEL,
    judge_model: JudgeModelOpt = None,
    base_url: BaseUrlOpt = None,
    min_improvement: MinImprovementOpt = POLICY.min_improvement,
    regression_tolerance: RegressionToleranceOpt = POLICY.regression_tolerance,
    harm_sensitivity: HarmSensitivityOpt = SENSITIVITY,
    confirm_trials: ConfirmTrialsOpt = 2,
    fail_on_regression: FailOnRegressionOpt = False,
    trials: TrialsOpt = None,
    concurrency: ConcurrencyOpt = None,
    batch: BatchOpt = False,
    max_turns: MaxTurnsOpt = DEFAULT_MAX_TURNS,
    max_runs: MaxRunsOpt = 4,
    output: OutputOpt = None,
    post: PostOpt = False,
    pr: PrOpt = None,
    state_dir: StateOpt = None,
    events: EventsOpt = None,
    as_json: JsonOpt = False,
    every_bucket: AllOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Review a prompt change (any PR, human-written too): evaluate both refs and gate it.

    Reads the agent's prompts (promptloop.toml) at --base and --head from git (your checkout is
    never touched), runs the changed agent's capability and regression suites for both prompts
    (base-side trials come from the trial cache when that prompt was evaluated before), pairs
    the trials and applies the optimize gate's harm detection to every bucket (each task against
    its own baseline record; trials are added where a bucket's statement needs them), besides a
    fixed-sample family of sign-flip tests. Suspected regressions are confirmed with extra
    trials. Each bucket says "no harm", "harm not ruled out" or "regressed". The verdict is
    `regresses` (some bucket regressed), `inconclusive` (none regressed, but some bucket's harm
    was not ruled out), `improves` (some bucket improved and every bucket said no harm) or
    `neutral` (every bucket said no harm); `broken` when the head's prompt source fails the
    region guard optimize applies (a literal closed early, a new interpolation, a stray `$`
    in Dart, an edit outside the region): no trial runs for that agent. A PR comment
    (verdict, per-bucket table, prompt diff, newly failing trials with grader rationales,
    trials fixed) is written to
    <state>/review/<id>/comment.md; --post comments it with `gh pr comment`.

    Exit codes: 0 review completed whatever the verdict (also: no prompt changed), 1 usage or
    configuration error, 2 infrastructure failure (provider, every trial errored, gh failed to
    post), 3 with --fail-on-regression when a bucket regresses or the head is broken, 4 with
    --fail-on-regression when the review is inconclusive (harm not ruled out, none
    regressed)."""
    flags: dict[str, Any] = {  # every option by name (a test checks none is left out)
        "base": base, "head": head, "suite": suite, "agent": agent, "trust_head": trust_head,
        "no_sandbox": no_sandbox,
        "agent_model": agent_model, "judge_model": judge_model, "base_url": base_url,
        "min_improvement": min_improvement, "regression_tolerance": regression_tolerance,
        "harm_sensitivity": harm_sensitivity, "confirm_trials": confirm_trials,
        "fail_on_regression": fail_on_regression, "trials": trials, "concurrency": concurrency,
        "batch": batch, "max_turns": max_turns, "max_runs": max_runs, "output": output,
        "post": post, "pr": pr, "state_dir": state_dir, "events": events, "as_json": as_json,
        "every_bucket": every_bucket, "verbose": verbose,
    }

    def body() -> int:
        from promptloop.optimizer.workflows.review import review as run_review

        config = _config(flags)
        runs = RunLog()
        with listening(events, quiet=as_json, runs=runs) as emit:
            result = asyncio.run(ui.acknowledged(
                run_review(config, on_event=emit),
                "stopping: the runs so far stay saved... (Ctrl-C again forces it)"))
        data: dict[str, Any] = result.model_dump(mode="json")
        code = _publish(result, data, config.repo or Path.cwd(), flags)
        why = ""
        if fail_on_regression and code == 0:
            code = {"regresses": EXIT_REGRESSION, "broken": EXIT_REGRESSION,
                    "inconclusive": EXIT_INCONCLUSIVE}.get(result.decision or "", 0)
            if code:  # the envelope's error says why the exit is not 0, not only its number
                why = (f"the review's verdict is {result.decision!r} "
                       f"(--fail-on-regression exits {code})")
        data["exit_code"] = code
        if as_json:
            ui.print_json(data)
        else:
            _show(data, every_bucket, compare_commands(data, runs, state_dir), verbose)
        if why:  # on stderr after the verdict, as every failing command ends
            ui.error(why)
        return code

    code = guarded(body)
    if code:
        raise typer.Exit(code)


def _config(flags: dict[str, Any]) -> ReviewConfig:
    from promptloop.optimizer.gate.compare import GatePolicy
    from promptloop.optimizer.workflows.context import state_dir as resolve_state
    from promptloop.optimizer.workflows.review import ReviewConfig

    root = require_repo("review")
    from promptloop.optimizer.workflows.context import COMMIT_HINT, uncommitted

    if not uncommitted(root, "HEAD")[0]:  # not "unknown git ref 'HEAD'" for --base master
        raise ConfigError(f"this repository ({root}) has no commit yet: review compares the "
                          f"prompt at two commits (--base, --head). Commit first: {COMMIT_HINT}")
    _check_output(flags["output"])
    fields = {k: flags[k] for k in CONFIG_OPTIONS}
    named, which = split_suite(flags["agent"], flags["suite"])
    fields["suite"] = named or which  # review runs every suite of an agent
    fields["confirm_trials"] = flags["confirm_trials"]
    try:
        fields |= agent_models(fields["suite"], flags)
    except ConfigError:
        if fields["suite"] is not None:
            raise
        # every agent whose prompt changed, on its own table's model (they disagree)
        fields["models_by_agent"] = models_by_agent(flags)
    try:
        return ReviewConfig.model_validate(
            fields
            | {
                "policy": GatePolicy(
                    min_improvement=flags["min_improvement"],
                    regression_tolerance=flags["regression_tolerance"],
                    harm_sensitivity=flags["harm_sensitivity"].value,
                ),
                "repo": root,
                "state_dir": resolve_state(flags["state_dir"]),
            }
        )
    except ValidationError as err:
        raise ConfigError(option_errors(err)) from None


def _check_output(output: Path | None) -> None:
    """--output names a file promptloop can write, before any trial (a team's missing folder
    failed after every trial, exit 2, the verdict unprinted and nothing posted)."""
    if output is None:
        return
    parent = output.parent
    if output.is_dir():
        raise ConfigError(f"--output {output} is a folder: give the comment file's path")
    if not parent.is_dir():
        raise ConfigError(f"--output {output}: the folder {parent} does not exist (create it "
                          "first)")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"--output {output}: the folder {parent} is not writable")


def _publish(result: ReviewResult, data: dict[str, Any], root: Path, flags: dict[str, Any]) -> int:
    """--output and --post; returns the exit code so far (2 when posting failed)."""
    output, pr = flags["output"], flags["pr"]
    code = 0
    if result.comment_path and output is not None:
        output.write_text(Path(result.comment_path).read_text(encoding="utf-8"), "utf-8")
        data["output"] = str(output)
    elif output is not None and result.status == "nothing_to_review":
        # --output asked for the comment: a job that reads or uploads it finds one saying why
        # no trial ran (none is posted: --post has nothing to post)
        output.write_text(f"### promptloop review\n\n{result.message}.\n", "utf-8")
        data["output"] = str(output)
    if flags["post"] and result.comment_path:
        posted = _post(Path(result.comment_path), root, flags["head"], pr)
        data["post"] = {
            "posted": posted.posted,
            "message": posted.message,
            "command": posted.command,
            "pr": posted.pr,
        }
        if not posted.posted:  # asked to post and nothing was posted: never a green check
            # (gh missing or not logged in, no PR found, gh failing: the comment file is kept)
            ui.error(f"--post: nothing was posted (the review's verdict is "
                     f"{result.decision!r}): {posted.message} {posted.command}")
            code = EXIT_INFRA
    elif flags["post"]:
        data["post"] = {"posted": False, "message": "nothing to post", "command": "", "pr": pr}
    return code


def _post(path: Path, root: Path, head: str, pr: int | None) -> PostResult:
    from promptloop.optimizer.workflows.github import post_comment

    return post_comment(path, repo=root, head_ref=head, pr=pr)


def compare_commands(data: dict[str, Any], runs: RunLog, state: Path | None) -> dict[str, str]:
    """Per reviewed agent: the `promptloop report` command comparing its head runs with its
    base runs (confirmation trials included), trials paired."""
    out: dict[str, str] = {}
    for a in data.get("agents", []):
        head = [*a["head_runs"], *runs.runs("confirm head", suites=runs.suites_of(a["head_runs"]))]
        base = [*a["base_runs"], *runs.runs("confirm base", suites=runs.suites_of(a["base_runs"]))]
        out[a["agent"]] = compare_command(head, base, state)
    return out


def _show(data: dict[str, Any], every_bucket: bool, compare: dict[str, str],
          verbose: bool = False) -> None:
    """Per agent: the verdict in one plain sentence, the per-bucket table with its legend,
    the newly failing trials; the findings and the method only with --verbose."""
    if data["status"] == "nothing_to_review":
        ui.say(data["message"])
        for note in data["notes"]:
            ui.say(f"note: {note}")
        return
    ui.out.rule(f"review {data['base_ref']}..{data['head_ref']}: {data['decision']}")
    for note in data["notes"]:
        ui.say(f"note: {note}")
    for a in data["agents"]:
        if a["decision"] == "broken":
            _show_broken(a)
            continue
        ui.show_review_agent(a, every_row=every_bucket, verbose=verbose)
        if a["agent"] in compare:
            ui.command("compare: ", compare[a["agent"]])
    ui.out.print()
    ui.say(data["message"])
    ui.say(f"comment: {data['comment_path']}")
    if data.get("output"):
        ui.say(f"also written to: {data['output']}")
    post = data.get("post")
    if post:
        if post["posted"]:
            ui.say(post["message"])
        else:
            ui.warn(post["message"])
            if post["command"]:
                ui.command("", post["command"])
    if data["exit_code"] == EXIT_REGRESSION and data["decision"] == "broken":
        ui.info(f"exit {EXIT_REGRESSION}: the head breaks a prompt's source file "
                "(--fail-on-regression)")
    elif data["exit_code"] == EXIT_REGRESSION:
        ui.info(f"exit {EXIT_REGRESSION}: a bucket regresses (--fail-on-regression)")
    elif data["exit_code"] == EXIT_INCONCLUSIVE:
        ui.info(f"exit {EXIT_INCONCLUSIVE}: harm not ruled out in some bucket "
                "(--fail-on-regression)")


def _show_broken(a: dict[str, Any]) -> None:
    """An agent whose head fails the region guard: the plain sentence, then each target's
    file, line, region and reason; no table (no trial ran)."""
    from promptloop.optimizer.report.plain import review_headline

    breaks = a.get("head_breaks", [])
    where = [b["path"] + (f" line {b['line']}" if b.get("line") else "") for b in breaks]
    ui.out.print()
    ui.say(f"{a['agent']} broken: {review_headline('broken', [], [], [], [], where)}",
           style="bold red")
    for w, b in zip(where, breaks, strict=True):
        ui.say(f"- {w}, {b['region']}: {b['reason']}", indent=2)
