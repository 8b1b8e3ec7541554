"""Gate calibration benchmark, world v2 (issues 18, 25, 31): kept, rejected, inconclusive.

    python bench/gate_calibration.py                      # every cell, 200 iterations each
    python bench/gate_calibration.py --n 40 --seed-set tune --scenarios good-all,narrow-1
    python bench/gate_calibration.py --json bench/gate_calibration.json --markdown
    python bench/gate_calibration.py --harm-sensitivity narrow --history-runs 40 --noises 0.1

Each iteration builds a world of `promptloop.optimizer.sim.world` (suites shaped like ours, a target
chosen from the baseline as nightly chooses it, flaky and judge-scored tasks, bucket shocks,
noise, errored trials, drift, 10 history runs) and runs ONE optimize gate on it through the
real driver, `promptloop.optimizer.workflows.gating.run_gate`, with the world's `run` as the trial
runner: the code that schedules trials and decides is the code `optimize` runs. The gate runs
at its defaults (`GatePolicy()`, `bench_policy`), at `--harm-sensitivity` (half or narrow);
`--history-runs N` gives the world N earlier runs per suite (default 10). Rows keep the
fields of issue 18's table and add `sensitivity` and `history_runs`.

Definitions (fixed before the run, see issue 18): "kept" = accepted; model calls = trials run
through the world's runner (candidate and fresh baseline trials; the cached baseline and the
history are not counted, as the session pays for them once); naive = both suites run twice
(baseline and candidate) at the default 2 trials per task. Seeds: `--seed-set v2` (the
reported table) or `tune` (used while choosing the gate's settings; disjoint seeds).
Each row records the gate's policy (`policy`) and the commit it was measured at (`commit`,
`dirty`). The exit code is 1 when a must-hold of issue 31 fails in the cells that were run
(`failures`; the bounds at noise 0.2 and of earlier issues are in bench/RESULTS.md), else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.sequential import heldout_tasks
from promptloop.optimizer.sim.world import (
    AGENTS,
    HISTORY_RUNS,
    SCENARIOS,
    TARGET_SIZES,
    World,
    build_world,
)
from promptloop.optimizer.workflows.gating import run_gate

NOISES = (0.0, 0.1, 0.2)


def bench_policy(sensitivity: str) -> GatePolicy:
    """The gate the benchmark runs: `GatePolicy`'s defaults, at the sensitivity asked for."""
    return GatePolicy(harm_sensitivity=sensitivity)  # type: ignore[arg-type]


def naive_calls(world: World) -> int:
    return 2 * sum(len(s.tasks) for s in world.suites) * 2


def one(agent: str, size: int, noise: float, scenario: str, seed: int,
        policy: GatePolicy, history_runs: int = HISTORY_RUNS) -> tuple[str, int, int, bool]:
    """(decision, model calls, naive calls, target has held-out tasks) of one iteration."""
    world = build_world(agent, size, noise, seed,
                        lambda ids, rates: heldout_tasks(ids, policy, str(seed), rates), scenario,
                        history_runs)
    gated = asyncio.run(run_gate(world.suites, world.baseline, (world.base_prompt, "candidate"),
                                 world.target, policy, world.run, heldout=world.heldout,
                                 history=world.history, display=False))
    return gated.verdict.decision, world.calls, naive_calls(world), bool(world.heldout)


def cell(args: tuple[str, int, float, str, int, str, str, int]
         ) -> dict[str, float | int | str]:
    agent, size, noise, scenario, n, seed_set, sensitivity, history_runs = args
    policy = bench_policy(sensitivity)
    counts = {"accept": 0, "reject": 0, "inconclusive": 0}
    calls = naive = 0
    heldout = False
    for k in range(n):
        seed = zlib.crc32(f"{seed_set}:{agent}:{size}:{noise}:{scenario}:{k}".encode())
        decision, c, nv, held = one(agent, size, noise, scenario, seed, policy, history_runs)
        counts[decision] += 1
        calls += c
        naive += nv
        heldout = heldout or held
    return {"agent": agent, "target_tasks": size, "noise": noise, "scenario": scenario, "n": n,
            "kept": counts["accept"] / n, "rejected": counts["reject"] / n,
            "inconclusive": counts["inconclusive"] / n, "calls": calls / n,
            "naive": naive / n, "cost_ratio": calls / naive, "heldout": int(heldout),
            "sensitivity": sensitivity, "history_runs": history_runs}


