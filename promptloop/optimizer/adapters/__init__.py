"""Trial adapters: how promptloop runs one trial of any agent, in any language (issues 24, 29).

- `contract`: the versioned trial contract (`promptloop.trial/1`), the request promptloop sends
  (`TrialRequest`, the one of that name) and the result the agent returns, as pydantic models,
  their JSON Schema (`schema/trial-v1.schema.json`, copied to docs/trial-contract.schema.json),
  and `TrialContext`, what an in-process kind gets besides the request;
- `registry`: adapter kinds by name (`@adapter(kind)`), each `attempt(request, context) ->
  AdapterOutcome`; `kinds/`: the built-in kinds, one module each (command, worker, http,
  python, session: the bundled agents' in-process loop);
- `spec`: the agent table's adapter settings (the union lives in core/adapter_settings.py);
- `runner`: the command's process (`run_command`) and `run_adapter_trial`, one trial through any
  kind outside a suite run;
- `outcome`: `AdapterOutcome` (ok / failed / errored with a message, `timed_out`), reading a
  result document; `worker`: `WorkerPool`, the long-lived processes of the `worker` kind;
- `process`: the process hygiene both process kinds share (environment, process groups,
  capped output); `escape`: the check for files written outside the workspace.
"""
