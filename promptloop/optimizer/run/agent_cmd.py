"""`promptloop agent`: run one agent on one input in a workspace, for debugging prompts."""

from __future__ import annotations

import difflib
import json
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from promptloop.agents.base import AgentInput, load_prompt, prepare_workspace
from promptloop.agents.registry import AgentOptions
from promptloop.agents.runtime import DEFAULT_MAX_TURNS, RuntimeConfig, run_agent
from promptloop.agents.transcript import Transcript
from promptloop.agents.trees import copy_tree
from promptloop.agents.workspace import FactId, FactIdError, Workspace
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.names import check_agent
from promptloop.optimizer.run.agents import get_agent
from promptloop.optimizer.run.models import ModelIds, ModelSet


@dataclass(frozen=True)
class AgentCommand:
    agent_name: str
    content: str
    fact_id: str
    workspace: Path | None
    model: str
    base_url: str | None
    published_at: datetime
    max_turns: int = DEFAULT_MAX_TURNS
    agent_options: AgentOptions | None = None
    """None: from $PROMPTLOOP_AGENT_OPTIONS."""


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pkm_unified_diff(before: dict[str, bytes], after: dict[str, bytes]) -> str:
    chunks: list[str] = []
    for path in sorted(set(before) | set(after)):
        a = before.get(path, b"").decode("utf-8", "replace").splitlines(keepends=True)
        b = after.get(path, b"").decode("utf-8", "replace").splitlines(keepends=True)
        if a == b and (path in before) == (path in after):
            continue
        chunks.extend(
            difflib.unified_diff(
                a,
                b,
                fromfile=f"a/PKM/{path}" if path in before else "/dev/null",
                tofile=f"b/PKM/{path}" if path in after else "/dev/null",
            )
        )
    return "".join(chunks)


def workspace_copy(source: Path) -> Path:
    """A copy of the user's workspace folder to run the agent on (issue 19: the tools may
    rewrite files there, e.g. another fact's card), in a new temporary folder that is kept so
    the result can be inspected. A missing or empty `source` holds nothing of the user's: it is
    used as it is."""
    if not source.is_dir() or not any(source.iterdir()):
        return source
    dest = Path(tempfile.mkdtemp(prefix=f"promptloop-agent-{source.name}-"))
    copy_tree(source, dest)
    return dest


async def run_agent_command(cmd: AgentCommand, root: Path) -> dict[str, Any]:
    """Run the agent and return a JSON-able result (outcome, diff, tool calls, summary)."""
    try:
        factory = get_agent(check_agent(cmd.agent_name),
                            cmd.agent_options or AgentOptions.from_env())
    except (KeyError, ValueError) as err:
        raise ConfigError(str(err).strip("'\"")) from err
    fact_id = cmd.fact_id or f"{cmd.published_at:%Y/%m/%d}.md#ts_1"
    try:
        FactId.parse(fact_id)
    except FactIdError as err:
        raise ConfigError(f"--fact-id: {err}") from err
    root.mkdir(parents=True, exist_ok=True)
    ws = Workspace(root)
    (ws.pkm).mkdir(exist_ok=True)
    before = ws.snapshot()
    agent_input = AgentInput(fact_id=fact_id, content=cmd.content, published_at=cmd.published_at)
    prepare_workspace(ws, agent_input)
    session = factory(ws, agent_input, load_prompt(cmd.agent_name))
    transcript = Transcript()
    async with ModelSet(ModelIds(agent=cmd.model, base_url=cmd.base_url)) as models:
        await models.preflight("agent")
        await run_agent(models.agent, session, RuntimeConfig(max_turns=cmd.max_turns), transcript)
    outcome = session.outcome(transcript)
    if hasattr(session, "record_session"):
        session.record_session()
    return {
        "agent": cmd.agent_name,
        "fact_id": fact_id,
        "model": cmd.model,
        "workspace": str(root) if cmd.workspace else None,
        "outcome": {
            k: v for k, v in outcome.items() if k not in ("file_contents", "file_contents_before")
        },
        "pkm_diff": pkm_unified_diff(before, ws.snapshot()),
        "tool_calls": [
            {
                "tool_name": c.tool_name,
                "arguments": c.arguments,
                "is_error": c.is_error,
                "result": c.result,
                "arguments_short": _short(c.arguments),
                "result_short": _short(c.result),
            }
            for c in transcript.tool_calls
        ],
        "summary": transcript.summary(),
        "metrics": transcript.metrics.model_dump(mode="json"),
    }
