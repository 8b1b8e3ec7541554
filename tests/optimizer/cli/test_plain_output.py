"""What a user reads, rendered through a fixed-width console of 80 columns: the verdict in
plain words first (under 160 characters, no test name), no word cut at the edge of the
terminal, the per-bucket table with a legend, the proposed diff, the method once and only with
--verbose, refusals and errors in words (no class name, no instruction meant for the model)."""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from agents.llm.registry import SCRIPTED_MODELS
from agents.llm.scripted import ScriptedModel, reply
from optimizer.cli import ui
from optimizer.cli.app import app
from optimizer.core.events import (
    ProposalRequested,
    ProposerReplied,
    RunFinished,
    RunStarted,
    TrialFinished,
    TrialsEstimated,
)
from tests.cli_json import cli_result
from tests.optimizer.cli.conftest import leaks
from tests.optimizer.workflows.test_optimize import BROAD, GOOD, diff_adding
from tests.optimizer.workflows.test_review import GOOD_LINE, human_branch

WIDTH = 80
TEST_NAMES = re.compile(r"Fisher|Wald|Holm|Lan-DeMets|O'?Brien|obrien|McNemar|SPRT|sign-flip|"
                        r"permutation|aGRAPA|alpha|p=|p-value", re.IGNORECASE)
NOTHING = diff_adding("Answer in English.")
"""A patch that fixes no target trial: the gate stops after its first round on the target."""
OVERLAPPING = json.dumps({"hypothesis": "trivial input needs a rule", "edits": [
    {"action": "replace", "anchor": "## Skipping", "text": "## Skipping trivial input"},
    {"action": "delete", "anchor": "## Skipping", "text": ""}]})
"""Two edits of one line: the model is told to "combine them into one edit"; a user is not."""

runner = CliRunner()


@pytest.fixture(autouse=True)
def narrow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every line goes through consoles of exactly 80 columns (stdout and stderr)."""
    monkeypatch.setattr(ui, "out", Console(width=WIDTH, soft_wrap=True))
    monkeypatch.setattr(ui, "err", Console(width=WIDTH, soft_wrap=True, stderr=True))
    yield


def cut_words(text: str, width: int = WIDTH) -> list[str]:
    """Lines a terminal of `width` columns would cut inside a word: a line wider than the
    terminal whose cut falls between two letters of a word that would fit on a line (a word
    wider than the terminal, a long path, cannot help being cut)."""
    bad = []
    for line in text.splitlines():
        if cell_len(line) <= width:
            continue
        col, at = 0, 0
        while at < len(line) and col + cell_len(line[at]) <= width:
            col += cell_len(line[at])
            at += 1
        if line[at - 1] == " " or line[at] == " ":
            continue
        start = line.rfind(" ", 0, at) + 1
        end = line.find(" ", at)
        word = line[start:] if end < 0 else line[start:end]
        if cell_len(word) <= width:
            bad.append(line)
    return bad


def paragraph(text: str, starts: str) -> str:
    """The logical line beginning with `starts`, joined back from its wrapped lines (the next
    item is indented or blank)."""
    lines = text.splitlines()
    [at] = [i for i, x in enumerate(lines) if x.startswith(starts)]
    out = [lines[at]]
    for x in lines[at + 1:]:
        if not x or x.startswith(" "):
            break
        out.append(x)
    return " ".join(out)


def invoke(args: list[str], code: int = 0) -> tuple[str, str]:
    got = runner.invoke(app, args, env={"COLUMNS": str(WIDTH)})
    assert got.exit_code == code, got.output
    return got.stdout, got.stderr


def optimize(repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, replies: list[str],
             *extra: str, code: int = 0) -> tuple[str, str]:
    monkeypatch.setitem(SCRIPTED_MODELS, "proposer",
                        lambda: ScriptedModel([reply(r) for r in replies]))
    monkeypatch.chdir(repo)
    return invoke(["optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial",
                   "--iterations", "1", "--agent-model", "scripted:pkm",
                   "--proposer-model", "scripted:proposer", "--state-dir", str(state), *extra],
                  code)


def check_plain(stdout: str, stderr: str, verdict: str) -> str:
    """Common rules of every rendering; returns the verdict's first (logical) line."""
    assert cut_words(stdout) == [] and cut_words(stderr) == []
    assert leaks(stdout + stderr) == []
    first = paragraph(stdout, verdict)
    assert len(first) < 160, first
    assert not TEST_NAMES.search(first), first
    return first


