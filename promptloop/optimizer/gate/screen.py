"""Screening several candidate patches on the target: successive halving. Pure, no I/O.

An iteration with `--candidates K` gets up to K guarded patches. Before one of them is paid a
full gate, `Screening` ranks them on the visible target tasks only:

- round 1: every candidate runs `first` trials of every visible target task; a candidate with
  no fixed pair (baseline failed and the candidate passed, or its score went up) drops out;
- then the better half (ranked on every screening pair so far) goes on to a round with
  `growth` times as many new trials per task, and so on, until one candidate remains.

A merged candidate (one patch stating the rules of two survivors that fix different target
tasks, when no candidate fixes both sets) may join after round 1: it is screened on round 1's
trials first and then takes part like the others (`merge_wanted`, `add`).

Screening trials are trial *slots* 0, 1, 2... per task; the caller maps them to trial indices
no gate ever uses (the winner's verdict must rest on fresh trials only) and pairs each with a
baseline trial (`screen_pairs`). `Screening` is a state machine like the sequential gate:
`request()` says which candidates run which slots, `feed()` takes their pairs. `simulate`
drives it with a synchronous callback (for benchmarks); workflows/tournament.py drives it with
real runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.gate.pairing import Pair

SCREEN_INDEX_OFFSET = 1_000_000
"""Trial index of screening slot 0: far above any index a gate or baseline uses, so screening
trials get their own seeds and cache entries and are never served to the winner's gate."""
EPS = 1e-9


@dataclass(frozen=True)
class ScreenPlan:
    first: int = 1
    """New trials per visible target task in round 1."""
    growth: int = 2
    """Each later round runs this many times the previous round's trials per task."""


@dataclass(frozen=True)
class ScreenRequest:
    """Run these trial slots of every visible target task for these candidates."""

    round: int
    slots: dict[str, list[int]]
    """Candidate -> trial slots to run on each task."""
    catch_up: bool = False
    """A merged candidate running round 1's slots."""

    @property
    def trials_per_task(self) -> int:
        return sum(len(s) for s in self.slots.values())


@dataclass
class Standing:
    """One candidate's screening so far."""

    name: str
    pairs: list[Pair] = field(default_factory=list)
    rounds: int = 0
    stopped: str = ""
    """Why it stopped (empty while it is in the running, and for the winner)."""
    disqualified: bool = False
    """Stopped for what it did, not how it scored (a trial wrote outside its workspace):
    never a winner, never a fallback."""

    @property
    def fixed(self) -> list[Pair]:
        return [p for p in self.pairs if fixes(p)]

    @property
    def broke(self) -> list[Pair]:
        return [p for p in self.pairs if p.base_passed and not p.cand_passed]

    @property
    def fixed_tasks(self) -> frozenset[str]:
        return frozenset(p.task_id for p in self.fixed)

    @property
    def rank_key(self) -> tuple[float, float]:
        """Mean pass gain, then mean score gain, over every screening pair (higher is better)."""
        if not self.pairs:
            return (float("-inf"), float("-inf"))
        n = len(self.pairs)
        passes = sum(int(p.cand_passed) - int(p.base_passed) for p in self.pairs) / n
        return (passes, sum(p.diff for p in self.pairs) / n)

    def summary(self) -> str:
        fixed, broke = len(self.fixed), len(self.broke)
        return f"{fixed} fixed and {broke} broken of {len(self.pairs)} screening pair(s)"


def fixes(p: Pair) -> bool:
    """A pair the candidate fixed: failed -> passed, or a higher score."""
    return (p.cand_passed and not p.base_passed) or p.cand_score > p.base_score + EPS


