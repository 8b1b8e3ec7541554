"""How one trial of an agent runs: the adapter part of its `[agents.<name>]` table.

One pydantic discriminated union on the key `adapter`, embedded in the agent table
(`core/project.AgentConfig.spec`) and validated once, there:

```toml
adapter = "worker"                                  # command | worker | http | python | session
command = ["node", "agent/agent.js", "--worker"]    # command / worker
request = "stdin"                                   # command: "stdin" | "file"
result = "stdout"                                   # command: "stdout" | "file"
# url = "http://127.0.0.1:8080/trial"               # http
# entry = "package.module:function"                 # python / session
env = ["MY_AGENT_FLAG"]
timeout = 120
```

Every field carries an explicit mark `runs_code` (`json_schema_extra`): True when the field
decides what code runs (a program, a URL, a module, what the process is handed). Review takes
the marked keys from the base ref, never from a pull request's head
(`workflows/review_trust.trusted_keys`); a test fails when a field has no mark.

Which road a trial takes is decided here, from the configuration alone: `session` is an entry
built into promptloop's agent loop (the bundled agents); `python` is a `(request, context)`
function. No module is imported to decide it. The implementations of the kinds live in
`optimizer/adapters/kinds/` and register themselves (`adapters/registry.adapter`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
)
from pydantic.fields import FieldInfo

from promptloop.agents.secrets import refuse_provider_keys

MB = 1024 * 1024
DEFAULT_MAX_OUTPUT = 10 * MB
RUNS_CODE = "runs_code"
"""The mark every adapter setting carries: does it decide what code runs?"""
ENTRY_PATTERN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def runs_code(default: Any = ..., **kw: Any) -> Any:
    """A field that decides what code runs (review takes it from the base ref)."""
    return Field(default, json_schema_extra={RUNS_CODE: True}, **kw)


def plain(default: Any = ..., **kw: Any) -> Any:
    """A field that does not decide what code runs (a limit, a description)."""
    return Field(default, json_schema_extra={RUNS_CODE: False}, **kw)


def marked(info: FieldInfo) -> bool | None:
    """A field's `runs_code` mark (None: unmarked)."""
    extra = info.json_schema_extra
    value = extra.get(RUNS_CODE) if isinstance(extra, dict) else None
    return value if isinstance(value, bool) else None