@pytest.mark.parametrize(("replies", "extra", "said"), [
    ([GOOD], [], "iteration 1 accepted: the patch fixed 16 of 16 target trials and the gate "
     "found no harm in the 3 other buckets; review its branch and merge it"),
    ([BROAD], [], "iteration 1 rejected: the patch fixed 16 of 16 target trials but made "
     "short_fact and regression/plain worse, so it was rejected"),
    ([NOTHING], [], "iteration 1 rejected: the patch fixed 0 of 4 target trials, so it was "
     "rejected without running the other buckets; the next iteration tries another idea"),
])
def test_an_optimize_verdict_reads_in_plain_words_first(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, replies: list[str],
    extra: list[str], said: str,
) -> None:
    stdout, stderr = optimize(repo, state, monkeypatch, replies, "--proposer-format", "diff",
                              *extra)
    assert check_plain(stdout, stderr, "iteration 1 ") == said
    # the sentence comes first, then the idea, the diff and the table with its legend
    assert stdout.index("iteration 1 ") < stdout.index("  diff:") < stdout.index("Bucket")
    assert "+++ b/prompts/pkm_agent.md" in stdout
    assert "F/B = trials fixed/broken" in paragraph(stdout, "columns: ")
    # the method is not printed by default: nor in the progress lines
    assert not TEST_NAMES.search(stdout + stderr), TEST_NAMES.findall(stdout + stderr)
    assert "how it was decided: --verbose" in stdout
    # the verdict on stderr is the same sentence, once
    assert paragraph(stderr, "  verdict: ").count("the patch fixed") == 1


