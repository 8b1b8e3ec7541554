"""A state folder for the viewer's tests, screenshots and benchmark, from scripted runs only.

`build_state` runs one real night with the prompt-sensitive scripted models of the nightly
tests (no network, no real model): it writes baseline and candidate runs of both agents' suites
(the accepted PKM candidate fixes the `skip_trivial` trials, so a comparison has flipped
trials and a recoverable prompt diff), optimize sessions with their packages and PR bodies,
the ledger and the night's summary. Two hand-made runs (the report tests' helpers) add
markup where a model or a task author could put it: in a transcript, a task id, a bucket
name, a judge dimension and a run name. The lifecycle's files (health, a calibration, a
graduation) are added by lifecycle_builders.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from promptloop.agents.llm.types import Message
from promptloop.agents.transcript import Transcript
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.core.suites import load_suite
from promptloop.optimizer.git import provenance
from promptloop.optimizer.report.store import default_store_dir, list_runs, load_run, save_run
from promptloop.optimizer.run.models import ModelIds, ModelSet
from promptloop.optimizer.run.runner import RunOptions
from promptloop.optimizer.workflows.nightly.engine import run_nightly
from promptloop.optimizer.workflows.nightly.summary import NightSummary
from promptloop.optimizer.workflows.paired import run_and_save
from tests.optimizer.lifecycle.helpers import judge_score
from tests.optimizer.report.test_report import mk_run, rich_trial, sc, tr
from tests.optimizer.view.lifecycle_builders import add_lifecycle
from tests.optimizer.workflows.nightly_support import clients, make_repo, night_config
from tests.optimizer.workflows.test_optimize import _git

SCRIPT_IN_TRANSCRIPT = "<script>document.title='pwned-transcript'</script>"
SCRIPT_TASK = "<script>document.title='pwned-task'</script>"
SCRIPT_BUCKET = "<img src=x onerror=\"document.title='pwned-bucket'\">"
SCRIPT_RUN = "evil<svg onload=alert(1)>"
EVIL_BASE = f"{SCRIPT_RUN}-base"
EVIL_CAND = f"{SCRIPT_RUN}-cand"
EVIL_SUITE = "evil_suite"
CAND_RUN = "pkm_agent_capability-accepted"


@dataclass(frozen=True)
class ViewState:
    root: Path
    """The state folder."""
    repo: Path
    base: str
    """The PKM capability baseline run of the night."""
    cand: str
    """The accepted PKM prompt on the whole capability suite (skip_trivial fixed)."""


def _evil_transcript() -> Transcript:
    return Transcript(messages=[
        Message.system("You organise notes."),
        Message.user(f"Raw Input Content:\n{SCRIPT_IN_TRANSCRIPT} and </pre></details>"),
        Message.assistant(f"I saw {SCRIPT_IN_TRANSCRIPT}"),
    ])


def evil_runs() -> list[RunResult]:
    """Two runs of one suite whose task id, bucket, run name and transcript carry markup."""
    runs = []
    for name, status in ((EVIL_BASE, "failed"), (EVIL_CAND, "passed")):
        trials = [
            tr(SCRIPT_TASK, 0, status, bucket=SCRIPT_BUCKET, transcript=_evil_transcript(),
               scores=[sc("g", 1.0 if status == "passed" else 0.0),
                       judge_score({SCRIPT_BUCKET: 0.5, "groundedness": 0.8})]),
            rich_trial("sleep_note", 0, "passed", bucket="route_health"),
        ]
        run = mk_run(trials, name=name, model="scripted:pkm")
        runs.append(run.model_copy(update={"suite_name": EVIL_SUITE}))
    return runs


async def _accepted_full_run(state: ViewState, trials: int) -> None:
    """The accepted PKM prompt evaluated on the whole capability suite (the gate ran only the
    tasks it needed), saved as `CAND_RUN`."""
    summary = NightSummary.model_validate_json(
        next((state.root / "nightly").glob("*/summary.json")).read_text(encoding="utf-8"))
    branch = next(a.branch for a in summary.accepted if a.suite == "pkm_agent")
    prompt = _git(state.repo, "show", f"{branch}:prompts/pkm_agent.md")
    suite = load_suite(state.repo / "tasks" / "pkm_agent" / "capability")
    models = clients()
    options = RunOptions(agent_model="scripted:night-agent", trials=trials,
                         state_dir=state.root, prompt_text=prompt, run_name=CAND_RUN)
    ids = ModelIds(agent="scripted:night-agent", judge="scripted:judge")
    async with ModelSet(ids, agent=models["agent"], judge=models["judge"]) as model_set:
        await run_and_save(suite, options, model_set, None, provenance(state.repo))


def build_state(root: Path, *, trials: int = 2) -> ViewState:
    """Run a scripted night in a fresh repo under `root`, evaluate its accepted PKM prompt on
    the whole suite, then add the hand-made runs."""
    repo = make_repo(root / "repo")
    state = root / "state"
    config = night_config(repo, state, trials=trials, confirm_trials=1)
    asyncio.run(run_nightly(config, **clients()))
    store = default_store_dir(state)
    base = next(e.run_name for e in list_runs(store) if e.suite_name == "pkm_agent_capability")
    view = ViewState(state, repo, base, CAND_RUN)
    asyncio.run(_accepted_full_run(view, trials))
    for run in evil_runs():
        save_run(run, store)
    add_lifecycle(state, (EVIL_SUITE,))
    return view


def load(state: ViewState, name: str) -> RunResult:
    return load_run(default_store_dir(state.root), name)
