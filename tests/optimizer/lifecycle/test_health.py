"""Lineage selection and suite health over scripted stored runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptloop.optimizer.lifecycle.errors import LifecycleError, UnknownNameError
from promptloop.optimizer.lifecycle.health import HealthPolicy, compute_health, record_class
from promptloop.optimizer.lifecycle.health_io import (
    build_health,
    health_markdown,
    health_path,
    load_health,
    refresh_health,
    save_health,
)
from promptloop.optimizer.lifecycle.lineage import (
    LineageSpec,
    distinct_trials,
    load_lineage,
    select_lineage,
)
from tests.optimizer.lifecycle.helpers import PROMPT, git, run, save_all, sha

T, F = True, False


def history() -> list:
    """Six nights: `event` fails once in the first night then always passes; `link` always
    passes; `stuck` never passes (12 trials)."""
    first = run("n1", {"event-a": [T, F], "event-b": [T, T], "link-a": [T, T],
                       "stuck-a": [F, F]}, day=0)
    rest = [run(f"n{d + 1}", {"event-a": [T, T], "event-b": [T, T], "link-a": [T, T],
                              "stuck-a": [F, F]}, day=d) for d in range(1, 6)]
    return [first, *rest]


def lineage_of(runs: list, **spec: object):  # type: ignore[no-untyped-def]
    return select_lineage(runs, LineageSpec("card_agent_capability", **spec))  # type: ignore[arg-type]


def test_health_rates_maturity_stragglers_and_streaks() -> None:
    h = compute_health(lineage_of(history()))
    tasks = {t.task_id: t for t in h.tasks}
    assert tasks["event-a"].pass_rate == pytest.approx(11 / 12)
    assert not tasks["event-a"].mature and tasks["event-b"].mature
    assert tasks["stuck-a"].straggler and tasks["stuck-a"].trials == 12
    assert not tasks["link-a"].straggler
    buckets = {b.bucket: b for b in h.buckets}
    event = buckets["event"]
    assert [p.pass_rate for p in event.series] == [0.75, 1, 1, 1, 1, 1]
    assert event.mature_streak == 5 and event.graduation_ready
    assert event.pass_rate == pytest.approx(23 / 24) and event.mature
    assert buckets["stuck"].mature_streak == 0 and not buckets["stuck"].graduation_ready
    assert h.summary.mature_tasks == 2 and h.summary.tasks_with_trials == 4
    assert h.summary.mature_share == pytest.approx(0.5) and not h.summary.saturated
    assert h.summary.stragglers == ["stuck-a"]
    assert h.summary.graduation_ready == ["event", "link"]


def test_four_mature_runs_are_not_enough_and_saturation() -> None:
    h = compute_health(lineage_of(history()[:5]))
    event = next(b for b in h.buckets if b.bucket == "event")
    assert event.mature_streak == 4 and not event.graduation_ready
    all_pass = [run(f"ok{d}", {"a-1": [T, T], "b-1": [T]}, day=d) for d in range(3)]
    assert compute_health(lineage_of(all_pass)).summary.saturated
    strict = compute_health(lineage_of(history()), HealthPolicy(graduation_runs=6))
    assert strict.summary.graduation_ready == ["link"]


def test_trend_directions() -> None:
    rates = [[T, T, T, T], [T, T, T, F], [T, T, F, F], [T, F, F, F], [F, F, F, F]]
    runs = [run(f"d{i}", {"x-1": r}, day=i) for i, r in enumerate(rates)]
    trend = compute_health(lineage_of(runs)).buckets[0].trend
    assert trend.slope_per_run == pytest.approx(-0.25)
    assert trend.direction == "declining" and trend.high is not None and trend.high < 0
    short = compute_health(lineage_of(runs[:2])).buckets[0].trend
    assert short.direction == "unknown" and short.low is None


def test_lineage_filters_model_replay_prompt_and_window() -> None:
    runs = [
        run("mine-1", {"x-1": [T]}, day=0),
        run("other-model", {"x-1": [F]}, day=1, model="openai:gpt-4.1"),
        run("replayed", {"x-1": [F]}, day=2, mode="replay"),
        run("candidate", {"x-1": [F]}, day=3, prompt="a rejected candidate prompt"),
        run("mine-2", {"x-1": [T]}, day=4),
        run("mine-3", {"x-1": [T]}, day=5),
    ]
    lin = lineage_of(runs, prompt_hashes=frozenset({sha(PROMPT)}), window=2)
    assert [r.run_name for r in lin.runs] == ["mine-2", "mine-3"]
    assert lin.excluded == {"other agent model": 1, "replay": 1,
                            "prompt not in the ref's history": 1, "older than the window": 1}
    assert lin.agent_model == "scripted:card"
    anyp = lineage_of(runs)
    assert "candidate" in [r.run_name for r in anyp.runs]


def test_cached_trials_count_once() -> None:
    first = run("fresh", {"x-1": [T, F]}, day=0)
    copy = run("cached", {}, day=1, trials=[t.model_copy(update={"cached": True})
                                            for t in first.trials])
    assert len(list(distinct_trials([first, copy]))) == 2
    h = compute_health(lineage_of([first, copy]))
    bucket = h.buckets[0]
    assert bucket.trials == 2 and [p.run_name for p in bucket.series] == ["fresh"]
    # a run served wholly from the cache takes no room in the window (a nightly baseline of an
    # unchanged prompt, night after night, pushed the runs with evidence out of it)
    assert [r.fresh_trials for r in h.lineage.runs] == [2]
    assert h.lineage.excluded == {"no fresh trial (all served from the trial cache)": 1}
    nights = [run(f"n{d}", {}, day=d + 2, trials=[t.model_copy(update={"cached": True})
                                                   for t in first.trials]) for d in range(12)]
    assert compute_health(lineage_of([first, *nights])).buckets[0].trials == 2


def test_a_run_whose_every_trial_errored_takes_no_room_in_the_window() -> None:
    """A team's health listed two evals whose every trial errored (a service down) among the
    window's runs, with nothing said of them."""
    good = run("good", {"x-1": [T, T]}, day=0)
    down = run("down", {"x-1": ["errored", "errored"]}, day=1)
    lin = lineage_of([good, down], window=1)
    assert [r.run_name for r in lin.runs] == ["good"]
    assert lin.excluded == {"no counted trial (every trial errored)": 1}


