"""`promptloop health`: pass rates, trends, mature tasks and buckets, stragglers, flaky and
ambiguous tasks of one suite over its prompt lineage."""

from __future__ import annotations

from typing import Annotated

import typer

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import (
    AgentOpt,
    JsonOpt,
    StateOpt,
    need_agent,
    stored_suite_name,
)
from promptloop.optimizer.cli.util import guarded


def health(
    suite: Annotated[str | None, typer.Option(
        "--suite", envvar="PROMPTLOOP_SUITE", metavar="SUITE",
        help="An agent (its capability suite), one of its suites (card_agent/regression), its "
        "folder, or a stored suite name such as card_agent_capability.")] = None,
    agent: AgentOpt = None,
    kind: Annotated[str, typer.Option(
        "--kind", hidden=True, help="Old spelling: --suite AGENT/SUITE.")
    ] = "capability",
    window: Annotated[int, typer.Option(
        "--window", min=1, help="Newest runs of the lineage to use.")] = 10,
    ref: Annotated[str, typer.Option(
        "--ref", metavar="REF", help="Git ref whose prompt history defines the lineage.")] = "HEAD",
    model: Annotated[str | None, typer.Option(
        "--agent-model", metavar="MODEL",
        help="Agent model of the lineage (default: the model of the newest run).")] = None,
    any_prompt: Annotated[bool, typer.Option(
        "--any-prompt", help="Every run of the suite, whatever prompt it ran.")] = False,
    out: StateOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show and save the health of a suite over the recent runs of its prompt lineage.

    The lineage is the suite's saved runs with one agent model whose prompt is a version of
    prompts/<agent>.md in the history of --ref (see docs/lifecycle.md). Per task and bucket:
    pass rate, trend per run with a 95% interval, mature (>= 95%), straggler (0% over >= 10
    trials), buckets ready to graduate (5 consecutive mature runs), saturated suite (>= 90% of
    tasks mature), and flaky or ambiguous tasks with the trials that disagree. Saved as
    <state>/health/<suite>.json (format promptloop.health/1).

    Exit codes: 0 ok, 1 unknown suite or no runs in the lineage, 2 unreadable state folder."""
    from promptloop.optimizer.lifecycle.errors import UnknownNameError
    from promptloop.optimizer.lifecycle.health_io import (
        ambiguous_table,
        bucket_table,
        build_health,
        headline,
        save_health,
    )
    from promptloop.optimizer.lifecycle.lineage import stored_suite_names
    from promptloop.optimizer.report.store import default_store_dir
    from promptloop.optimizer.workflows.context import repo_root, state_dir

    need_agent(agent, suite)
    chosen = suite or agent or ""
    if "/" not in chosen and kind != "capability":  # the old --kind
        chosen = f"{chosen}/{kind}"

    def body() -> None:
        state = state_dir(out, write=False)  # read first; saving the health creates it
        name = stored_suite_name(chosen, kind)
        try:
            result = build_health(state, name, repo=repo_root(), ref=ref, agent_model=model,
                                  window=window, any_prompt=any_prompt)
        except UnknownNameError as err:
            from promptloop.optimizer.lifecycle.errors import LifecycleError
            from promptloop.optimizer.workflows.context import agent_names

            store = default_store_dir(state)
            if chosen.partition("/")[0] in agent_names():
                raise LifecycleError(f"no saved runs of {name} in {store}; run `promptloop eval "
                                     f"--suite {chosen}` first") from None
            known = [*stored_suite_names(store), *agent_names()]
            raise UnknownNameError("suite", err.name, known) from None
        path = save_health(state, result)
        if as_json:
            ui.print_json(result.model_dump(mode="json"))
            return
        for line in headline(result):
            ui.say(line)  # wrapped at spaces: the first line runs to 190 characters
        ui.show_table(bucket_table(result.buckets), f"Buckets of {result.suite_name}")
        s = result.summary
        if s.graduation_ready:
            ui.say("Ready to graduate: " + ", ".join(s.graduation_ready))
        if s.stragglers:
            ui.say("Stragglers: " + ", ".join(s.stragglers))
        if result.ambiguous:
            ui.show_table(ambiguous_table(result.ambiguous), "Ambiguous or flaky tasks")
        ui.table("Task records (what the gate judges each task against)",
                 ["Task", "Bucket", "Record", "Class"],
                 [[t.task_id, t.bucket, t.trials, t.record_class] for t in result.tasks])
        ui.info(f"Saved {path}")

    guarded(body)
