"""What keys an adapter agent's cached trials besides the task, prompt and models
(`run.external.adapter_variant`): a new-team trial switched its agent's behaviour with a
variable its table passes (`env`) and with the sandbox, and got the other setting's trials
back from the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptloop.optimizer.adapters import box
from promptloop.optimizer.core.project import Agent, AgentConfig, Project
from promptloop.optimizer.run.external import adapter_variant


def agent(tmp_path: Path, adapter: str = "command") -> Agent:
    (tmp_path / "a.py").write_text("print('{}')\n")
    table = {"prompt": "p.md", "suites": ["evals/x"], "adapter": adapter, "env": ["MY_FLAG"]}
    table |= ({"command": ["python3", "a.py"]} if adapter != "http"
              else {"url": "http://127.0.0.1:9/trial"})
    config = AgentConfig.model_validate(table)
    return Agent("x", config, Project(tmp_path / "promptloop.toml", {"x": config}, {}))


def test_a_passed_variables_value_and_the_sandbox_key_the_trials(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = agent(tmp_path)
    monkeypatch.setenv(box.SANDBOX_VAR, "off")
    monkeypatch.delenv("MY_FLAG", raising=False)
    plain = adapter_variant(a, tmp_path)
    assert adapter_variant(a, tmp_path) == plain  # stable
    monkeypatch.setenv("MY_FLAG", "1")
    flagged = adapter_variant(a, tmp_path)
    assert flagged != plain
    monkeypatch.setenv("OTHER", "2")  # a variable the table does not pass: no change
    assert adapter_variant(a, tmp_path) == flagged
    if box.available() != "none":
        monkeypatch.setenv(box.SANDBOX_VAR, "on")
        assert adapter_variant(a, tmp_path) != flagged
    served = agent(tmp_path, "http")  # not boxed by promptloop: the mode does not matter
    monkeypatch.setenv(box.SANDBOX_VAR, "off")
    off = adapter_variant(served, tmp_path)
    monkeypatch.setenv(box.SANDBOX_VAR, "on")
    assert adapter_variant(served, tmp_path) == off


def test_code_beside_a_region_prompt_keys_the_trials(tmp_path: Path) -> None:
    """A team changed `MAX_TAGS = 5` to 0 in src/prompt.js, outside the prompt's literal, and
    eval served the old trials from the cache: the file's code around the region is part of
    the key; the region's own text is not (the prompt hash keys it)."""
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "a.py").write_text("print('{}')\n")
    source = "const MAX_TAGS = 5;\nconst SYSTEM_PROMPT = `Tag the note.`;\nmodule.exports = {};\n"
    (src / "prompt.js").write_text(source)
    config = AgentConfig.model_validate({
        "prompts": [{"name": "system", "path": "src/prompt.js", "variable": "SYSTEM_PROMPT"}],
        "suites": ["evals/x"], "adapter": "command", "command": ["python3", "a.py"]})
    a = Agent("x", config, Project(tmp_path / "promptloop.toml", {"x": config}, {}))
    before = adapter_variant(a, tmp_path)
    (src / "prompt.js").write_text(source.replace("Tag the note.", "Tag the note briefly."))
    assert adapter_variant(a, tmp_path) == before  # a candidate's prompt: same variant
    (src / "prompt.js").write_text(source.replace("MAX_TAGS = 5", "MAX_TAGS = 0"))
    assert adapter_variant(a, tmp_path) != before


def test_a_module_beside_the_agent_keys_the_trials(tmp_path: Path) -> None:
    """A team's worker.py imports rules.py: a changed rule was served 7 trials from the cache
    (57.1%; --fresh 71.4%), and optimize's baseline later reused those stale trials. The code
    and config beside the command's files key the trials; the suites and the prompt's own
    text do not (their tasks and the prompt hash do)."""
    agent_dir = tmp_path / "agent"
    (agent_dir / "node_modules" / "dep").mkdir(parents=True)
    (tmp_path / "evals" / "tasks").mkdir(parents=True)
    (agent_dir / "worker.py").write_text("import rules\n")
    (agent_dir / "rules.py").write_text("URGENT = 'high'\n")
    (agent_dir / "prompt.md").write_text("Triage the mail.\n")
    (tmp_path / "evals" / "tasks" / "t.json").write_text("{}")
    config = AgentConfig.model_validate({
        "prompt": "agent/prompt.md", "suites": ["evals"], "adapter": "worker",
        "command": ["python3", "agent/worker.py"]})
    a = Agent("x", config, Project(tmp_path / "promptloop.toml", {"x": config}, {}))
    before = adapter_variant(a, tmp_path)
    (agent_dir / "prompt.md").write_text("Triage the mail briefly.\n")  # the prompt hash's
    (tmp_path / "evals" / "tasks" / "t.json").write_text('{"x": 1}')  # the task's own hash
    (agent_dir / "node_modules" / "dep" / "i.js").write_text("1")  # dependencies: not read
    assert adapter_variant(a, tmp_path) == before
    (agent_dir / "rules.py").write_text("URGENT = 'low'\n")
    assert adapter_variant(a, tmp_path) != before


def test_an_http_agents_service_code_keys_its_trials(tmp_path: Path) -> None:
    """A team changed its http agent's service (agent/server.py), restarted it, and eval
    served the old trials from the cache; reverted, it served the broken ones. promptloop
    cannot see a service from its table: without `code`, every code file of the repository
    keys the trials; with `code`, the files and folders it names (and nothing else)."""
    svc, other = tmp_path / "agent", tmp_path / "docs"
    svc.mkdir()
    other.mkdir()
    (svc / "server.py").write_text("FORCE = None\n")
    (other / "build.py").write_text("x = 1\n")

    def http(**extra: object) -> Agent:
        config = AgentConfig.model_validate({"prompt": "p.md", "suites": ["evals/x"],
                                             "adapter": "http",
                                             "url": "http://127.0.0.1:9/trial", **extra})
        return Agent("x", config, Project(tmp_path / "promptloop.toml", {"x": config}, {}))

    bare, named = http(), http(code=["agent"])
    first = (adapter_variant(bare, tmp_path), adapter_variant(named, tmp_path))
    (svc / "server.py").write_text("FORCE = 'low'\n")
    changed = (adapter_variant(bare, tmp_path), adapter_variant(named, tmp_path))
    assert changed[0] != first[0] and changed[1] != first[1]
    (svc / "server.py").write_text("FORCE = None\n")  # reverted: the first trials again
    assert (adapter_variant(bare, tmp_path), adapter_variant(named, tmp_path)) == first
    (other / "build.py").write_text("x = 2\n")  # outside `code`: only the bare key moves
    assert adapter_variant(named, tmp_path) == first[1]
    assert adapter_variant(bare, tmp_path) != first[0]
    with pytest.raises(ValueError, match="relative to the repository root"):
        AgentConfig.model_validate({"prompt": "p.md", "suites": ["e"], "adapter": "http",
                                    "url": "http://127.0.0.1:9/t", "code": ["../svc"]})
