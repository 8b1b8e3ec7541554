"""How an agent's trial runs: the adapter part of its table in promptloop.toml.

```toml
adapter = "worker"                                  # command | worker | http | python
command = ["node", "agent/agent.js", "--worker"]    # command / worker
request = "stdin"                                   # command: "stdin" | "file"
result = "stdout"                                   # command: "stdout" | "file"
# url = "http://127.0.0.1:8080/trial"               # http
# entry = "agents.adapters:card_agent"              # python
env = ["MY_AGENT_FLAG"]
timeout = 120
```
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MB = 1024 * 1024
DEFAULT_MAX_OUTPUT = 10 * MB

AdapterKind = Literal["command", "worker", "http", "python"]


class AdapterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: AdapterKind = "command"
    command: list[str] = Field(default_factory=list)
    """command / worker: the argv. Relative paths in it that exist under the repository root
    are made absolute (the argv is written as run from the repository root)."""
    request: Literal["stdin", "file"] = "stdin"
    """command: the request on stdin, or in a file named by $PROMPTLOOP_REQUEST."""
    result: Literal["stdout", "file"] = "stdout"
    """command: the result on stdout, or written to the file named by $PROMPTLOOP_RESULT."""
    url: str | None = None
    """http: the URL the request is POSTed to."""
    entry: str | None = None
    """python: `package.module:function`."""
    env: list[str] = Field(default_factory=list)
    """Names of promptloop's environment variables passed through to the agent's process."""
    timeout: float | None = Field(None, gt=0)
    """Seconds per trial (None: the task's timeout_seconds)."""
    max_output_bytes: int = Field(DEFAULT_MAX_OUTPUT, gt=0)
    """The largest result accepted (stdout, result file, worker line, HTTP body)."""
    workers: int = Field(1, ge=1, le=256)
    """worker: processes run side by side (one per concurrency slot)."""

    @model_validator(mode="after")
    def _needs(self) -> AdapterSpec:
        if self.kind in ("command", "worker") and not self.command:
            raise ValueError(f"adapter {self.kind!r} needs `command` (the argv to run)")
        if self.kind == "http" and not self.url:
            raise ValueError("adapter 'http' needs `url`")
        if self.kind == "python" and (not self.entry or ":" not in self.entry):
            raise ValueError("adapter 'python' needs `entry` = \"package.module:function\"")
        return self


__all__ = ["DEFAULT_MAX_OUTPUT", "MB", "AdapterKind", "AdapterSpec"]
