"""`promptloop doctor`: check providers, the embedded model, git and the suites."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import (
    AgentModelOpt,
    BaseUrlOpt,
    JsonOpt,
    JudgeModelOpt,
    StateOpt,
    declared_models,
    flag_given,
)
from promptloop.optimizer.cli.util import EXIT_INFRA, EXIT_USER, guarded
from promptloop.optimizer.workflows.context import DEFAULT_AGENT_MODEL
from promptloop.optimizer.workflows.doctor import DoctorReport, diagnose


def doctor(
    agent_model: AgentModelOpt = DEFAULT_AGENT_MODEL,
    judge_model: JudgeModelOpt = None,
    base_url: BaseUrlOpt = None,
    suite: Annotated[
        str | None,
        typer.Option(
            "--suite",
            envvar=["PROMPTLOOP_SUITE", "PROMPTLOOP_TASKS"],
            metavar="SUITE",
            help="Only these suites: an agent (all its suites), AGENT/SUITE, or a folder of "
            "suites (default: the suites your agents declare in promptloop.toml; outside a "
            "repository, promptloop's bundled ones).",
        ),
    ] = None,
    check_local: Annotated[
        bool,
        typer.Option(
            "--check-local",
            envvar="PROMPTLOOP_CHECK_LOCAL",
            help="Start the embedded model server and time one short completion.",
        ),
    ] = False,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Clean up after killed runs first: remove their candidate worktrees and "
            "unfinished promptloop/* branches, close their ledger records as abandoned.",
        ),
    ] = False,
    state_dir: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check what this machine and checkout can run, and say what to do about the rest.

    Shows which providers are configured (whether ANTHROPIC_API_KEY / OPENAI_API_KEY are set;
    their values are never printed), whether the embedded model's weights and runtime are
    installed, the git state (branch, dirty, promptloop/* branches, stray worktrees), how an
    external proposer (--proposer-cmd) is isolated here (bwrap, unshare or none) and, for
    every suite, its tasks, buckets, trials and whether it needs a judge model. Exit 0 when
    everything needed to run with --agent-model (default: the model each agent's table in
    promptloop.toml declares, else the offline local:smollm2) is present, 2 when all that is
    missing is a server that does not answer at --base-url, 1 otherwise. With
    --fix, what was cleaned is listed (and under "cleaned" in --json); accepted and kept
    branches are never touched."""

    def body() -> None:
        tasks = _suite_folder(suite) if suite is not None else None
        models = [agent_model] if flag_given("agent_model", agent_model, DEFAULT_AGENT_MODEL) \
            else declared_models() or [agent_model]
        report = diagnose(
            agent_model=models[0],
            more_models=models[1:],
            judge_model=judge_model,
            base_url=base_url,
            tasks_dir=tasks,
            check_local_server=check_local,
            state_dir=state_dir,
            fix=fix,
        )
        if as_json:
            ui.print_json(report.model_dump(mode="json") | {"ok": report.ok})
        else:
            _show(report)
        if not report.ok:  # the envelope's error names what blocks a run
            said = [f"{p.what}: {p.fix}" for p in report.problems]
            if as_json:  # stderr still says it, one `Error:` line each (the report did above)
                for line in said:
                    ui.error(line)
            else:
                ui.ERRORS.extend(said)
            # a server that does not answer is infrastructure (2), as eval says of it
            infra = all(p.infra for p in report.problems)
            raise typer.Exit(EXIT_INFRA if infra else EXIT_USER)

    guarded(body)