def test_verbose_prints_the_method_once_wrapped(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdout, stderr = optimize(repo, state, monkeypatch, [GOOD], "--proposer-format", "diff",
                              "--verbose")
    check_plain(stdout, stderr, "iteration 1 ")
    both = stdout + stderr
    flat = " ".join(both.split())  # the method text is wrapped at the terminal's width
    assert flat.count("Lan-DeMets") == 1 and flat.count("anytime-valid over looks") == 1
    assert "  how it was decided: target improvement" in stdout
    assert "obrien-fleming-type" in stdout and "run tests:" not in both
    assert "visible target tasks" in stdout  # the findings too
    # the PR body: the same sentence first, then each reason on its own line
    [body] = (state / "optimize").glob("*/iter-1/PR.md")
    text = body.read_text()
    assert ("**Verdict: accept.** The patch fixed 16 of 16 target trials and the gate found no "
            "harm in the 3 other buckets; review its branch and merge it.") in text
    assert "\n- tests: target improvement" in text


def test_a_refusal_says_why_in_words_and_keeps_every_reply(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdout, stderr = optimize(repo, state, monkeypatch, [OVERLAPPING] * 3,
                              "--proposer-format", "edits")
    first = check_plain(stdout, stderr, "iteration 1 ")
    assert first == ("iteration 1 refused: nothing was evaluated: no usable patch in 3 replies "
                     "(the last: edits of the proposal overlap (line 7 is edited twice))")
    assert "combine them" not in stdout + stderr
    assert "proposer reply 3 (0 s) not usable: edits of the proposal overlap" in stderr
    [folder] = (state / "optimize").iterdir()
    replies = sorted((folder / "iter-1").glob("reply-attempt-*.md"))
    assert [p.read_text() for p in replies] == [OVERLAPPING] * 3
    assert "reply-attempt-*.md" in stdout


def test_a_failing_proposer_model_is_an_error_without_its_class_name(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdout, stderr = optimize(repo, state, monkeypatch, [], "--proposer-format", "diff",
                              code=2)  # the proposer failed: an infrastructure failure
    first = check_plain(stdout, stderr, "iteration 1 ")
    assert first.startswith("iteration 1 error: the proposer failed, so nothing was evaluated: "
                            "the proposer model failed: scripted model ran out of responses")
    data = cli_result(runner.invoke(app, ["optimize", "--suite", "pkm_agent", "--bucket",
                                          "skip_trivial", "--iterations", "1", "--agent-model",
                                          "scripted:pkm", "--proposer-model",
                                          "scripted:proposer", "--state-dir", str(state),
                                          "--json"]).stdout)
    [it] = data["iterations"]
    assert it["outcome"] == "error" and "Error" not in json.dumps(it)


def test_a_review_verdict_reads_in_plain_words_first(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    human_branch(repo, "human/skip", GOOD_LINE)
    monkeypatch.chdir(repo)
    stdout, stderr = invoke(["review", "--base", "main", "--head", "human/skip",
                             "--agent-model", "scripted:pkm", "--state-dir", str(state)])
    first = check_plain(stdout, stderr, "pkm_agent ")
    assert first == ("pkm_agent neutral: no bucket changed beyond the thresholds and the gate "
                     "found no harm (fixed 4 and broke 0 of 16 paired trials); it can be merged")
    assert "H.mean = head mean score" in paragraph(stdout, "columns: ")
    [comment] = (state / "review").glob("*/comment.md")
    assert "\nNo bucket changed beyond the thresholds and the gate found no harm (fixed 4 and " \
           "broke 0 of 16 paired trials); it can be merged.\n" in comment.read_text()
    assert not TEST_NAMES.search(stdout)
    # before its trials start: how many, and (once a run of the suites was saved) their cost
    assert ("» pkm_agent: review: about 32 trials; no earlier run of these suites to price "
            "them by") in " ".join(stderr.splitlines())
    assert stderr.index("about 32 trials") < stderr.index("run started: ")
    verbose, again = invoke(["review", "--base", "main", "--head", "human/skip",
                             "--agent-model", "scripted:pkm", "--state-dir", str(state),
                             "--verbose"])
    assert re.search(r"» pkm_agent: review: about 32 trials \(~[\d,]+ tokens, ~\$0\.0000 at "
                     r"list prices\)", " ".join(again.splitlines())), again
    flat = " ".join(verbose.split())  # the method text is wrapped at the terminal's width
    assert flat.count("weighted Holm") == 2  # review's fixed family and its bucket family
    assert flat.count("anytime-valid over looks") == 1  # its per-task harm detection, once
    assert cut_words(verbose) == []
    statements = [x for x in verbose.splitlines() if x.startswith("  [no harm] bucket")]
    assert len(statements) == 4  # each bucket's statement once (not again as a reason)


def test_eval_output_fits_80_columns(state: Path) -> None:
    stdout, stderr = invoke(["eval", "--suite", "pkm_agent", "--kind", "capability",
                             "--agent-model", "scripted:pkm", "--state-dir", str(state)])
    assert cut_words(stdout) == [] and cut_words(stderr) == []
    assert leaks(stdout + stderr) == []


def test_a_long_diff_is_cut_with_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    diff = "--- a/p.md\n+++ b/p.md\n@@ -1,40 +1,40 @@\n" + "".join(
        f"-old line {i} of a prompt that says quite a lot about what the agent should do\n"
        f"+new line {i}\n" for i in range(40))
    ui.show_diff(diff, where="PR.md")
    shown = capsys.readouterr().out
    assert "new line 12" in shown and "new line 13" not in shown
    assert "... 53 more lines of the diff not shown (all of it: PR.md, or --verbose)" in shown
    assert cut_words(shown) == []


def test_progress_lines_in_a_log(capsys: pytest.CaptureFixture[str]) -> None:
    """Off a terminal (CI logs): a line when the proposer is asked and one per reply, with
    its time and tokens; trial statuses in words ("timed out", never `timedOut`); the
    estimate before trials start."""
    display = ui.LoopDisplay(console=Console(width=WIDTH, file=None, force_terminal=False))
    with display:
        display.on_event(TrialsEstimated(what="review", trials=64, tokens=310_000, usd=0.42,
                                         basis="2 sides x 2 suites"))
        display.on_event(ProposalRequested(iteration=1, tokens=3244, package="/tmp/p.md"))
        display.on_event(ProposerReplied(iteration=1, attempt=1, seconds=312.4,
                                         input_tokens=3300, output_tokens=512))
        display.on_event(RunStarted(run="r", label="baseline", suite="s", total=2))
        for status in ("timedOut", "passed"):
            display.on_event(TrialFinished(run="r", task="t", trial=0, bucket="b",
                                           status=status, cached=False))
        display.on_event(RunFinished(run="r", suite="s"))
    shown = capsys.readouterr().out
    assert "review: about 64 trials (~310,000 tokens, ~$0.4200 at list prices)" in shown
    assert "proposer: ~3,244 tokens sent, waiting for its reply" in shown
    assert "proposer replied in 312 s (3,300 tokens in, 512 out)" in shown
    assert "run finished: baseline: 1 passed, 1 timed out" in shown
    assert leaks(shown) == [] and cut_words(shown) == []


def test_a_terminal_gets_a_live_line_while_the_proposer_works() -> None:
    """On a terminal: a spinner with the elapsed time and the tokens so far while the
    proposer works, gone once a usable reply came."""
    sink = io.StringIO()
    display = ui.LoopDisplay(console=Console(file=sink, width=WIDTH, force_terminal=True))
    with display:
        display.on_event(ProposalRequested(iteration=1, tokens=3244, package="/tmp/p.md"))
        [task] = display.progress.tasks
        assert (task.description, task.total) == ("proposer", None)
        assert task.fields["status"] == "~3,244 tokens sent, waiting for its reply"
        display.on_event(ProposerReplied(iteration=1, attempt=1, seconds=40, input_tokens=3300,
                                         output_tokens=20, problem="the reply contained no diff"))
        [task] = display.progress.tasks
        assert task.fields["status"] == ("reply 1 unusable, asking again; 3,300 tokens in, 20 "
                                         "out")
        display.on_event(ProposerReplied(iteration=1, attempt=2, seconds=41, input_tokens=3400,
                                         output_tokens=300))
        assert display.progress.tasks == []
    assert "proposer replied in 41 s (6,700 tokens in, 320 out)" in sink.getvalue()


def test_nightly_announces_each_step_and_its_cost_before_its_trials(
    repo: Path, state: Path
) -> None:
    from optimizer.core.events import Event, StepEstimated
    from optimizer.workflows.nightly.engine import run_nightly
    from tests.optimizer.workflows.nightly_support import FAST, PRICES, clients, night_config

    seen: list[Event] = []
    config = night_config(repo, state, **FAST, prices=PRICES, max_buckets=1, suites=["pkm_agent"],
                          iterations_per_bucket=1)
    asyncio.run(run_nightly(config, **clients(), on_event=seen.append))
    kinds = [e.event for e in seen if isinstance(e, StepEstimated | RunStarted)]
    assert kinds[0] == "step_estimate" and "run_start" in kinds
    first = next(e for e in seen if isinstance(e, StepEstimated))
    assert first.step.startswith("baseline:") and "uncached trial(s)" in first.basis
    assert first.usd is not None and first.usd > 0  # the price is known
    shown = ui.estimate_line(first)
    assert shown.startswith(f"{first.step}: estimated ~") and "at list prices" in shown


def test_several_candidates_read_the_same_way(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.optimizer.workflows.crash_child import GOOD_TWIN

    stdout, stderr = optimize(repo, state, monkeypatch,
                              [f"## Patch 1\n{GOOD}\n## Patch 2\n{GOOD_TWIN}"] * 2,
                              "--proposer-format", "diff", "--candidates", "2")
    first = check_plain(stdout, stderr, "iteration 1 ")
    assert first.startswith("iteration 1 accepted: the patch fixed"), first


def test_a_timed_out_trial_reads_timed_out_in_the_report() -> None:
    from optimizer.report.markdown import render_markdown
    from optimizer.report.summary import summarize
    from tests.optimizer.lifecycle.helpers import run

    done = run("r", {"event-a": [False]})
    done.trials[0].status = "timedOut"
    text = render_markdown(done, summarize(done))
    assert "### `event-a` #0 (event) — timed out" in text and "timedOut" not in text