GOOD_ALL: dict[tuple[str, float], tuple[float, float, float]] = {
    # (sensitivity, noise) -> (kept floor 3-task, kept floor 10-task, cost ceiling vs naive)
    ("half", 0.0): (0.85, 0.90, 0.55), ("half", 0.1): (0.52, 0.65, 1.0),
    ("narrow", 0.0): (0.90, 0.93, 0.35), ("narrow", 0.1): (0.65, 0.75, 0.55)}
LONG_HISTORY: dict[str, tuple[float, float]] = {"half": (0.70, 0.8), "narrow": (0.85, 0.45)}
"""40-run history, noise 0.1, good-all: (kept floor, cost ceiling) per sensitivity."""
MUST_N = 200
"""Iterations a cell needs for its must-hold to count as measured (issue 31)."""


def failures(row: dict[str, float | int | str]) -> list[str]:
    """The must-holds of issue 31 this cell misses (cells no must-hold names: none)."""
    s, noise, kept = str(row["scenario"]), float(row["noise"]), float(row["kept"])
    size, sens = int(row["target_tasks"]), str(row.get("sensitivity", "half"))
    history, cost = int(row.get("history_runs", HISTORY_RUNS)), float(row["cost_ratio"])
    out = []
    if noise not in (0.0, 0.1):
        return out
    if s == "good-all" and history == HISTORY_RUNS and (sens, noise) in GOOD_ALL:
        f3, f10, ceiling = GOOD_ALL[(sens, noise)]
        floor = f3 if size <= 3 else f10
        if kept < floor:
            out.append(f"good-all kept {kept:.1%} < {floor:.0%}")
        if cost > ceiling:
            out.append(f"good-all cost {cost:.2f}x naive > {ceiling}x")
    if s == "good-all" and history == 40 and noise == 0.1:
        floor, ceiling = LONG_HISTORY[sens]
        if kept < floor:
            out.append(f"40-run good-all kept {kept:.1%} < {floor:.0%}")
        if cost > ceiling:
            out.append(f"40-run good-all cost {cost:.2f}x naive > {ceiling}x")
    if s == "narrow-1" and kept > (0.01 if noise == 0.0 else 0.05):
        out.append(f"narrow-1 kept {kept:.1%} > {0.01 if noise == 0.0 else 0.05:.0%}")
    if sens == "half" and s == "half-break" and kept > 0.20:
        out.append(f"half-break kept {kept:.1%} > 20%")
    if sens == "half" and s in ("null", "broad") and kept > 0.05:
        out.append(f"{s} kept {kept:.1%} > 5%")
    if s == "overfit" and size == 3 and row["heldout"] and kept > 0.10:
        out.append(f"overfit kept {kept:.1%} > 10%")
    return out


def provenance() -> dict[str, str | bool]:
    """The commit the rows were measured at (and whether the tree had uncommitted edits)."""
    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                    cwd=root, capture_output=True, text=True,
                                    check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "dirty": True}
    return {"commit": sha, "dirty": dirty}


