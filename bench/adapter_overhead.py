"""Trial adapters' overhead per trial (issue 24; run by hand, not in CI).

A trivial agent answers a fixed outcome at once; N trials run one after the other through the
`python`, `worker` and `command` adapters (`optimizer.adapters.runner.run_adapter_trial`), each
in a fresh workspace. The overhead of a trial is its wall time through the adapter minus the
agent's own run time (the time between reading the request and answering, which the agent
measures itself and reports in its outcome). For `command` it includes starting the agent's
interpreter: that is what a command adapter costs a trial. The worker's first trial (its
process start) is reported on its own line. Targets: worker median <= 20 ms, command median
<= 150 ms.

    nice -n 10 .venv/bin/python bench/adapter_overhead.py [--trials 200] [--node]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promptloop.optimizer.adapters import box
from promptloop.optimizer.adapters.contract import (
    ModelEndpoint,
    PromptInfo,
    TrialContext,
    TrialInfo,
    TrialRequest,
    TrialResultDoc,
)
from promptloop.optimizer.adapters.runner import run_adapter_trial
from promptloop.optimizer.adapters.spec import AnyAdapterSettings, parse_settings
from promptloop.optimizer.adapters.worker import WorkerPool

TARGETS_MS = {"worker": 20.0, "command": 150.0}

PY_AGENT = '''\
import json, os, sys, time


def answer(line):
    t0 = time.perf_counter()
    json.loads(line)
    out = {"contract": "promptloop.trial/1", "outcome": {"answer": 42},
           "usage": {"input_tokens": 0, "output_tokens": 0}}
    out["outcome"]["agent_ms"] = (time.perf_counter() - t0) * 1000
    return json.dumps(out)


if "--worker" in sys.argv:
    for line in sys.stdin:
        sys.stdout.write(answer(line) + "\\n")
        sys.stdout.flush()
elif os.environ.get("PROMPTLOOP_REQUEST"):
    with open(os.environ["PROMPTLOOP_REQUEST"]) as f:
        text = answer(f.read())
    with open(os.environ["PROMPTLOOP_RESULT"], "w") as f:
        f.write(text)
else:
    sys.stdout.write(answer(sys.stdin.read()))
'''

NODE_AGENT = '''\
const readline = require("node:readline");
function answer(line) {
  const t0 = performance.now();
  JSON.parse(line);
  const outcome = { answer: 42 };
  outcome.agent_ms = performance.now() - t0;
  return JSON.stringify({ contract: "promptloop.trial/1", outcome });
}
if (process.argv.includes("--worker")) {
  const rl = readline.createInterface({ input: process.stdin });
  rl.on("line", (line) => process.stdout.write(answer(line) + "\\n"));
} else {
  let data = "";
  process.stdin.on("data", (c) => (data += c));
  process.stdin.on("end", () => process.stdout.write(answer(data)));
}
'''


async def trivial_agent(request: TrialRequest, context: TrialContext | None) -> TrialResultDoc:
    """The python adapter's trivial agent."""
    t0 = time.perf_counter()
    outcome: dict[str, Any] = {"answer": 42}
    outcome["agent_ms"] = (time.perf_counter() - t0) * 1000
    return TrialResultDoc(outcome=outcome)


def request_for(root: Path, index: int) -> TrialRequest:
    workspace = root / "trials" / f"t{index}" / "workspace"
    workspace.mkdir(parents=True)
    return TrialRequest(
        agent="bench", task={"id": "trivial", "input": {"content": "x"}},
        prompt=PromptInfo(name="system", text="Answer 42.", path="agent/prompt.txt",
                          ref="working tree"),
        workspace=str(workspace),
        model=ModelEndpoint(base_url="http://127.0.0.1:9/v1", model="scripted:none",
                            api_key="plt-bench-token-0123456789"),
        trial=TrialInfo(index=index, seed=index), published_at="2026-03-14T09:30:00",
        timeout_s=30,
    )


async def measure(spec: AnyAdapterSettings, repo: Path, trials: int) -> list[float]:
    """Overhead (ms) of each trial, in order."""
    work = Path(tempfile.mkdtemp(prefix="adapter-bench-"))
    requests = [request_for(work, i) for i in range(trials)]
    out: list[float] = []
    pool = WorkerPool(spec, repo_root=repo, agent="bench") if spec.adapter == "worker" else None
    try:
        for request in requests:
            t0 = time.perf_counter()
            got = await run_adapter_trial(spec, request, repo_root=repo, agent="bench",
                                          context=None, pool=pool)
            wall = (time.perf_counter() - t0) * 1000
            if got.status != "ok" or got.result is None:
                raise SystemExit(f"{spec.adapter}: {got.message}")
            out.append(wall - float(got.result.outcome["agent_ms"]))
    finally:
        if pool is not None:
            await pool.aclose()
        shutil.rmtree(work, ignore_errors=True)
    return out


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def process_floor(argv: list[str], n: int = 30) -> float:
    """Median ms to run `argv` to its end with no adapter (the interpreter's own start)."""
    import subprocess

    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--node", action="store_true", help="also a Node.js worker and command")
    args = parser.parse_args()
    repo = Path(tempfile.mkdtemp(prefix="adapter-bench-repo-"))
    (repo / "agent.py").write_text(PY_AGENT)
    (repo / "agent.js").write_text(NODE_AGENT)
    py = sys.executable
    cases = [
        ("python", parse_settings({"adapter": "python", "entry": "__main__:trivial_agent"})),
        ("worker", parse_settings({"adapter": "worker", "command": [py, "agent.py", "--worker"]})),
        ("command", parse_settings({"adapter": "command", "command": [py, "agent.py"]})),
        ("command, request and result in files",
         parse_settings({"adapter": "command", "command": [py, "agent.py"],
                         "request": "file", "result": "file"})),
    ]
    if args.node and shutil.which("node"):
        cases += [
            ("worker (node)", parse_settings({"adapter": "worker",
                                              "command": ["node", "agent.js", "--worker"]})),
            ("command (node)", parse_settings({"adapter": "command",
                                               "command": ["node", "agent.js"]})),
        ]
    print(f"# {args.trials} trials per adapter, one at a time; {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("\n| adapter | sandbox | median ms | p90 ms | max ms | first trial ms | target |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    mechanisms = [m for m in ("bwrap", "unshare") if box.probe(m)] + ["none"]
    runs = [(name, spec, mech) for name, spec in cases
            for mech in (mechanisms if spec.adapter in ("command", "worker") else ["-"])]
    for name, spec, mech in runs:
        os.environ[box.SANDBOX_VAR] = "off" if mech == "none" else mech
        got = await measure(spec, repo, args.trials)
        rest = got[1:] if spec.adapter == "worker" else got
        kind = spec.adapter
        target = TARGETS_MS.get(kind) if name == kind else None
        median = statistics.median(rest)
        verdict = "" if target is None else (
            f"<= {target:g} ms: {'met' if median <= target else 'MISSED'}")
        ok = ok and (target is None or median <= target)
        print(f"| {name} | {mech} | {median:.1f} | {p90(rest):.1f} | {max(rest):.1f} | "
              f"{got[0]:.1f} | "
              f"{verdict} |")
    floor = process_floor([py, "-c", "pass"])
    print(f"\nFor scale: `{Path(py).name} -c pass` alone takes {floor:.1f} ms (median of 30).")
    shutil.rmtree(repo, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    asyncio.run(main())
