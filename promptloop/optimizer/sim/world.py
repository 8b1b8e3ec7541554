"""Calibration world v2 (issue 18, deliver 7): a seeded simulated agent behind the real gate.

Pure (no I/O; every draw from `random.Random`). A world holds an agent's suites shaped like
ours (card: 49 capability tasks in 21 buckets, PKM: 44 in 18, each plus 4 regression buckets
of 2), each task's pass probability p (45% pass ~U(0.98, 1), 25% fail ~U(0, 0.02), 30% flaky
~Beta(2, 2)), judge-scored buckets (a third of the tasks), the cached baseline (2 trials per
task), 10 history runs, and the candidates of `add_candidate`. A trial's latent is
z = sqrt(0.3) S + sqrt(0.7) e (S per run and bucket); with q = inv_Phi(p) in [-3, 3], a code
task passes iff z < q, a judge score is clip(0.6 + 0.1 (q - z)) passing at 0.6. Outcomes flip
with probability `noise`, 3% of trials error, and `run` uses p +- 0.02 (drift). The target is
chosen from the baseline as nightly's `rank_buckets` would. `World.run` is a RunFn
(`optimizer.workflows.paired`), so `optimizer.workflows.gating.run_gate` drives it unchanged.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from statistics import NormalDist

from promptloop.agents.transcript import Transcript
from promptloop.graders.base import Score
from promptloop.optimizer.core.buckets import bucket_prefix
from promptloop.optimizer.core.results import Provenance, RunResult, TrialResult
from promptloop.optimizer.core.suite_models import SuiteConfig, TaskSpec
from promptloop.optimizer.core.suites import LoadedTask, Suite
from promptloop.optimizer.gate.sequential import record_rates

SCENARIOS: tuple[str, ...] = ("good-all", "good-partial", "null", "broad", "narrow-1",
                              "narrow-3", "half-break", "score-drop", "overfit", "flaky-target")
PROPOSALS: tuple[str, ...] = ("half-fix",)
"""Candidate effects used only by the candidates benchmark (a proposer's partial patch:
half of the failing target tasks fixed)."""
AGENTS: tuple[str, ...] = ("card", "pkm")
TARGET_SIZES = (2, 3, 10)
THR = 0.6
JUDGE_SD = 0.1
SHARED = 0.3
ERROR_RATE = 0.03
DRIFT = 0.02
FIXED_P = 0.98
HISTORY_RUNS = 10
BASE_TRIALS = 2
MAX_REDRAWS = 1000
BASE_PROMPT = "world base prompt"
_Q_MAX = 3.0
_P_LO, _P_HI = NormalDist().cdf(-_Q_MAX), NormalDist().cdf(_Q_MAX)
_INV = NormalDist().inv_cdf
_SQ_S, _SQ_E = math.sqrt(SHARED), math.sqrt(1 - SHARED)
_T0 = datetime(2026, 3, 14, 9, 30)
_ROOT = Path("/nonexistent/promptloop-world")
_FACT = "2026/03/14.md#ts_1"
_INFRA = "world: simulated infrastructure error"


HeldoutOf = Callable[[Sequence[str], dict[str, float]], frozenset[str]]
"""(target task ids, task id -> pass rate on its record) -> the held-out task ids."""


class InfeasibleScenario(ValueError):
    """The world lacks what the scenario needs (e.g. no judge-scored non-target bucket)."""


@dataclass
class Effect:
    """What one candidate prompt does to one task."""

    p: float
    """Pass probability under the candidate (before the drift)."""
    shift: float = 0.0
    """Added to a judge score before the noise (score-drop: -0.25)."""
    broken: bool = False
    fixed: bool = False


@dataclass
class TaskTruth:
    suite_kind: str
    kind: str  # "pass", "fail" or "flaky"
    judge: bool
    p: float
    """Base pass probability (the cached baseline and the history; `run` adds the drift)."""
    target: bool = False
    heldout: bool = False
    effects: dict[str, Effect] = field(default_factory=dict)
    """Candidate prompt text -> its effect on this task."""

    @property
    def failing(self) -> bool:
        return self.kind != "pass"


def capability_layout(agent: str, target_size: int) -> list[int]:
    """Bucket sizes of the agent's capability suite for a target of `target_size` tasks."""
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")
    if target_size not in TARGET_SIZES:
        raise ValueError(f"target size must be one of {TARGET_SIZES}, got {target_size}")
    if target_size == 10:
        # card: 49 tasks in 21 buckets (10 + 19 x 2 + 1); pkm: 44 in 18 (10 + 17 x 2)
        return [10] + [2] * (19 if agent == "card" else 17) + ([1] if agent == "card" else [])
    return [2] * 14 + [3] * 7 if agent == "card" else [2] * 10 + [3] * 8


