"""The viewer's must-holds: nothing outside the state folder is ever served, every string from
runs is escaped, and the server is read-only (GET and HEAD only)."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from promptloop.agents.llm.types import Message
from promptloop.agents.transcript import Transcript
from promptloop.optimizer.core.ledger import Ledger, LedgerEntry
from promptloop.optimizer.report.store import default_store_dir, save_run
from promptloop.optimizer.view.server import ViewServer, running
from tests.optimizer.report.test_report import mk_run, tr
from tests.optimizer.view.builders import (
    EVIL_BASE,
    EVIL_CAND,
    EVIL_SUITE,
    SCRIPT_BUCKET,
    SCRIPT_IN_TRANSCRIPT,
    SCRIPT_RUN,
    SCRIPT_TASK,
    ViewState,
)
from tests.optimizer.view.http import get, request

SECRET = "TOP-SECRET-0xC0FFEE"
SESSION_OUT = "20260101T000000-abc1"
SESSION_IN = "20260102T000000-def2"
NIGHT_OUT = "20260103T000000-ab12"


@pytest.fixture
def jail(tmp_path: Path) -> Iterator[tuple[ViewServer, Path, Path]]:
    """A state folder whose symlinks point at files holding SECRET outside it, served."""
    state, outside = tmp_path / "state", tmp_path / "outside"
    store = default_store_dir(state)
    save_run(mk_run([tr("a", 0, "passed"), tr("b", 0, "failed")], name="good"), store)
    leak = mk_run([tr("secret-task", 0, "passed",
                      transcript=Transcript(messages=[Message.user(SECRET)]))], name="leak")
    outside_report = save_run(leak, default_store_dir(outside))
    save_run(leak, store)  # indexed in the state folder, then its report swapped for a link
    (store / "reports" / "leak.json").unlink()
    (store / "reports" / "leak.json").symlink_to(outside_report)
    (outside / "secret.txt").write_text(SECRET)
    (outside / "sess" / "iter-1").mkdir(parents=True)
    (outside / "sess" / "iter-1" / "PR.md").write_text(SECRET)
    (state / "optimize").mkdir()
    (state / "optimize" / SESSION_OUT).symlink_to(outside / "sess")
    inner = state / "optimize" / SESSION_IN / "iter-1"
    inner.mkdir(parents=True)
    (inner / "package.md").symlink_to(outside / "secret.txt")
    Ledger(state / "ledger.jsonl").append(LedgerEntry(
        id=f"{SESSION_IN}-1", suite="pkm_agent", agent="pkm_agent", bucket="skip_trivial",
        iteration=1, base_commit="0" * 40, prompt_path="prompts/pkm_agent.md",
        proposer="scripted:p", outcome="rejected", hypothesis=SCRIPT_IN_TRANSCRIPT,
        reasons=[SCRIPT_TASK], pr_body_path=str(outside / "secret.txt")))
    (outside / "night").mkdir()
    (outside / "night" / "summary.json").write_text('{"night_id": "' + SECRET + '"}')
    (state / "nightly").mkdir()
    (state / "nightly" / NIGHT_OUT).symlink_to(outside / "night")
    # lifecycle files planted as links out of the state folder
    for folder, name in (("health", "demo.json"), ("calibration", "pkm_insight_quality.json")):
        (state / folder).mkdir()
        (state / folder / name).symlink_to(outside / "secret.txt")
    (outside / "grad").mkdir()
    (outside / "grad" / "graduation.json").write_text('{"agent": "' + SECRET + '"}')
    (outside / "grad" / "PR.md").write_text(SECRET)
    (state / "graduations").mkdir()
    (state / "graduations" / "graduate-demo-x").symlink_to(outside / "grad")
    with running(state) as server:
        yield server, state, outside


def _traversals(outside: Path) -> list[str]:
    report = outside / "runs" / "reports" / "leak.json"
    return [
        "/static/../../../../../../etc/passwd",
        "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/static/%2E%2E%2F%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "/static/report.js/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "//etc/passwd",
        "/run/..%2f..%2f..%2foutside%2fruns%2freports%2fleak",
        "/run/..\\..\\outside\\runs\\reports\\leak",
        "/run/..%5c..%5coutside%5cruns%5creports%5cleak",
        "/run/" + quote(str(report), safe=""),
        "/run/%2Fetc%2Fpasswd",
        "/run/leak",
        "/run/%00leak",
        "/compare?" + urlencode({"base": str(report), "cand": "good"}),
        "/compare?" + urlencode({"base": "../../outside/runs/reports/leak.json", "cand": "good"}),
        "/compare?" + urlencode({"base": "leak", "cand": "good"}),
        f"/session/{SESSION_OUT}",
        "/session/..%2f..%2foutside%2fsess",
        "/session/" + quote(str(outside / "sess"), safe=""),
        f"/nightly/{NIGHT_OUT}",
        "/nightly/%2e%2e",
        "/nightly/..%2f..%2foutside%2fnight",
        "http://127.0.0.1/static/../../../../etc/passwd",
        "/health/..%2f..%2foutside%2fsecret.txt",
        "/health/" + quote(str(outside / "secret.txt"), safe=""),
        "/health/%2e%2e",
        "/health/secret",
        "/calibration/..%2f..%2foutside%2fsecret",
        "/calibration/" + quote(str(outside / "secret.txt"), safe=""),
        "/trial?" + urlencode({"run": "leak", "task": "secret-task", "index": 0}),
        "/trial?" + urlencode({"run": "../../outside/runs/reports/leak", "task": "secret-task",
                               "index": 0}),
        "/label?" + urlencode({"grader": "pkm_insight_quality", "run": "leak"}),
    ]


def test_no_request_reads_a_file_outside_the_state_folder(
    jail: tuple[ViewServer, Path, Path],
) -> None:
    server, _, outside = jail
    for target in _traversals(outside):
        reply = get(server, target)
        assert reply.status in (400, 404), (target, reply.status)
        assert SECRET not in reply.text and "root:x:0:0" not in reply.text, target
    # the pages that list or read around the planted links answer without the secret
    for target in ("/", "/ledger", "/sessions", f"/session/{SESSION_IN}", "/nightly",
                   "/trend?suite=demo", "/run/good", "/health", "/graduations",
                   "/calibration", "/calibration/pkm_insight_quality",
                   "/label?grader=pkm_insight_quality&run=good"):
        reply = get(server, target)
        assert reply.status == 200, target
        assert SECRET not in reply.text, target
    session = get(server, f"/session/{SESSION_IN}").text
    assert "Iteration 1" in session and "Package the proposer read" not in session
    assert SESSION_OUT not in get(server, "/sessions").text
    trend = get(server, "/trend?suite=demo").text
    assert "1 run(s) of this suite could not be read" in trend
    # the linked health file reads as missing: the page says how to save one
    assert "promptloop health --suite demo" in get(server, "/health/demo").text
    assert "never calibrated" in get(server, "/calibration/pkm_insight_quality").text
    assert "graduate-demo-x" not in get(server, "/graduations").text


def test_a_state_folder_that_is_itself_a_symlink_is_served(
    jail: tuple[ViewServer, Path, Path], tmp_path: Path,
) -> None:
    _, state, _ = jail
    link = tmp_path / "linked-state"
    link.symlink_to(state)
    with running(link) as server:
        assert get(server, "/run/good").status == 200
        assert get(server, "/run/leak").status == 404


def test_only_get_and_head_are_answered(jail: tuple[ViewServer, Path, Path]) -> None:
    server, state, _ = jail
    before = sorted(str(p) for p in state.rglob("*"))
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND", "BREW"):
        reply = request(server, "/run/good", method, body=b"x" if method != "TRACE" else None)
        assert reply.status == 405, method
        assert reply.headers["allow"] == "GET, HEAD"
    assert sorted(str(p) for p in state.rglob("*")) == before
    got, head = get(server, "/run/good"), request(server, "/run/good", "HEAD")
    assert head.status == 200 and head.body == b""
    assert head.headers["content-length"] == str(len(got.body))


def test_foreign_host_headers_are_refused_and_headers_lock_the_page_down(
    jail: tuple[ViewServer, Path, Path],
) -> None:
    server, _, _ = jail
    assert request(server, "/", headers={"Host": "attacker.example"}).status == 403
    assert request(server, "/", headers={"Host": f"localhost:{server.port}"}).status == 200
    headers = get(server, "/").headers
    csp = headers["content-security-policy"]
    script_src = next(d for d in csp.split(";") if d.strip().startswith("script-src"))
    assert script_src.split() == ["script-src", "'self'"]
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"


class Tags(HTMLParser):
    """Start tags with their attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def assert_inert(html: str, where: str) -> None:
    """No injected element or handler: only our scripts, no event attributes, no images."""
    parsed = Tags()
    parsed.feed(html)
    for tag, attrs in parsed.tags:
        assert not any(a.startswith("on") for a in attrs), (where, tag, attrs)
        assert tag not in ("img", "iframe", "object", "embed", "base", "link"), (where, tag)
        if tag == "script":
            assert attrs.get("src") in ("/static/report.js", "/static/view.js") or \
                attrs.get("type") == "application/json", (where, attrs)
    for raw in (SCRIPT_TASK, SCRIPT_BUCKET, SCRIPT_IN_TRANSCRIPT, SCRIPT_RUN):
        assert raw not in html, (where, raw)


