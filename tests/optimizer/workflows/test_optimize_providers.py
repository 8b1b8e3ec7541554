"""The optimize loop through the real provider SDKs against loopback fakes.

The agent is `openai:<model>` on an OpenAI-compatible server (as vLLM/Ollama would be) that
plays the prompt-sensitive PKM policy; the proposer is `anthropic:<model>` on a fake Messages
API. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.workflows.optimize import OptimizeConfig, optimize
from tests.llm.agent_server import AgentServer
from tests.llm.fake_api import FakeAPI, Reply, anthropic_error, anthropic_message
from tests.optimizer.workflows.test_optimize import GOOD, _git

SECRET = "sk-ant-test-0123456789abcdef"


def _config(repo: Path, state: Path, agent_url: str) -> OptimizeConfig:
    return OptimizeConfig(
        suite="pkm_agent",
        bucket="skip_trivial",
        iterations=1,
        agent_model="openai:fake-agent",
        base_url=f"{agent_url}/v1",
        proposer_model="anthropic:claude-fake",
        proposer_format="diff",
        repo=repo,
        state_dir=state,
        concurrency=4,
    )


def test_optimize_through_openai_and_anthropic_sdks(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with AgentServer() as agent_api, FakeAPI() as proposer_api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", proposer_api.url)
        proposer_api.queue(
            Reply(body=anthropic_message({"type": "text", "text": "ok"})),  # preflight
            Reply(
                body=anthropic_message(
                    {"type": "text", "text": GOOD},
                    usage={"input_tokens": 900, "output_tokens": 120},
                )
            ),
        )
        result = asyncio.run(optimize(_config(repo, state, agent_api.url)))
    it = result.iterations[0]
    assert it.outcome == "accepted", it.reasons
    assert "only a greeting" in _git(repo, "show", f"{it.branch}:prompts/pkm_agent.md")
    # the agent really went through Chat Completions with our tools
    tool_requests = [r for r in agent_api.requests if r.body.get("tools")]
    assert tool_requests and {"Write", "skip_pkm_organization"} <= {
        t["function"]["name"] for t in tool_requests[0].body["tools"]
    }
    # the proposer got the package as a cached system prompt + user message, key never logged
    proposal = proposer_api.requests[-1]
    assert SECRET in (
        proposal.headers.get("x-api-key", "") + proposal.headers.get("authorization", "")
    )
    assert proposal.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    package = proposal.body["messages"][0]["content"]
    package = package if isinstance(package, str) else package[0]["text"]
    assert "<failing_trials>" in package and "greet-hi" in package
    for path in state.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path


def test_rejected_proposer_key_fails_before_the_baseline(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptloop.agents.llm.errors import CredentialsError

    with AgentServer() as agent_api, FakeAPI() as proposer_api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", proposer_api.url)
        proposer_api.queue(anthropic_error(401, "invalid x-api-key"))
        with pytest.raises(CredentialsError, match="ANTHROPIC_API_KEY") as err:
            asyncio.run(optimize(_config(repo, state, agent_api.url)))
        assert SECRET not in str(err.value)
        assert not [r for r in agent_api.requests if r.body.get("tools")]  # no trial ran


def test_unknown_provider_is_a_config_error(repo: Path, state: Path) -> None:
    config = OptimizeConfig(
        suite="pkm_agent", bucket="skip_trivial", agent_model="nope:x", repo=repo, state_dir=state
    )
    with pytest.raises(ConfigError, match="unknown model provider"):
        asyncio.run(optimize(config))
