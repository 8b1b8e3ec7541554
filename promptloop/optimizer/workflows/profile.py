"""`promptloop profile`: grow the records the gate decides against, where it pays.

Every harm task is judged against its record: the lineage history of the prompt (earlier live
runs of its suites with the same agent model and the same prompt) plus the baseline. A record
too short or too wide to tell a flaky task from a broken one costs the gate fresh baseline
trials, or ends a task at its cap. This command spends a budget of baseline trials ahead of
time on the tasks whose records are least decided, ranked by `optimizer.gate.profile.plan`
(the uncertainty, in bits, of "can this task lose the drop?"), and saves them as an ordinary
run of the prompt, so the next optimize, nightly or review reads them as lineage history.
Trial indices start past every index the lineage already holds (no trial is served from the
cache twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from promptloop.agents.llm.types import ModelClient
from promptloop.optimizer.core.buckets import bucket_prefix
from promptloop.optimizer.core.events import EventSink, Phase, ignore
from promptloop.optimizer.core.names import AgentName
from promptloop.optimizer.core.prompt_target import PromptSource
from promptloop.optimizer.core.results import Provenance, RunResult, new_session
from promptloop.optimizer.core.suites import Suite
from promptloop.optimizer.gate.policy import GatePolicy
from promptloop.optimizer.gate.profile import ProfilePick, plan
from promptloop.optimizer.gate.tasks import TaskKey, TaskRecord
from promptloop.optimizer.lifecycle.lineage import trial_key
from promptloop.optimizer.report.store import ReportError, default_store_dir, list_runs, load_run
from promptloop.optimizer.run.cache import text_hash
from promptloop.optimizer.run.models import AgentJudgeModels, ModelSet
from promptloop.optimizer.run.runner import needs_judge
from promptloop.optimizer.run.settings import RunSettings
from promptloop.optimizer.workflows.gating import graded_trial
from promptloop.optimizer.workflows.paired import agent_suites, run_and_save
from promptloop.optimizer.workflows.sources import RepoSource


class ProfileConfig(AgentJudgeModels, RunSettings):
    agent: AgentName
    budget: int = Field(40, ge=0)
    """Extra baseline trials to spend, over every suite of the agent."""
    kinds: tuple[str, ...] = ("capability", "regression")
    ref: str = "HEAD"
    repo: Path | None = None
    policy: GatePolicy = Field(default_factory=GatePolicy)
    dry_run: bool = False
    """Rank and plan only: run nothing."""


class ProfileRow(BaseModel):
    suite: str
    bucket: str
    task_id: str
    record: int
    record_class: str
    value_bits: float
    trials: int


class ProfileResult(BaseModel):
    agent: str
    prompt_hash: str
    budget: int
    lineage_runs: int
    """Earlier runs of this prompt and agent model the records were read from."""
    rows: list[ProfileRow] = Field(default_factory=list)
    trials_run: int = 0
    run_names: list[str] = Field(default_factory=list)


@dataclass
class _Records:
    records: dict[TaskKey, TaskRecord] = field(default_factory=dict)
    next_index: dict[str, int] = field(default_factory=dict)
    runs: int = 0


def lineage_records(store_dir: Path, suites: list[Suite], prompt_hash: str, agent_model: str
                    ) -> _Records:
    """Every task's record over the lineage of (suite, prompt, agent model), each trial once
    (a trial the cache served again is the same trial: same task, index and start time), and
    the first unused trial index per task."""
    out = _Records()
    names = {s.name: s for s in suites}
    try:
        entries = list_runs(store_dir)
    except (OSError, ValueError, ReportError):
        entries = []
    seen: set[tuple[str, str, int, str]] = set()  # a cached copy counts once (lineage.py)
    for entry in entries:
        if (entry.suite_name not in names or entry.prompt_hash != prompt_hash
                or entry.agent_model != agent_model):
            continue
        try:
            run: RunResult = load_run(store_dir, entry.run_name)
        except (OSError, ValueError, ReportError):
            continue
        if run.provenance.mode == "replay":
            continue
        out.runs += 1
        prefix = bucket_prefix(run.suite_kind)
        for t in run.trials:
            out.next_index[t.task_id] = max(out.next_index.get(t.task_id, 0), t.trial_index + 1)
            if not t.counts:
                continue
            copy = (run.suite_name, *trial_key(t))
            if copy in seen:
                continue
            seen.add(copy)
            key = (prefix + run.task_buckets.get(t.task_id, t.bucket), t.task_id)
            rec = out.records.setdefault(key, TaskRecord(key, scored=False))
            rec.history.append((t.score, t.passed))
            rec.scored = rec.scored or graded_trial(t)
    for suite in suites:  # tasks never run have an empty record (worth a full bit)
        prefix = bucket_prefix(suite.config.kind)
        for task in suite.tasks:
            key = (prefix + task.bucket, task.id)
            out.records.setdefault(key, TaskRecord(key))
    return out


def _suite_of(suites: list[Suite], key: TaskKey) -> Suite:
    for suite in suites:
        prefix = bucket_prefix(suite.config.kind)
        if any(prefix + t.bucket == key[0] and t.id == key[1] for t in suite.tasks):
            return suite
    raise KeyError(key)


async def profile(config: ProfileConfig, emit: EventSink | None = None, *,
                  agent: ModelClient | None = None, models: ModelSet | None = None
                  ) -> ProfileResult:
    """Rank the agent's tasks by the value of a longer record and run the budget's trials.
    `models`: a caller's open clients (nightly: its metered set, so the spend counts toward
    the night's budget); else a set is opened and closed here."""
    emit = emit or ignore
    with RepoSource.find(config.ref, config.state_dir, config.repo) as source:
        suites = agent_suites(config.agent, config.kinds, source)
        target = source.prompt(config.agent)  # the agent's first prompt target, as declared
        prompt = target.text
        prov = Provenance(git_commit=source.sha, git_dirty=False, role="profile",
                          branch=None if config.ref == "HEAD" else config.ref,
                          session=new_session())
    digest = text_hash(prompt)
    store = default_store_dir(config.state_dir)
    found = lineage_records(store, suites, digest, config.agent_model)
    picks: list[ProfilePick] = plan(found.records, config.policy, config.budget)
    rows = [ProfileRow(suite=_suite_of(suites, p.key).name, bucket=p.key[0], task_id=p.key[1],
                       record=p.record, record_class=p.record_class,
                       value_bits=round(p.value, 3), trials=p.trials) for p in picks]
    result = ProfileResult(agent=config.agent, prompt_hash=digest, budget=config.budget,
                           lineage_runs=found.runs, rows=rows)
    emit(Phase(message=f"profile: {len(rows)} task(s) picked over {found.runs} lineage run(s)"))
    if config.dry_run or not picks:
        return result
    if models is not None:
        await _run_picks(config, suites, picks, found, prompt, models, emit, result,
                         target, prov)
        return result
    async with ModelSet(config.model_ids, agent=agent) as own:
        await _run_picks(config, suites, picks, found, prompt, own, emit, result,
                         target, prov)
    return result


async def _run_picks(config: ProfileConfig, suites: list[Suite], picks: list[ProfilePick],
                     found: _Records, prompt: str, models: ModelSet, emit: EventSink,
                     result: ProfileResult, target: PromptSource | None = None,
                     prov: Provenance | None = None) -> None:
    """Run each picked task's trials past its lineage's indices, one saved run per suite
    (`prov`: the commit read, role "profile")."""
    for suite in suites:
        mine = [p for p in picks if _suite_of(suites, p.key) is suite]
        if not mine:
            continue
        indices = {p.key[1]: list(range(found.next_index.get(p.key[1], 0),
                                        found.next_index.get(p.key[1], 0) + p.trials))
                   for p in mine}
        await models.preflight("agent", *(("judge",) if needs_judge(suite) else ()))
        options = config.run_options(models.ids.agent, prompt, "profile", indices,
                                     prompt_source=target)
        saved = await run_and_save(suite.select(task_ids=list(indices)), options, models,
                                   emit, prov)
        result.trials_run += sum(not t.cached for t in saved.run.trials)
        result.run_names.append(saved.run.run_name)


__all__ = ["ProfileConfig", "ProfileResult", "ProfileRow", "lineage_records", "profile"]