def _q(p: float) -> float:
    return -_Q_MAX if p <= _P_LO else _Q_MAX if p >= _P_HI else _INV(p)


def _clip(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


Plan = dict[str, tuple[float, bool, float]]
"""Task id -> (q, judge-scored, score shift): what a run draws from."""


def _trial(rng: random.Random, shock: float, plan: tuple[float, bool, float], noise: float,
           ) -> tuple[str, float]:
    """(status, score) of one trial; always three draws, so streams stay aligned."""
    q, judge, shift = plan
    errored = rng.random() < ERROR_RATE
    z = _SQ_S * shock + _SQ_E * rng.gauss(0.0, 1.0)
    flip = rng.random() < noise
    if errored:
        return "errored", 0.0
    if judge:
        score = _clip(THR + JUDGE_SD * (q - z))
        if shift:
            score = _clip(score + shift)
        if flip:
            score = _clip(2 * THR - score)
        return ("passed" if score >= THR else "failed"), score
    passed = (z < q) != flip
    return ("passed", 1.0) if passed else ("failed", 0.0)


def _score(judge: bool, value: float) -> Score:
    return Score.model_construct(grader="world_judge" if judge else "world_code", value=value,
                                 passed=value >= THR, assertions=[], rationale="", metadata={})


_SCORES = {(j, v): _score(j, v) for j in (True, False) for v in (0.0, 1.0)}
_TRIAL = TrialResult.model_construct(
    task_id="", bucket="", trial_index=0, status="passed", started_at=_T0, ended_at=_T0,
    failure_reason=None, infra_error=None, transcript=Transcript(), outcome={}, scores=[],
    cached=False, seed=None)
"""Every trial is a shallow copy of this (model_construct with defaults is slow)."""


def _trial_result(task: LoadedTask, index: int, status: str, score: float, judge: bool,
                  cached: bool, at: datetime) -> TrialResult:
    if status == "errored":
        scores: list[Score] = []
    elif not judge or score in (0.0, 1.0):
        scores = [_SCORES[(judge, score)]]
    else:
        scores = [_score(True, score)]
    return _TRIAL.model_copy(update={
        "task_id": task.id, "bucket": task.bucket, "trial_index": index, "status": status,
        "started_at": at, "ended_at": at, "scores": scores, "cached": cached, "outcome": {},
        "infra_error": _INFRA if status == "errored" else None})


def draw_run(rng: random.Random, suite: Suite, plan: Plan, indices: dict[str, list[int]],
             noise: float, name: str, at: datetime, cached: bool = False) -> RunResult:
    """One run (one shock per bucket) of the tasks of `suite` named in `indices`."""
    shocks: dict[str, float] = {}
    trials: list[TrialResult] = []
    counts: dict[str, int] = {}
    for task in suite.tasks:
        wanted = indices.get(task.id)
        if not wanted:
            continue
        shock = shocks.get(task.bucket)
        if shock is None:
            shock = shocks[task.bucket] = rng.gauss(0.0, 1.0)
        tp = plan[task.id]
        for i in wanted:
            status, score = _trial(rng, shock, tp, noise)
            trials.append(_trial_result(task, i, status, score, tp[1], cached, at))
        counts[task.id] = len(wanted)
    return RunResult.model_construct(
        run_name=name, suite_name=suite.name, suite_kind=suite.config.kind,
        agent_name=suite.agent_name, suite_root=str(suite.root), task_ids=list(counts),
        task_buckets={t.id: t.bucket for t in suite.tasks if t.id in counts},
        trials_per_task=counts, started_at=at, ended_at=at, trials=trials, version=1,
        task_info={}, task_pass_threshold=1.0, require_reference_solution=False,
        provenance=Provenance(), concurrency=None)


@functools.lru_cache(maxsize=4096)
def _task(agent: str, kind: str, bucket: str, k: int, grader: str) -> LoadedTask:
    tid = f"{bucket}-t{k}"
    spec = TaskSpec.model_validate({
        "id": tid, "description": f"synthetic task {k} of bucket {bucket}",
        "metadata": {"failure_bucket": bucket}, "input": {"fact_id": _FACT},
        "graders": [{"name": grader}], "trials_per_run": BASE_TRIALS})
    return LoadedTask(spec, _ROOT / agent / kind / tid, None, None, tid)


def _suite(agent: str, kind: str, buckets: list[tuple[str, int]], judged: set[str]) -> Suite:
    config = SuiteConfig.model_validate(
        {"name": f"world-{agent}-{kind}", "agent_name": f"{agent}_agent", "kind": kind})
    tasks = tuple(_task(agent, kind, b, k, "world_judge" if b in judged else "world_code")
                  for b, size in buckets for k in range(1, size + 1))
    return Suite(_ROOT / agent / kind, config, tasks, f"world-{agent}-{kind}")


def _draw_kind(rng: random.Random) -> tuple[str, float]:
    u = rng.random()
    if u < 0.45:
        return "pass", rng.uniform(0.98, 1.0)
    if u < 0.70:
        return "fail", rng.uniform(0.0, 0.02)
    return "flaky", rng.betavariate(2.0, 2.0)


def _draw_tasks(rng: random.Random, agent: str, target_size: int
                ) -> tuple[list[Suite], dict[tuple[str, str], TaskTruth]]:
    """The suites (capability, regression) and every task's type, p and grading."""
    sizes = capability_layout(agent, target_size)
    rng.shuffle(sizes)
    layouts = {"capability": [(f"b{n + 1:02d}", s) for n, s in enumerate(sizes)],
               "regression": [(f"r{n + 1:02d}", 2) for n in range(4)]}
    every = [(b, s) for bs in layouts.values() for b, s in bs]
    total, judged, chosen = sum(s for _, s in every), 0, set()
    for b, s in rng.sample(every, len(every)):
        if 3 * judged >= total:
            break
        chosen.add(b)
        judged += s
    suites, truth = [], {}
    for kind, bs in layouts.items():
        for b, s in bs:
            for k in range(1, s + 1):
                t_kind, p = _draw_kind(rng)
                truth[(bucket_prefix(kind) + b, f"{b}-t{k}")] = TaskTruth(
                    kind, t_kind, b in chosen, p)
        suites.append(_suite(agent, kind, bs, chosen))
    return suites, truth


def choose_target(run: RunResult, sizes: dict[str, int], target_size: int) -> str | None:
    """Nightly's choice among capability buckets of `target_size` tasks: most failing counted
    trials, then lowest mean score, then name; None when none of them has a failing trial."""
    stats: dict[str, list[float]] = {}
    for t in run.trials:
        if t.counts:
            s = stats.setdefault(t.bucket, [0, 0, 0.0])
            s[0] += t.status in ("failed", "timedOut")
            s[1] += 1
            s[2] += t.score
    ranked = [(-s[0], s[2] / s[1], b) for b, s in stats.items()
              if s[0] and sizes.get(b) == target_size]
    return min(ranked)[2] if ranked else None


def _plan(truth: dict[tuple[str, str], TaskTruth], p_of: Callable[[TaskTruth], float],
          shift_of: Callable[[TaskTruth], float] = lambda t: 0.0) -> Plan:
    return {tid: (_q(p_of(t)), t.judge, shift_of(t)) for (_, tid), t in truth.items()}


def _all_indices(suite: Suite, n: int, start: int = 0) -> dict[str, list[int]]:
    return {t.id: list(range(start, start + n)) for t in suite.tasks}


@dataclass
class World:
    suites: list[Suite]
    target: str
    baseline: list[RunResult]
    history: list[RunResult]
    base_prompt: str
    heldout: frozenset[str]
    truth: dict[tuple[str, str], TaskTruth]
    noise: float
    drift: float
    seed: str
    calls: int = 0
    scenarios: dict[str, str] = field(default_factory=dict)
    """Candidate prompt text -> its scenario."""
    flaky_base: bool = False
    """Built for flaky-target: the target's failing tasks are flaky at p=0.5."""
    _plans: dict[str, Plan] = field(default_factory=dict, repr=False)
    _seen: set[tuple[str, str, int]] = field(default_factory=set, repr=False)
    _base_trials: dict[tuple[str, int], TrialResult] = field(default_factory=dict, repr=False)
    """Base-prompt trials run through `run` (served again, cached, to a later gate)."""
    _rng: random.Random = field(init=False, repr=False)
    _serial: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(f"{self.seed}:runs")
        self._plans[self.base_prompt] = _plan(self.truth, lambda t: _clip(t.p + self.drift))
        self._seen.update((self.base_prompt, t.task_id, t.trial_index)
                          for r in self.baseline for t in r.trials)

    def tasks_of(self, bucket: str) -> list[tuple[str, TaskTruth]]:
        return [(tid, t) for (b, tid), t in self.truth.items() if b == bucket]

    def add_candidate(self, prompt: str, scenario: str) -> None:
        """Register `prompt` as a candidate with the effect of `scenario` (see SCENARIOS)."""
        if scenario not in SCENARIOS + PROPOSALS:
            raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
        if prompt in self._plans:
            raise ValueError(f"prompt {prompt[:40]!r} is already registered")
        if scenario == "flaky-target" and not self.flaky_base:
            raise InfeasibleScenario("flaky-target needs a world built with that scenario")
        rng = random.Random(f"{self.seed}:{prompt}:{scenario}")
        effects = {key: Effect(t.p) for key, t in self.truth.items()}
        fixed = _apply(scenario, self, effects, rng)
        for key, e in effects.items():
            e.fixed = key in fixed
            e.broken = not e.fixed and (e.p < self.truth[key].p or e.shift < 0)
            self.truth[key].effects[prompt] = e
        self.scenarios[prompt] = scenario
        self._plans[prompt] = _plan(self.truth, lambda t: _clip(t.effects[prompt].p + self.drift),
                                    lambda t: t.effects[prompt].shift)

    async def run(self, suite: Suite, prompt: str, label: str,
                  indices: dict[str, list[int]] | None) -> RunResult:
        """RunFn: fresh trials of `suite` under `prompt` (None: every task at 0..1). A trial
        of the base prompt asked again (a second gate of the same session, on the same
        baseline) is served as the trial cache serves it: the same trial, `cached`, no call;
        any other trial asked twice is a bug of the caller."""
        plan = self._plans.get(prompt)
        if plan is None:
            raise ValueError(f"unknown prompt {prompt[:40]!r}: neither the base nor a candidate")
        wanted = _all_indices(suite, BASE_TRIALS) if indices is None else indices
        known = {t.id for t in suite.tasks}
        fresh: dict[str, list[int]] = {}
        served: list[TrialResult] = []
        for tid, ids in wanted.items():
            if tid not in known:
                raise ValueError(f"task {tid} is not in the suite {suite.name}")
            for i in ids:
                key = (prompt, tid, i)
                if key in self._seen:
                    done = self._base_trials.get((tid, i)) if prompt == self.base_prompt else None
                    if done is None:
                        raise AssertionError(f"trial {tid}#{i} requested twice ({label})")
                    served.append(done.model_copy(update={"cached": True}))
                    continue
                self._seen.add(key)
                fresh.setdefault(tid, []).append(i)
            self.calls += len(fresh.get(tid, ()))
        self._serial += 1
        at = _T0 + timedelta(minutes=1 + self._serial)
        run = draw_run(self._rng, suite, plan, fresh, self.noise,
                       f"{suite.name}-world-{self._serial}", at)
        if prompt == self.base_prompt:
            self._base_trials.update(((t.task_id, t.trial_index), t) for t in run.trials)
        if not served:
            return run
        trials = [*run.trials, *served]
        counts = {tid: len(ids) for tid, ids in wanted.items()}
        return run.model_copy(update={
            "trials": trials, "task_ids": [t.id for t in suite.tasks if t.id in counts],
            "task_buckets": {t.id: t.bucket for t in suite.tasks if t.id in counts},
            "trials_per_task": counts})


def _passing(world: World, buckets: Iterable[str]) -> list[tuple[str, str]]:
    return [(b, tid) for b in buckets for tid, t in world.tasks_of(b) if t.kind == "pass"]


def _other_buckets(world: World, capability_only: bool) -> list[str]:
    names = dict.fromkeys(b for b, _ in world.truth)
    return [b for b in names if b != world.target and (not capability_only or "/" not in b)]


def _break_some(world: World, effects: dict[tuple[str, str], Effect], rng: random.Random,
                n: int, to: float, capability_only: bool) -> None:
    """Lower one passing task in each of `n` other buckets (chosen at random) to `to`."""
    usable = [b for b in _other_buckets(world, capability_only) if _passing(world, [b])]
    if len(usable) < n:
        raise InfeasibleScenario(f"fewer than {n} other buckets have a passing task")
    for b in rng.sample(usable, n):
        effects[rng.choice(_passing(world, [b]))].p = to


def _apply(scenario: str, world: World, effects: dict[tuple[str, str], Effect],
           rng: random.Random) -> set[tuple[str, str]]:
    """Set the candidate's effects of `scenario`; returns the target tasks it fixes."""
    failing = [(world.target, tid) for tid, t in world.tasks_of(world.target) if t.failing]
    if scenario == "null":
        return set()
    if scenario == "good-partial":
        failing = rng.sample(failing, round(2 / 3 * len(failing)))
    elif scenario == "half-fix":
        failing = rng.sample(failing, max(1, round(len(failing) / 2))) if failing else []
    elif scenario == "overfit":
        failing = [k for k in failing if k[1] not in world.heldout]
    for key in failing:
        effects[key].p = 0.9 if scenario == "flaky-target" else FIXED_P
    if scenario == "broad":
        for key in _passing(world, _other_buckets(world, capability_only=False)):
            effects[key].p = _clip(effects[key].p - 0.3)
    elif scenario in ("narrow-1", "narrow-3"):
        _break_some(world, effects, rng, 1 if scenario == "narrow-1" else 3, 0.1, True)
    elif scenario == "half-break":
        _break_some(world, effects, rng, 1, 0.5, False)
    elif scenario == "score-drop":
        judged = [b for b in _other_buckets(world, capability_only=False)
                  if world.tasks_of(b) and world.tasks_of(b)[0][1].judge]
        if not judged:
            raise InfeasibleScenario("no judge-scored non-target bucket")
        bucket = rng.choice(judged)
        for tid, _ in world.tasks_of(bucket):
            effects[(bucket, tid)].shift = -0.25
    return set(failing)



def _cached(suites: list[Suite], truth: dict[tuple[str, str], TaskTruth], noise: float,
            seed: str, history: bool = False, runs: int = HISTORY_RUNS) -> list[RunResult]:
    """The cached baseline (one run per suite, BASE_TRIALS trials per task) or the history
    (`runs` earlier runs per suite, suite by suite, oldest first, 1 trial each), at p. Only
    the first suite's first HISTORY_RUNS runs are the same whatever `runs` is (one stream,
    drawn suite by suite): a 40-run world differs from a 10-run one in more than length."""
    rng, plan = random.Random(f"{seed}:{'history' if history else 'baseline'}"), _plan(
        truth, lambda t: t.p)
    if not history:
        return [draw_run(rng, s, plan, _all_indices(s, BASE_TRIALS), noise,
                         f"{s.name}-world-baseline", _T0, cached=True) for s in suites]
    return [draw_run(rng, s, plan, _all_indices(s, 1), noise, f"{s.name}-world-history-{k + 1:02d}",
                     _T0 - timedelta(days=runs - k)) for s in suites
            for k in range(runs)]


def _attempt(agent: str, target_size: int, noise: float, seed: str, heldout_of: HeldoutOf,
             scenario: str | None, history_runs: int = HISTORY_RUNS) -> World | None:
    """The world of one sub-seed, or None when it must be redrawn."""
    suites, truth = _draw_tasks(random.Random(f"{seed}:world"), agent, target_size)
    drift = random.Random(f"{seed}:drift").choice((-DRIFT, DRIFT))
    sizes = {b: len(ts) for b, ts in suites[0].buckets.items()}
    baseline = _cached(suites, truth, noise, seed)
    target = choose_target(baseline[0], sizes, target_size)
    if target is None:
        return None
    flaky = scenario == "flaky-target"
    if flaky:
        for (b, _), t in truth.items():
            if b == target and t.failing:
                t.kind, t.p = "flaky", 0.5
        baseline = _cached(suites, truth, noise, seed)  # same draws; only the target moves
        if choose_target(baseline[0], sizes, target_size) != target:
            return None
    history = _cached(suites, truth, noise, seed, history=True, runs=history_runs)
    ids = [t.id for t in suites[0].tasks if t.bucket == target]
    heldout = frozenset(heldout_of(ids, record_rates([*history, *baseline], set(ids))))
    for (b, tid), t in truth.items():
        t.target, t.heldout = b == target, tid in heldout
    world = World(suites, target, baseline, history, BASE_PROMPT, heldout, truth, noise, drift,
                  seed, flaky_base=flaky)
    if scenario is not None:
        try:
            world.add_candidate("candidate", scenario)
        except InfeasibleScenario:
            return None
    return world


def build_world(agent: str, target_size: int, noise: float, seed: int,
                heldout_of: HeldoutOf,
                scenario: str | None = None, history_runs: int = HISTORY_RUNS) -> World:
    """The world of `seed`, redrawn from the next sub-seed until the target has a failing
    baseline trial (and the scenario is feasible); `scenario` also registers the candidate
    prompt "candidate" with it. `history_runs`: earlier runs of the base prompt per suite
    (the lineage history; 10 in issue 18's world)."""
    capability_layout(agent, target_size)
    if not 0.0 <= noise <= 0.5:
        raise ValueError(f"noise must be in [0, 0.5], got {noise}")
    if scenario is not None and scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    for sub in range(MAX_REDRAWS):
        world = _attempt(agent, target_size, noise, f"{agent}:{target_size}:{seed}:{sub}",
                         heldout_of, scenario, history_runs)
        if world is not None:
            return world
    raise RuntimeError(f"no usable world in {MAX_REDRAWS} sub-seeds of seed {seed}")
