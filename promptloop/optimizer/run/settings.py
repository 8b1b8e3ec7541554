"""The run settings of the commands that evaluate prompts on a branch or a ref (optimize,
review) and the one place they become a suite run's `RunOptions`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from promptloop.agents.runtime import DEFAULT_MAX_TURNS, RuntimeConfig
from promptloop.optimizer.core.config import STATE_FOLDER
from promptloop.optimizer.core.prompt_target import PromptSource
from promptloop.optimizer.run.adaptive import AdaptiveLimit
from promptloop.optimizer.run.trial import RunOptions


class RunSettings(BaseModel):
    """Trials, concurrency, batch mode, the agent's runtime limits and the state folder."""

    trials: int | None = Field(None, ge=1)
    """Override of trials_per_run for every task (None = the task's own)."""
    concurrency: int | None = Field(None, ge=1)
    batch: bool = False
    """Send each run's judge calls (and agent turns) as provider batches (run/batching.py)."""
    max_turns: int = Field(DEFAULT_MAX_TURNS, ge=1)
    """Turns per agent run; the default is the agent runtime's (the original's 20)."""
    max_runs: int = Field(4, ge=1)
    state_dir: Path = Path(STATE_FOLDER)

    def run_options(self, agent_model: str, prompt: str, label: str,
                    indices: dict[str, list[int]] | None = None, *,
                    limit: AdaptiveLimit | None = None, run_name: str | None = None,
                    prompt_source: PromptSource | None = None) -> RunOptions:
        """One suite run of `prompt` under these settings; `limit` bounds it together with
        other runs going on at once (not in batch mode, where every trial of a run goes at
        once)."""
        return RunOptions(
            agent_model=agent_model,
            trials=self.trials,
            concurrency=self.concurrency,
            batch=self.batch,
            state_dir=self.state_dir,
            prompt_text=prompt,
            prompt_source=prompt_source,
            trial_indices=indices,
            runtime=RuntimeConfig(max_turns=self.max_turns, max_runs=self.max_runs),
            run_name=run_name,
            label=label,
            limit=None if self.batch else limit,
        )