def _suite_folder(suite: str) -> Path | list[tuple[Path, str | None]]:
    """What `--suite` names: a folder of suites as given, a JSONL suite file, an agent (every
    suite it declares, folders and JSONL files alike) or one suite (AGENT/SUITE)."""
    from promptloop.optimizer.workflows.context import ConfigError, agent_names, is_jsonl_suite
    from promptloop.optimizer.workflows.sources import project_suite, project_suites

    folder = Path(suite)
    if folder.is_dir():
        return folder
    if folder.is_file() and is_jsonl_suite(folder):
        return [(folder, None)]
    agent, sep, kind = suite.partition("/")
    if agent not in agent_names():
        raise ConfigError(f"--suite {suite}: no such folder or JSONL file and no agent "
                          f"'{agent}'; agents: {', '.join(agent_names()) or 'none'}")
    if sep:
        return [(project_suite(agent, kind), agent)]
    declared, _ = project_suites(agents=[agent])
    return [(path, who) for path, who in declared]


def _yes(flag: bool | None) -> str:
    return "yes" if flag else "no"


def _show(report: DoctorReport) -> None:
    ui.table(
        "providers",
        ["provider", "key", "base URL", "SDK"],
        [
            [
                p.provider,
                f"{p.key_var} {'set' if p.key_set else 'not set'}",
                p.base_url or "-",
                "installed" if p.sdk_installed else "missing",
            ]
            for p in report.providers
        ],
    )
    local = report.local
    weights = Path(local.model_path) if local.model_path else None
    rows = [  # the path as file and folder: one word of 90 characters fits no 80 columns
        ["weights", weights.name if weights else f"missing: {local.model_error}"],
        *([["in", str(weights.parent)]] if weights else []),
        ["size", f"{local.model_bytes / 1e6:.1f} MB" if local.model_bytes else "-"],
        ["xllamacpp", local.runtime_version or f"missing: {local.runtime_error}"],
    ]
    if local.check is not None:
        c = local.check
        rows.append(
            [
                "server check",
                f"started in {c.start_s:.2f}s, {c.output_tokens} tokens in "
                f"{c.completion_s:.2f}s: {c.reply!r}"
                if c.ok
                else f"failed: {c.error}",
            ]
        )
    ui.table("embedded model (local:smollm2)", ["item", "status"], rows)
    git = report.git
    ui.table(
        "git",
        ["item", "value"],
        [["error", git.error]]
        if git.error
        else [
            ["repository", git.repo_root],
            ["branch", git.branch or f"(detached at {(git.commit or '')[:12]})"],
            ["dirty", _yes(git.dirty) + (f" ({git.untracked} untracked file"
                                         f"{'s' if git.untracked != 1 else ''})"
                                         if git.untracked else "")],
            ["promptloop branches",
             ", ".join(f"{b.name} ({b.state})" for b in git.branches) or "none"],
            ["stray worktrees", ", ".join(w.path for w in git.stray_worktrees) or "none"],
            ["open iterations",
             ", ".join(f"{o.id} (pid {o.pid}, {'dead' if o.dead else 'running'})"
                       for o in git.open_iterations) or "none"],
        ],
    )
    ui.table("external proposer (--proposer-cmd)", ["item", "value"],
             [["isolation", report.proposer_isolation],
              ["what it isolates", report.proposer_isolation_note]])
    ui.table("agent trials (command, worker)", ["item", "value"],
             [["sandbox", report.trial_sandbox], ["what it isolates", report.trial_sandbox_note]])
    if report.cleaned is not None:
        lines = report.cleaned.lines
        ui.table("cleaned (--fix)", ["what"], [[line] for line in lines] or [["nothing to clean"]])
    ui.table(
        f"suites (agent model {report.agent_model})",
        ["suite", "tasks", "buckets", "trials", "judge model", "loads"],
        [
            [
                s.name or s.path,
                s.tasks,
                s.buckets,
                s.trials,
                f"{s.judge_model} for {', '.join(s.judge_graders)}" if s.judge_model else "-",
                "yes" if s.loads else f"NO: {s.error}",
            ]
            for s in report.suites
        ],
    )
    for w in report.warnings:
        ui.warn(f"{w.what}\n  fix: {w.fix}")
    if report.ok:
        ui.out.print(
            f"ready: everything a run with {report.agent_model} needs is here", markup=False
        )
        return
    for p in report.problems:
        ui.error(f"{p.what}\n  fix: {p.fix}")

