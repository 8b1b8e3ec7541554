"""promptloop: auditable, statistically gated prompt optimization for LLM agents.

Everything installs under this one import package: `promptloop.agents` (the bundled agents
and the model layer), `promptloop.graders`, `promptloop.optimizer` (the loop, the gate, the
CLI)."""
