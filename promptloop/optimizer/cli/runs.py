"""`promptloop runs [--suite SUITE] [--json]`: the saved runs, newest first, from the run index.

The table is plain aligned text (the same in a terminal and a CI log): identifiers are never
split; when the terminal is too narrow, whole columns are left out, least useful first, and
each run's name goes on a line of its own, so model, prompt and commit always show.
"""

from __future__ import annotations

import shutil
import sys
from typing import Annotated

import typer

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import JsonOpt, StateOpt
from promptloop.optimizer.cli.util import guarded
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.store import RunIndexEntry, default_store_dir, list_runs
from promptloop.optimizer.workflows.context import ConfigError, did_you_mean

COLUMNS = ("run", "suite", "kind", "role", "agent", "model", "prompt", "commit", "task pass",
           "trial pass", "trials", "errored", "started (UTC)")
RIGHT = {"task pass", "trial pass", "pass", "trials", "errored"}
KEEP = ("run", "role", "model", "prompt", "commit", "trial pass", "started (UTC)")
"""Columns never left out: which run, in which role, which model and prompt at which commit,
its rate and when it started."""
DROP_ORDER = ("agent", "kind", "task pass", "trials", "suite", "errored")
"""Columns left out, in this order, until the table fits the terminal (the suite and agent
are in the run's name)."""
NARROW = ("role", "model", "prompt", "commit", "pass", "started")
"""Under each run's name when one line per run does not fit: `pass` is the trial pass rate
and `started` the UTC start without its year."""


def select_runs(entries: list[RunIndexEntry], suite: str | None,
                agent: str | None = None) -> list[RunIndexEntry]:
    """Runs of `agent` (every suite of it) and of `suite` (a stored suite name such as
    `pkm_agent_capability`, or an agent name such as `pkm_agent` for all its suites), newest
    first. An unknown name is a ConfigError; an agent promptloop.toml declares that has no
    run yet has none."""
    if agent:
        kept = [e for e in entries if e.agent_name == agent]
        if not kept:
            from promptloop.optimizer.workflows.context import active_project

            declared = active_project().agent_names()
            if agent not in declared:
                known = sorted({e.agent_name for e in entries} | set(declared))
                raise ConfigError(f"unknown agent '{agent}'.{did_you_mean(agent, known)} "
                                  f"Agents: {', '.join(known) or 'none'}")
        entries = kept
    if suite:
        kept = [e for e in entries if suite in (e.suite_name, e.agent_name)]
        if not kept and agent:
            return []
        if not kept:
            known = sorted({e.suite_name for e in entries} | {e.agent_name for e in entries})
            listed = ", ".join(known) if known else "none yet"
            raise ConfigError(f"no saved run of suite '{suite}'.{did_you_mean(suite, known)} "
                              f"Suites and agents with runs: {listed}")
        entries = kept
    order = sorted(enumerate(entries), key=lambda x: (x[1].started_at, x[0]), reverse=True)
    return [e for _, e in order]


def row(e: RunIndexEntry) -> dict[str, str]:
    values = {
        "run": e.run_name, "suite": e.suite_name, "kind": e.suite_kind, "agent": e.agent_name,
        "role": e.role or "-", "model": e.agent_model or "?",
        "prompt": (e.prompt_hash or "?")[:7], "commit": (e.candidate_commit or e.git_commit
                                                         or "?")[:7],
        # the rates eval prints first: errored trials count as failed (a run whose trials
        # mostly errored must not read 100%); the errored-excluded ones are in `report`
        "task pass": fmt.pct(e.listed_task_pass_rate),
        "trial pass": fmt.pct(e.listed_trial_pass_rate),
        "trials": str(e.num_trials),
        "errored": str(e.errored_trials), "started (UTC)": f"{e.started_at:%Y-%m-%d %H:%M}",
    }
    # the narrow layout's one rate column keeps the errored count the dropped column had
    short = values["trial pass"] + (f" ({e.errored_trials} err)" if e.errored_trials else "")
    return values | {"pass": short, "started": f"{e.started_at:%m-%d %H:%M}"}


def render_table(entries: list[RunIndexEntry], width: int) -> str:
    """Aligned columns separated by two spaces, narrowed to `width` by leaving columns out
    (`DROP_ORDER`). When one line per run cannot hold the `KEEP` columns, each run's name gets
    a line of its own above the `NARROW` columns, indented (names are never split)."""
    rows = [row(e) for e in entries]
    names = [*COLUMNS, *NARROW]
    widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in names}

    def size(cols: list[str]) -> int:
        return sum(widths[c] for c in cols) + 2 * (len(cols) - 1)

    def line(values: dict[str, str], cols: list[str], indent: str = "") -> str:
        cells = [values[c].rjust(widths[c]) if c in RIGHT else values[c].ljust(widths[c])
                 for c in cols]
        return (indent + "  ".join(cells)).rstrip()

    cols = list(COLUMNS)
    for victim in DROP_ORDER:
        if size(cols) <= width:
            break
        cols.remove(victim)
    if size(cols) <= width:
        return "\n".join([line({c: c for c in cols}, cols),
                          *(line(r, cols) for r in rows)]) + "\n"
    narrow = list(NARROW)
    out = ["run", line({c: c for c in narrow}, narrow, "  ")]
    for r in rows:
        out += [r["run"], line(r, narrow, "  ")]
    return "\n".join(out) + "\n"


def stored_name(agent: str | None, suite: str | None) -> str | None:
    """The stored name of `--suite` as the agent's promptloop.toml declares it (AGENT/SUITE,
    `--agent A --suite SUITE`, a suite folder or .jsonl file); else `suite` as typed."""
    from promptloop.optimizer.workflows.context import declared_suite_name, split_suite

    if suite is None:
        return None
    named, which = split_suite(agent, suite)
    if named is None or which is None:
        return named if named is not None and agent is None else suite
    try:
        return declared_suite_name(named, which)
    except ConfigError:
        return suite  # not one of its suites in this checkout: a stored name


def runs(
    suite: Annotated[
        str | None,
        typer.Option("--suite", envvar="PROMPTLOOP_SUITE", metavar="SUITE",
                     help="Only runs of this suite: a stored name (e.g. "
                     "pkm_agent_capability), one of an agent's suites (pkm_agent/quickstart), "
                     "a suite folder or .jsonl file, or an agent (all its suites)."),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", envvar="PROMPTLOOP_AGENT", metavar="AGENT",
                     help="Only runs of this agent's suites ([agents.<name>] in "
                     "promptloop.toml)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Show only the newest N runs.")
    ] = None,
    as_json: JsonOpt = False,
    state_dir: StateOpt = None,
) -> None:
    """List saved runs, newest first: suite, agent, model, prompt hash, commit, pass rates."""
    from promptloop.optimizer.workflows.context import state_dir as resolve_state

    def body() -> None:
        store = default_store_dir(resolve_state(state_dir, write=False))
        every = list_runs(store)
        entries = select_runs(every, stored_name(agent, suite), agent)[:limit]
        if as_json:
            ui.print_json([e.model_dump(mode="json") for e in entries])
        elif not entries:
            who = agent or "AGENT"
            whose = f" of {agent or suite}" if (agent or suite) and every else ""
            others = f" ({len(every)} run(s) of others)" if whose else ""
            ui.info(f"No saved runs{whose} in {store}{others}; `promptloop eval --agent "
                    f"{who}` saves one.")
        else:
            width = shutil.get_terminal_size((200, 24)).columns
            sys.stdout.write(render_table(entries, width))

    guarded(body)