class AdapterSettingsBase(BaseModel):
    """What every adapter kind accepts. Strict: `timeout = "300"` is an error, not 300."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    adapter: str = runs_code()
    pass_provider_keys: bool = runs_code(False, validation_alias=AliasChoices(
        "pass-provider-keys", "pass_provider_keys"))
    """Let `env` name a provider key (unsafe: the agent reaches its model through the
    gateway; agents.secrets.refuse_provider_keys). Before `env`, whose check reads it."""
    env: list[str] = runs_code(default_factory=list)
    """Names of promptloop's environment variables passed through to the agent's process."""
    timeout: float | None = plain(None, gt=0)
    """Seconds per trial (None: the task's timeout_seconds)."""
    max_output_bytes: int = plain(DEFAULT_MAX_OUTPUT, gt=0)
    """The largest result accepted (stdout, result file, worker line, HTTP body)."""

    @field_validator("env")
    @classmethod
    def _keys(cls, env: list[str], info: ValidationInfo) -> list[str]:
        # a field validator, so the error names the key 'env' (not the table's 'adapter')
        refuse_provider_keys(env, bool(info.data.get("pass_provider_keys")))
        return env

    @property
    def in_process(self) -> bool:
        """The agent runs inside promptloop's own agent loop (no gateway, no process)."""
        return False


class ProcessSettings(AdapterSettingsBase):
    """A kind that starts a program of the agent's (`command`, `worker`)."""

    command: list[str] = runs_code(min_length=1)
    """The argv. Relative paths in it that exist under the repository root are made absolute
    (the argv is written as run from the repository root)."""

    @property
    def workers(self) -> int:
        """Processes a worker pool starts when the run does not say (it passes the agent's
        `concurrency` or the run's)."""
        return 1


class CommandSettings(ProcessSettings):
    """`command`: the argv runs once per trial."""

    adapter: Literal["command"] = runs_code()
    request: Literal["stdin", "file"] = runs_code("stdin")
    """The request on stdin, or in a file named by $PROMPTLOOP_REQUEST."""
    result: Literal["stdout", "file"] = runs_code("stdout")
    """The result on stdout, or written to the file named by $PROMPTLOOP_RESULT."""


class WorkerSettings(ProcessSettings):
    """`worker`: long-lived processes, one JSON line in and out per trial."""

    adapter: Literal["worker"] = runs_code()


class HttpSettings(AdapterSettingsBase):
    """`http`: the request is POSTed to `url`."""

    adapter: Literal["http"] = runs_code()
    url: str = runs_code()

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an http(s) URL")
        return v


class _EntrySettings(AdapterSettingsBase):
    entry: str = runs_code()
    """`package.module:function`, looked up from the repository top."""

    @field_validator("entry")
    @classmethod
    def _entry(cls, v: str) -> str:
        if not ENTRY_PATTERN.match(v):
            raise ValueError(f"{v!r} is not 'package.module:function'")
        return v


class PythonSettings(_EntrySettings):
    """`python`: `entry(request, context)` is awaited in promptloop's interpreter."""

    adapter: Literal["python"] = runs_code()


class SessionSettings(_EntrySettings):
    """`session`: `entry` is a `@session_factory` (agents/base.py) whose session promptloop's
    agent loop runs with the trial's model client, transcript and limits (the bundled agents)."""

    adapter: Literal["session"] = runs_code()

    @property
    def in_process(self) -> bool:
        return True


AnyAdapterSettings = (
    CommandSettings | WorkerSettings | HttpSettings | PythonSettings | SessionSettings
)
AdapterSettings = Annotated[AnyAdapterSettings, Field(discriminator="adapter")]
"""The one union of adapter settings, discriminated on `adapter`."""
MEMBERS: tuple[type[AdapterSettingsBase], ...] = (
    CommandSettings, WorkerSettings, HttpSettings, PythonSettings, SessionSettings)
AdapterKind = Literal["command", "worker", "http", "python", "session"]


def kind_of(model: type[AdapterSettingsBase]) -> str:
    """The `adapter` value a member of the union is chosen by."""
    annotation = model.model_fields["adapter"].annotation
    return str(annotation.__args__[0])  # type: ignore[union-attr]


def kinds() -> tuple[str, ...]:
    """Every adapter kind of the union, in declaration order."""
    return tuple(kind_of(m) for m in MEMBERS)


def settings_keys() -> tuple[str, ...]:
    """Every key an adapter kind accepts (the agent table's adapter part)."""
    seen: dict[str, None] = {}
    for m in MEMBERS:
        for name, info in m.model_fields.items():
            seen[name] = None
            alias = info.validation_alias
            if isinstance(alias, AliasChoices):  # `pass-provider-keys` as written in TOML
                seen.update(dict.fromkeys(c for c in alias.choices if isinstance(c, str)))
    return tuple(seen)


def keys_of(kind: str) -> tuple[str, ...]:
    for m in MEMBERS:
        if kind_of(m) == kind:
            return tuple(m.model_fields)
    return ()


def code_keys() -> tuple[str, ...]:
    """The adapter keys marked `runs_code`, over every kind."""
    seen: dict[str, None] = {}
    for m in MEMBERS:
        seen.update({k: None for k, f in m.model_fields.items() if marked(f)})
    return tuple(seen)


__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "MB",
    "MEMBERS",
    "RUNS_CODE",
    "AdapterKind",
    "AdapterSettings",
    "AdapterSettingsBase",
    "AnyAdapterSettings",
    "CommandSettings",
    "HttpSettings",
    "ProcessSettings",
    "PythonSettings",
    "SessionSettings",
    "WorkerSettings",
    "code_keys",
    "keys_of",
    "kind_of",
    "kinds",
    "marked",
    "parse_settings",
    "plain",
    "runs_code",
    "settings_keys",
]


def parse_settings(data: dict[str, Any]) -> AnyAdapterSettings:
    """Adapter settings from a mapping (`{"adapter": "worker", "command": [...]}`), as the agent
    table validates them (for code and tests that build them outside a promptloop.toml)."""
    return _ADAPTER.validate_python(data)


_ADAPTER: TypeAdapter[AnyAdapterSettings] = TypeAdapter(AdapterSettings)