class Screening:
    """Successive halving over `candidates` (names, in proposal order). Ties in the ranking
    are broken by a draw seeded with `seed` and the name, never by position (a proposer that
    lists its best guess first would otherwise win every tie)."""

    def __init__(self, candidates: Sequence[str], plan: ScreenPlan | None = None,
                 seed: int | str = 0) -> None:
        if len(set(candidates)) != len(candidates):
            raise ValueError("candidate names must be unique")
        self.plan = plan or ScreenPlan()
        self.order = list(candidates)
        self.standings = {c: Standing(c) for c in candidates}
        self.alive = list(candidates)
        self.round = 0
        self.next_slot = 0
        self.merge_asked = False
        self.merged: dict[str, tuple[str, str]] = {}
        """Merged candidate -> the two candidates whose rules it states."""
        self._pending: ScreenRequest | None = None
        self._catch_up: list[str] = []
        self.log: list[str] = []
        """What happened, round by round, in words (for records and pages)."""
        self.seed = seed

    # --- the state machine ----------------------------------------------------------------
    @property
    def done(self) -> bool:
        if self._pending is not None or self._catch_up or self.merge_wanted() is not None:
            return False
        return not self.alive or (len(self.alive) == 1 and (self.round >= 1
                                                           or len(self.order) == 1))

    @property
    def winner(self) -> str | None:
        return self.alive[0] if self.done and self.alive else None

    def request(self) -> ScreenRequest | None:
        """The next trials to run, or None when screening is over (see `winner`). A merge
        that `merge_wanted` names must be answered (`add`, `decline_merge`) first."""
        if self._pending is not None:
            return self._pending
        if self.merge_wanted() is not None:
            raise RuntimeError("answer merge_wanted() with add() or decline_merge() first")
        if self._catch_up:  # a merged candidate runs round 1's slots first
            first = list(range(self.plan.first))
            self._pending = ScreenRequest(1, {c: list(first) for c in self._catch_up}, True)
            return self._pending
        if self.done:
            return None
        n = self.plan.first * self.plan.growth ** self.round
        slots = list(range(self.next_slot, self.next_slot + n))
        self._pending = ScreenRequest(self.round + 1, {c: list(slots) for c in self.alive})
        return self._pending

    @property
    def pending_names(self) -> list[str]:
        """The candidates whose trials the pending request still wants fed."""
        return list(self._pending.slots) if self._pending is not None else []

    def disqualify(self, name: str, why: str) -> Standing:
        """Take `name` out of the running for good, before its pending trials are fed (its
        pairs are not wanted): a screening trial of it wrote outside its workspace."""
        s = self.standings[name]
        s.stopped, s.disqualified = why, True
        if name in self.alive:
            self.alive.remove(name)
        if name in self._catch_up:
            self._catch_up.remove(name)
        req = self._pending
        if req is not None and name in req.slots:
            self._pending = replace(req, slots={k: v for k, v in req.slots.items()
                                                if k != name})
        self.log.append(f"round {max(1, self.round)}: {name} disqualified ({why})")
        return s

    def feed(self, pairs: Mapping[str, Sequence[Pair]]) -> list[Standing]:
        """The pairs of the pending request's trials; returns the candidates that stopped.
        After round 1 check `merge_wanted` before the next `request`."""
        req = self._pending
        if req is None:
            raise RuntimeError("no screening request is pending")
        missing = set(req.slots) - set(pairs)
        if missing:
            raise ValueError(f"no screening pairs for {sorted(missing)}")
        self._pending = None
        for name in req.slots:
            s = self.standings[name]
            s.pairs.extend(pairs[name])
            s.rounds += 1
        if req.catch_up:
            self._catch_up = []
            return self._drop_idle(list(req.slots)) + self._halve()
        self.round = req.round
        if not req.slots:  # every candidate of the round was disqualified
            return []
        self.next_slot = max(x for v in req.slots.values() for x in v) + 1
        out = self._drop_idle(list(req.slots)) if req.round == 1 else []
        if self.merge_wanted() is not None:
            return out  # halved once the merge is answered
        return out + self._halve()

    def _drop_idle(self, names: list[str]) -> list[Standing]:
        """Round 1: a candidate that fixed no pair drops out."""
        out = []
        for name in names:
            s = self.standings[name]
            if not s.fixed:
                s.stopped = f"fixed no target trial in round 1 ({s.summary()})"
                self.alive.remove(name)
                out.append(s)
        if out:
            self.log.append(f"round 1: {', '.join(s.name for s in out)} fixed no target trial")
        return out

    def _halve(self) -> list[Standing]:
        """Keep the better half of the candidates in the running (at least one)."""
        if len(self.alive) <= 1:
            return []
        ranked = self.ranking()
        keep = ranked[: (len(ranked) + 1) // 2]
        out = []
        for s in ranked[len(keep):]:
            s.stopped = (f"ranked in the lower half after round {self.round} ({s.summary()}; "
                         f"kept: {', '.join(k.name for k in keep)})")
            self.alive.remove(s.name)
            out.append(s)
        if out:
            self.log.append(f"round {self.round}: kept {', '.join(k.name for k in keep)}; "
                            f"dropped {', '.join(s.name for s in out)}")
        return out

    def _draw(self, name: str) -> str:
        return hashlib.sha256(f"{self.seed}:{name}".encode()).hexdigest()

    def _ranked(self, standings: Sequence[Standing]) -> list[Standing]:
        return sorted(standings, key=lambda s: (-s.rank_key[0], -s.rank_key[1],
                                                self._draw(s.name)))

    def ranking(self) -> list[Standing]:
        """The candidates in the running, best first (ties: a seeded draw)."""
        return self._ranked([self.standings[c] for c in self.alive])

    def fallbacks(self, exclude: Sequence[str] = ()) -> list[str]:
        """The candidates that fixed a visible target trial in screening, best first on all
        their screening pairs (ties: the seeded draw), without `exclude` (the winner): the
        next one is gated when the winner is rejected for harm."""
        fixed = [s for s in self.standings.values()
                 if s.fixed and s.name not in exclude and not s.disqualified]
        return [s.name for s in self._ranked(fixed)]

    # --- merging --------------------------------------------------------------------------
    def merge_wanted(self) -> tuple[str, str] | None:
        """After round 1, once: two candidates in the running that fix different target tasks
        while no candidate fixes both sets (the best such two, in ranking order)."""
        if self.merge_asked or self.round != 1 or self._catch_up:
            return None
        ranked = self.ranking()
        for i, a in enumerate(ranked):
            for b in ranked[i + 1:]:
                fa, fb = a.fixed_tasks, b.fixed_tasks
                if not fa or not fb or fa <= fb or fb <= fa:
                    continue
                both = fa | fb
                if not any(both <= s.fixed_tasks for s in self.standings.values()
                           if not s.disqualified):
                    return a.name, b.name
        return None

    def decline_merge(self) -> list[Standing]:
        """No merged candidate came of the request (refused, duplicate, error): halve now."""
        if self.merge_wanted() is None:
            raise RuntimeError("no merge is wanted now")
        self.merge_asked = True
        self.log.append("merge: no merged candidate came of the request")
        return self._halve()

    def add(self, name: str, parents: tuple[str, str]) -> None:
        """A merged candidate joins: it runs round 1's slots, then screens with the rest."""
        if name in self.standings:
            raise ValueError(f"candidate {name!r} already screened")
        if self.merge_wanted() is None:
            raise RuntimeError("no merge is wanted now")
        self.merge_asked = True
        self.order.append(name)
        self.standings[name] = Standing(name)
        self.alive.append(name)
        self.merged[name] = parents
        self._catch_up = [name]
        self.log.append(f"merge: {name} states the rules of {parents[0]} and {parents[1]}")

    @property
    def slots_run(self) -> int:
        """Trial slots run per task, summed over candidates."""
        return sum(len(s.pairs) for s in self.standings.values())


# --- pairing screening trials with the baseline ------------------------------------------------


def screen_indices(slots: Sequence[int]) -> list[int]:
    return [SCREEN_INDEX_OFFSET + s for s in slots]


def screen_pairs(base: RunResult, cand: RunResult, tasks: Sequence[str]) -> list[Pair]:
    """Pair each screening trial (index SCREEN_INDEX_OFFSET + slot) of `tasks` with the
    baseline trial of the same task at position `slot` modulo its counting trials. Errored
    trials on either side make no pair."""
    wanted = set(tasks)
    base_of: dict[str, list[TrialResult]] = {}
    for t in sorted(base.trials, key=lambda t: t.trial_index):
        if t.task_id in wanted and t.counts:
            base_of.setdefault(t.task_id, []).append(t)
    out = []
    for c in sorted(cand.trials, key=lambda t: (t.task_id, t.trial_index)):
        prior = base_of.get(c.task_id)
        if c.task_id not in wanted or not prior or not c.counts:
            continue
        b = prior[(c.trial_index - SCREEN_INDEX_OFFSET) % len(prior)]
        out.append(Pair(c.task_id, c.trial_index, b.score, c.score, b.passed, c.passed))
    return out


# --- a synchronous driver for simulators -----------------------------------------------------

TrialFn = Callable[[str, str, int], Pair]
"""(candidate, task id, slot) -> the pair of that screening trial against the baseline."""
MergeFn = Callable[[str, str], str | None]
"""(candidate a, candidate b) -> the name of a merged candidate, or None when there is none."""


@dataclass(frozen=True)
class ScreenOutcome:
    winner: str | None
    trials: int
    """Screening trials run (candidate side; the baseline's are cached)."""
    merge_calls: int
    standings: dict[str, Standing]
    log: list[str]


def simulate(candidates: Sequence[str], tasks: Sequence[str], trial: TrialFn, *,
             merge: MergeFn | None = None, plan: ScreenPlan | None = None,
             seed: int | str = 0) -> ScreenOutcome:
    """Screen `candidates` on `tasks` with `trial` answering every trial; `merge` (optional)
    is asked at most once for a merged candidate. Returns the winner and what it cost."""
    screening = Screening(candidates, plan, seed)
    spent = merge_calls = 0
    while (req := screening.request()) is not None:
        got = {c: [trial(c, t, s) for t in tasks for s in slots] for c, slots in req.slots.items()}
        spent += sum(len(v) for v in got.values())
        screening.feed(got)
        wanted = screening.merge_wanted()
        if wanted is not None:
            name = merge(*wanted) if merge is not None else None
            merge_calls += merge is not None
            if name is None:
                screening.decline_merge()
            else:
                screening.add(name, wanted)
    return ScreenOutcome(screening.winner, spent, merge_calls, screening.standings,
                         screening.log)


__all__ = [
    "SCREEN_INDEX_OFFSET",
    "ScreenOutcome",
    "ScreenPlan",
    "ScreenRequest",
    "Screening",
    "Standing",
    "fixes",
    "screen_indices",
    "screen_pairs",
    "simulate",
]
