"""Graduation: readiness, proposals, the file plan and the branch it commits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.graduate import graduate as graduate_command
from promptloop.optimizer.cli.health import health as health_command
from promptloop.optimizer.lifecycle.errors import (
    GraduationRefused,
    LifecycleError,
    UnknownNameError,
)
from promptloop.optimizer.lifecycle.graduate_git import (
    GraduateRequest,
    graduate,
    graduation_proposals,
)
from promptloop.optimizer.lifecycle.graduation import (
    plan_graduation,
    propose_graduations,
    readiness,
)
from promptloop.optimizer.lifecycle.health import compute_health
from tests.cli_json import cli_result
from tests.optimizer.lifecycle.helpers import PROMPT, app_with, git, save_all
from tests.optimizer.lifecycle.test_health import history, lineage_of
from tests.optimizer.suite_builder import suite, task, write_json

CAP = "tasks/card_agent/capability"
REG = "tasks/card_agent/regression"


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "prompts").mkdir(parents=True)
    (repo / "prompts" / "card_agent.md").write_text(PROMPT)
    shared = {"fixture_dir": "fixtures/event_week"}
    suite(repo / CAP, [task("event-a", "Dinner Friday 8pm", 1, bucket="event"),
                       task("event-b", "Call mum Sunday", 2, bucket="event", input=shared),
                       task("link-a", "https://example.com", 3, bucket="link"),
                       task("stuck-a", "???", 4, bucket="stuck")],
          category="templates", name="card_agent_capability")
    write_json(repo / CAP / "fixtures" / "event_week" / "Facts" / "2026" / "03" / "note.json",
               {"fixture": True})
    suite(repo / REG, [task("plain-a", "Coffee $3", 5, bucket="plain")], kind="regression",
          category="basics", name="card_agent_regression")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=d", "-c", "user.email=d@x", "commit", "-qm", "suites")
    return repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    save_all(tmp_path / "state", history())
    return tmp_path / "state"


def test_readiness_and_proposals() -> None:
    h = compute_health(lineage_of(history()))
    r = readiness(h, "event", ["event-a", "event-b"])
    assert r.ready and r.streak == 5 and [p.run_name for p in r.runs] == [
        "n2", "n3", "n4", "n5", "n6"]
    assert not readiness(h, "event", ["event-a", "event-new"]).ready
    stuck = readiness(h, "stuck")
    assert not stuck.ready and "0 consecutive mature run(s) at >= 95% (needs 5)" in stuck.figures()
    assert "no counted trials of bucket nope" in readiness(h, "nope").figures()
    proposals = propose_graduations(h)
    assert [(p.bucket, p.streak) for p in proposals] == [("event", 5), ("link", 6)]
    assert proposals[0].command == "promptloop graduate --agent card_agent --bucket event"
    regression = h.model_copy(update={"suite_kind": "regression"})
    assert propose_graduations(regression) == []


def test_plan_keeps_paths_copies_shared_fixtures_and_refuses_conflicts() -> None:
    src = {f"{CAP}/suite.json": "1", f"{CAP}/tasks/e/a/task.json": "2",
           f"{CAP}/tasks/e/a/workspace/x.md": "3", f"{CAP}/tasks/shared/b.json": "4",
           f"{CAP}/tasks/shared/c.json": "5", f"{CAP}/fx/f.md": "6"}
    dst = {f"{REG}/suite.json": "7", f"{REG}/tasks/r/task.json": "8"}
    tasks = {f"{CAP}/tasks/e/a/task.json": {"id": "a", "metadata": {"failure_bucket": "e"}},
             f"{CAP}/tasks/shared/b.json": {"id": "b", "metadata": {"failure_bucket": "e"},
                                            "input": {"fixture_dir": "fx"}},
             f"{CAP}/tasks/shared/c.json": {"id": "c", "metadata": {"failure_bucket": "k"}},
             f"{REG}/tasks/r/task.json": {"id": "r"}}
    plan = plan_graduation("card_agent", "e", copy=False, source=src, target=dst, tasks=tasks)
    assert plan.task_ids == ("a", "b")
    assert [(m.source, m.destination, m.kind, m.remove_source) for m in plan.moves] == [
        (f"{CAP}/tasks/e/a", f"{REG}/tasks/e/a", "task", True),
        (f"{CAP}/tasks/shared/b.json", f"{REG}/tasks/shared/b.json", "task", True),
        (f"{CAP}/fx", f"{REG}/fx", "fixture", False)]
    same = {**dst, f"{REG}/fx/f.md": "6"}
    plan = plan_graduation("card_agent", "e", copy=True, source=src, target=same, tasks=tasks)
    assert [m.kind for m in plan.moves] == ["task", "task"]
    assert not any(m.remove_source for m in plan.moves)
    with pytest.raises(LifecycleError, match="other content"):
        plan_graduation("card_agent", "e", copy=False, source=src,
                        target={**dst, f"{REG}/fx/f.md": "9"}, tasks=tasks)
    clash = {**tasks, f"{REG}/tasks/r/task.json": {"id": "b"}}
    with pytest.raises(LifecycleError, match="task id 'b' already exists"):
        plan_graduation("card_agent", "e", copy=False, source=src, target=dst, tasks=clash)
    with pytest.raises(UnknownNameError, match="Did you mean 'e'"):
        plan_graduation("card_agent", "ee", copy=False, source=src, target=dst, tasks=tasks)


def _request(repo: Path, state: Path, bucket: str = "event", **kw: object) -> GraduateRequest:
    return GraduateRequest(repo=repo, state_dir=state, agent="card_agent", bucket=bucket,
                           **kw)  # type: ignore[arg-type]


def test_graduate_moves_the_bucket_on_a_new_branch(repo: Path, state: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    record = graduate(_request(repo, state))
    assert record.branch and record.branch.startswith("promptloop/graduate/card_agent-event/")
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "branch", "--show-current").strip() == "main"
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / CAP / "tasks/templates/event-a/task.json").is_file()
    files = git(repo, "ls-tree", "-r", "--name-only", record.branch).split()
    assert f"{REG}/tasks/templates/event-a/task.json" in files
    assert f"{REG}/tasks/templates/event-b/task.json" in files
    assert f"{REG}/fixtures/event_week/Facts/2026/03/note.json" in files
    assert f"{CAP}/fixtures/event_week/Facts/2026/03/note.json" in files
    assert not any(f.startswith(f"{CAP}/tasks/templates/event-") for f in files)
    moved = json.loads(git(repo, "show", f"{record.branch}:{REG}/tasks/templates/event-a/"
                                        "task.json"))
    assert moved["id"] == "event-a"
    msg = git(repo, "log", "-1", "--format=%B", record.branch)
    assert msg.startswith("promptloop(graduate): move event of card_agent to regression")
    assert "Mature runs: n2, n3, n4, n5, n6" in msg
    body = Path(record.pr_body_path or "").read_text()
    assert "| n6 | 2026-03-06 02:00 | 4 | 4 | 100.0% |" in body
    assert "`event-a`, `event-b`" in body and "Forced" not in body
    saved = json.loads((Path(record.pr_body_path or "").parent / "graduation.json").read_text())
    assert saved["format"] == "promptloop.graduation/1" and saved["commit"] == record.commit


def test_graduate_copy_keeps_the_source(repo: Path, state: Path) -> None:
    record = graduate(_request(repo, state, bucket="link", copy=True))
    files = git(repo, "ls-tree", "-r", "--name-only", record.branch or "").split()
    assert f"{CAP}/tasks/templates/link-a/task.json" in files
    assert f"{REG}/tasks/templates/link-a/task.json" in files
    assert record.mode == "copy"


def test_graduate_refuses_unless_forced(repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "young"
    save_all(state, history()[:5])
    with pytest.raises(GraduationRefused, match=r"4 consecutive mature run\(s\).*--force"):
        graduate(_request(repo, state))
    assert "promptloop/" not in git(repo, "branch", "--list")
    forced = graduate(_request(repo, state, force=True))
    assert forced.forced and "Forced" in Path(forced.pr_body_path or "").read_text()
    empty = tmp_path / "empty"
    with pytest.raises(GraduationRefused, match="no lineage to judge maturity"):
        graduate(_request(repo, empty))


def test_graduate_names_unknown_suites_and_buckets(repo: Path, state: Path) -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'event'"):
        graduate(_request(repo, state, bucket="evnt"))
    with pytest.raises(UnknownNameError, match="Did you mean 'card_agent'"):
        graduate(GraduateRequest(repo=repo, state_dir=state, agent="card_agnt", bucket="x"))
    plan = graduate(_request(repo, state, dry_run=True))
    assert plan.branch is None and plan.ready
    assert "promptloop/" not in git(repo, "branch", "--list")


def test_nightly_proposals(repo: Path, state: Path) -> None:
    found = graduation_proposals(state, "card_agent", repo=repo)
    assert [p.bucket for p in found] == ["event", "link"]
    assert graduation_proposals(state, "pkm_agent", repo=repo) == []


def test_graduate_and_health_commands(repo: Path, state: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    app = app_with(("graduate", graduate_command), ("health", health_command))
    runner = CliRunner()
    res = runner.invoke(app, ["health", "--suite", "card_agent_capability",
                              "--state-dir", str(state)])
    assert res.exit_code == 0, res.output
    assert "event" in res.stdout and "Stragglers: stuck-a" in res.stdout
    assert (state / "health" / "card_agent_capability.json").is_file()
    res = runner.invoke(app, ["health", "--suite", "card_agent_capability", "--json",
                              "--state-dir", str(state)])
    assert cli_result(res.stdout)["summary"]["graduation_ready"] == ["event", "link"]
    res = runner.invoke(app, ["health", "--suite", "card_agnt", "--state-dir", str(state)])
    assert res.exit_code == 1 and "Did you mean 'card_agent'" in res.stderr
    res = runner.invoke(app, ["health", "--suite", "pkm_agent", "--state-dir", str(state)])
    # this repository has no pkm_agent suite: an error naming the key, not promptloop's suite
    assert res.exit_code == 1 and "pkm_agent has no suite 'capability'" in res.stderr
    res = runner.invoke(app, ["graduate", "--agent", "card_agent", "--bucket", "stuck",
                              "--state-dir", str(state)])
    assert res.exit_code == 1 and "not ready to graduate" in res.stderr, res.output
    res = runner.invoke(app, ["graduate", "--agent", "card_agent", "--bucket", "event",
                              "--state-dir", str(state)])
    assert res.exit_code == 0, res.output
    assert "Branch promptloop/graduate/card_agent-event/" in res.stdout
    (state / "runs" / "index.jsonl").write_text("not json\n")
    res = runner.invoke(app, ["health", "--suite", "card_agent_capability",
                              "--state-dir", str(state)])
    assert res.exit_code == 2 and "index.jsonl" in res.stderr
    assert "--bucket" in runner.invoke(app, ["graduate", "--help"]).stdout


def test_a_jsonl_suite_is_not_offered_a_command_graduate_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team's health said "Ready to graduate: dietary" and offered `promptloop graduate
    --suite recipe_bot --bucket dietary`, which refused: its suite is a JSONL file."""
    from promptloop.optimizer.core.project import parse_project, use_project
    from promptloop.optimizer.lifecycle.graduation import MANUAL, graduate_command

    project = parse_project('[agents.bot]\nprompt = "p.md"\nsuites = ["evals/recipes.jsonl"]\n'
                            'adapter = "command"\ncommand = ["python3", "bot.py"]\n',
                            tmp_path / "promptloop.toml")
    monkeypatch.setattr("promptloop.optimizer.core.project._ACTIVE", [project])
    use_project(project)
    assert graduate_command("bot", "dietary") == MANUAL
    assert graduate_command("other", "x") == "promptloop graduate --agent other --bucket x"
