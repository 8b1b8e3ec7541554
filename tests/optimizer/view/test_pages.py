"""What each page of the viewer shows, over the scripted state folder (no sockets needed)."""

from __future__ import annotations

import html
import re
import shutil
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from promptloop.agents.llm.types import Message
from promptloop.agents.transcript import Transcript
from promptloop.optimizer.core.ledger import Ledger
from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.lifecycle.stats import slope
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.store import default_store_dir, list_runs
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.run.cache import text_hash
from promptloop.optimizer.view import state as state_module
from promptloop.optimizer.view.app import ViewApp
from promptloop.optimizer.view.compare import prompt_diff, recover_prompt
from promptloop.optimizer.workflows.paired import compare_suite_runs
from tests.optimizer.report.test_report import mk_run, tr
from tests.optimizer.view.builders import EVIL_BASE, EVIL_SUITE, ViewState, load

GOOD_LINE = "If the input is only a greeting, filler or emoji, call skip_pkm_organization"


@pytest.fixture(scope="module")
def app(view_state: ViewState) -> ViewApp:
    return ViewApp(view_state.root)


def page(app: ViewApp, target: str, status: int = 200) -> str:
    r = app.handle(target)
    assert r.status == status, (target, r.body.decode()[-400:])
    return r.body.decode("utf-8")


def rows(text: str, table_id: str) -> list[str]:
    body = text.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr[ >].*?</tr>", body, flags=re.S)[1:]