def test_errored_trials_never_count() -> None:
    r = run("e", {"x-1": [T, "errored", "errored"]})
    t = compute_health(lineage_of([r])).tasks[0]
    assert (t.trials, t.passed, t.pass_rate) == (1, 1, 1.0)


def test_markdown_and_saved_format(tmp_path: Path) -> None:
    h = compute_health(lineage_of(history()))
    md = health_markdown(h)
    assert "## Suite health: `card_agent_capability`" in md
    assert "| `event` | 2 | 24 | **95.8%** | +3.6 pp/run [-2.2, +9.3] | 1/2 | 5 | ready |" in md
    assert "Ready to graduate (5 consecutive mature runs): `event`, `link`" in md
    assert "Stragglers (0% over >= 10 trials): `stuck-a`" in md
    path = save_health(tmp_path, h)
    assert path == health_path(tmp_path, "card_agent_capability")
    data = json.loads(path.read_text())
    assert data["format"] == "promptloop.health/1"
    assert data["summary"]["graduation_ready"] == ["event", "link"]
    loaded = load_health(tmp_path, "card_agent_capability")
    assert loaded == h
    assert load_health(tmp_path, "nothing") is None
    path.write_text("{}")
    with pytest.raises(LifecycleError, match=r"promptloop\.health/1"):
        load_health(tmp_path, "card_agent_capability")


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "prompts").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for n, text in enumerate(["v1\n", "v2\n"]):
        (repo / "prompts" / "card_agent.md").write_text(text)
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=d", "-c", "user.email=d@x", "commit", "-qm", f"p{n}")
    return repo


def test_lineage_follows_the_prompt_history_of_the_ref(tmp_path: Path) -> None:
    repo, state = _repo(tmp_path), tmp_path / "state"
    save_all(state, [
        run("on-v1", {"x-1": [T]}, day=0, prompt="v1\n"),
        run("candidate", {"x-1": [F]}, day=1, prompt="v3 never committed\n"),
        run("on-v2", {"x-1": [T]}, day=2, prompt="v2\n"),
        run("checkout", {"x-1": [F]}, day=3, prompt="v2 edited\n"),
    ])
    lin = load_lineage(state / "runs", "card_agent_capability", repo=repo)
    assert [r.run_name for r in lin.runs] == ["on-v1", "on-v2"]
    assert lin.excluded == {"prompt not in the ref's history": 2}
    (repo / "prompts" / "card_agent.md").write_text("v2 edited\n")
    lin = load_lineage(state / "runs", "card_agent_capability", repo=repo)
    assert [r.run_name for r in lin.runs] == ["on-v1", "on-v2", "checkout"]
    lin = load_lineage(state / "runs", "card_agent_capability", repo=repo, ref="HEAD~1")
    assert [r.run_name for r in lin.runs] == ["on-v1"]
    assert "history of HEAD~1" in lin.definition
    h = build_health(state, "card_agent_capability", repo=repo, window=2)
    assert [r.run_name for r in h.lineage.runs] == ["on-v2", "checkout"]
    assert h.lineage.prompt_versions == 3


