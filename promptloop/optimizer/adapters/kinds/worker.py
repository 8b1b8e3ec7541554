"""`adapter = "worker"`: long-lived processes of the agent's, one JSON line in and one out per
trial (adapters/worker.WorkerPool, one process per concurrency slot, started on first use)."""

from __future__ import annotations

from promptloop.optimizer.adapters.contract import TrialContext, TrialRequest
from promptloop.optimizer.adapters.outcome import AdapterOutcome
from promptloop.optimizer.adapters.registry import Adapter, AdapterSetup, adapter, settings_of
from promptloop.optimizer.adapters.worker import WorkerPool
from promptloop.optimizer.core.adapter_settings import AdapterSettingsBase, WorkerSettings


@adapter("worker")
class WorkerAdapter(Adapter):
    def __init__(self, settings: AdapterSettingsBase, setup: AdapterSetup) -> None:
        super().__init__(settings, setup)
        spec: WorkerSettings = settings_of(self, WorkerSettings)
        self.pool = WorkerPool(spec, repo_root=setup.repo_root, agent=setup.agent,
                               size=max(1, setup.workers))

    async def attempt(self, request: TrialRequest, context: TrialContext | None
                      ) -> AdapterOutcome:
        return await self.pool.run(request, agent=self.setup.agent)

    async def aclose(self) -> None:
        await self.pool.aclose()