def test_runs_list_is_built_from_the_index_alone(
    app: ViewApp, view_state: ViewState, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_reports(*_: object) -> None:
        raise AssertionError("the runs list opened a report")

    monkeypatch.setattr(state_module, "load_report_file", no_reports)
    entries = list_runs(view_state.root / "runs")
    text = page(ViewApp(view_state.root), "/")
    listed = rows(text, "runs-table")
    assert len(listed) == len(entries)
    assert view_state.cand in listed[0]  # newest first
    assert f"{len(entries)} of {len(entries)} run(s)" in text
    for e in entries:
        assert html.escape(e.run_name, quote=False) in text
        assert (e.prompt_hash or "")[:12] in text and (e.git_commit or "")[:12] in text


def test_runs_list_filters_and_search(app: ViewApp, view_state: ViewState) -> None:
    evil = rows(page(app, "/?" + urlencode({"suite": EVIL_SUITE})), "runs-table")
    assert len(evil) == 2 and all("evil_suite" in r for r in evil)
    found = rows(page(app, "/?q=ACCEPTED"), "runs-table")
    assert len(found) == 1 and view_state.cand in found[0]
    by_model = rows(page(app, "/?model=scripted:pkm"), "runs-table")
    assert len(by_model) == 2
    text = page(app, "/?" + urlencode({"kind": "regression", "q": "no-such-run"}))
    assert "No run matches these filters." in text and 'value="regression" selected' in text


def test_run_page_is_the_html_report_with_a_compare_form(
    app: ViewApp, view_state: ViewState,
) -> None:
    text = page(app, "/run/" + quote(view_state.cand, safe=""))
    run = load(view_state, view_state.cand)
    assert f'data-order="{len(run.trials)}"' in text and 'id="trial-table"' in text
    assert '<script src="/static/report.js"></script>' in text
    assert "<script>" not in text  # no inline script: the CSP forbids it
    options = re.findall(r'<option value="([^"]+)">', text.split('id="compare-base"')[1]
                         .split("</select>")[0])
    same = [e.run_name for e in list_runs(view_state.root / "runs")
            if e.suite_name == run.suite_name and e.run_name != run.run_name]
    assert sorted(options) == sorted(same) and view_state.base in options


def test_compare_page_shows_the_gates_paired_table(app: ViewApp, view_state: ViewState) -> None:
    base, cand = load(view_state, view_state.base), load(view_state, view_state.cand)
    text = page(app, "/compare?" + urlencode({"base": base.run_name, "cand": cand.run_name}))
    comps = compare_suite_runs([base], [cand], GatePolicy())
    assert comps and any(c.bucket == "skip_trivial" and c.fixed == 4 for c in comps)
    table = text.split("Paired per-bucket comparison")[1].split("</table>")[0]
    for c in comps:
        row = next(r for r in re.findall(r"<tr>.*?</tr>", table, flags=re.S) if c.bucket in r)
        for cell in (fmt.p_value(c.p_value), fmt.p_value(c.p_improve), fmt.p_value(c.p_regress),
                     fmt.interval(c.ci_low, c.ci_high), f"{c.fixed}/{c.broken}", c.status,
                     fmt.signed(c.delta)):
            assert f">{cell}<" in row, (c.bucket, cell, row)
    # flipped trials first, each linked to its side-by-side view
    flipped = re.findall(r'<tr class="pair c-fixed".*?</tr>', text, flags=re.S)
    assert len(flipped) == 4 and all("skip_trivial" in r for r in flipped)
    assert text.index("c-fixed") < text.index("c-same")
    assert "/compare/trial?base=" in flipped[0]
    # the prompt diff, recovered from the transcripts and verified against the hashes
    diff = text.split('id="prompt-diff"')[1].split("</section>")[0]
    assert f'<span class="add">+{GOOD_LINE}' in diff


def test_prompt_diff_says_when_the_prompt_cannot_be_recovered() -> None:
    prompt = "You file notes.\nSkip greetings.\n"
    talk = Transcript(messages=[Message.system(prompt), Message.user("hi")])
    base = mk_run([tr("a", 0, "passed", transcript=talk)], name="b")
    base.provenance.prompt_hashes = {"pkm_agent": text_hash(prompt)}
    other = mk_run([tr("a", 0, "failed", transcript=talk)], name="c")
    other.provenance.prompt_hashes = {"pkm_agent": "0" * 64}  # no transcript has this text
    assert recover_prompt(base).text == prompt
    assert recover_prompt(other).text is None and recover_prompt(other).hash == "0" * 64
    d = prompt_diff(base, other)
    assert not d.same and not d.recovered and d.files == []
    same = prompt_diff(base, base.model_copy(update={"run_name": "d"}))
    assert same.same and same.files == []


def test_compare_refuses_runs_of_different_suites(app: ViewApp, view_state: ViewState) -> None:
    text = page(app, "/compare?" + urlencode({"base": EVIL_BASE, "cand": view_state.cand}), 400)
    assert "only runs of the same suite can be paired" in text
    assert "choose a base run" in page(app, "/compare", 400)
    assert "no run named" in page(app, "/compare?base=nope&cand=" + view_state.cand, 404)


def test_side_by_side_shows_one_trial_in_both_runs(app: ViewApp, view_state: ViewState) -> None:
    query = {"base": view_state.base, "cand": view_state.cand, "task": "greet-hi", "index": 0}
    text = page(app, "/compare/trial?" + urlencode(query))
    base_side, cand_side = text.split('data-side="base"')[1].split('data-side="cand"')
    assert view_state.base in base_side and 'b-failed">failed' in base_side
    assert view_state.cand in cand_side and 'b-passed">passed' in cand_side
    assert "skip_pkm_organization" in cand_side and "Transcript (" in cand_side
    assert 'rel="next"' in text or 'rel="previous"' in text
    missing = {**query, "index": 9}
    assert "neither run has trial 9" in page(app, "/compare/trial?" + urlencode(missing), 404)


def test_trend_plots_every_bucket_with_its_slope(app: ViewApp, view_state: ViewState) -> None:
    text = page(app, "/trend?suite=pkm_agent_capability&limit=200")
    every = [e for e in list_runs(view_state.root / "runs")
             if e.suite_name == "pkm_agent_capability"]
    # the lineage only: a candidate is not the suite's trend, an accepted one neither (a team
    # read a +1.5 pp/run climb on a trend whose HEAD prompt never changed: the accepted
    # branch was not merged)
    # and, as `health`, only runs with evidence of their own: no replay, no run served wholly
    # from the cache (a team's trend plotted 16 runs where health read 6)
    runs = [e for e in every if e.role != "candidate" and e.new_evidence]
    left_out = [e for e in every if e not in runs]
    assert any(e.verdict == "accepted" for e in left_out)
    assert left_out and all(e.run_name not in text for e in left_out)
    summaries = [summarize(load(view_state, e.run_name)) for e in sorted(
        runs, key=lambda e: e.started_at)]
    for bucket in ("skip_trivial", "short_fact", "long_fact"):
        values = [next((b.trial_pass_rate for b in s.buckets if b.bucket == bucket), None)
                  for s in summaries]
        figure = text.split(f'data-bucket="{bucket}"')[1].split("</figure>")[0]
        s = slope(values)
        assert s is not None and f"{s * 100:+.1f} pp/run" in figure
        assert figure.count("<circle") == sum(v is not None for v in values)
    assert f"in the {len(runs)} newest of {len(runs)} run(s)" in text
    assert slope([0.0, None, 1.0]) == pytest.approx(0.5) and slope([1.0]) is None


def test_ledger_lists_every_proposal_with_filters(app: ViewApp, view_state: ViewState) -> None:
    entries = Ledger(view_state.root / "ledger.jsonl").entries()
    assert len(rows(page(app, "/ledger"), "ledger-table")) == len(entries)
    accepted = rows(page(app, "/ledger?outcome=accepted"), "ledger-table")
    assert len(accepted) == sum(e.outcome == "accepted" for e in entries) == 1
    assert "promptloop/pkm_agent/skip_trivial/" in accepted[0]
    card = rows(page(app, "/ledger?agent=card_agent"), "ledger-table")
    assert len(card) == sum(e.agent == "card_agent" for e in entries) and card
    assert "No proposal matches" in page(app, "/ledger?q=zzzz-nothing")


def test_session_page_shows_each_iteration(app: ViewApp, view_state: ViewState) -> None:
    sessions = sorted(p.name for p in (view_state.root / "optimize").iterdir())
    pkm = next(s for s in sessions if "pkm_agent" in s)
    text = page(app, "/session/" + pkm)
    one, two = text.split('id="iter-1"')[1].split('id="iter-2"')
    assert 'b-rejected">rejected' in one and "regressed" in one
    assert 'b-accepted">accepted' in two and "Every guard passed" in two
    assert f"+{GOOD_LINE}" in two  # the proposal's diff
    assert "PR body" in two and "```diff" in two and "promptloop/pkm_agent/skip_trivial/" in two
    assert "Package the proposer read" in two and "&lt;prompt_file&gt;" in two
    card = next(s for s in sessions if "card_agent" in s)
    refused = page(app, "/session/" + card).split('id="iter-2"')[1]
    assert 'b-refused">refused' in refused and ">duplicate<" in refused
    listing = page(app, "/sessions")
    assert all(s in listing for s in sessions)


def test_session_page_links_the_runs_the_session_made(app: ViewApp,
                                                      view_state: ViewState) -> None:
    pkm = next(p.name for p in (view_state.root / "optimize").iterdir() if "pkm_agent" in p.name)
    made = [e for e in list_runs(default_store_dir(view_state.root)) if e.session == pkm]
    assert {e.role for e in made} >= {"candidate"}, made
    section = page(app, "/session/" + pkm).split('id="runs"')[1].split("</section>")[0]
    for e in made:
        assert f'href="/run/{quote(e.run_name, safe="")}"' in section
    others = [e for e in list_runs(default_store_dir(view_state.root)) if e.session != pkm]
    assert others and not any(f">{e.run_name}<" in section for e in others)


@pytest.mark.parametrize("alive", [True, False])
def test_an_iteration_without_verdict_says_running_or_interrupted(
    view_state: ViewState, tmp_path: Path, alive: bool,
) -> None:
    import os
    import socket
    import subprocess

    from promptloop.optimizer.core.ledger import LedgerOpen

    copy = tmp_path / "state"
    shutil.copytree(view_state.root, copy)
    pkm = next(p.name for p in (copy / "optimize").iterdir() if "pkm_agent" in p.name)
    first = next(e for e in Ledger(copy / "ledger.jsonl").entries() if e.id.startswith(pkm))
    if alive:
        pid = os.getpid()
    else:
        proc = subprocess.Popen(["true"])
        proc.wait()
        pid = proc.pid
    Ledger(copy / "ledger.jsonl").append(LedgerOpen(
        id=f"{pkm}-9", command="optimize", pid=pid, host=socket.gethostname(),
        suite=first.suite, agent=first.agent, bucket=first.bucket, iteration=9,
        base_commit=first.base_commit, prompt_path=first.prompt_path, proposer=first.proposer,
        repo=str(view_state.repo), branch=f"{first.branch}-9", worktree="/nonexistent"))
    nine = page(ViewApp(copy), "/session/" + pkm).split('id="iter-9"')[1]
    heading = nine.split("</h2>")[0]
    if alive:
        assert f"running (pid {pid})" in heading and "interrupted" not in heading
    else:
        assert "interrupted: the process ended before a verdict" in heading


def test_nightly_pages(app: ViewApp, view_state: ViewState) -> None:
    night = next((view_state.root / "nightly").iterdir()).name
    assert night in page(app, "/nightly")
    text = page(app, "/nightly/" + night)
    assert "Status: finished" in text and "Accepted branches (1)" in text
    assert text.count('class="meter"') == 3 and "min of 480 min" in text
    assert "iterate:pkm_agent/skip_trivial/2" in text  # the steps
    assert "/session/" in text  # the night's optimize sessions are linked


def test_a_night_without_summary_is_rebuilt_from_its_checkpoint(
    view_state: ViewState, tmp_path: Path,
) -> None:
    copy = tmp_path / "state"
    shutil.copytree(view_state.root / "nightly", copy / "nightly")
    night = next((copy / "nightly").iterdir())
    (night / "summary.json").unlink()
    text = page(ViewApp(copy), "/nightly/" + night.name)
    assert "Rebuilt from the night's checkpoint" in text
    assert "Accepted branches (1)" in text and "iterate:pkm_agent/skip_trivial/2" in text
    # the PR body recorded by the night lies in the original state folder: not served
    assert "(the PR body is not in the state folder)" in text


def test_the_nights_list_reads_rows_without_building_night_pages(
    view_state: ViewState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from promptloop.optimizer.view import nightly as view_nightly

    copy = tmp_path / "state"
    shutil.copytree(view_state.root / "nightly", copy / "nightly")
    night = next((copy / "nightly").iterdir())
    rebuilt = copy / "nightly" / "rebuilt-night"
    shutil.copytree(night, rebuilt)
    (rebuilt / "summary.json").unlink()  # a night known by its checkpoint only
    app = ViewApp(copy)
    pages = {f.name: view_nightly.night_page(app.state, f.name).summary
             for f in (night, rebuilt)}

    def no_pages(*_a: object, **_k: object) -> None:
        raise AssertionError("a list row built a whole night page")

    monkeypatch.setattr(view_nightly, "night_page", no_pages)
    monkeypatch.setattr(view_nightly, "build_summary", no_pages)
    monkeypatch.setattr(view_nightly.NightSummary, "model_validate_json", no_pages)
    names = sorted(f.name for f in (night, rebuilt))
    assert len(view_nightly.night_rows(app.state)) == 2
    rows_by_folder = {n: view_nightly.night_row(app.state, n) for n in names}
    for name, row in rows_by_folder.items():
        s = pages[name]
        assert (row.id, row.status, row.accepted, row.steps, row.stop_reason) == (
            s.night_id, s.status, len(s.accepted), len(s.steps), s.stop_reason or "")
        assert row.started == f"{s.started_at:%Y-%m-%d %H:%M}"
    assert night.name in page(app, "/nightly")


def test_not_found_and_bad_ids(app: ViewApp) -> None:
    assert "does not name a page" in page(app, "/nope", 404)
    assert "does not name a page" in page(app, "/compare/other", 404)
    assert page(app, "/session/..", 404)
    assert "no optimize session" in page(app, "/session/20990101T000000-zzzz", 404)
    assert page(app, "/nightly/not-a-night", 404)
    assert "name a suite" in page(app, "/trend", 400)


def test_runs_of_equal_time_list_the_later_saved_first(tmp_path: Path) -> None:
    from promptloop.optimizer.report.store import save_run

    store = tmp_path / "runs"
    first = mk_run([tr("a", 0, "passed")], name="first")
    save_run(first, store)
    save_run(first.model_copy(update={"run_name": "second"}), store)
    later = first.model_copy(update={"run_name": "older",
                                     "started_at": first.started_at - timedelta(days=1)})
    save_run(later, store)
    text = page(ViewApp(tmp_path), "/")
    assert re.findall(r'name="base" value="([^"]+)"', text) == ["second", "first", "older"]


def test_the_runs_list_shows_the_rates_runs_shows(tmp_path: Path) -> None:
    """A team's run with an errored trial read 83.3% in `promptloop runs` and 100.0% in the
    viewer, under the same "Task pass" header: both list the rate eval prints first (an
    errored trial counts as failed)."""
    from promptloop.optimizer.cli.runs import row
    from promptloop.optimizer.report.store import save_run

    store = tmp_path / "runs"
    run = mk_run([tr("a", 0, "passed"), tr("b", 1, "passed"),
                  tr("c", 2, "errored", infra_error="replay miss")], name="with-error")
    save_run(run, store)
    [entry] = list_runs(store)
    assert entry.task_pass_rate == 1.0  # ours: errored excluded
    listed = rows(page(ViewApp(tmp_path), "/"), "runs-table")
    shown = row(entry)["task pass"]
    assert shown == fmt.pct(2 / 3) and shown in listed[0], listed[0]
    assert fmt.pct(1.0) not in listed[0]
