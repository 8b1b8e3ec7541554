"""`adapter = "command"`: the agent's argv runs once per trial (adapters/runner.run_command:
the request on stdin or in a file, the result on stdout or in a file, its process group killed
at the time limit)."""

from __future__ import annotations

from promptloop.optimizer.adapters.contract import TrialContext, TrialRequest
from promptloop.optimizer.adapters.outcome import AdapterOutcome, TrialLabel
from promptloop.optimizer.adapters.registry import Adapter, adapter, settings_of
from promptloop.optimizer.adapters.runner import run_command
from promptloop.optimizer.core.adapter_settings import CommandSettings


@adapter("command")
class CommandAdapter(Adapter):
    async def attempt(self, request: TrialRequest, context: TrialContext | None
                      ) -> AdapterOutcome:
        spec: CommandSettings = settings_of(self, CommandSettings)
        return await run_command(spec, request, repo_root=self.setup.repo_root,
                                 label=TrialLabel(self.setup.agent, request))
