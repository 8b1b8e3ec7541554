"""Candidates benchmark (issue 20): K patches per iteration, screened, one winner gated.

    python bench/candidates.py                       # K = 1, 2, 4, 8 at noise 0.1, 200 iterations
    python bench/candidates.py --n 60 --noises 0.0,0.1 --markdown

Each iteration builds a world of `promptloop.optimizer.sim.world` (card agent, 10-task target, 10
history runs) and draws K proposals from a simulated proposer population, independently:
30% good (every failing target task fixed), 20% partial (half of them fixed), 30% null,
10% narrow-1 (good plus one broken passing task elsewhere), 10% broad (good plus every
passing task elsewhere down 0.3). K = 1 goes straight to the gate, as the single-patch loop
does. K > 1 screens the candidates with the real successive-halving state machine
(`promptloop.optimizer.gate.screen.Screening`, the loop of `screen.simulate`) on the visible target
tasks, each trial a fresh draw of the world at a screening index, paired with the cached
baseline as the tournament pairs it;
the winner then goes through the real gate driver (`optimizer.workflows.gating.run_gate`) on
fresh trials; when the gate rejects it for harm, the next candidate that fixed the target in
screening is gated too (once; `--no-fallback` turns it off), as the tournament does. Ties in
screening are broken by a seeded draw. Merges are not simulated (the merge callback declines).

Definitions (fixed before the run): model calls = proposer calls (1 per iteration: K patches
in one request) + screening trials + gate trials (candidate and fresh baseline; the cached
baseline and the history are paid once per session and not counted). "Good kept" = the kept
patch is good or partial; "harmful kept" = narrow-1 or broad kept; "null kept" = null kept,
each as a share of iterations. Wall time: every round of trials (a screening round, or one gate
request) takes ceil(trials / 16) x the model latency (concurrency 16); a proposer call takes
one latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.pairing import Pair
from promptloop.optimizer.gate.screen import SCREEN_INDEX_OFFSET, Screening
from promptloop.optimizer.gate.sequential import TrialAsk, heldout_tasks
from promptloop.optimizer.sim.world import World, build_world
from promptloop.optimizer.workflows.gating import run_gate

POPULATION = (("good-all", 0.30), ("half-fix", 0.20), ("null", 0.30), ("narrow-1", 0.10),
              ("broad", 0.10))
GOOD, HARMFUL = {"good-all", "half-fix"}, {"narrow-1", "broad"}
CONCURRENCY = 16


def draw(rng: random.Random) -> str:
    x, acc = rng.random(), 0.0
    for kind, share in POPULATION:
        acc += share
        if x < acc:
            return kind
    return POPULATION[-1][0]


def screen_trial(world: World, base_scores: dict[str, list[tuple[float, bool]]]):  # type: ignore[no-untyped-def]
    """A TrialFn for `screen.simulate`: one fresh world trial of a candidate on a task."""
    suite = world.suites[0]

    def trial(cand: str, task: str, slot: int) -> Pair:
        index = SCREEN_INDEX_OFFSET + slot
        run = asyncio.run(world.run(suite.select(task_ids=[task]), cand, "screen",
                                    {task: [index]}))
        t = run.trials[0]
        prior = base_scores[task]
        if not prior or not t.counts:  # an errored trial on either side: no evidence
            return Pair(task, index, 0.0, 0.0, False, False)
        b_score, b_pass = prior[slot % len(prior)]
        return Pair(task, index, b_score, t.score, b_pass, t.passed)

    return trial


def one(k: int, noise: float, seed: int, policy: GatePolicy, fallback: bool = True
        ) -> dict[str, float | str]:
    rng = random.Random(seed)
    world = build_world("card", 10, noise, seed,
                        lambda ids, rates: heldout_tasks(ids, policy, str(seed), rates))
    kinds = {f"candidate-{i}": draw(rng) for i in range(k)}
    for prompt, kind in kinds.items():
        world.add_candidate(prompt, kind)
    visible = [t.id for t in world.suites[0].tasks
               if f"{t.bucket}" == world.target and t.id not in world.heldout]
    base_scores = {t.task_id: [] for t in world.baseline[0].trials}
    for t in world.baseline[0].trials:
        if t.counts:
            base_scores[t.task_id].append((t.score, t.passed))
    rounds: list[int] = [1]  # the proposer call
    screening: Screening | None = None
    if k == 1:
        winner: str | None = next(iter(kinds))
        screened = 0
    else:
        before = world.calls
        screening = _screen(list(kinds), visible, screen_trial(world, base_scores), rounds,
                            seed)
        winner = screening.winner
        screened = world.calls - before
    decision, gate_calls, gated_kind = "reject", 0, ""
    fell_back = False
    for attempt in range(2):  # the winner, then (after a harm rejection) one fallback
        if winner is None:
            break
        before = world.calls
        gated = asyncio.run(run_gate(
            world.suites, world.baseline, (world.base_prompt, winner), world.target, policy,
            world.run, heldout=world.heldout, history=world.history,
            on_stage=lambda req: rounds.append(_request_trials(req)), display=False))
        decision, gate_calls = gated.verdict.decision, gate_calls + world.calls - before
        gated_kind = kinds[winner]
        if (attempt or not fallback or screening is None or decision != "reject"
                or gated.verdict.stopped != "regression"):
            break
        nxt = screening.fallbacks(exclude=[winner])
        winner, fell_back = (nxt[0] if nxt else None), bool(nxt)
    kept = gated_kind if decision == "accept" else ""
    return {"kept": kept, "calls": 1 + screened + gate_calls, "fallback": int(fell_back),
            "wall": sum(math.ceil(n / CONCURRENCY) if n else 0 for n in rounds)}


def _request_trials(req: TrialAsk) -> int:
    return sum(map(len, req.indices.values())) + sum(map(len, req.base.values()))


def _screen(cands: list[str], tasks: list[str], trial, rounds: list[int],  # type: ignore[no-untyped-def]
            seed: int) -> Screening:
    """`screen.simulate`'s loop, counting each round's trials (merges declined); ties broken
    by a draw seeded with the iteration's seed."""
    screening = Screening(cands, seed=seed)
    while (req := screening.request()) is not None:
        got = {c: [trial(c, t, s) for t in tasks for s in slots] for c, slots in req.slots.items()}
        rounds.append(sum(len(v) for v in got.values()))
        screening.feed(got)
        if screening.merge_wanted() is not None:
            screening.decline_merge()
    return screening


