"""How fast `promptloop view` opens the runs list of a big state folder.

    python bench/view_runs.py [--runs 500] [--tasks 20] [--trials 2] [--keep DIR]

Saves `--runs` runs through the report store (4 suites, 2 agents, 3 models; each run has
`--tasks` tasks x `--trials` trials with short transcripts and grader scores), then serves the
folder on a loopback port and times GET / over HTTP: the first request of a fresh server (the
index is parsed and cached), then the median and worst of 20 warm requests, a filtered and a
searched list. The runs list reads only runs/index.jsonl, never a report.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from promptloop.agents.llm.types import Message
from promptloop.agents.transcript import Transcript
from promptloop.graders.base import Score
from promptloop.optimizer.core.results import Provenance, RunResult, TrialResult
from promptloop.optimizer.report.store import default_store_dir, list_runs, save_run
from promptloop.optimizer.view.server import running

SUITES = [("pkm_agent_capability", "capability", "pkm_agent"),
          ("pkm_agent_regression", "regression", "pkm_agent"),
          ("card_agent_capability", "capability", "card_agent"),
          ("card_agent_regression", "regression", "card_agent")]
MODELS = ("anthropic:claude-haiku-4-5", "openai:gpt-4.1-mini", "local:smollm2")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_run(n: int, tasks: int, trials: int) -> RunResult:
    suite, kind, agent = SUITES[n % len(SUITES)]
    started = T0 + timedelta(minutes=17 * n)
    out = []
    for t in range(tasks):
        for i in range(trials):
            passed = (n * 7 + t * 3 + i) % 5 != 0
            at = started + timedelta(seconds=3 * (t * trials + i))
            talk = Transcript(messages=[
                Message.system(f"You are the {agent}. Prompt version {n % 9}."),
                Message.user(f"Raw Input Content:\nnote {t} of run {n}"),
                Message.assistant("Filed the note." if passed else "I could not file it."),
            ])
            out.append(TrialResult(
                task_id=f"task-{t:02d}", bucket=f"bucket_{t % 6}", trial_index=i,
                status="passed" if passed else "failed", started_at=at,
                ended_at=at + timedelta(seconds=2), transcript=talk,
                scores=[Score(grader="completion", value=1.0 if passed else 0.0, passed=passed)],
                failure_reason=None if passed else "failed graders: completion"))
    return RunResult(
        run_name=f"{suite}-{started:%Y%m%dT%H%M%S}-{n:04d}", suite_name=suite, suite_kind=kind,
        agent_name=agent, suite_root=f"/suites/{suite}",
        task_ids=[f"task-{t:02d}" for t in range(tasks)],
        task_buckets={f"task-{t:02d}": f"bucket_{t % 6}" for t in range(tasks)},
        started_at=started, ended_at=started + timedelta(minutes=3),
        provenance=Provenance(git_commit=f"{n:040x}", agent_model=MODELS[n % len(MODELS)],
                              prompt_hashes={agent: f"{n % 9:064x}"}),
        trials=out)


def get(port: int, target: str) -> tuple[float, int, int]:
    """(seconds, status, bytes) of one GET over a fresh connection."""
    t = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", target)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return time.perf_counter() - t, resp.status, len(body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="build the state folder here and keep it")
    args = ap.parse_args()
    state = args.keep or Path(tempfile.mkdtemp(prefix="promptloop-bench-view-"))
    store = default_store_dir(state)
    t = time.perf_counter()
    for n in range(len(list_runs(store)), args.runs):
        save_run(make_run(n, args.tasks, args.trials), store)
    built = time.perf_counter() - t
    size = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    t = time.perf_counter()
    n_index = len(list_runs(store))
    index_s = time.perf_counter() - t
    print(f"{n_index} runs ({size / 1e6:.0f} MB on disk) built in {built:.0f}s; "
          f"list_runs alone {index_s * 1000:.0f} ms")
    with running(state) as server:
        cold, status, size_b = get(server.port, "/")
        assert status == 200, status
        warm = [get(server.port, "/")[0] for _ in range(20)]
        suite = get(server.port, "/?suite=pkm_agent_capability")
        search = get(server.port, "/?q=gpt-4.1")
    print(f"GET / first request (cold index): {cold * 1000:.0f} ms, {size_b / 1e3:.0f} kB")
    print(f"GET / warm: median {statistics.median(warm) * 1000:.0f} ms, "
          f"worst {max(warm) * 1000:.0f} ms (20 requests)")
    print(f"GET /?suite=pkm_agent_capability: {suite[0] * 1000:.0f} ms; "
          f"GET /?q=gpt-4.1: {search[0] * 1000:.0f} ms")
    print("under 1 s: " + ("yes" if max(cold, *warm) < 1.0 else "NO"))


if __name__ == "__main__":
    main()