MUST_HOLDS: tuple[tuple[str, str, int, tuple[str, ...], tuple[float, ...], tuple[int, ...]],
                  ...] = (
    # (what issue 31 says, sensitivity, history runs, scenarios, noises, target sizes)
    ("`half`: good-all kept >= 85% (3-task) / >= 90% (10-task) at <= 0.55x naive, noise 0",
     "half", 10, ("good-all",), (0.0,), (3, 10)),
    ("`half`: good-all kept >= 52% / >= 65% at <= 1.0x, noise 0.1",
     "half", 10, ("good-all",), (0.1,), (3, 10)),
    ("`half`: half-break kept <= 20%", "half", 10, ("half-break",), (0.0, 0.1), (3, 10)),
    ("`half`: narrow-1 kept <= 1% at noise 0 and <= 5% at 0.1",
     "half", 10, ("narrow-1",), (0.0, 0.1), (3, 10)),
    ("`half`: null and broad kept <= 5%", "half", 10, ("null", "broad"), (0.0, 0.1), (3, 10)),
    ("`narrow`: good-all kept >= 90% / >= 93% at <= 0.35x, noise 0",
     "narrow", 10, ("good-all",), (0.0,), (3, 10)),
    ("`narrow`: good-all kept >= 65% / >= 75% at <= 0.55x, noise 0.1",
     "narrow", 10, ("good-all",), (0.1,), (3, 10)),
    ("`narrow`: narrow-1 kept <= 1% at noise 0 and <= 5% at 0.1",
     "narrow", 10, ("narrow-1",), (0.0, 0.1), (3, 10)),
    ("40-run history, noise 0.1: `narrow` good-all kept >= 85% at <= 0.45x",
     "narrow", 40, ("good-all",), (0.1,), (3, 10)),
    ("40-run history, noise 0.1: `half` good-all kept >= 70% at <= 0.8x",
     "half", 40, ("good-all",), (0.1,), (3, 10)),
    ("overfit kept <= 10% on 3-task targets with held-out tasks (`half`)",
     "half", 10, ("overfit",), (0.0, 0.1), (3,)),
)


