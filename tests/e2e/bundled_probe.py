"""What the bundled card and PKM agents do on a small suite each, with the scripted policies of
tests/policies.py: every trial's status, outcome, scores and transcript shape, and the inputs of
its trial cache key. tests/e2e/test_bundled_unchanged.py compares it with the golden file
recorded from commit dba772a (the last commit before issue 24 changed how agents are declared
and run); run as a script it prints the JSON (how the golden file was made):

    git worktree add /tmp/golden dba772a
    cd /tmp/golden && PYTHONPATH=/tmp/golden /work/main/.venv/bin/python \\
        /work/main/tests/e2e/bundled_probe.py > bundled_dba772a.json

Only APIs that exist unchanged in both versions are used here (load_suite, run_suite,
RunOptions, runner.trial_cache_key).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SUITES = (("card_agent", "regression", "card"), ("pkm_agent", "regression", "pkm"))
"""(agent, suite folder under tasks/<agent>/, scripted agent model)."""
TRIALS = 2


@contextmanager
def recording_cache_keys() -> Iterator[list[dict[str, Any]]]:
    """The arguments of every trial_cache_key call the runner makes, in a list."""
    import promptloop.optimizer.run.runner as runner

    calls: list[dict[str, Any]] = []
    original = runner.trial_cache_key

    def spy(task_hash: str, prompt_hash: str, agent_model: str, judge_model: str | None,
            trial_index: int, variant: str = "") -> str:
        calls.append({"task_hash": task_hash, "prompt_hash": prompt_hash,
                      "agent_model": agent_model, "judge_model": judge_model,
                      "trial_index": trial_index, "variant": variant})
        return original(task_hash, prompt_hash, agent_model, judge_model, trial_index, variant)

    runner.trial_cache_key = spy
    try:
        yield calls
    finally:
        runner.trial_cache_key = original


def digest(value: Any) -> str:
    """A short hash of a JSON value (outcomes and rationales are large; the golden keeps
    their hashes)."""
    blob = json.dumps(value, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _trial(t: Any) -> dict[str, Any]:
    return {
        "status": t.status,
        "failure_reason": t.failure_reason,
        "infra_error": t.infra_error,
        "outcome": digest(t.outcome),
        "outcome_keys": sorted(t.outcome),
        "scores": [{"grader": s.grader, "value": s.value, "passed": s.passed,
                    "rationale": digest(s.rationale),
                    "assertions": digest([a.model_dump(mode="json") for a in s.assertions])}
                   for s in t.scores],
        "tool_calls": [c.tool_name for c in t.transcript.tool_calls],
        "seed": t.seed,
    }


async def _run(root: Path, state: Path) -> dict[str, Any]:
    from promptloop.optimizer.core.suites import load_suite
    from promptloop.optimizer.run.cache import HARNESS_VERSION
    from promptloop.optimizer.run.runner import run_suite
    from promptloop.optimizer.run.trial import RunOptions
    from tests import policies

    out: dict[str, Any] = {"harness_version": HARNESS_VERSION, "suites": {}}
    for agent, kind, model in SUITES:
        suite = load_suite(root / "tasks" / agent / kind)
        options = RunOptions(agent_model=f"scripted:{model}", judge_model="scripted:judge",
                             trials=TRIALS, concurrency=4, state_dir=state, reuse=False)
        client = policies.card_model() if model == "card" else policies.pkm_model()
        with recording_cache_keys() as keys:
            run = await run_suite(suite, options, client, policies.judge_model())
        by_hash = {t.content_hash: t.id for t in suite.tasks}
        key_inputs = {f"{by_hash[k['task_hash']]}#{k['trial_index']}": k for k in keys}
        out["suites"][f"{agent}/{kind}"] = {
            "suite_hash": suite.content_hash,
            "prompt_hashes": run.provenance.prompt_hashes,
            "trials": {f"{t.task_id}#{t.trial_index}": _trial(t) for t in run.trials},
            "cache_key_inputs": dict(sorted(key_inputs.items())),
        }
    return out


def probe(root: Path, state: Path) -> dict[str, Any]:
    """Run both suites of the checkout at `root` (the current folder must be `root`)."""
    result: dict[str, Any] = json.loads(json.dumps(asyncio.run(_run(root, state)),
                                                   sort_keys=True, default=str))
    return result


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    import tests.conftest  # noqa: F401  (clears provider keys, registers scripted models)

    with tempfile.TemporaryDirectory() as tmp:
        json.dump(probe(Path.cwd(), Path(tmp)), sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