def cell(args: tuple[int, float, int, str, bool]) -> dict[str, float | int | str]:
    k, noise, n, seed_set, fallback = args
    policy = GatePolicy()
    good = harmful = null = calls = wall = fell = 0.0
    for i in range(n):
        r = one(k, noise, zlib.crc32(f"{seed_set}:cands:{k}:{noise}:{i}".encode()), policy,
                fallback)
        fell += float(r["fallback"])
        good += r["kept"] in GOOD
        harmful += r["kept"] in HARMFUL
        null += r["kept"] == "null"
        calls += float(r["calls"])
        wall += float(r["wall"])
    return {"k": k, "noise": noise, "n": n, "good_per_1000_calls": 1000 * good / calls,
            "harmful_kept": harmful / n, "null_kept": null / n, "calls": calls / n,
            "wall_latencies": wall / n, "fallback": int(fallback), "fell_back": fell / n}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--noises", default="0.1")
    ap.add_argument("--seed-set", default="v2")
    ap.add_argument("--no-fallback", action="store_true",
                    help="never gate the next candidate after a harm rejection")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    jobs = [(int(k), float(x), a.n, a.seed_set, not a.no_fallback) for x in a.noises.split(",")
            for k in a.ks.split(",")]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(a.workers) as pool:
        rows = list(pool.map(cell, jobs))
    for r in rows:
        print(f"noise {r['noise']:.1f} K={r['k']}: good kept per 1000 calls "
              f"{float(r['good_per_1000_calls']):.2f}, harmful kept {float(r['harmful_kept']):.1%}"
              f", null kept {float(r['null_kept']):.1%}, fell back {float(r['fell_back']):.1%}"
              f", calls {float(r['calls']):.1f}, wall "
              f"{float(r['wall_latencies']):.1f} latencies", file=sys.stderr)
    print(f"{len(rows)} cells x {a.n} iterations in {time.perf_counter() - t0:.0f}s",
          file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps({"n": a.n, "rows": rows}, indent=2) + "\n")
    if a.markdown:
        print("| noise | K | good kept / 1000 calls | harmful kept | null kept | calls/iteration "
              "| wall (latencies, concurrency 16) |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {float(r['noise']):.1f} | {r['k']} | {float(r['good_per_1000_calls']):.2f} "
                  f"| {float(r['harmful_kept']):.1%} | {float(r['null_kept']):.1%} | "
                  f"{float(r['calls']):.1f} | {float(r['wall_latencies']):.1f} |")


if __name__ == "__main__":
    main()
