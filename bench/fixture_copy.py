"""Per-trial cost of a big knowledge base: 10,000 files (run by hand, not in CI).

Builds a synthetic PKM base fixture (PARA folders, ~1 KB notes), then times what the runner does
for every trial of a task that uses it: copy the fixture into a fresh workspace
(`runner.build_workspace`), open a PKM session (snapshot + the tree in the first message),
capture the outcome (snapshot, diff, file contents) and delete the workspace.

    .venv/bin/python bench/fixture_copy.py [--files 10000] [--repeats 5]
    TMPDIR=/dev/shm .venv/bin/python bench/fixture_copy.py   # workspaces on tmpfs
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promptloop.agents.base import AgentInput, load_prompt, prepare_workspace
from promptloop.agents.registry import get_agent
from promptloop.agents.transcript import Transcript
from promptloop.optimizer.core.suites import DEFAULT_CLOCK, LoadedTask, TaskSpec
from promptloop.optimizer.run.workspaces import build_workspace

PARA = ("Projects", "Areas", "Resources", "Archives")
FACT = "2026/03/14.md#ts_1"


def make_fixture(root: Path, files: int) -> int:
    """`files` notes spread over PARA/<topic>/<note>.md; returns the total bytes."""
    per_dir = 100
    total = 0
    for i in range(files):
        folder = root / "PKM" / PARA[i % 4] / f"topic-{(i // per_dir):03d}"
        folder.mkdir(parents=True, exist_ok=True)
        body = (
            f"# Note {i}\n\n"
            + "".join(f"- point {j} about topic {i // per_dir}, kept short.\n" for j in range(20))
            + f"<!-- fact_id: 2025/01/{1 + i % 28:02d}.md#ts_{i} -->\n"
        )
        (folder / f"note-{i:05d}.md").write_text(body, encoding="utf-8")
        total += len(body.encode())
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    phases: dict[str, list[float]] = {"copy": [], "open": [], "outcome": [], "delete": []}
    first_message_chars = 0
    with tempfile.TemporaryDirectory(prefix="promptloop-bench-kb-") as tmp:
        fixture = Path(tmp) / "fixture"
        size = make_fixture(fixture, args.files)
        spec = TaskSpec.model_validate(
            {
                "id": "big-kb",
                "description": "a knowledge base of many files",
                "input": {"fact_id": FACT, "content": "Booked the dentist for Friday."},
                "graders": [{"name": "pkm_completion"}],
            }
        )
        task = LoadedTask(spec, fixture / "task.json", fixture, None, "bench")
        prompt = load_prompt("pkm_agent")
        agent_input = AgentInput(FACT, spec.input.content, datetime.fromisoformat(DEFAULT_CLOCK))
        for _ in range(args.repeats):
            dest = Path(tempfile.mkdtemp(prefix="promptloop-trial-"))
            t0 = time.perf_counter()
            ws = build_workspace(task, dest)
            t1 = time.perf_counter()
            prepare_workspace(ws, agent_input)
            session = get_agent("pkm_agent")(ws, agent_input, prompt)
            t2 = time.perf_counter()
            session.outcome(Transcript())
            t3 = time.perf_counter()
            shutil.rmtree(dest)
            t4 = time.perf_counter()
            for name, start, end in (
                ("copy", t0, t1),
                ("open", t1, t2),
                ("outcome", t2, t3),
                ("delete", t3, t4),
            ):
                phases[name].append(end - start)
            first_message_chars = len(session.first_message())
    print(
        f"knowledge base of {args.files} files, {size / 1e6:.1f} MB, {args.repeats} repeats, "
        f"temp dir {tempfile.gettempdir()}"
    )
    for name, values in phases.items():
        print(
            f"{name:8s} median {statistics.median(values) * 1000:8.1f} ms   "
            f"min {min(values) * 1000:8.1f} ms   "
            f"({args.files / statistics.median(values):,.0f} files/s)"
        )
    total = sum(statistics.median(v) for v in phases.values())
    print(f"per trial {total * 1000:.0f} ms; first user message {first_message_chars:,} chars")


if __name__ == "__main__":
    main()