def must_hold_report(rows: list[dict[str, Any]]) -> list[str]:
    """One line per must-hold of issue 31: met, missed or not measured, with the figures of
    the cells it names (the last row of a cell wins; cells under `MUST_N` iterations are
    named as such)."""
    cells = {(r["agent"], int(r["target_tasks"]), float(r["noise"]), r["scenario"],
              r.get("sensitivity", "half"), int(r.get("history_runs", HISTORY_RUNS))): r
             for r in rows}
    out = []
    for what, sens, hist, scenarios, noises, sizes in MUST_HOLDS:
        wanted = [(a, z, nz, sc, sens, hist) for sc in scenarios for nz in noises
                  for a in AGENTS for z in sizes]
        got = [cells[k] for k in wanted if k in cells]
        missing = len(wanted) - len(got)
        figures = "; ".join(
            f"{r['agent']} {r['target_tasks']}-task {r['scenario']} noise {r['noise']}: "
            f"{float(r['kept']):.1%} kept, {float(r['cost_ratio']):.2f}x"
            + (f" [n={r['n']}]" if int(r["n"]) < MUST_N else "") for r in got)
        misses = [r for r in got if failures(r)]
        short = any(int(r["n"]) < MUST_N for r in got)
        state = ("not measured" if not got else
                 f"missed in {len(misses)} of {len(got)} cell(s)" if misses else
                 "met" + (" (cells under 200 iterations)" if short else ""))
        if missing and got:
            state += f"; {missing} of {len(wanted)} cell(s) not measured"
        out.append(f"- **{state}**: {what}" + (f" (measured: {figures})" if got else ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="iterations per cell (default 200)")
    ap.add_argument("--agents", default=",".join(AGENTS))
    ap.add_argument("--sizes", default=",".join(map(str, TARGET_SIZES)))
    ap.add_argument("--noises", default=",".join(map(str, NOISES)))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed-set", default="v2", help="v2 (reported) or tune")
    ap.add_argument("--harm-sensitivity", default=GatePolicy().harm_sensitivity,
                    choices=["half", "narrow"], help="the gate's harm sensitivity")
    ap.add_argument("--history-runs", type=int, default=HISTORY_RUNS,
                    help=f"earlier runs per suite in the world's lineage (default {HISTORY_RUNS})")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    ap.add_argument("--rows", type=Path, help="append each finished cell here (JSON lines)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--report", type=Path, nargs="+", metavar="ROWS",
                    help="run nothing: read --rows files and print issue 31's must-holds "
                    "(met, missed, not measured) and the Markdown table")
    a = ap.parse_args()
    if a.report:
        rows = [json.loads(line) for f in a.report
                for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
        last = {(r["agent"], r["target_tasks"], r["noise"], r["scenario"],
                 r.get("sensitivity"), r.get("history_runs")): r for r in rows}
        print("\n".join(must_hold_report(list(last.values()))))
        print()
        print("| agent | noise | target tasks | scenario | sensitivity | history runs | n | kept "
              "| rejected | inconclusive | calls/iteration | vs naive |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in last.values():
            print(f"| {r['agent']} | {float(r['noise']):.1f} | {r['target_tasks']} | "
                  f"{r['scenario']} | {r.get('sensitivity')} | {r.get('history_runs')} | "
                  f"{r['n']} | {float(r['kept']):.1%} | {float(r['rejected']):.1%} | "
                  f"{float(r['inconclusive']):.1%} | {float(r['calls']):.1f} | "
                  f"{float(r['cost_ratio']):.2f}x |")
        sys.exit(1 if any(failures(r) for r in last.values()) else 0)
    jobs = [(agent, int(size), float(noise), s, a.n, a.seed_set, a.harm_sensitivity,
             a.history_runs)
            for agent in a.agents.split(",") for noise in a.noises.split(",")
            for size in a.sizes.split(",") for s in a.scenarios.split(",")]
    t0 = time.perf_counter()
    rows = []
    prov = provenance()
    gate = bench_policy(a.harm_sensitivity)
    policy_dump = {**gate.model_dump(), "task_beta": gate.task_beta}
    with ProcessPoolExecutor(a.workers) as pool:
        for row in pool.map(cell, jobs):
            row = {**row, "policy": policy_dump, **prov}
            rows.append(row)
            if a.rows:
                with a.rows.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
            miss = failures(row)
            print(f"{row['agent']:4s} noise {row['noise']:.1f} target {row['target_tasks']:2d} "
                  f"{row['scenario']:12s} kept {float(row['kept']):6.1%} rejected "
                  f"{float(row['rejected']):6.1%} inconclusive {float(row['inconclusive']):6.1%}"
                  f" calls {float(row['calls']):6.1f} ({float(row['cost_ratio']):.2f}x)"
                  + (f"  MISSES: {'; '.join(miss)}" if miss else ""), file=sys.stderr,
                  flush=True)
    seconds = time.perf_counter() - t0
    print(f"{len(rows)} cells x {a.n} iterations in {seconds:.0f}s", file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps({"n": a.n, "seed_set": a.seed_set,
                                      "policy": bench_policy(a.harm_sensitivity).model_dump(),
                                      "history_runs": a.history_runs, "rows": rows,
                                      "seconds": round(seconds)}, indent=2) + "\n")
    if a.markdown:
        print("| agent | noise | target tasks | scenario | kept | rejected | inconclusive "
              "| calls/iteration | vs naive |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['agent']} | {float(r['noise']):.1f} | {r['target_tasks']} | "
                  f"{r['scenario']} | {float(r['kept']):.1%} | {float(r['rejected']):.1%} | "
                  f"{float(r['inconclusive']):.1%} | {float(r['calls']):.1f} | "
                  f"{float(r['cost_ratio']):.2f}x |")
    short = sorted({int(r["n"]) for r in rows if failures(r) == [] and int(r["n"]) < MUST_N})
    if short:
        print(f"note: cells of {short} iterations: issue 31's must-holds are stated at "
              f"{MUST_N}", file=sys.stderr)
    if any(failures(r) for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
