"""Gate calibration benchmark: runs optimizer.gate.simulate over every cell and prints the table.

    python bench/gate_calibration.py [--n 200] [--json out.json] [--markdown]

See optimizer/gate/simulate.py for the agent population, the noise and the patch kinds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.gate.compare import GatePolicy
from optimizer.gate.simulate import KINDS, run_cell


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="iterations per cell (default 200)")
    ap.add_argument("--json", type=Path, help="write the table as JSON here")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    policy = GatePolicy()
    rows = []
    t0 = time.perf_counter()
    for noise in (0.0, 0.1, 0.2):
        for size in (3, 10):
            for kind in KINDS:
                cell = run_cell(kind, size, noise, args.n, policy)
                rows.append({"noise": noise, "target_tasks": size, "patch": kind, **cell})
                print(f"noise {noise:.1f} target {size:2d} {kind:12s} accepted "
                      f"{cell['accepted']:6.1%} inconclusive {cell['inconclusive']:5.1%} "
                      f"trials {cell['mean_trials']:6.1f} ({cell['cost_ratio']:.2f}x)",
                      file=sys.stderr, flush=True)
    print(f"{len(rows)} cells x {args.n} iterations in {time.perf_counter() - t0:.0f}s",
          file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"n": args.n, "policy": policy.model_dump(),
                                         "rows": rows}, indent=2))
    if args.markdown:
        print("| noise | target tasks | patch | accepted | inconclusive | trials/decision "
              "| vs both suites twice |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['noise']:.1f} | {r['target_tasks']} | {r['patch']} | "
                  f"{r['accepted']:.1%} | {r['inconclusive']:.1%} | {r['mean_trials']:.1f} | "
                  f"{r['cost_ratio']:.2f}x |")


if __name__ == "__main__":
    main()
