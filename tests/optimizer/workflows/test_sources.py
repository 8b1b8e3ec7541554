"""One place for prompts, tasks and manuals: the repository, at a git ref or in its working tree,
said in the output; eval and optimize on the same command line evaluate the same prompt."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from promptloop.agents.data import data_dir
from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.events import Event, Phase, RunWarning
from promptloop.optimizer.core.suites import load_suite
from promptloop.optimizer.git import GitOpsError
from promptloop.optimizer.run.cache import text_hash
from promptloop.optimizer.run.models import ModelIds
from promptloop.optimizer.run.runner import RunOptions
from promptloop.optimizer.workflows.evaluate import EvalRequest, evaluate
from promptloop.optimizer.workflows.optimize import OptimizeConfig, optimize
from promptloop.optimizer.workflows.sources import RepoSource
from tests import policies
from tests.cli_json import cli_result
from tests.optimizer.workflows.test_optimize import GOOD, PROMPT, _git

EDIT = "\nAlways answer in one sentence.\n"
PROMPT_PATH = "prompts/pkm_agent.md"
GREETING_TASK = "tasks/pkm_agent/capability/tasks/skip_trivial/greet-hi/task.json"


def _head(repo: Path) -> str:
    return _git(repo, "rev-parse", "HEAD").strip()


def test_working_tree_and_ref_say_where_they_read(repo: Path, state: Path) -> None:
    sha = _head(repo)
    with RepoSource(repo, None, state / "sources") as wt:
        got = wt.read(PROMPT_PATH)
        assert got.text == PROMPT
        assert got.line() == f"prompt: {PROMPT_PATH} @ working tree (same as HEAD {sha[:7]})"
    (repo / PROMPT_PATH).write_text(PROMPT + EDIT)
    (repo / "prompts" / "card_agent.md").write_text("# new card prompt\n")
    with RepoSource(repo, None, state / "sources") as wt:
        assert wt.read(PROMPT_PATH).describe().endswith(f"(differs from HEAD {sha[:7]})")
        assert wt.read("prompts/card_agent.md").origin.note == "not committed"
        assert wt.uncommitted_edit(PROMPT_PATH)
        # not in this repository: promptloop's own copy, and the output says so
        manual = wt.read("manuals/prompt_engineering.md")
        assert manual.origin.kind == "bundled" and "not in this repository" in manual.describe()
    with RepoSource(repo, "main", state / "sources") as at:
        got = at.read(PROMPT_PATH)
        assert got.text == PROMPT and got.describe() == f"{PROMPT_PATH} @ main {sha[:7]}"
        assert at.unevaluated_warning(PROMPT_PATH, "optimize") == (
            f"your uncommitted edit to {PROMPT_PATH} is not evaluated: optimize uses "
            f"main {sha[:7]}"
        )
        missing = rf"prompts/nope\.md does not exist at main {sha[:7]}"
        with pytest.raises(GitOpsError, match=missing):
            at.read("prompts/nope.md", bundled=False)


def test_a_suite_at_a_ref_is_that_commit_exported_once(repo: Path, state: Path) -> None:
    committed = (repo / GREETING_TASK).read_text()
    (repo / GREETING_TASK).write_text(committed.replace('"hi"', '"hello there"'))
    with RepoSource(repo, "HEAD", state / "sources") as at:
        found = at.suite("pkm_agent", "capability")
        assert found is not None and found.folder is not None
        assert found.folder.is_relative_to(state / "sources" / _head(repo))
        exported = found.folder / "tasks/skip_trivial/greet-hi/task.json"
        assert exported.read_text() == committed
        stamp = exported.stat().st_mtime_ns
        assert at.suite("pkm_agent", "capability") is not None
        assert exported.stat().st_mtime_ns == stamp  # a finished export is reused
        assert at.suite("pkm_agent", "nope") is None
        assert {"capability", "regression"} <= set(at.kinds("pkm_agent"))
    with RepoSource(repo, None, state / "sources") as wt:
        found = wt.suite("pkm_agent", "capability")
        assert found is not None and found.folder == repo / "tasks/pkm_agent/capability"
        assert "differs from HEAD" in found.describe()


def test_outside_a_repository_the_bundled_copy_is_read(tmp_path: Path, state: Path) -> None:
    with RepoSource(None, None, state / "sources") as bundled:
        got = bundled.read("prompts/card_agent.md")
        assert got.text == (data_dir("prompts") / "card_agent.md").read_text()
        assert got.line() == ("prompt: prompts/card_agent.md @ promptloop's bundled copy "
                              "(no git repository here)")
        suite = bundled.suite("card_agent", "regression")
        assert suite is not None and suite.folder == data_dir("tasks") / "card_agent/regression"
    with pytest.raises(ConfigError, match="not inside a git repository"):
        RepoSource(None, "main", state / "sources")


def _evaluate(repo: Path, state: Path, ref: str | None) -> tuple[str, list[Event]]:
    """(hash of the prompt the run evaluated, the events) of a scripted eval in `repo`."""
    events: list[Event] = []
    request = EvalRequest(suite="pkm_agent", kind="regression", ref=ref, repo=repo,
                          models=ModelIds(agent="scripted:pkm"),
                          options=RunOptions(agent_model="scripted:pkm", trials=1))
    run_, _, _ = asyncio.run(evaluate(request, state, events.append))
    assert [e.message for e in events if isinstance(e, Phase)][:2] == run_.provenance.sources
    return run_.provenance.prompt_hashes["pkm_agent"], events


def test_eval_reads_the_working_tree_or_the_ref_and_says_which(repo: Path, state: Path) -> None:
    sha = _head(repo)
    (repo / PROMPT_PATH).write_text(PROMPT + EDIT)
    evaluated, events = _evaluate(repo, state, None)
    assert evaluated == text_hash(PROMPT + EDIT)  # the edit in the working tree, not a copy
    said = [e.message for e in events if isinstance(e, Phase)]
    assert f"prompt: {PROMPT_PATH} @ working tree (differs from HEAD {sha[:7]})" in said
    assert f"tasks: tasks/pkm_agent/regression @ working tree (same as HEAD {sha[:7]})" in said
    evaluated, events = _evaluate(repo, state, "HEAD")
    assert evaluated == text_hash(PROMPT)
    said = [e.message for e in events if isinstance(e, Phase)]
    assert f"prompt: {PROMPT_PATH} @ HEAD {sha[:7]}" in said


def test_eval_cli_has_ref_and_reports_sources(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from promptloop.optimizer.cli.app import app

    monkeypatch.chdir(repo)
    args = ["eval", "--suite", "pkm_agent", "--kind", "regression", "--agent-model",
            "scripted:pkm", "--trials", "1", "--out", str(state), "--json"]
    out = CliRunner().invoke(app, [*args, "--ref", "HEAD"])
    assert out.exit_code == 0, out.output
    sources = cli_result(out.stdout)["sources"]
    assert any(s.startswith(f"prompt: {PROMPT_PATH} @ HEAD ") for s in sources)
    bad = CliRunner().invoke(app, [*args, "--ref", "no-such-branch"])
    assert bad.exit_code == 1 and "unknown git ref 'no-such-branch'" in bad.output


def test_optimize_warns_that_an_uncommitted_prompt_edit_is_not_evaluated(
    repo: Path, state: Path
) -> None:
    sha = _head(repo)
    (repo / PROMPT_PATH).write_text(PROMPT + EDIT)
    events: list[Event] = []
    agent = policies.pkm_model()
    config = OptimizeConfig(suite="pkm_agent", bucket="skip_trivial", iterations=1,
                            agent_model="scripted:pkm", proposer_model="scripted:proposer",
                            proposer_format="diff", repo=repo, state_dir=state)
    result = asyncio.run(optimize(config, agent=agent, proposer=ScriptedModel([reply(GOOD)]),
                                  on_event=events.append))
    warning = (f"your uncommitted edit to {PROMPT_PATH} is not evaluated: optimize uses "
               f"HEAD {sha[:7]}")
    assert result.warnings == [warning]
    assert any(isinstance(e, RunWarning) and e.message == warning for e in events)
    assert f"prompt: {PROMPT_PATH} @ HEAD {sha[:7]}" in result.sources
    # the baseline ran the committed prompt, never the edit; eval at the same ref runs it too
    systems = {c.messages[0].content for c in agent.calls}
    assert PROMPT in systems and PROMPT + EDIT not in systems
    evaluated, _ = _evaluate(repo, state, "HEAD")
    assert evaluated == text_hash(PROMPT)


def test_an_exported_suite_hashes_like_the_working_tree(tmp_path: Path, state: Path) -> None:
    """Tasks and shared fixtures read at a ref hash exactly as in the working tree, so the
    trial cache serves a ref's trials that the working tree already ran (and back)."""
    import shutil

    repo = tmp_path / "copy"
    shutil.copytree(data_dir("tasks") / "pkm_agent" / "regression",
                    repo / "tasks" / "pkm_agent" / "regression")
    shutil.copytree(data_dir("fixtures"), repo / "fixtures")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "-qm", "x")
    with RepoSource(repo, "main", state / "sources") as at, \
            RepoSource(repo, None, state / "sources") as wt:
        a, w = (src.suite("pkm_agent", "regression") for src in (at, wt))
        assert a is not None and a.folder is not None and w is not None and w.folder is not None
        # the working tree's fixtures are not promptloop's own: it is loaded from a copy too
        assert w.folder != repo / "tasks/pkm_agent/regression"
        base, work = load_suite(a.folder), load_suite(w.folder)
    assert any(t.base_fixture is not None for t in base.tasks)
    assert all(t.base_fixture is None or t.base_fixture.is_relative_to(a.folder)
               for t in base.tasks)
    assert [t.content_hash for t in base.tasks] == [t.content_hash for t in work.tasks]
    assert base.content_hash == work.content_hash


