"""The trial contract, version 1 (`promptloop.trial/1`): what promptloop sends the process that
runs one trial (`TrialRequest`) and what it answers (`TrialResultDoc`).

The request is promptloop's own document (unknown keys refused); the result is the agent's, read
leniently (unknown keys ignored) except where it matters: `outcome` must be an object, and a
`contract` given must be this version. `error.cause == "agent"` makes the trial FAILED (the
agent's own fault), `"infrastructure"` makes it ERRORED (not counted).

The JSON Schema of both documents ships in the package (`schema/trial-v1.schema.json`) and in
docs/trial-contract.schema.json; `python -m optimizer.adapters.contract` rewrites both from these
models (a test fails when either differs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import models_json_schema

if TYPE_CHECKING:
    from promptloop.agents.base import AgentInput
    from promptloop.agents.llm.types import ModelClient
    from promptloop.agents.registry import AgentOptions
    from promptloop.agents.runtime import RuntimeConfig
    from promptloop.agents.transcript import Transcript

CONTRACT: Final = "promptloop.trial/1"
SCHEMA_ID = "https://promptloop.dev/schemas/trial-v1.schema.json"
SCHEMA_FILE = Path(__file__).resolve().parent / "schema" / "trial-v1.schema.json"
DOCS_SCHEMA = "docs/trial-contract.schema.json"
"""The copy in the repository's docs/ folder (relative to the repository root)."""


class _Ours(BaseModel):
    """A document promptloop writes: unknown keys are a bug."""

    model_config = ConfigDict(extra="forbid")


class _Theirs(BaseModel):
    """A document the agent writes: unknown keys are ignored (later versions may add some)."""

    model_config = ConfigDict(extra="ignore")


class PromptInfo(_Ours):
    """The prompt text the trial must use, and where it came from."""

    name: str = Field(description="The prompt target's name (e.g. 'system').")
    text: str = Field(description="The prompt text to use for this trial.")
    path: str | None = Field(None, description="The file holding it, relative to the repository.")
    ref: str | None = Field(
        None, description="The commit it was read at, or 'working tree'."
    )
    region: str | None = Field(
        None,
        description="The region of the file, e.g. 'template literal SYSTEM_PROMPT (lines 4-31)'; "
        "null for a whole file.",
    )


class ModelEndpoint(_Ours):
    """The OpenAI-compatible chat-completions endpoint the agent calls (promptloop's loopback
    gateway: `api_key` is a per-run token, never a real provider key)."""

    base_url: str = Field(description="POST {base_url}/chat/completions.")
    model: str = Field(description="The model id to send.")
    api_key: str = Field(description="The gateway's per-run token (Authorization: Bearer).")


class TrialInfo(_Ours):
    index: int = Field(ge=0, description="The trial's index for this task (0-based).")
    seed: int = Field(description="The trial's seed (the same for every prompt).")


class TrialRequest(_Ours):
    """One trial to run."""

    contract: Literal["promptloop.trial/1"] = CONTRACT
    agent: str = Field(description="The agent's name in promptloop.toml.")
    task: dict[str, Any] = Field(description="The task, as in its task.json.")
    prompt: PromptInfo
    workspace: str = Field(
        description="Absolute path of the trial's fresh workspace, made from the task's "
        "fixture; the agent may write only here."
    )
    model: ModelEndpoint
    trial: TrialInfo
    published_at: str = Field(description="The suite's fixed clock (ISO 8601).")
    timeout_s: float = Field(gt=0, description="The trial's time limit in seconds.")

    @property
    def task_id(self) -> str:
        return str(self.task.get("id", "?"))


class ToolCallDoc(_Theirs):
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None
    result: Any = None
    is_error: bool = Field(False, description="The tool reported an error (with `result`).")

    @model_validator(mode="before")
    @classmethod
    def _openai_shape(cls, data: Any) -> Any:
        """An OpenAI tool call (`{"id", "type", "function": {"name", "arguments"}}`) as the
        agent sent it back to the model is read as the same call."""
        if isinstance(data, dict) and "name" not in data and isinstance(data.get("function"),
                                                                        dict):
            fn = data["function"]
            return {**data, "name": fn.get("name"), "arguments": fn.get("arguments") or {}}
        return data


class TranscriptMessage(_Theirs):
    """One message of the trial's conversation (OpenAI-like)."""

    role: str
    content: str | None = None
    tool_calls: list[ToolCallDoc] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = Field(
        False, description="A tool message: the tool reported an error (the model saw its "
        "text; the failure package marks the call ERROR).")


class UsageDoc(_Theirs):
    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)


class ErrorDoc(_Theirs):
    """Why the agent could not finish: its own fault ("agent": the trial fails) or not
    ("infrastructure": the trial is errored and not counted)."""

    cause: Literal["agent", "infrastructure"]
    message: str = ""


class TrialResultDoc(_Theirs):
    """What one trial came to."""

    contract: Literal["promptloop.trial/1"] = CONTRACT
    outcome: dict[str, Any] = Field(
        description="REQUIRED: the environment state the graders read."
    )
    transcript: list[TranscriptMessage] = Field(default_factory=list)
    usage: UsageDoc | None = None
    error: ErrorDoc | None = None


@dataclass
class TrialContext:
    """What an in-process adapter (`python`, `session`) gets besides the request: promptloop's
    own objects for the trial (the recorded model client, the transcript to fill, the runtime
    settings, the workspace and the opt-in agent options)."""

    model: ModelClient
    transcript: Transcript
    runtime: RuntimeConfig
    workspace: Path
    agent_options: AgentOptions
    agent_input: AgentInput | None = None
    """The input a `session` agent is built with (fact id, content, publish time, language);
    None: read from the request."""
    trial_key: str = ""
    """Names the trial apart from every other of the run (`suite/task#index`): batched model
    rounds key its requests with it."""
    make_workspace: Callable[[], None] | None = None
    """Fills the request's workspace from the task's fixtures, when the caller left that to
    the adapter (an in-process kind does it in the same worker thread as its own file work);
    None: the workspace is ready."""


def schema_document() -> dict[str, Any]:
    """The JSON Schema of the contract: the request and the result as two definitions."""
    _, defs = models_json_schema(
        [(TrialRequest, "validation"), (TrialResultDoc, "validation")],
        ref_template="#/$defs/{model}",
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"promptloop trial contract ({CONTRACT})",
        "description": "The request promptloop sends to the process running one trial "
        "($defs/TrialRequest) and the result it answers ($defs/TrialResultDoc).",
        "anyOf": [{"$ref": "#/$defs/TrialRequest"}, {"$ref": "#/$defs/TrialResultDoc"}],
        **defs,
    }


def schema_text() -> str:
    return json.dumps(schema_document(), indent=2, sort_keys=True) + "\n"


def write_schema(repo_root: Path | None = None) -> list[Path]:
    """Write the schema into the package and (with `repo_root`) into its docs/ folder."""
    text = schema_text()
    paths = [SCHEMA_FILE, *([repo_root / DOCS_SCHEMA] if repo_root is not None else [])]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return paths


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    for written in write_schema(Path(__file__).resolve().parents[3]):
        print(written)
