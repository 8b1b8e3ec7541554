"""Trial adapters: how promptloop runs one trial of any agent, in any language (issue 24).

- `contract`: the versioned trial contract (`promptloop.trial/1`), the request promptloop sends
  and the result the agent returns, as pydantic models, and their JSON Schema
  (`schema/trial-v1.schema.json`, copied to docs/trial-contract.schema.json);
- `spec`: `AdapterSpec`, how an agent's table in promptloop.toml says a trial runs;
- `runner`: `run_adapter_trial`, one trial through a `command`, `worker`, `http` or `python`
  adapter, always answering an `AdapterOutcome` (ok / failed / errored with a message) for
  anything the agent process does;
- `worker`: `WorkerPool`, the long-lived processes of the `worker` adapter;
- `process`: the process hygiene both process adapters share (environment, process groups,
  capped output); `escape`: the check for files written outside the workspace.
"""
