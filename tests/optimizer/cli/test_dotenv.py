"""Provider keys from the repository's `.env`: used by the models, never stored, and a
variable already set in the environment wins."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from promptloop.optimizer.workflows.context import load_dotenv
from tests.llm.agent_server import AgentServer

SECRET = "sk-dotenv-0123456789abcdef"
runner = CliRunner()


def forget(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Unset `names` now and again after the test (load_dotenv writes os.environ)."""
    for name in names:
        monkeypatch.setenv(name, "x")
        monkeypatch.delenv(name)


def test_dotenv_keys_are_used_and_stored_nowhere(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL")
    (repo / ".env").write_text(f"# keys\nexport OPENAI_API_KEY='{SECRET}'\nUNRELATED=1\n")
    monkeypatch.chdir(repo)
    with AgentServer() as api:
        got = runner.invoke(app, ["eval", "--suite", "pkm_agent", "--agent-model",
                                  "openai:fake-agent", "--base-url", f"{api.url}/v1",
                                  "--state-dir", str(state)])
        assert got.exit_code == 0, got.output
        sent = [r.headers.get("authorization", "") for r in api.requests]
    assert sent and all(h == f"Bearer {SECRET}" for h in sent)
    files = [p for p in state.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path
    assert SECRET not in got.stdout + got.stderr


def test_the_environment_wins_and_only_provider_variables_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget(monkeypatch, "ANTHROPIC_API_KEY", "MISTRAL_API_KEY", "UNRELATED")
    monkeypatch.setenv("OPENAI_API_KEY", "from-the-shell-123456")
    (tmp_path / ".env").write_text(
        'OPENAI_API_KEY=from-the-file-123456\nANTHROPIC_API_KEY="sk-ant-from-file-1234"\n'
        "MISTRAL_API_KEY=mistral-secret-99 # a comment\nUNRELATED=whatever\nnot a line\n")
    loaded = load_dotenv(tmp_path)
    import os

    from promptloop.optimizer.core.redact import redact

    assert sorted(loaded) == ["ANTHROPIC_API_KEY", "MISTRAL_API_KEY"]
    assert os.environ["OPENAI_API_KEY"] == "from-the-shell-123456"
    assert os.environ["ANTHROPIC_API_KEY"] == "sk-ant-from-file-1234"
    assert os.environ["MISTRAL_API_KEY"] == "mistral-secret-99"
    assert "UNRELATED" not in os.environ
    # every value the file holds is redacted, the one the shell's value hid too
    assert redact("a from-the-file-123456 b sk-ant-from-file-1234") == "a *** b ***"


def test_a_key_is_redacted_reversed_and_in_base64_at_any_alignment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent that found a key could store it reversed or base64-encoded inside a longer
    text (issue 30: neither may reach a stored file); the redactor removes both."""
    import base64

    from promptloop.optimizer.core.redact import redact

    key = "sk-test-FAKE123-redact-me"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    for prefix in ("", "a", "ab", "note: "):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            blob = encode(f"{prefix}{key} and more".encode()).decode()
            assert "***" in redact(f"outcome {blob} end"), (prefix, blob)
    assert redact(f"x {key[::-1]} y") == "x *** y"
    assert redact("an ordinary sentence") == "an ordinary sentence"
