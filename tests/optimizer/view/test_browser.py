"""The viewer in headless Chromium (Debian's package, driven by Playwright; never downloaded):
a person clicks from the runs list to a comparison and to one trial side by side, and the pages
work under their Content-Security-Policy without running anything injected."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from promptloop.optimizer.lifecycle.labels import join_labels, read_labels
from promptloop.optimizer.report.store import default_store_dir, load_run
from promptloop.optimizer.view.server import ViewServer
from tests.optimizer.view.browser import chromium_path
from tests.optimizer.view.builders import (
    EVIL_BASE,
    EVIL_CAND,
    EVIL_SUITE,
    SCRIPT_BUCKET,
    SCRIPT_IN_TRANSCRIPT,
    SCRIPT_TASK,
    ViewState,
)
from tests.optimizer.view.lifecycle_builders import JUDGE, JUDGED_NEWEST, JUDGED_SUITE

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="needs the playwright package (pip install -e '.[dev]')")
expect = sync_api.expect
CHROMIUM = chromium_path()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="needs Debian's chromium: apt-get install chromium (`make test` installs it when "
    "run as root)")
GOOD_LINE = "If the input is only a greeting, filler or emoji, call skip_pkm_organization"


class Watched:
    """A page plus everything it reported: console errors, script errors, dialogs."""

    def __init__(self, page: sync_api.Page) -> None:
        self.page = page
        self.problems: list[str] = []
        page.on("console", lambda m: self.problems.append(f"console: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.problems.append(f"script error: {e}"))
        page.on("dialog", self._dialog)

    def _dialog(self, dialog: sync_api.Dialog) -> None:
        self.problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()


@pytest.fixture(scope="module")
def browser() -> Iterator[sync_api.Browser]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM),
                               args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def tab(browser: sync_api.Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    watched = Watched(context.new_page())
    yield watched
    context.close()
    assert watched.problems == []


def test_runs_list_to_compare_to_side_by_side(
    tab: Watched, server: ViewServer, view_state: ViewState,
) -> None:
    page = tab.page
    page.goto(server.url)
    expect(page.locator("h1")).to_have_text("Runs")
    button = page.locator("#compare-button")
    expect(button).to_be_disabled()
    page.get_by_label(f"base {view_state.base}", exact=True).check()
    page.get_by_label(f"candidate {EVIL_CAND}", exact=True).check()
    expect(page.locator("#compare-hint")).to_have_text("A and B must be runs of the same suite")
    expect(button).to_be_disabled()
    page.get_by_label(f"candidate {view_state.cand}", exact=True).check()
    expect(page.locator("#compare-hint")).to_have_text("compare pkm_agent_capability runs")
    button.click()

    expect(page).to_have_url(re.compile(r"/compare\?.*cand=pkm_agent_capability-accepted"))
    expect(page.locator("h1")).to_have_text("pkm_agent_capability: compare two runs")
    gate = page.locator("table").first
    expect(gate.locator("tr", has_text="skip_trivial")).to_contain_text("4/0")
    expect(gate.locator("th")).to_contain_text(["Bucket", "n", "Base pass", "Cand pass"])
    expect(page.locator("#prompt-diff .add")).to_contain_text(GOOD_LINE)
    expect(page.locator("#flipped h2")).to_have_text("Flipped trials (4)")
    flipped = page.locator("#flipped tr.pair")
    expect(flipped).to_have_count(4)
    expect(flipped.first.locator(".change")).to_have_text("fail → pass")
    expect(page.locator("#others table")).to_be_hidden()  # the unchanged trials are folded
    page.locator("#others summary").click()
    expect(page.locator("#others tr.pair").first).to_contain_text("unchanged")

    task = flipped.first.locator("td").nth(1).inner_text()
    flipped.first.get_by_role("link", name="side by side").click()
    expect(page.locator("h1")).to_contain_text(task)
    base_side = page.locator(".side[data-side=base]")
    cand_side = page.locator(".side[data-side=cand]")
    expect(base_side.locator("> p .badge")).to_have_text("failed")
    expect(cand_side.locator("> p .badge")).to_have_text("passed")
    expect(cand_side.locator(".msg .call")).to_contain_text(["skip_pkm_organization"])
    expect(base_side).to_contain_text("Transcript (")
    left, right = base_side.bounding_box(), cand_side.bounding_box()
    assert left is not None and right is not None
    assert right["x"] >= left["x"] + left["width"] and abs(right["y"] - left["y"]) < 2

    page.get_by_role("link", name=re.compile(r"^next: ")).click()
    expect(page.locator(".prov")).to_contain_text("fail → pass")
    page.get_by_role("link", name="back to the comparison").click()
    expect(page.locator("h1")).to_have_text("pkm_agent_capability: compare two runs")


def test_filters_search_and_run_page_scripts_work_under_the_csp(
    tab: Watched, server: ViewServer, view_state: ViewState,
) -> None:
    page = tab.page
    page.goto(server.url)
    total = page.locator("#runs-table tbody tr").count()
    page.locator("#run-search").fill("ACCEPTED")
    expect(page.locator("#run-count")).to_have_text(f"showing 1 of {total} runs")
    page.locator("#run-search").fill("svg")
    expect(page.locator("#run-count")).to_have_text(f"showing 2 of {total} runs")
    page.locator("select[name=kind]").select_option("capability")  # submits the form
    expect(page).to_have_url(re.compile(r"kind=capability.*q=svg"))
    expect(page.locator("#runs-table tbody tr")).to_have_count(2)
    expect(page.locator("#runs-table tbody")).to_contain_text(EVIL_SUITE)
    page.locator("select[name=suite]").select_option("pkm_agent_regression")
    expect(page.locator("main")).to_contain_text("No run matches these filters.")
    page.get_by_role("link", name="reset").click()
    expect(page.locator("#runs-table tbody tr")).to_have_count(total)

    page.goto(server.url + "run/" + quote(view_state.cand, safe=""))
    expect(page.locator("body")).to_have_attribute("data-ready", "true")  # report.js ran
    expect(page.locator("#f-count")).to_have_text("showing 12 of 12 trials")
    page.locator("#b-failures").click()
    expect(page.locator("#f-count")).to_have_text("showing 0 of 12 trials")
    page.locator("#compare-base").select_option(view_state.base)
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("#flipped h2")).to_have_text("Flipped trials (4)")


def test_injected_markup_shows_as_text_and_never_runs(
    tab: Watched, server: ViewServer,
) -> None:
    page = tab.page
    pair = {"base": EVIL_BASE, "cand": EVIL_CAND}
    for target in ("", "run/" + quote(EVIL_CAND, safe=""), "compare?" + urlencode(pair),
                   "trend?" + urlencode({"suite": EVIL_SUITE}),
                   "compare/trial?" + urlencode({**pair, "task": SCRIPT_TASK, "index": 0})):
        page.goto(server.url + target)
        page.wait_for_load_state("load")
        assert not page.title().startswith("pwned"), target
    expect(page.locator("h1")).to_contain_text(SCRIPT_TASK)
    expect(page.locator(".prov")).to_contain_text(SCRIPT_BUCKET)
    expect(page.locator(".side[data-side=cand] .m-user pre")).to_contain_text(
        SCRIPT_IN_TRANSCRIPT)
    assert page.locator("img, iframe").count() == 0


def test_sessions_ledger_and_nightly_pages(
    tab: Watched, server: ViewServer, view_state: ViewState,
) -> None:
    page = tab.page
    page.goto(server.url)
    page.get_by_role("link", name="Nightly", exact=True).click()
    page.locator("#nights-table a").first.click()
    expect(page.locator("h1")).to_contain_text("promptloop nightly")
    expect(page.locator(".meter")).to_have_count(3)
    page.get_by_role("link", name="pkm_agent/skip_trivial").click()
    expect(page.locator("section.iteration")).to_have_count(2)
    expect(page.locator("#iter-2 h2 .badge")).to_have_text("accepted")
    page.get_by_role("link", name="Ledger", exact=True).click()
    page.locator("select[name=outcome]").select_option("refused")
    expect(page.locator("#ledger-table tbody tr")).to_have_count(1)
    page.locator("#ledger-table tbody a").click()
    expect(page.locator("#iter-2 h2 .badge")).to_have_text("refused")


def test_labeling_page_builds_a_labels_file_calibrate_reads(
    tab: Watched, server: ViewServer, view_state: ViewState, tmp_path: Path,
) -> None:
    page = tab.page
    page.goto(server.url)
    page.get_by_role("link", name="Judges", exact=True).click()
    page.locator("#calibration-table tr", has_text=JUDGE).first.get_by_role(
        "link", name="label trials").click()
    page.locator("select[name=run]").select_option(JUDGED_NEWEST)
    page.get_by_role("button", name="Show trials").click()
    expect(page.locator("section.label-trial")).to_have_count(3)
    expect(page.locator("#labels-output")).to_have_value("")
    first, second = (f"{JUDGED_NEWEST}/insight-a#0", f"{JUDGED_NEWEST}/insight-b#1")
    page.get_by_label(f"{first} groundedness", exact=True).select_option("0.75")
    page.get_by_label(f"{first} non_redundancy", exact=True).select_option("unknown")
    page.get_by_label(f"{second} expression_quality", exact=True).select_option("0.25")
    page.get_by_label(f"{second} note", exact=True).fill("vague \"due date\"")
    page.locator("#labeler").fill("ana")
    expect(page.locator("#label-count")).to_have_text("2 trial(s) labelled")
    expect(page.locator("#labels-download")).to_have_attribute("aria-disabled", "false")
    text = page.locator("#labels-output").input_value()
    path = tmp_path / "labels.jsonl"
    path.write_text(text, encoding="utf-8")
    parsed = read_labels(path, JUDGE)
    assert [(lab.trial_id, lab.scores, lab.labeler) for lab in parsed.labels] == [
        (first, {"groundedness": 0.75, "non_redundancy": None}, "ana"),
        (second, {"expression_quality": 0.25}, "ana"),
    ]
    assert parsed.warnings == []
    store = default_store_dir(view_state.root)
    items = join_labels(parsed, JUDGE, 0.6, lambda n: load_run(store, n))
    assert [i.human_value for i in items] == [0.75, 0.25]
    with page.expect_download() as got:
        page.locator("#labels-download").click()
    download = got.value
    assert download.suggested_filename == f"labels-{JUDGE}.jsonl"
    assert Path(download.path()).read_text(encoding="utf-8") == text


def test_health_page_links_evidence_to_transcripts(tab: Watched, server: ViewServer) -> None:
    page = tab.page
    page.goto(server.url)
    page.get_by_role("link", name="Health", exact=True).click()
    page.locator("#health-table").get_by_role("link", name=JUDGED_SUITE, exact=True).click()
    expect(page.locator("#bucket-table tr[data-bucket=plain]")).to_contain_text(
        "promptloop graduate --agent pkm_agent --bucket plain")
    evidence = page.locator(".ambiguous[data-task=insight-b] table a").first
    name = evidence.inner_text()
    evidence.click()
    expect(page.locator("h1")).to_contain_text("insight-b")
    expect(page.locator(".prov")).to_contain_text(name.split("/")[0])
    page.goto(server.url + "health/" + quote(EVIL_SUITE, safe=""))
    assert not page.title().startswith("pwned")
    expect(page.locator("#bucket-table")).to_contain_text(SCRIPT_BUCKET)