def test_unknown_suite_and_empty_lineage(tmp_path: Path) -> None:
    save_all(tmp_path, [run("a", {"x-1": [T]})])
    with pytest.raises(UnknownNameError, match="Did you mean 'card_agent_capability'"):
        build_health(tmp_path, "card_agent_capabilty")
    with pytest.raises(LifecycleError, match="no run of card_agent_capability belongs"):
        build_health(tmp_path, "card_agent_capability", agent_model="openai:gpt-4.1")


def test_refresh_renders_ambiguous_tasks_with_evidence(tmp_path: Path) -> None:
    save_all(tmp_path, [run("r1", {"event-a": [T, F], "event-b": [T, T]}),
                        run("r2", {"event-a": [F, T], "event-b": [T, T]}, day=1)])
    h, path = refresh_health(tmp_path, "card_agent_capability")
    assert path.is_file() and h.summary.ambiguous_tasks == ["event-a"]
    md = health_markdown(h, heading_level=3, max_evidence=3)
    assert "#### Ambiguous or flaky tasks (1)" in md
    assert "| event-a | event | flaky trials | 2 of 4 trials passed on one prompt" in md
    assert ("- `r1/event-a#1` failed: score: 0.00; failing graders: card_completion 0.00 fail"
            in md)
    assert "- ... 1 more in the health JSON" in md


def test_trend_cell_stays_on_one_line_at_80_columns() -> None:
    from rich.console import Console

    from promptloop.optimizer.cli.ui import table_renderable
    from promptloop.optimizer.lifecycle.health_io import bucket_table

    rates = [[T, T, T, T], [T, T, T, F], [T, T, F, F], [T, F, F, F], [F, F, F, F]]
    runs = [run(f"d{i}", {f"a_long_bucket_name_{k}-1": r for k in range(3)}, day=i)
            for i, r in enumerate(rates)]
    view = bucket_table(compute_health(lineage_of(runs)).buckets)
    trend = view.rows[0][4].text
    assert trend.startswith("-25.0 pp/run [")
    console = Console(width=80, record=True)
    console.print(table_renderable(view, "", 80)[0])
    assert sum(trend in line for line in console.export_text().splitlines()) == 3


def test_two_runs_show_no_trend_in_the_table() -> None:
    """A line through two runs read "-33.3 pp/run" in the table while the JSON said the
    direction is unknown (a team: one eval and one optimize's extra baseline trials)."""
    from promptloop.optimizer.lifecycle.health_io import bucket_table

    runs = [run(f"d{i}", {"event-a": r}, day=i) for i, r in enumerate([[T, T, T], [T, F, F]])]
    health = compute_health(lineage_of(runs))
    assert health.buckets[0].trend.direction == "unknown"
    cell = bucket_table(health.buckets).rows[0][4]
    assert cell.text == "unknown (2 of 3 runs)" and cell.tone == ""


def test_one_tone_rule_for_deltas_slopes_and_trends() -> None:
    from promptloop.optimizer.report import fmt

    assert fmt.trend(0.5, 0.5004) == fmt.tone(0.0004) == "same"
    assert fmt.trend(0.5, 0.501) == fmt.tone(0.001) == "up"
    assert fmt.tone(-0.2, -0.3, 0.1) == "same" and fmt.tone(-0.2, -0.3, -0.1) == "down"
    assert fmt.tone(None) == "" and fmt.trend(None, 0.5) == "same"


def test_each_task_shows_its_record_length_and_class() -> None:
    """The record the gate judges a task against: its length and its class."""
    h = compute_health(lineage_of(history()))
    tasks = {t.task_id: t for t in h.tasks}
    assert tasks["event-b"].trials == 12 and tasks["event-b"].record_class == "reliable"
    assert tasks["stuck-a"].record_class == "failing"
    assert tasks["event-a"].record_class == "flaky"  # 11 of 12: not sure enough of 0.8
    # a coin-flip task needs more than 12 trials before its rate is known to within 0.12
    assert record_class(6, 12) == "ambiguous" and record_class(9, 9) == "ambiguous"
    assert record_class(20, 40) == "flaky" and record_class(30, 40) == "flaky"


def _session(r, session: str | None):  # type: ignore[no-untyped-def]
    return r.model_copy(update={"provenance": r.provenance.model_copy(
        update={"session": session})})


