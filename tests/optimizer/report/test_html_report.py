"""HTML report: self-contained, escaped, complete; renders and runs its script in Chromium."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import struct
import subprocess
import zlib
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.agents.base import load_prompt
from promptloop.agents.llm.types import Message
from promptloop.agents.transcript import Transcript
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.report.fmt import truncate
from promptloop.optimizer.report.html.kit import ChartRow, bucket_chart_svg, render, script_json
from promptloop.optimizer.report.html.page import render_diff, render_html
from promptloop.optimizer.report.store import default_store_dir, load_run
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.run.models import ModelIds
from promptloop.optimizer.run.runner import RunOptions
from promptloop.optimizer.workflows.evaluate import EvalRequest, evaluate
from promptloop.optimizer.workflows.nightly import summary as nightly
from promptloop.optimizer.workflows.nightly.state import BucketRank
from tests import policies
from tests.optimizer.report.test_report import mk_run, tr

runner = CliRunner()
CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[3]
INJECTED = '<script>alert("pwned")</script> </script><system-reminder>sneaky</system-reminder>'
INJECTED_TASK = "pkm-reg-finished-piranesi"
EVIL = "<script>alert(1)</script>"


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text of each <script> and <style>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.raw: dict[str, list[str]] = {"script": [], "style": []}
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag in self.raw:
            self._in = tag
            self.raw[tag].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self.raw[self._in][-1] += data


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, RunResult]:
    """A PKM regression run of a suite copy whose task input carries markup; its HTML file."""
    root = tmp_path_factory.mktemp("html")
    suite = root / "suite"
    shutil.copytree(REPO / "tasks" / "pkm_agent" / "regression", suite)
    task_file = next(p for p in suite.rglob("task.json") if INJECTED_TASK in p.read_text())
    task = json.loads(task_file.read_text())
    task["input"]["content"] = "Finished Piranesi " + INJECTED
    task_file.write_text(json.dumps(task))
    state = root / "state"
    result = runner.invoke(app, [
        "eval", "--suite", str(suite), "--agent-model", "scripted:pkm",
        "--judge-model", "scripted:judge", "--out", str(state), "--json",
    ])
    assert result.exit_code == 0, result.output
    out = root / "report.html"
    result = runner.invoke(
        app, ["report", "latest", "--format", "html", "-o", str(out), "--out", str(state)]
    )
    assert result.exit_code == 0, result.output
    return out, state, load_run(default_store_dir(state), "latest")


def test_report_is_self_contained_and_escaped(report: tuple[Path, Path, RunResult]) -> None:
    path, _, run = report
    html = path.read_text(encoding="utf-8")
    parsed = _Tags()
    parsed.feed(html)
    tags = {t for t, _ in parsed.tags}
    assert not tags & {"link", "img", "iframe", "object", "embed", "base", "system-reminder"}
    for _, attrs in parsed.tags:
        for name in ("src", "href", "action", "srcset", "poster", "formaction", "xlink:href"):
            value = attrs.get(name, "")
            assert not value or value.startswith("#"), (name, value)
    assert all("url(" not in s and "@import" not in s for s in parsed.raw["style"])
    scripts = [a for t, a in parsed.tags if t == "script"]
    assert [a.get("type") for a in scripts] == ["application/json", None]
    assert not any("src" in a for a in scripts)
    # the injected markup shows as text (in the transcript, tool arguments and diff) only
    assert "alert(" not in "".join(parsed.raw["script"])
    # autoescaping (markupsafe) writes a quote as &#34;
    assert 'alert("pwned")' not in html
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in html
    assert "&lt;system-reminder&gt;sneaky" in html
    # the embedded index parses back, and still holds no closing tag
    data_text = next(
        s for s, a in zip(parsed.raw["script"], scripts, strict=True)
        if a.get("type") == "application/json"
    )
    assert "</" not in data_text
    index = json.loads(data_text)
    assert index["run"] == run.run_name
    assert len(index["trials"]) == len(run.trials) == 16


def test_report_lists_every_bucket_and_trial(report: tuple[Path, Path, RunResult]) -> None:
    path, _, run = report
    html = path.read_text(encoding="utf-8")
    parsed = _Tags()
    parsed.feed(html)
    summary = summarize(run)
    shown_buckets = {a["data-show-bucket"] for _, a in parsed.tags if "data-show-bucket" in a}
    assert shown_buckets == {b.bucket for b in summary.buckets} and len(shown_buckets) == 4
    groups = [a for t, a in parsed.tags if t == "tbody" and "trial" in a.get("class", "")]
    assert sorted((g["data-task"], int(g["data-index"]), g["data-status"]) for g in groups) == \
        sorted((t.task_id, t.trial_index, t.status) for t in run.trials)
    assert len(groups) == 16
    for t in run.trials:  # every grader's rationale reaches the page
        for s in t.scores:
            assert f"<h4>{s.grader} " in html
    assert "skip_pkm_organization" in html or "update_timeline_card_insight" in html
    assert "System prompt P1" in html and html.count('id="prompt-') == 1
    assert summary.trial_pass_rate is not None
    assert f"{summary.trial_pass_rate * 100:.1f}%" in html
    assert "Errored trials" in html and run.provenance.agent_model in html


def test_errored_trials_are_prominent(report: tuple[Path, Path, RunResult]) -> None:
    _, _, run = report
    broken = run.trials[0].model_copy(
        update={"status": "errored", "infra_error": "provider said 401 <bad key>"}
    )
    errored = run.model_copy(update={"trials": [broken, *run.trials[1:]]})
    html = render_html(errored, summarize(errored))
    assert 'class="card stat alert"' in html
    assert "1× provider said 401 &lt;bad key&gt;" in html
    assert "Infrastructure error (not an agent failure)" in html


def test_base_comparison_shows_bucket_deltas(report: tuple[Path, Path, RunResult]) -> None:
    _, state, base = report
    prompt = load_prompt("pkm_agent") + "\nSkip an input that is only a greeting or thanks.\n"
    assert policies.GOOD_SKIP_RULE in prompt.lower()
    request = EvalRequest(
        suite=base.suite_root,
        models=ModelIds(agent="scripted:pkm", judge="scripted:judge"),
        options=RunOptions(agent_model="scripted:pkm", prompt_text=prompt),
    )
    cand, cand_summary, _ = asyncio.run(evaluate(request, state))
    html = render_html(cand, cand_summary, base=base, title="skip rule candidate")
    assert "<title>skip rule candidate</title>" in html
    old = {b.bucket: b.trial_pass_rate for b in summarize(base).buckets}
    new = {b.bucket: b.trial_pass_rate for b in cand_summary.buckets}
    assert old["skip_trivial"] == 0.0 and new["skip_trivial"] == 1.0
    assert "+100.0 pp" in html and ">candidate</text>" in html
    assert f'base run: <b class="mono" title="{base.run_name}">' in html
    changed = html.count('data-changed="1"')
    flips = sum(
        1 for t in cand.trials for b in base.trials
        if (t.task_id, t.trial_index) == (b.task_id, b.trial_index) and t.status != b.status
    )
    assert changed == flips >= 4
    assert 'id="f-changed"' in html


def test_diff_shows_modified_lines_and_truncation() -> None:
    before = "# Books\n\n- Dune\n"
    after = before + "- Piranesi <!-- fact_id: 2026/03/14.md#ts_3 -->\n"
    outcome = {
        "workspace_diff": {"created": ["Resources/new.md"], "modified": ["Resources/Books.md"],
                           "deleted": ["Old.md"], "snippets": {"Resources/new.md": "x" * 5000}},
        "file_contents_before": {"Resources/Books.md": before, "Old.md": "gone"},
        "file_contents": {"Resources/Books.md": after, "Resources/new.md": "x" * 5000},
    }
    html = render_diff(outcome)
    assert '<span class="add">+- Piranesi &lt;!-- fact_id: 2026/03/14.md#ts_3 --&gt;</span>' in html
    assert "[truncated: 2000 more characters]" in html
    assert html.index("created") < html.index("modified") < html.index("deleted")
    assert render_diff({"workspace_diff": {}}).startswith('<p class="muted">No file')


def test_helpers_escape_and_embed() -> None:
    value = {"text": "</script><!-- & \u2028"}
    embedded = script_json(value)
    assert "<" not in embedded and "&" not in embedded and json.loads(embedded) == value
    assert truncate("abcdef", 4) == "abcd\n… [truncated: 2 more characters]"
    doc = render("base.html.j2", title="a <b> title")
    assert "<title>a &lt;b&gt; title</title>" in doc and "<main>" in doc
    svg = bucket_chart_svg([ChartRow("ok", 0.9, note="9/10"), ChartRow("<none>", None)])
    assert svg.startswith("<svg") and "&lt;none&gt;" in svg and "n/a" in svg
    assert "bar-good" in svg and "http" not in svg
    cmp_svg = bucket_chart_svg([ChartRow("a", 0.25, base=0.75)])
    assert "-50.0 pp" in cmp_svg and 'class="down"' in cmp_svg
    assert "no buckets" in bucket_chart_svg([])


def test_html_escapes_untrusted_names_and_transcripts() -> None:
    transcript = Transcript(messages=[Message.system("prompt"), Message.user(f"hi {EVIL}")])
    trial = tr(EVIL, 0, "failed", bucket=EVIL, transcript=transcript,
               failure_reason=f"because {EVIL}")
    run = mk_run([trial, tr("ok", 0, "passed")])
    html = render_html(run, summarize(run), base=run)
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'data-show-bucket="&lt;script&gt;alert(1)&lt;/script&gt;"' in html
    data = re.search(r'id="report-data">(.*?)</script>', html)
    assert data and "<" not in data.group(1) and EVIL in json.loads(data.group(1))["buckets"]

    night = nightly.NightSummary(
        night_id=EVIL, status="finished", stop_reason=None, started_at=datetime.now(UTC),
        updated_at=datetime.now(UTC), attempts=1, base_commit="0" * 40, suites=["pkm_agent"],
        models={}, ranking=[BucketRank(suite="pkm_agent", bucket=EVIL, failing=2, trials=4,
                                       mean_score=0.5)],
        skipped_buckets=[], accepted=[],
        rejected=[nightly.RejectedProposal(suite="pkm_agent", bucket=EVIL, iteration=1,
                                           outcome="rejected", hypothesis=EVIL, reasons=[EVIL])],
        budget=nightly.BudgetReport(max_usd=None, max_tokens=None, max_wall_minutes=None,
                                    used_usd=None, used_tokens=0, used_wall_minutes=0.0, roles=[]),
        infra_errors=[EVIL], notes=[EVIL], steps=[],
    )
    page = nightly.render_html(night)
    assert "<script" not in page and page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 6


# --- headless Chromium -------------------------------------------------------------------


PROBE = """<script>
(function () {
  var body = document.body, sel = document.getElementById("f-bucket");
  sel.value = "skip_trivial";
  sel.dispatchEvent(new Event("change", {bubbles: true}));
  body.setAttribute("data-bucket-count", document.getElementById("f-count").textContent);
  document.getElementById("b-failures").click();
  body.setAttribute("data-failing-count", document.getElementById("f-count").textContent);
  document.getElementById("b-reset").click();
  var th = document.querySelector("th[data-sort=score]");
  th.click(); th.click();
  body.setAttribute("data-top-score", document.querySelector("tbody.trial").dataset.score);
})();
</script>"""


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=90, check=False,
    )


def _png_info(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values of the image data): a blank page has very few."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        if data[pos + 4:pos + 8] == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")
def test_renders_in_headless_chromium(
    report: tuple[Path, Path, RunResult], tmp_path: Path
) -> None:
    path, _, run = report
    url = path.resolve().as_uri()
    dom = _chromium(tmp_path / "p1", "--dump-dom", url + "#trial-2").stdout
    assert '<body data-ready="true">' in dom
    for bucket in {t.bucket for t in run.trials}:
        assert f'<option value="{bucket}">{bucket} (4)</option>' in dom
    assert '<input type="checkbox" value="failed">' in dom
    assert "showing 16 of 16 trials" in dom
    assert '<tbody class="trial open" id="trial-2"' in dom  # deep link expanded the trial
    assert '<tr class="detail" id="detail-1" hidden="">' in dom

    # drive the filters and sorting as a person would, then read the outcome back from the DOM
    probe = tmp_path / "probe.html"
    probe.write_text(path.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
    dom = _chromium(tmp_path / "p3", "--dump-dom", probe.resolve().as_uri()).stdout
    shown = sum(t.bucket == "skip_trivial" for t in run.trials)
    failing = sum(t.bucket == "skip_trivial" and t.status == "failed" for t in run.trials)
    top = max(t.score for t in run.trials)
    assert f'data-bucket-count="showing {shown} of 16 trials"' in dom
    assert f'data-failing-count="showing {failing} of 16 trials"' in dom
    assert f'data-top-score="{top:.4f}"' in dom

    shot = tmp_path / "report.png"
    result = _chromium(tmp_path / "p2", f"--screenshot={shot}", "--window-size=1280,1600", url)
    assert shot.is_file(), result.stderr[-2000:]
    width, height, distinct = _png_info(shot)
    assert (width, height) == (1280, 1600)
    assert distinct > 40  # text and coloured bars, not an empty page
