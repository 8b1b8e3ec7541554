"""Model calls of one optimize iteration vs. a naive rerun of both suites (run by hand).

In a temporary git repository holding a copy of prompts/, runs `optimize` on the bundled PKM
suites (capability + regression) with the prompt-sensitive scripted agent and judge of
tests/policies.py and a scripted proposer, counting every model call:

- naive: what a loop without caching pays per iteration (both suites for the baseline and
  both again for the candidate, plus the proposer call), and one that also reruns the other
  agent's (card) suites although its prompt did not change;
- cold: our first iteration in a fresh state folder (baseline not cached yet);
- warm: a later iteration on the same base (the baseline comes from the trial cache);
- repeat: a proposal identical to one already evaluated (refused by the ledger, no reruns).

    .venv/bin/python bench/optimize_cost.py
"""

from __future__ import annotations

import asyncio
import difflib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.optimizer.core.suites import REPO_ROOT, TASKS_DIR, load_suite
from promptloop.optimizer.run.runner import RunOptions, run_suite
from promptloop.optimizer.workflows.optimize import OptimizeConfig, OptimizeResult, optimize
from tests import policies

PROMPT = "prompts/pkm_agent.md"
RULES = (
    "- the input is only a greeting, filler or emoji: nothing in it is worth keeping.",
    "- the input is only a greeting or a thank-you with no fact, plan or feeling to keep.",
)


@dataclass
class Calls:
    agent: int = 0
    judge: int = 0
    proposer: int = 0

    @property
    def total(self) -> int:
        return self.agent + self.judge + self.proposer


def proposal(prompt: str, rule: str) -> str:
    """A proposer reply: hypothesis plus a unified diff adding `rule` to the skip list."""
    lines = prompt.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("Call `skip_pkm_organization`"))
    new = [*lines[: at + 1], rule + "\n", *lines[at + 1 :]]
    diff = "".join(difflib.unified_diff(lines, new, f"a/{PROMPT}", f"b/{PROMPT}"))
    return f"HYPOTHESIS: greetings are not listed as a reason to skip.\n\n```diff\n{diff}```\n"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def session(repo: Path, state: Path, reply_text: str) -> tuple[Calls, OptimizeResult]:
    agent, judge = policies.pkm_model(), policies.judge_model()
    proposer = ScriptedModel([reply(reply_text)])
    config = OptimizeConfig.model_validate(
        {
            "suite": "pkm_agent",
            "bucket": "skip_trivial",
            "iterations": 1,
            "agent_model": "scripted:pkm",
            "judge_model": "scripted:judge",
            "proposer_model": "scripted:proposer",
            "proposer_format": "diff",
            "repo": repo,
            "state_dir": state,
        }
    )
    result = asyncio.run(optimize(config, agent=agent, judge=judge, proposer=proposer))
    return Calls(len(agent.calls), len(judge.calls), len(proposer.calls)), result


def full_evaluation(state: Path, agent_name: str) -> Calls:
    """One uncached run of an agent's capability and regression suites."""
    calls = Calls()
    prompt = (REPO_ROOT / "prompts" / f"{agent_name}.md").read_text(encoding="utf-8")
    for kind in ("capability", "regression"):
        agent = policies.pkm_model() if agent_name == "pkm_agent" else policies.card_model()
        judge = policies.judge_model()
        options = RunOptions(
            agent_model=f"scripted:{agent_name}",
            judge_model="scripted:judge",
            state_dir=state,
            prompt_text=prompt,
            reuse=False,
        )
        suite = load_suite(TASKS_DIR / agent_name / kind)
        asyncio.run(run_suite(suite, options, agent, judge))
        calls.agent += len(agent.calls)
        calls.judge += len(judge.calls)
    return calls


def main() -> None:
    prompt = (REPO_ROOT / PROMPT).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="promptloop-bench-opt-") as tmp:
        repo, state = Path(tmp) / "repo", Path(tmp) / "state"
        shutil.copytree(REPO_ROOT / "prompts", repo / "prompts")
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "base")
        one = full_evaluation(Path(tmp) / "naive", "pkm_agent")
        card = full_evaluation(Path(tmp) / "naive", "card_agent")
        naive = Calls(2 * one.agent, 2 * one.judge, 1)
        everything = Calls(2 * (one.agent + card.agent), 2 * (one.judge + card.judge), 1)
        rows = [
            ("one evaluation of the PKM suites", one, ""),
            ("naive iteration (2 evaluations + proposer)", naive, ""),
            ("naive, also rerunning the card suites", everything, ""),
        ]
        for label, text in (
            ("cold iteration (fresh state)", proposal(prompt, RULES[0])),
            ("warm iteration (baseline cached)", proposal(prompt, RULES[1])),
            ("repeat of an evaluated proposal", proposal(prompt, RULES[0])),
        ):
            calls, result = session(repo, state, text)
            it = result.iterations[0]
            note = f"{it.outcome}; baseline {result.baseline_cached_trials}/"
            note += f"{result.baseline_trials} trials cached"
            rows.append((label, calls, note))
    print("model calls per optimize iteration, PKM suites (capability + regression)")
    print(f"{'':44s} {'agent':>6s} {'judge':>6s} {'prop.':>6s} {'total':>6s} {'vs naive':>8s}")
    for label, c, note in rows:
        print(
            f"{label:44s} {c.agent:6d} {c.judge:6d} {c.proposer:6d} {c.total:6d} "
            f"{c.total / naive.total:8.2f}  {note}"
        )


if __name__ == "__main__":
    main()
