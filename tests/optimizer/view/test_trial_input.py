"""The viewer's trial pages and the HTML report's trial detail show what the trial was given as
the failure package does (issue 29): the task's input as the task declares it (the run's
TaskInfo.input) and the first user message as the agent sent it, the same for every agent; a
run saved before the input was kept shows what the first message holds."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest

from promptloop.agents.llm.types import Message
from promptloop.agents.transcript import Transcript
from promptloop.optimizer.core.results import RunResult, TaskInfo
from promptloop.optimizer.propose.package import export_failing
from promptloop.optimizer.report.html.page import render_html
from promptloop.optimizer.report.store import default_store_dir, save_run
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.view.app import ViewApp
from tests.optimizer.report.test_report import mk_run, tr

CARD_INPUT = {"fact_id": "2026/03/14.md#ts_2", "content": "Call the landlord tomorrow 6pm"}
CARD_FIRST = ("<system-reminder>\nUser language: English.\n</system-reminder>\n\n"
              "Raw Input ID (fact_id): 2026/03/14.md#ts_2\nRaw Input Content:\n"
              "Call the landlord tomorrow 6pm")
TICKET_INPUT = {"content": "I was charged twice <b>today</b> & want a refund"}
TICKET_FIRST = "Support message:\nI was charged twice <b>today</b> & want a refund"
TEXT_INPUT = "just a plain text input"


def conversation(first: str) -> Transcript:
    return Transcript(messages=[Message.system("You help."), Message.user(first),
                                Message.assistant('{"category": "other"}')])


def one_run(name: str, task: str, first: str, declared: object | None) -> RunResult:
    trial = tr(task, 0, "failed", transcript=conversation(first))
    info = {task: TaskInfo.of(f"{task} task", {}, declared)} if declared is not None else {}
    return mk_run([trial], name=name, task_info=info)


RUNS = {
    "card-run": one_run("card-run", "call", CARD_FIRST, CARD_INPUT),
    "ticket-run": one_run("ticket-run", "ticket", TICKET_FIRST, TICKET_INPUT),
    "text-run": one_run("text-run", "note", TEXT_INPUT, TEXT_INPUT),
    "old-run": one_run("old-run", "call", CARD_FIRST, None),
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> ViewApp:
    root: Path = tmp_path_factory.mktemp("state")
    for run in RUNS.values():
        save_run(run, default_store_dir(root))
    return ViewApp(root)


def shown(page: str) -> tuple[str, str, str]:
    """(heading, input text, first user message) of the first trial detail on `page`."""
    block = page.split('<div class="given">', 1)[1].split("</div>", 1)[0]
    heading = html.unescape(re.search(r"<h4>(.*?)</h4>", block, re.S).group(1))  # type: ignore[union-attr]
    text = re.search(r'<pre class="input input-\w+">(.*?)</pre>', block, re.S)
    first = re.search(r'<pre class="first-message">(.*?)</pre>', block, re.S)
    assert text is not None
    return (heading, html.unescape(text.group(1)),
            html.unescape(first.group(1)) if first else "")


def trial_page(app: ViewApp, run: str, task: str) -> str:
    r = app.handle("/trial?" + urlencode({"run": run, "task": task, "index": 0}))
    assert r.status == 200, r.body.decode()[-400:]
    return r.body.decode("utf-8")


@pytest.mark.parametrize("name", list(RUNS))
def test_the_viewer_and_the_report_show_the_input_as_the_package_does(app: ViewApp,
                                                                      name: str) -> None:
    run = RUNS[name]
    [trial] = run.trials
    [packaged] = export_failing(run, "alpha").trials
    expected = (packaged.input_content, packaged.first_message)
    for text in (trial_page(app, name, trial.task_id), render_html(run, summarize(run))):
        heading, given, first = shown(text)
        assert (given, first) == expected
        assert heading == ("The task's input" if name != "old-run"
                           else "Input (read from the first message)")
        assert "(input not recorded)" not in text


def test_each_agent_shape_is_shown_whole() -> None:
    """What the package (and so the pages) hold for each shape of agent."""
    views = {name: export_failing(run, "alpha").trials[0] for name, run in RUNS.items()}
    assert json.loads(views["card-run"].input_content) == CARD_INPUT
    assert views["card-run"].first_message == CARD_FIRST
    assert json.loads(views["ticket-run"].input_content) == TICKET_INPUT
    assert views["ticket-run"].first_message == TICKET_FIRST
    # a text input the agent sent as it is: shown once
    assert (views["text-run"].input_content, views["text-run"].first_message) == (TEXT_INPUT, "")
    # a run saved before the input was kept: read back from the bundled harness's marker
    assert views["old-run"].input_content == "Call the landlord tomorrow 6pm"
    assert views["old-run"].first_message == CARD_FIRST


def test_the_side_by_side_page_shows_each_runs_input(app: ViewApp) -> None:
    r = app.handle("/compare/trial?" + urlencode({"base": "old-run", "cand": "card-run",
                                                  "task": "call", "index": 0}))
    assert r.status == 200, r.body.decode()[-400:]
    text = r.body.decode("utf-8")
    base, cand = text.split('data-side="base"', 1)[1].split('data-side="cand"', 1)
    assert shown(base)[:2] == ("Input (read from the first message)",
                               "Call the landlord tomorrow 6pm")
    assert json.loads(shown(cand)[1]) == CARD_INPUT
    assert shown(cand)[2] == CARD_FIRST


def test_the_input_is_escaped(app: ViewApp) -> None:
    text = trial_page(app, "ticket-run", "ticket")
    assert "<b>today</b>" not in text and "&lt;b&gt;today&lt;/b&gt;" in text
