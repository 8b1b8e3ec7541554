"""Runner: timeouts that cancel, infrastructure errors apart from failures, concurrency bound,
fixed clock, trial cache keys, and a suite in the original framework's layout end to end."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.agents.llm.errors import ProviderError
from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.core.suites import DEFAULT_CLOCK, Suite, load_suite
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.run.cache import text_hash, trial_cache_key
from promptloop.optimizer.run.models import ModelIds
from promptloop.optimizer.run.runner import (
    AllTrialsErroredError,
    RunOptions,
    default_concurrency,
    run_suite,
)
from promptloop.optimizer.workflows.evaluate import EvalRequest, evaluate
from tests import policies
from tests.optimizer import suite_builder as sb

PROMPT = "You turn raw input into a timeline card."


def options(state: Path, **kw: object) -> RunOptions:
    fields: dict[str, object] = {"prompt_text": PROMPT, "reuse": False, **kw}
    return RunOptions(agent_model="scripted:card", state_dir=state, **fields)  # type: ignore[arg-type]


def run(suite: Suite, opts: RunOptions, model: ScriptedModel) -> RunResult:
    return asyncio.run(run_suite(suite, opts, model))


def test_timeout_cancels_the_agent(tmp_path: Path, state: Path) -> None:
    suite = load_suite(sb.suite(tmp_path / "s", [sb.task("slow", "Coffee $3", 1, trials=1)]))
    cancelled: list[str] = []

    async def forever(req: Request) -> ModelResponse:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append("agent call")
            raise
        raise AssertionError("unreachable")

    async def main() -> tuple[RunResult, set[asyncio.Task[object]]]:
        result = await run_suite(suite, options(state, timeout_s=0.2), ScriptedModel(forever))
        others = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
        return result, others

    t0 = time.perf_counter()
    result, leftovers = asyncio.run(main())
    assert time.perf_counter() - t0 < 3
    [trial] = result.trials
    assert trial.status == "timedOut" and trial.failure_reason == "trial exceeded 0.2s"
    assert cancelled == ["agent call"] and not leftovers
    assert any(e.kind == "timeout" for e in trial.transcript.events)
    assert trial.outcome.get("is_complete") is False  # the outcome is still captured
    # docs/compat.md: a timed-out trial is still graded and counts in the grader means
    assert {s.grader: s.value for s in trial.scores} == {
        "card_completion": 0.0, "card_template_choice": 0.0}
    summary = summarize(result)
    assert summary.timed_out_trials == 1 and summary.counted_trials == 1
    assert {g.grader: g.decided for g in summary.graders} == {
        "card_completion": 1, "card_template_choice": 1}
    assert summary.trial_pass_rate == 0.0  # a timeout counts against the agent


def test_provider_errors_are_errored_not_failed(tmp_path: Path, state: Path) -> None:
    tasks = [
        sb.task("ok-coffee", "Coffee at Bean Bar $4.20", 1),
        sb.task("down", "Bought boots for $89", 2),
        sb.task("wrong", "Walked the dog by the canal", 3),
    ]
    suite = load_suite(sb.suite(tmp_path / "s", tasks))

    def policy(req: Request) -> ModelResponse:
        if "boots" in req.messages[1].content:
            raise ProviderError("provider returned HTTP 503 after 4 retries", retries=4)
        return policies.card_policy(req)

    result = run(suite, options(state, reuse=True), ScriptedModel(policy))
    status = {(t.task_id, t.trial_index): t.status for t in result.trials}
    assert status == {
        ("ok-coffee", 0): "passed",
        ("ok-coffee", 1): "passed",
        ("down", 0): "errored",
        ("down", 1): "errored",
        ("wrong", 0): "failed",  # snippet instead of transaction: an agent failure
        ("wrong", 1): "failed",
    }
    errored = [t for t in result.trials if t.status == "errored"]
    assert all("HTTP 503" in (t.infra_error or "") and not t.scores for t in errored)
    assert all(any(e.kind == "infra_error" for e in t.transcript.events) for t in errored)
    summary = summarize(result)
    assert (summary.num_trials, summary.counted_trials, summary.errored_trials) == (6, 4, 2)
    assert summary.counted_trial_pass_rate == 0.5 and summary.counted_task_pass_rate == 0.5
    # the original's rates count the errored task as failed
    assert (summary.trial_pass_rate, summary.task_pass_rate) == (pytest.approx(2 / 6),
                                                                  pytest.approx(1 / 3))
    tasks_by_id = {t.task_id: t for t in summary.tasks}
    assert tasks_by_id["down"].passed is None and tasks_by_id["wrong"].passed is False
    assert list(summary.infra_errors.values()) == [2]
    # errored trials are never cached: a rerun retries them and reuses the rest
    again = ScriptedModel(policies.card_policy)
    rerun = run(suite, options(state, reuse=True), again)
    assert {t.task_id for t in rerun.trials if not t.cached} == {"down"}
    assert all(t.status == "passed" for t in rerun.trials if t.task_id == "down")


def _always_down() -> ScriptedModel:
    def policy(_req: Request) -> ModelResponse:
        raise ProviderError("connection refused after 4 retries", retries=4)

    return ScriptedModel(policy, model_id="scripted:down")


def test_all_errored_fails_loudly(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = sb.suite(tmp_path / "s", sb.card_tasks(3))
    monkeypatch.setitem(SCRIPTED_MODELS, "down", _always_down)
    request = EvalRequest(suite=str(root), models=ModelIds(agent="scripted:down"))
    with pytest.raises(AllTrialsErroredError, match=r"every trial of s-\S+ errored"):
        asyncio.run(evaluate(request, state))
    result = CliRunner().invoke(
        app,
        ["eval", "--suite", str(root), "--agent-model", "scripted:down", "--out", str(state)],
    )
    assert result.exit_code == 2, result.output
    assert "errored" in result.output and "connection refused" in result.output


@pytest.mark.parametrize(("limit", "expected"), [(3, 3), (None, 6)])
def test_concurrency_bound_is_respected(
    tmp_path: Path, state: Path, limit: int | None, expected: int
) -> None:
    suite = load_suite(sb.suite(tmp_path / "s", sb.card_tasks(10)))
    inflight = peak = 0

    async def slow(req: Request) -> ModelResponse:
        nonlocal inflight, peak
        inflight += 1
        peak = max(peak, inflight)
        try:
            await asyncio.sleep(0.01)
            return policies.card_policy(req)
        finally:
            inflight -= 1

    result = run(suite, options(state, concurrency=limit), ScriptedModel(slow))
    assert len(result.trials) == 20 and inflight == 0
    assert peak == expected  # reached (work overlaps) and never exceeded (card default: 6)
    assert default_concurrency("pkm_agent", RunOptions(agent_model="scripted:pkm")) == 4
    assert default_concurrency("card_agent", RunOptions(agent_model="scripted:card")) == 6
    assert default_concurrency("card_agent", RunOptions(agent_model="local:smollm2")) == 1


@pytest.mark.parametrize(("threshold", "status"), [(1.0, "failed"), (0.5, "passed")])
def test_threshold_below_one_decides_each_trial(
    tmp_path: Path, state: Path, threshold: float, status: str
) -> None:
    # the card is complete (1.0) but a snippet, not the expected transaction (0.0): mean 0.5
    task = sb.task("dog", "Walked the dog by the canal", 1, trials=2)
    suite = load_suite(sb.suite(tmp_path / "s", [task], kind="regression",
                                task_pass_threshold=threshold))
    result = run(suite, options(state), ScriptedModel(policies.card_policy))
    assert [t.status for t in result.trials] == [status, status]
    assert summarize(result).task_pass_rate == (1.0 if status == "passed" else 0.0)


def test_fixed_clock_is_the_published_time(tmp_path: Path, state: Path) -> None:
    assert DEFAULT_CLOCK == "2026-03-14T09:30:00"
    model = ScriptedModel(policies.card_policy)
    suite = load_suite(sb.suite(tmp_path / "a", sb.card_tasks(2)))
    result = run(suite, options(state), model)
    firsts = {r.messages[1].content for r in model.calls}
    # SPEC §8: the card's Published time goes on with the UTC offset, zone and a note
    assert all("Published time: 2026-03-14 09:30:00 UTC" in m for m in firsts)
    saved = {t.outcome["card_yaml_blob"] for t in result.trials}
    assert all("timestamp: 1773" in blob for blob in saved)  # 2026-03-14, not today
    # a suite can pin its own clock; PKM shows it with the weekday
    pkm_model = policies.pkm_model()
    pkm_task = sb.task("p", "Dentist moved to Friday", 1, graders=[{"name": "pkm_completion"}])
    pkm = load_suite(
        sb.suite(tmp_path / "b", [pkm_task], agent="pkm_agent", clock="2026-07-01T08:00:00")
    )
    asyncio.run(run_suite(pkm, options(state), pkm_model))
    # docs/compat.md: the publish time carries the UTC offset and zone (the original PKM form)
    first = pkm_model.calls[0].messages[1].content
    assert "Published Time: 2026-07-01 08:00:00 UTC+0000 (UTC, Wednesday)" in first


def test_trial_cache_key_follows_the_prompt(tmp_path: Path, state: Path) -> None:
    a, b = text_hash("prompt A"), text_hash("prompt B")
    key = trial_cache_key("task", a, "scripted:card", None, 0)
    assert key == trial_cache_key("task", a, "scripted:card", None, 0)
    assert key != trial_cache_key("task", b, "scripted:card", None, 0)
    assert key != trial_cache_key("task", a, "scripted:card", None, 1)
    assert key != trial_cache_key("task", a, "scripted:other", None, 0)
    suite = load_suite(sb.suite(tmp_path / "s", sb.card_tasks(2)))
    first = ScriptedModel(policies.card_policy)
    run(suite, options(state, reuse=True), first)
    same = ScriptedModel(policies.card_policy)
    cached = run(suite, options(state, reuse=True), same)
    assert all(t.cached for t in cached.trials) and not same.calls
    changed = ScriptedModel(policies.card_policy)
    fresh = run(suite, options(state, reuse=True, prompt_text=PROMPT + " Be brief."), changed)
    assert not any(t.cached for t in fresh.trials) and len(changed.calls) == len(first.calls)


# --- a suite in the original framework's layout ---------------------------------------------

SLEEP_BASE = "# Sleep\n\n## Notes\n- Magnesium before bed seems to help. <!-- fact_id: x -->\n"
SLEEP_OVERLAY = SLEEP_BASE + "- overlay: white-noise app at night\n"


def dart_layout_suite(root: Path) -> Path:
    """suite.json in camelCase, tasks/<category>/<folder>/task.json, a `workspace/` overlay and
    a shared `_starter_pkm` base fixture, as suites written for the original framework are."""
    sb.write_json(
        root / "suite.json",
        {
            "name": "dart_pkm",
            "agent_name": "pkm_agent",
            "kind": "capability",
            "taskPassThreshold": 0.75,
            "requireReferenceSolution": True,
        },
    )
    base = root / "_starter_pkm" / "PKM"
    (base / "Areas" / "Health").mkdir(parents=True)
    (base / "Areas" / "Health" / "Sleep.md").write_text(SLEEP_BASE)
    (base / "Resources").mkdir()
    (base / "Resources" / "Reading list.md").write_text("# Reading list\n\n- Piranesi\n")
    cases = [
        (
            "sleep-magnesium",
            "Stopped the magnesium two weeks ago, no change in sleep.",
            ["Areas/Health"],
            ["Areas/Health/Sleep.md"],
        ),
        (
            "book-new-file",
            "Started Klara and the Sun on the train.",
            ["Resources"],
            ["Resources/Reading list.md"],
        ),
        ("book-wrong-bucket", "Finished Piranesi, 4/5.", ["Resources"], []),
    ]
    for n, (folder, content, buckets, files) in enumerate(cases, start=1):
        task_dir = root / "tasks" / "routing" / folder
        inp: dict[str, str] = {
            "fact_id": f"2026/03/14.md#ts_{n}",
            "content": content,
            "base_fixture": "_starter_pkm",
        }
        if folder == "sleep-magnesium":
            overlay = task_dir / "workspace" / "PKM" / "Areas" / "Health"
            overlay.mkdir(parents=True)
            (overlay / "Sleep.md").write_text(SLEEP_OVERLAY)
            (overlay / "settings.json").write_text('{"not": "a task"}')
            inp["fixture_dir"] = "tasks/routing/sleep-magnesium/workspace"
        routing: dict[str, object] = {"expected_buckets": buckets}
        if files:
            routing["expected_files"] = files
        sb.write_json(
            task_dir / "task.json",
            {
                "id": folder,
                "description": f"routing: {content}",
                "metadata": {"failure_bucket": "routing"},
                "input": inp,
                "reference_solution": {
                    "expected_outcome": {"terminal_path": "persist"},
                    "source": "manual",
                },
                "graders": [
                    {"name": "pkm_completion", "config": {}},
                    {"name": "pkm_routed_correctly", "config": routing},
                ],
            },
        )
    return root


def dart_policy(req: Request) -> ModelResponse:
    fact_id, content = policies.raw_input(req)
    done = [m.tool_name for m in req.messages if m.role == "tool" and not m.is_error]
    if "update_timeline_card_insight" in done:
        return reply("Done.")
    note = f"- {content} <!-- fact_id: {fact_id} -->\n"
    if "magnesium" in content and "Read" not in done:
        return reply("", call("Read", file_path="/Areas/Health/Sleep.md"))
    if "magnesium" in content and "Edit" not in done:
        return reply(
            "",
            call(
                "Edit",
                file_path="/Areas/Health/Sleep.md",
                old_string="## Notes\n",
                new_string="## Notes\n" + note,
            ),
        )
    if "magnesium" not in content and "Write" not in done:
        path = "/Resources/Klara and the Sun.md" if "Klara" in content else "/Projects/piranesi.md"
        return reply("", call("Write", file_path=path, content=f"# Note\n\n{note}"))
    return reply(
        "",
        call(
            "update_timeline_card_insight",
            fact_id=fact_id,
            insight_text="This continues your sleep and reading notes.",
        ),
    )


def test_original_layout_loads_runs_and_grades(tmp_path: Path, state: Path) -> None:
    suite = load_suite(dart_layout_suite(tmp_path / "dart"))
    assert suite.config.task_pass_threshold == 0.75 and suite.config.require_reference_solution
    assert [t.id for t in suite.tasks] == ["book-new-file", "book-wrong-bucket", "sleep-magnesium"]
    first = suite.tasks[0]
    assert first.spec.trials_per_run == 1 and first.spec.timeout_seconds == 300
    assert first.base_fixture == (tmp_path / "dart" / "_starter_pkm").resolve()
    assert suite.tasks[2].fixture_dir is not None
    model = ScriptedModel(dart_policy)
    result = asyncio.run(run_suite(suite, options(state, prompt_text="Organise the input."), model))
    trials = {t.task_id: t for t in result.trials}
    values = {tid: {s.grader: s.value for s in t.scores} for tid, t in trials.items()}
    assert values == {
        "sleep-magnesium": {"pkm_completion": 1.0, "pkm_routed_correctly": 1.0},
        "book-new-file": {"pkm_completion": 1.0, "pkm_routed_correctly": 0.5},
        "book-wrong-bucket": {"pkm_completion": 1.0, "pkm_routed_correctly": 0.0},
    }
    assert [
        trials[t].status for t in ("sleep-magnesium", "book-new-file", "book-wrong-bucket")
    ] == ["passed", "passed", "failed"]
    # the overlay replaced the base file, and the agent's edit landed in it
    sleep = trials["sleep-magnesium"]
    read = next(c for c in sleep.transcript.tool_calls if c.tool_name == "Read")
    assert "overlay: white-noise" in read.result and not read.is_error
    contents = sleep.outcome["file_contents"]
    sleep_file = next(v for k, v in contents.items() if k.endswith("Areas/Health/Sleep.md"))
    assert "overlay: white-noise" in sleep_file and "fact_id: 2026/03/14.md#ts_1" in sleep_file
    assert any(k.endswith("Reading list.md") for k in contents)  # the base fixture is there
    summary = summarize(result)
    by_task = {t.task_id: t.passed for t in summary.tasks}
    # taskPassThreshold 0.75: the mean score decides (1.0, 0.75 pass; 0.5 fails)
    assert by_task == {"book-new-file": True, "book-wrong-bucket": False, "sleep-magnesium": True}
    assert summary.task_pass_rate == pytest.approx(2 / 3)


def test_trial_cache_key_follows_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """A change to agent or grader code must not serve trials cached by the old code."""
    from promptloop.optimizer.run import cache

    before = trial_cache_key("task", "p", "scripted:card", None, 0)
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "a-different-build")
    assert trial_cache_key("task", "p", "scripted:card", None, 0) != before


def test_stale_trial_workspaces_of_dead_processes_are_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import subprocess
    import sys
    import tempfile

    from promptloop.optimizer.run import workspaces

    shm, tmp = tmp_path / "shm", tmp_path / "tmp"
    monkeypatch.setattr(workspaces, "trial_root", lambda: str(shm))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = shm / f"{workspaces.TRIAL_PREFIX}{dead}-abc"
    live = shm / f"{workspaces.TRIAL_PREFIX}{os.getpid()}-def"
    other = shm / "unrelated"
    # a killed run's agent processes' private folders (HOME, TMPDIR; a worker slot's) too:
    # a team found them left in TMPDIR after kill -9 and a second Ctrl-C
    scratch = [tmp / f"{p}{dead}-xyz" for p in workspaces.SCRATCH_PREFIXES]
    mine = tmp / f"promptloop-worker-{os.getpid()}-xyz"
    for folder in (stale, live, other, *scratch, mine):
        (folder / "home").mkdir(parents=True)
    assert workspaces.sweep_stale_trials.__wrapped__() == 4
    assert not stale.exists() and live.exists() and other.exists() and mine.exists()
    assert not any(p.exists() for p in scratch)
    from promptloop.optimizer.adapters.process import new_scratch

    made = new_scratch("promptloop-worker-")
    try:  # named after this process, so the sweep can tell it is not a dead one's
        assert made.name.startswith(f"promptloop-worker-{os.getpid()}-")
    finally:
        made.rmdir()


def test_a_grader_that_raises_errors_the_trial_instead_of_passing_it(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The original scores a raising grader null and passes the trial on its other scores; a
    broken grader must not turn into a pass here: the trial is errored and says which grader."""
    import dataclasses

    from promptloop.graders import registry

    spec = registry.get_grader("card_template_choice")

    async def broken(ctx: object, config: object) -> object:
        raise KeyError("no_such_field")

    monkeypatch.setitem(registry._REGISTRY, spec.name, dataclasses.replace(spec, grade=broken))
    suite = load_suite(sb.suite(tmp_path / "s", sb.card_tasks(2, trials=1)))
    result = run(suite, options(state), ScriptedModel(policies.card_policy))
    assert {t.status for t in result.trials} == {"errored"}
    assert all("grader card_template_choice failed: grader raised KeyError" in (t.infra_error or "")
               for t in result.trials)