def test_a_committed_crlf_prompt_reads_the_same_bytes_everywhere(repo: Path,
                                                                 state: Path) -> None:
    """A prompt committed with CRLF line endings: the working tree used to be read with its
    line endings translated, so a clean checkout said "differs from HEAD", optimize warned of
    an uncommitted edit, and the agent got other bytes than at a ref."""
    crlf = PROMPT.replace("\n", "\r\n")
    (repo / PROMPT_PATH).write_bytes(crlf.encode())
    _git(repo, "commit", "-qam", "crlf prompt")
    sha = _head(repo)
    with RepoSource(repo, None, state / "sources") as wt:
        got = wt.read(PROMPT_PATH)
        assert got.text == crlf
        assert got.describe().endswith(f"(same as HEAD {sha[:7]})")
        assert not wt.uncommitted_edit(PROMPT_PATH)
    with RepoSource(repo, "HEAD", state / "sources") as at:
        assert at.read(PROMPT_PATH).text == crlf
        assert at.unevaluated_warning(PROMPT_PATH, "optimize") is None


def test_a_checkout_with_crlf_line_endings_reads_the_committed_text(repo: Path,
                                                                   state: Path) -> None:
    """`*.md text eol=crlf` checks an LF blob out with CRLF: eval ran the CRLF text ("same as
    HEAD") and optimize the LF one at its ref, so a team's baseline was paid again. The
    working tree's file is read as the commit holds it when only line endings differ."""
    (repo / ".gitattributes").write_text("*.md text eol=crlf\n")
    _git(repo, "add", ".gitattributes")
    _git(repo, "commit", "-qm", "crlf checkouts")
    (repo / PROMPT_PATH).unlink()
    _git(repo, "checkout", "--", PROMPT_PATH)
    assert b"\r\n" in (repo / PROMPT_PATH).read_bytes()  # checked out with CRLF
    with RepoSource(repo, None, state / "sources") as wt:
        got = wt.read(PROMPT_PATH)
        assert got.text == PROMPT and "\r" not in got.text
        assert got.describe().endswith(f"(same as HEAD {_head(repo)[:7]})")
    (repo / PROMPT_PATH).write_bytes((PROMPT + EDIT).replace("\n", "\r\n").encode())
    with RepoSource(repo, None, state / "sources") as wt:  # an edit stays the edit
        assert wt.read(PROMPT_PATH).text == (PROMPT + EDIT).replace("\n", "\r\n")
