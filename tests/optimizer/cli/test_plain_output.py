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

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.core.events import (
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
    ([GOOD], [], "accepted: the patch fixed 8 of 8 target trials and the gate found no harm "
     "in the 3 other buckets; review its branch and merge it"),
    ([BROAD], [], "rejected: the patch fixed 8 of 8 target trials but broke dentist "
     "(short_fact), oat-milk (short_fact) and 2 more; the base prompt stays"),
    ([NOTHING], [], "rejected: the patch fixed 0 of 4 target trials, so the other buckets were "
     "not run; the base prompt stays"),
])
def test_an_optimize_verdict_reads_in_plain_words_first(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch, replies: list[str],
    extra: list[str], said: str, tmp_path: Path,
) -> None:
    stdout, stderr = optimize(repo, state, monkeypatch, replies, "--proposer-format", "diff",
                              *extra)
    assert check_plain(stdout, stderr, said.split(":")[0]) == said
    # the sentence comes first and once (the progress says only the outcome), then the idea
    # and the diff; the table, its legend and the method only with --verbose
    assert stdout.startswith(said.split(":")[0])
    assert " ".join((stdout + stderr).split()).count(said.split(": ", 1)[1]) == 1
    assert stdout.index("  diff:") < stdout.index("table and how it was decided: --verbose")
    assert "+++ b/prompts/pkm_agent.md" in stdout
    assert "Bucket" not in stdout and "columns: " not in stdout
    assert not TEST_NAMES.search(stdout + stderr), TEST_NAMES.findall(stdout + stderr)
    assert "  iteration 1: " + said.split(":")[0] in stderr
    verbose, _ = optimize(repo, tmp_path / "again", monkeypatch, replies, "--proposer-format",
                          "diff", "--verbose", *extra)
    assert verbose.startswith(said.split(":")[0])
    assert verbose.index(said.split(": ", 1)[1][:40]) < verbose.index("  diff:")
    assert "F/B = trials fixed/broken" in paragraph(verbose, "columns: ")
    if "broke" in said:  # the table agrees with the verdict: those buckets regressed
        rows = [x for x in verbose.splitlines() if x.startswith(("short_fact ", "regression/p"))]
        assert len(rows) == 2 and all(r.rstrip().endswith("regressed") for r in rows), rows