def test_one_sessions_rounds_are_one_run_and_a_run_covers_the_bucket() -> None:
    """The gate's fresh baseline trials of a suspect task (runs of one task, in rounds) made a
    bucket "ready to graduate" after a single optimize iteration: a command's runs are one
    run to the streak, and a run counts only once it covers every task of the bucket."""
    full = _session(run("base", {"event-a": [T, T], "event-b": [T, T], "solo-a": [T]}, day=0),
                    "s1")
    twins = [_session(run(f"twin{k}", {"event-a": [T], "solo-a": [T]}, day=k + 1), "s1")
             for k in range(6)]
    h = compute_health(lineage_of([full, *twins]))
    buckets = {b.bucket: b for b in h.buckets}
    # one point per command in the series (its trend and sparkline), every trial in the rates
    assert len(buckets["solo"].series) == 1 and buckets["solo"].trials == 7
    assert buckets["solo"].mature_streak == 1 and not buckets["solo"].graduation_ready
    assert buckets["event"].mature_streak == 1 and buckets["event"].streak_runs == 1
    # runs saved without a session (older files) are a session each; partial runs of one
    # bucket task pool until they cover the bucket: six one-task runs of `event` are 3 runs
    old = [_session(run(f"p{k}", {f"event-{'ab'[k % 2]}": [T]}, day=k), None) for k in range(6)]
    event = next(b for b in compute_health(lineage_of(old)).buckets if b.bucket == "event")
    assert event.mature_streak == 3 and event.streak_runs == 6
    # a failure seen in a stretch that has not covered the bucket yet stops the count
    failing = _session(run("p9", {"event-a": [F]}, day=9), None)
    event = next(b for b in compute_health(lineage_of([*old, failing])).buckets
                 if b.bucket == "event")
    assert event.mature_streak == 0
    # five separate sessions that each ran the bucket are five runs, as before
    nights = [_session(run(f"n{d}", {"event-a": [T], "event-b": [T]}, day=d), f"n{d}")
              for d in range(5)]
    event = next(b for b in compute_health(lineage_of(nights)).buckets if b.bucket == "event")
    assert event.mature_streak == 5 and event.graduation_ready


def test_the_window_counts_commands_not_the_rounds_of_one() -> None:
    """An optimize session's gate saved 15 small runs of suspect tasks: they filled the
    10-run window and pushed every full evaluation out (health showed 4 of 12 tasks)."""
    full = [_session(run(f"n{d}", {"event-a": [T], "event-b": [T], "link-a": [T]}, day=d),
                     f"night{d}") for d in range(3)]
    gate = [_session(run(f"g{k}", {"event-a": [T]}, day=3 + k), "opt") for k in range(15)]
    h = compute_health(lineage_of([*full, *gate]))
    assert [r.run_name for r in h.lineage.runs][:3] == ["n0", "n1", "n2"]
    assert len(h.lineage.runs) == 18 and "older than the window" not in h.lineage.excluded
    assert {t.task_id for t in h.tasks} == {"event-a", "event-b", "link-a"}
    event = next(b for b in h.buckets if b.bucket == "event")
    assert len(event.series) == 4  # three nights and the one optimize session


def test_runs_copied_from_the_cache_leave_the_window_to_runs_with_evidence(
        tmp_path: Path) -> None:
    """A team's second night served its baseline from the cache, two profile runs ran one
    task each; with the window read run by run, the copies and the profile runs filled it,
    the first night's baseline (every task) was "not read: the window was full", and health
    called the suite saturated on 2 of its 8 tasks."""
    tasks = {f"{b}-{i}": [T, F] for b in ("event", "link") for i in range(4)}
    first = run("night-1", tasks, day=0)
    copy = run("night-2", {}, day=1, trials=[t.model_copy(update={"cached": True})
                                             for t in first.trials])
    profiles = [run(f"profile-{k}", {"event-0": [T]}, day=2 + k) for k in range(2)]
    runs = [first, copy, *profiles]
    runs = [r.model_copy(update={"provenance": r.provenance.model_copy(update={
        "session": r.run_name})}) for r in runs]
    state = tmp_path / "state"
    save_all(state, runs)
    lin = load_lineage(state / "runs", "card_agent_capability", window=3)
    assert [r.run_name for r in lin.runs] == ["night-1", "profile-0", "profile-1"]
    assert "not read: the window was full" not in lin.excluded
    h = compute_health(lin)
    assert h.summary.tasks_with_trials == 8 and not h.summary.saturated
    # a window of 2 commands with evidence: the two profile runs (night-1 is not read)
    two = load_lineage(state / "runs", "card_agent_capability", window=2)
    assert [r.run_name for r in two.runs] == ["profile-0", "profile-1"]