def test_strings_from_runs_are_escaped_on_every_page(
    view_state: ViewState, server: ViewServer,
) -> None:
    pair = {"base": EVIL_BASE, "cand": EVIL_CAND}
    pages = {
        "runs": "/",
        "search": "/?" + urlencode({"q": SCRIPT_TASK}),
        "run": "/run/" + quote(EVIL_CAND, safe=""),
        "compare": "/compare?" + urlencode(pair),
        "trial": "/compare/trial?" + urlencode({**pair, "task": SCRIPT_TASK, "index": 0}),
        "trend": "/trend?" + urlencode({"suite": EVIL_SUITE}),
        "missing run": "/run/" + quote(SCRIPT_TASK, safe=""),
        "missing suite": "/trend?" + urlencode({"suite": SCRIPT_BUCKET}),
        "health list": "/health",
        "health": "/health/" + quote(EVIL_SUITE, safe=""),
        "missing health": "/health/" + quote(SCRIPT_TASK, safe=""),
        "one trial": "/trial?" + urlencode({"run": EVIL_CAND, "task": SCRIPT_TASK, "index": 0}),
        "label": "/label?" + urlencode({"grader": "pkm_insight_quality", "run": EVIL_CAND}),
        "label grader": "/label?" + urlencode({"grader": SCRIPT_TASK, "run": EVIL_CAND}),
        "calibration": "/calibration/pkm_insight_quality",
        "missing grader": "/calibration/" + quote(SCRIPT_TASK, safe=""),
    }
    for where, target in pages.items():
        reply = get(server, target)
        assert reply.status in (200, 404), (where, reply.status)
        assert_inert(reply.text, where)
    trial = get(server, pages["trial"]).text
    assert "&lt;script&gt;document.title=&#39;pwned-transcript&#39;&lt;/script&gt;" in trial
    assert "&lt;script&gt;document.title=&#39;pwned-task&#39;&lt;/script&gt;" in trial
    compare = get(server, pages["compare"]).text
    assert "&lt;img src=x onerror=&#34;document.title=&#39;pwned-bucket&#39;&#34;&gt;" in compare
    assert "evil&lt;svg onload=alert(1)&gt;-base" in get(server, "/").text
    health = get(server, pages["health"]).text
    bucket = "&lt;img src=x onerror=&#34;document.title=&#39;pwned-bucket&#39;&#34;&gt;"
    assert f'<td class="mono">{bucket}</td>' in health  # the bucket row of the health table
    assert "&lt;script&gt;document.title=&#39;pwned-task&#39;&lt;/script&gt;" in health
    label = get(server, pages["label"]).text
    assert f'<td class="mono">{bucket}</td>' in label  # a judge dimension named with markup
    assert r"\u003cscript\u003e" in label  # the task id inside the embedded JSON


def test_ledger_strings_are_escaped(jail: tuple[ViewServer, Path, Path]) -> None:
    server, _, _ = jail
    for target in ("/ledger", f"/session/{SESSION_IN}", "/sessions"):
        reply = get(server, target)
        assert reply.status == 200
        assert_inert(reply.text, target)
    assert "&lt;script&gt;document.title" in get(server, "/ledger").text


def test_unknown_static_files_are_not_served(server: ViewServer) -> None:
    assert get(server, "/static/view.js").status == 200
    assert get(server, "/static/view.js").headers["content-type"].startswith("text/javascript")
    for name in ("base.css", "__init__.py", "state.py", "..", "%2e%2e%2fstate.py"):
        assert get(server, f"/static/{name}").status == 404, name