def test_verbose_prints_the_method_once_wrapped(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdout, stderr = optimize(repo, state, monkeypatch, [GOOD], "--proposer-format", "diff",
                              "--verbose")
    check_plain(stdout, stderr, "accepted")
    both = stdout + stderr
    flat = " ".join(both.split())  # the method text is wrapped at the terminal's width
    assert flat.count("Lan-DeMets") == 1 and flat.count("anytime-valid over looks") == 1
    assert "  how it was decided: target improvement" in stdout
    assert "Pocock-type" in stdout and "run tests:" not in both
    # the findings too, the target's pass rate once (against its record; the table pairs)
    assert "target bucket 'skip_trivial' improved" in stdout
    assert "visible target tasks" not in stdout
    assert " ".join(stdout.split()).count("every other bucket showed no harm") == 1
    # the finding and the headline count the same other buckets (the held-out target tasks
    # were counted as a fourth "bucket" by the finding)
    flat_out = " ".join(stdout.split())
    assert "every other bucket showed no harm (3 bucket(s)" in flat_out, flat_out
    # the PR body: the same sentence first, then each reason on its own line
    [body] = (state / "optimize").glob("*/iter-1/PR.md")
    text = body.read_text()
    assert ("**Verdict: accept.** The patch fixed 8 of 8 target trials and the gate found no "
            "harm in the 3 other buckets; review its branch and merge it.") in text
    assert "\n- tests: target improvement" in text


def test_a_refusal_says_why_in_words_and_keeps_every_reply(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdout, stderr = optimize(repo, state, monkeypatch, [OVERLAPPING] * 3,
                              "--proposer-format", "edits")
    first = check_plain(stdout, stderr, "refused")
    assert first == ("refused: nothing was evaluated: no usable patch in 3 replies (the last: "
                     "edits of the proposal overlap (line 7 is edited twice)); the base prompt "
                     "stays")
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
    first = check_plain(stdout, stderr, "error")
    assert first.startswith("error: the proposer failed, so nothing was evaluated: the "
                            "proposer model failed: scripted model ran out of responses")
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
    # 4 fixed pairs are no fixed-sample evidence (p = 1/16); review's sequential efficacy
    # looks add head trials to the fixed bucket and show it (issue 31)
    # the headline counts every paired trial the review ran (the sequential looks' too), as
    # the comment's list of fixed trials does (it said 4 of 16 above a list of 8)
    assert first == ("pkm_agent improves: the change improved skip_trivial and the gate found "
                     "no harm in any bucket (fixed 8 and broke 0 trials (20 paired)); merge it")
    assert "H.mean = head mean score" in paragraph(stdout, "columns: ")
    [comment] = (state / "review").glob("*/comment.md")
    assert "the gate found no harm in any bucket (fixed 8 and broke 0 trials (20 paired)); " \
           "merge it.\n" in comment.read_text()
    assert "### Trials fixed (8)" in comment.read_text()
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
        # an external command reads the package from disk: nothing is "sent" to a model
        display.on_event(ProposalRequested(iteration=1, tokens=3244, package="/tmp/p.md",
                                           command=True))
        [task] = display.progress.tasks
        assert task.fields["status"] == ("running --proposer-cmd on the package (~3,244 "
                                         "tokens), waiting for it to finish")
        display.on_event(ProposalRequested(iteration=1, tokens=3244, package="/tmp/p.md"))
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
    from promptloop.optimizer.core.events import Event, StepEstimated
    from promptloop.optimizer.workflows.nightly.engine import run_nightly
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
    assert first.seconds is not None  # the budget's time (0 s here: no trial timed yet)
    timed = ui.estimate_line(first.model_copy(update={"seconds": 1500.0}))
    assert timed.startswith(f"{first.step}: estimated ~") and ", ~25 min (" in timed


def test_several_candidates_read_the_same_way(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.optimizer.workflows.crash_child import GOOD_TWIN

    stdout, stderr = optimize(repo, state, monkeypatch,
                              [f"## Patch 1\n{GOOD}\n## Patch 2\n{GOOD_TWIN}"] * 2,
                              "--proposer-format", "diff", "--candidates", "2")
    first = check_plain(stdout, stderr, "accepted")
    assert first.startswith("accepted: the patch fixed"), first


def test_a_timed_out_trial_reads_timed_out_in_the_report() -> None:
    from promptloop.optimizer.report.markdown import render_markdown
    from promptloop.optimizer.report.summary import summarize
    from tests.optimizer.lifecycle.helpers import run

    done = run("r", {"event-a": [False]})
    done.trials[0].status = "timedOut"
    text = render_markdown(done, summarize(done))
    assert "### `event-a` #0 (event) — timed out" in text and "timedOut" not in text


LONG_LINE = ("A call or meeting with a date and a time is an event: always use the event "
             "template for it, never a snippet.")
DEMO_PATCH = ("```diff\n--- a/prompts/card_agent.md\n+++ b/prompts/card_agent.md\n"
              "@@ -1,3 +1,4 @@\n # Card Agent\n \n+" + LONG_LINE + "\n You turn one raw input "
              "from the user's personal timeline into one timeline card. The input is\n```")
FLAG_AT_END = re.compile(r"(?:^|\s)--(?!verbose\b|all\b|json\b)[a-z][a-z-]*[,;]?$")
"""A line ending in a flag that takes a value: its value went to the next line."""


def demo_repo(root: Path) -> Path:
    """The demo's repository: the card agent's prompt and its quickstart suite, committed."""
    import shutil
    import subprocess

    here = Path(__file__).resolve().parents[3]
    (root / "prompts").mkdir(parents=True)
    shutil.copy(here / "prompts" / "card_agent.md", root / "prompts" / "card_agent.md")
    shutil.copytree(here / "tasks" / "card_agent" / "quickstart",
                    root / "tasks" / "card_agent" / "quickstart")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    return root


@pytest.mark.parametrize("verbose", [False, True])
def test_the_demo_at_80_columns_says_its_verdict_once_and_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verbose: bool
) -> None:
    """`make demo`'s command (scripted models): the verdict sentence once, as stdout's first
    line, before any table; no line wider than 80 columns, no flag wrapped away from its
    value, a folded `+` line still reads as added."""
    repo = demo_repo(tmp_path / "demo")
    monkeypatch.setitem(SCRIPTED_MODELS, "proposer",
                        lambda: ScriptedModel([reply(DEMO_PATCH)] * 2))
    monkeypatch.chdir(repo)
    stdout, stderr = invoke(["optimize", "--suite", "card_agent/quickstart", "--bucket",
                             "template_event", "--iterations", "2", "--max-turns", "2",
                             "--max-runs", "2", "--round-trials", "1", "--agent-model",
                             "scripted:card", "--proposer-model", "scripted:proposer",
                             "--proposer-format", "diff", "--state-dir", str(tmp_path / "s"),
                             *(["--verbose"] if verbose else [])])
    verdict = paragraph(stdout, "no proposal was accepted")
    assert stdout.startswith("no proposal was accepted in 2 iterations"), stdout
    assert verdict == ("no proposal was accepted in 2 iterations (1 rejected, 1 refused); the "
                       "base prompt stays")
    flat = " ".join((stdout + stderr).split())
    assert flat.count(verdict) == 1
    said = "the patch fixed 0 of 2 target trials, so the other buckets were not run"
    assert flat.count(said) == 1  # iteration 1's sentence, once (the progress: its outcome)
    assert "iteration 1: rejected" in stderr and "verdict:" not in stderr
    if verbose:
        assert stdout.index(verdict[:30]) < stdout.index("Bucket")
    else:
        assert "Bucket" not in stdout and "columns:" not in stdout
    lines = (stdout + stderr).splitlines()
    # wider only where one word, or a flag with its value (a long path), cannot be cut
    assert [x for x in lines if cell_len(x) > WIDTH
            and len(x.rstrip(" \\").split()) > (2 if x.split()[0].startswith("--") else 1)] == []
    assert [x for x in lines if FLAG_AT_END.search(x.rstrip(" \\"))] == []
    rows = stdout.splitlines()
    at = next(i for i, x in enumerate(rows) if x.strip().startswith("+A call or meeting"))
    assert rows[at + 1].strip().startswith("+↳ ")  # the fold keeps the + of the line
    assert " ".join(r.strip().lstrip("+↳ ") for r in rows[at:at + 2]) == LONG_LINE


def test_the_real_model_note_keeps_each_flag_with_its_value(
    capsys: pytest.CaptureFixture[str]
) -> None:
    ui.info(ui.LOCAL_HINT)
    shown = capsys.readouterr().err
    lines = shown.splitlines()
    assert all(cell_len(x) <= WIDTH for x in lines)
    assert [x for x in lines if FLAG_AT_END.search(x)] == []
    assert "--proposer-model anthropic:claude-sonnet-4-5" in shown


def test_prose_never_breaks_between_a_flag_and_its_value() -> None:
    text = ("x " * 33) + "--proposer-model anthropic:claude-sonnet-4-5 and more words here"
    rows = ui.wrapped(ui.Text(text), WIDTH).plain.splitlines()
    assert any("--proposer-model anthropic:claude-sonnet-4-5" in r for r in rows), rows


def test_a_gate_stage_with_only_statistics_in_a_clause_has_no_empty_clause() -> None:
    from promptloop.optimizer.report.plain import plain_stage

    said = plain_stage("; held-out tasks improved too (pass rate 0% -> 100%, p=0.01 <= 0.02); "
                       "harm detection on 6 other task(s)")
    assert said == "held-out tasks improved too; harm detection on 6 other task(s)"


def test_a_run_line_counts_passed_trials_among_the_cached(
    capsys: pytest.CaptureFixture[str]
) -> None:
    display = ui.LoopDisplay(console=Console(width=WIDTH, file=None, force_terminal=False))
    with display:
        display.on_event(RunStarted(run="r", label="eval card_agent", suite="s", total=3))
        for status, cached in (("passed", True), ("passed", True), ("failed", False)):
            display.on_event(TrialFinished(run="r", task="t", trial=0, bucket="b",
                                           status=status, cached=cached))
        display.on_event(RunFinished(run="r", suite="s"))
    assert ("run finished: eval card_agent: 1 failed, 2 passed (2 from cache)"
            in capsys.readouterr().out)


def test_the_estimate_counts_the_screening_of_candidates(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --candidates K each candidate runs the visible target tasks (2 here) first."""
    _, several = optimize(repo, state, monkeypatch, [NOTHING] * 4, "--proposer-format", "diff",
                          "--candidates", "2")
    assert ("then at least 8 per iteration (4 screening 2 candidates, then the winner's gate)"
            in " ".join(several.split())), several


def test_optimize_and_eval_say_their_trials_and_time_before_they_start(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate comes before the first run: trials (baseline, then per proposal), and
    once a run of the suites was saved, the time and tokens it measured."""
    _, stderr = optimize(repo, state, monkeypatch, [NOTHING], "--proposer-format", "diff")
    flat = " ".join(stderr.split())
    assert "» optimize: about 20 trials; no earlier run of these suites to time and price them " \
           "by; 16 for the baseline, then at least 4 per iteration (1 iteration at most)" in flat
    # and what harm detection adds when the target improves (a team's iteration ran 1,934
    # trials where the estimate said "at least 20"): 3 clean trials a passing task, `half`
    assert ("at least 3 trials for each of the 6 other task(s) that passes on its record "
            "(about 18 more per iteration if all pass, not in the figures above)") in flat
    assert stderr.index("» optimize: about") < stderr.index("run started: ")
    _, again = invoke(["eval", "--suite", "pkm_agent", "--agent-model", "scripted:pkm",
                       "--state-dir", str(state), "--fresh"])
    said = " ".join(again.split())
    assert re.search(r"» eval pkm_agent: about 12 trials \(.*~\d+ s\); agent tokens and time per "
                     r"trial of the last run of 1 of 1 suite\(s\)", said), said
    assert said.index("» eval pkm_agent: about") < said.index("run started: ")
    assert "trials done" not in said  # a short run: its start and end lines are enough


def test_the_embedded_model_is_announced_with_its_time() -> None:
    from promptloop.optimizer.core.suites import load_suite
    from promptloop.optimizer.workflows.estimate import (
        LOCAL_SECONDS_PER_TRIAL,
        estimate,
        suite_trials,
    )

    here = Path(__file__).resolve().parents[3]
    suites = [load_suite(here / "tasks" / "pkm_agent" / k) for k in ("capability", "regression")]
    event = estimate("optimize", "local:smollm2", here / "no-such-state",
                     [(s, suite_trials(s)) for s in suites])
    assert event.trials == sum(suite_trials(s) for s in suites) > 60
    assert event.seconds == event.trials * LOCAL_SECONDS_PER_TRIAL
    shown = ui.estimate_text(event)
    assert re.match(r"optimize: about \d+ trials \(~\d+ min\); ~45 s a trial on the "
                    r"embedded model", shown), shown


def test_a_log_hears_the_time_left_of_a_long_run(capsys: pytest.CaptureFixture[str]) -> None:
    display = ui.LoopDisplay(console=Console(width=WIDTH, file=None, force_terminal=False))
    now = [0.0]
    display.clock = lambda: now[0]
    with display:
        display.on_event(RunStarted(run="r", label="baseline", suite="s", total=20))
        for i in range(10):
            now[0] += 30.0  # a trial each 30 s
            display.on_event(TrialFinished(run="r", task="t", trial=i, bucket="b",
                                           status="passed", cached=False))
    shown = capsys.readouterr().out
    assert "  baseline: 5/20 trials done, ~8 min left" in shown  # 15 more at 30 s
    assert "  baseline: 10/20 trials done, ~5 min left" in shown
    assert ui.duration(5400) == "1 h 30 min" and ui.duration(40) == "40 s"


def test_a_cached_last_run_times_the_estimate_by_the_run_before(tmp_path: Path) -> None:
    """optimize after an eval: the last run (the baseline) came wholly from the cache, and the
    estimate fell back to the embedded model's ~45 s a trial ("~11 min") while saying it used
    the last run's time (a team: the trials took under a second)."""
    from datetime import timedelta

    from promptloop.optimizer.core.suites import load_suite
    from promptloop.optimizer.workflows.estimate import estimate
    from tests.optimizer.lifecycle.helpers import T0, save_all, trial
    from tests.optimizer.lifecycle.helpers import run as make_run

    here = Path(__file__).resolve().parents[3]
    suite = load_suite(here / "tasks" / "pkm_agent" / "regression")
    ids = [t.id for t in suite.tasks]
    quick = [trial(t, "b", 0, True, T0 + timedelta(seconds=i)) for i, t in enumerate(ids)]
    cached = [trial(t, "b", 0, True, T0 + timedelta(days=1), cached=True) for t in ids]
    runs = [make_run(n, {key: [True] for key in ids}, suite=suite.name, model="local:smollm2",
                     trials=tr, day=d) for n, tr, d in (("eval-1", quick, 0),
                                                         ("base-2", cached, 1))]
    save_all(tmp_path, runs)
    event = estimate("optimize", "local:smollm2", tmp_path, [(suite, len(ids))])
    assert event.seconds is not None and event.seconds < 10 * len(ids), event
