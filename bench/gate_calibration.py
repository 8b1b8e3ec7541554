"""Gate calibration benchmark: runs optimizer.gate.simulate over every cell and prints the table.

    python bench/gate_calibration.py [--n 200] [--json out.json] [--markdown]
    python bench/gate_calibration.py --quick            # 40 iterations per cell, for tuning
    python bench/gate_calibration.py --noise 0.2 --size 3 --kinds good,broad --n 100

See optimizer/gate/simulate.py for the agent population, the noise and the patch kinds. The
gate runs at its defaults (GatePolicy()), the settings optimize and the CLI use. The exit code
is 1 when a must-hold of issue 10 fails in the cells that were run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.gate.compare import GatePolicy
from optimizer.gate.simulate import KINDS, MUST_HOLD, run_cell

NOISES = (0.0, 0.1, 0.2)
SIZES = (3, 10)
MAX_COST = 0.6


def failures(row: dict[str, float | int | str]) -> list[str]:
    """The must-holds of issue 10 that this cell misses (none for reported-only kinds)."""
    kind, noise = row["patch"], float(row["noise"])
    if kind not in MUST_HOLD:
        return []
    out = []
    acc, cost = float(row["accepted"]), float(row["cost_ratio"])
    if kind == "good" and acc < (0.95 if noise < 0.15 else 0.90):
        out.append(f"good accepted {acc:.1%}")
    if kind == "null" and acc > 0.05:
        out.append(f"null accepted {acc:.1%}")
    if kind == "broad" and acc > 0.01:
        out.append(f"broad accepted {acc:.1%}")
    if cost > MAX_COST:
        out.append(f"cost {cost:.2f}x")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="iterations per cell (default 200)")
    ap.add_argument("--quick", action="store_true", help="40 iterations per cell")
    ap.add_argument("--noise", type=float, action="append", help="only this noise (repeatable)")
    ap.add_argument("--size", type=int, action="append", help="only this target size")
    ap.add_argument("--kinds", help=f"comma-separated patch kinds (default {','.join(KINDS)})")
    ap.add_argument("--json", type=Path, help="write the table as JSON here")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    n = 40 if args.quick else args.n
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else list(KINDS)
    policy = GatePolicy()
    rows: list[dict[str, float | int | str]] = []
    t0 = time.perf_counter()
    for noise in args.noise or NOISES:
        for size in args.size or SIZES:
            for kind in kinds:
                cell = run_cell(kind, size, noise, n, policy)
                row: dict[str, float | int | str] = {"noise": noise, "target_tasks": size,
                                                      "patch": kind, "n": n, **cell}
                rows.append(row)
                miss = failures(row)
                print(f"noise {noise:.1f} target {size:2d} {kind:12s} accepted "
                      f"{cell['accepted']:6.1%} inconclusive {cell['inconclusive']:5.1%} "
                      f"trials {cell['mean_trials']:6.1f} ({cell['cost_ratio']:.2f}x, max "
                      f"{cell['max_trials']:.0f})" + (f"  MISSES: {'; '.join(miss)}" if miss
                                                      else ""), file=sys.stderr, flush=True)
    seconds = time.perf_counter() - t0
    print(f"{len(rows)} cells x {n} iterations in {seconds:.0f}s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"n": n, "policy": policy.model_dump(), "rows": rows,
                                         "seconds": round(seconds)}, indent=2) + "\n")
    if args.markdown:
        print("| noise | target tasks | patch | accepted | inconclusive | trials/decision "
              "| max trials | vs both suites twice |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['noise']:.1f} | {r['target_tasks']} | {r['patch']} | "
                  f"{float(r['accepted']):.1%} | {float(r['inconclusive']):.1%} | "
                  f"{float(r['mean_trials']):.1f} | {float(r['max_trials']):.0f} | "
                  f"{float(r['cost_ratio']):.2f}x |")
    if any(failures(r) for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
