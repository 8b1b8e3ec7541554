"""All terminal output (rich). Engine code never prints; it reports typed events
(optimizer/core/events.py) that `LoopDisplay` draws."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from promptloop.optimizer.cli.help import Page, Row
from promptloop.optimizer.core.events import (
    BaselineReady,
    BudgetStopped,
    CandidateEvaluating,
    CandidateStopped,
    ConfirmStarted,
    Event,
    GateStage,
    IterationAbandoned,
    Phase,
    ProposalRefused,
    ProposalRequested,
    ProposerReplied,
    RunFinished,
    RunStarted,
    RunWarning,
    ScreeningRound,
    StepEstimated,
    TrialFinished,
    TrialsEstimated,
    VerdictReached,
)
from promptloop.optimizer.gate.compare import BucketComparison
from promptloop.optimizer.report import fmt, plain
from promptloop.optimizer.report.summary import RunSummary, failed_text, outside_text
from promptloop.optimizer.report.table import Table as TableView
from promptloop.optimizer.report.table import bucket_table, comparison_table, gate_table
from promptloop.optimizer.workflows.context import redact

T = TypeVar("T")

class _Console(Console):
    """rich's console, ending on a closed pipe as the rest of the CLI does (`pipe_closed`:
    quietly, exit 141) instead of rich's own exit 1, which reads as a user error."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # what a command prints is redacted as its files are (core/redact.py): a secret in a
        # model's hypothesis, an agent's output or an error never reaches a terminal or a log
        return redact(super()._render_buffer(buffer))


# no emoji codes: a model id ("openai:x: nothing answers") or a user's text is never ":x:"
out = _Console(soft_wrap=True, emoji=False)
err = _Console(stderr=True, soft_wrap=True, emoji=False)


ERRORS: list[str] = []
"""The `Error:` lines of the running command (for `--json`'s error object, cli/command.py)."""


@dataclass
class JsonOutput:
    """What `--json` prints for the running command: one envelope (docs/json-envelope.schema
    .json), written by `PromptloopGroup.main` when the command ends, or at once (`view`)."""

    wanted: bool = False
    result: list[Any] = field(default_factory=list)
    """The command's result object, once handed (`print_json`)."""
    printed: bool = False

    def reset(self) -> None:
        self.wanted, self.printed = False, False
        self.result.clear()


JSON = JsonOutput()
EXIT_KINDS = {1: "user", 2: "infrastructure", 130: "interrupted", 143: "interrupted"}
"""`error.kind` of the envelope by exit code (README: 1 user/configuration, 2 infrastructure,
130 interrupted by Ctrl-C, 143 by SIGTERM)."""


def error(message: str) -> None:
    ERRORS.append(message)
    err.print(f"[bold red]Error:[/] {escape(message)}", highlight=False, markup=True)


def warn(message: str) -> None:
    err.print(wrapped(Text.assemble(("Warning:", "yellow"), " ", message), err.width),
              highlight=False, soft_wrap=True)


def info(message: str) -> None:
    err.print(wrapped(Text(message), err.width), highlight=False, soft_wrap=True)


_WORD = re.compile(r"--[A-Za-z][\w-]*(?: (?!-)[^\s;,()]+)(?=[\s;,)]|$)|\S+")
"""A word where a line may not break: a flag and its value (`--proposer-model x`) stay on
one line, else any run of non-blanks."""


def wrapped(text: Text, width: int, indent: int = 0) -> Text:
    """`text` broken into lines at spaces only, each at most `width` cells where its words
    allow (a word wider than that, a long path, keeps a line of its own, whole), styles kept,
    every line indented by `indent` spaces."""
    room = max(20, width - indent)
    pieces: list[Text] = []
    for para in text.split("\n", allow_blank=True):
        starts, col, line_start = [], 0, 0
        for m in _WORD.finditer(para.plain):
            end = m.end() - line_start
            if col and end > room:
                starts.append(m.start())
                line_start = m.start()
                end = m.end() - line_start
            col = end
        for line in para.divide(starts) if starts else [para]:
            line.rstrip()
            pieces.append(Text(" " * indent) + line if indent else line)
    return Text("\n").join(pieces)


def say(text: str, *, style: str = "", indent: int = 0, console: Console | None = None) -> None:
    """Prose, wrapped to the terminal's width at spaces, so that no word is ever cut (a word
    wider than the terminal, a long path, keeps a line of its own, whole)."""
    c = console or out
    c.print(wrapped(Text(text, style=style), c.width, indent), soft_wrap=True, highlight=False)


def command(label: str, cmd: str, *, indent: int = 2) -> None:
    """A command to copy: on one line when it fits, else continued with ` \\` at word
    boundaries so that it still pastes into a shell as one command."""
    room = out.width - indent
    line = f"{label}{cmd}"
    if cell_len(line) <= room or "'" in cmd or '"' in cmd:
        out.print(" " * indent + line, markup=False, highlight=False, soft_wrap=True)
        return
    parts: list[str] = []
    for m in _WORD.finditer(line):  # a flag stays with its value on one line
        word = m.group(0)
        lead = "    " if parts else ""
        if parts and cell_len(parts[-1]) + 1 + cell_len(word) <= room - 2:
            parts[-1] += f" {word}"
        else:
            parts.append(lead + word)
    text = " \\\n".join(" " * indent + p for p in parts)
    out.print(text, markup=False, highlight=False, soft_wrap=True)


STOPPED: list[bool] = []
"""Non-empty once Ctrl-C stopped the running command (`acknowledged`)."""
TERMINATED: list[bool] = []
"""Non-empty once SIGTERM stopped the running command (`stop_on_sigterm`)."""


def stop_on_sigterm() -> None:
    """SIGTERM (a scheduler ending a nightly run, `kill`) stops the command as Ctrl-C does:
    the work is cancelled, its clean-up runs (candidate branch and worktree, the iteration
    closed as abandoned, a night's checkpoint kept for --resume), `--json` still prints its
    envelope, and the exit code is 143. Installed only over the default action, in the main
    thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        TERMINATED.append(True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


EXIT_PIPE, EXIT_TERMINATED = 141, 143
"""128 + SIGPIPE (the reader of stdout closed it: `promptloop runs | head`, as git and ls
end) and 128 + SIGTERM."""


def pipe_closed() -> int:
    """The reader of stdout closed it (`| head` took what it wanted): no error message, no
    traceback, no flush error at exit (stdout goes to /dev/null from here); 141, the exit
    status of a process ended by SIGPIPE, as git and ls end there."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_PIPE


def stopped() -> tuple[int, str]:
    """(exit code, `Error:` line) of a command stopped by Ctrl-C or SIGTERM."""
    return (EXIT_TERMINATED, "terminated (SIGTERM)") if TERMINATED else (130, "interrupted")


def exit_now(code: int) -> None:
    """End a process whose command was stopped by Ctrl-C, once its clean-up ran: without the
    interpreter's own shutdown, which waits for what the stop abandoned (the embedded model
    still generating a reply nobody reads keeps both cores busy meanwhile)."""
    from promptloop.optimizer.adapters.process import kill_live

    kill_live()  # os._exit runs no atexit: a trial a forced stop abandoned must not outlive it
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


async def acknowledged(work: Awaitable[T], message: str) -> T:
    """Await `work`; the first Ctrl-C prints `message` at once, then asyncio.run's own handler
    cancels the work (its clean-up runs); a second Ctrl-C goes straight to that handler,
    which forces the stop."""
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or threading.current_thread() is not threading.main_thread():
        return await work

    def first(signum: int, frame: FrameType | None) -> None:
        STOPPED.append(True)
        signal.signal(signal.SIGINT, previous)
        with contextlib.suppress(Exception):  # printing must never stop the stop
            err.print(message, markup=False, highlight=False)
        previous(signum, frame)

    signal.signal(signal.SIGINT, first)
    try:
        return await work
    finally:
        if signal.getsignal(signal.SIGINT) is first:
            signal.signal(signal.SIGINT, previous)


def want_json(value: bool) -> bool:
    """The `--json` option's callback: the command's output is the JSON envelope (set from the
    flag, its environment variable or a promptloop.toml table alike)."""
    if value:
        JSON.wanted = True
    return value


def print_json(data: Any) -> None:
    """Hand the command's result to the JSON envelope (printed when the command ends, with its
    exit code; cli/command.py). The one way a command outputs JSON."""
    JSON.wanted = True
    JSON.result[:] = [data]


def envelope(command: str, code: int, result: list[Any], errors: list[str]) -> dict[str, Any]:
    """`{"command", "ok", "exit_code", "result" | "error"}`: a failure has an `error` (and its
    `result` too when the command had one, e.g. doctor's findings)."""
    doc: dict[str, Any] = {"command": command, "ok": code == 0, "exit_code": code}
    if result:
        doc["result"] = result[0]
    if code:
        message = "\n".join(errors) or f"exited with code {code}"
        # one item per problem: an error listing several ("3 problems in promptloop.toml:"
        # then "- ..." lines) gives its heading and each listed problem
        items = [ln.strip().removeprefix("- ") for e in errors for ln in e.splitlines()
                 if ln.strip()]
        doc["error"] = {"kind": EXIT_KINDS.get(code, "error"), "message": message,
                        "messages": items or [message]}
    elif not result:
        doc["result"] = None
    return doc


def utf8_stream(stream: Any) -> bool:
    """Whether `stream` writes UTF-8 (or has no encoding of its own: a test's buffer)."""
    return str(getattr(stream, "encoding", "") or "").lower().replace("-", "") in ("utf8", "")


def tolerate_encoding() -> None:
    """Under a locale that is not UTF-8 (LANG=en_US.ISO-8859-1, LC_ALL=C without Python's
    UTF-8 coercion), a character the terminal's encoding lacks (an em dash, an emoji in a
    task) crashed a command after its work was done, exit 1: it is replaced instead (the
    --json envelope escapes it: `write_envelope`)."""
    for stream in (sys.stdout, sys.stderr):
        if not utf8_stream(stream) and hasattr(stream, "reconfigure"):
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors="replace")


def write_envelope(command: str, code: int) -> None:
    """Print the running command's envelope on stdout, once."""
    if JSON.printed:
        return
    JSON.printed = True
    doc = envelope(command, code, JSON.result, ERRORS)
    ascii_only = not utf8_stream(sys.stdout)  # \u escapes: valid JSON in any encoding
    sys.stdout.write(redact(json.dumps(doc, indent=2, ensure_ascii=ascii_only, default=str))
                     + "\n")
    sys.stdout.flush()


_TONE_STYLE = {"": "", "up": "green", "down": "red", "same": "dim", "alert": "magenta"}


def _style(tone: str, strong: bool) -> str:
    return f"{_TONE_STYLE[tone]} bold".strip() if strong else _TONE_STYLE[tone]


@dataclass(frozen=True)
class Layout:
    """How much of a table view-model a terminal shows, from the roomiest to the tightest."""

    boxed: bool
    brief: bool
    """Abbreviated column titles."""
    details: bool
    """Detail columns (supporting evidence) shown."""


LAYOUTS = (Layout(True, False, True), Layout(False, False, True), Layout(False, True, True),
           Layout(False, True, False))


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def _rich_table(view: TableView, title: str, layout: Layout, widths: list[int]) -> Table:
    # unboxed: no vertical rules and no padding (columns stay one space apart)
    t = _frame_table(layout, title)
    keep = [i for i, c in enumerate(view.columns) if layout.details or not c.detail]
    for n, i in enumerate(keep):
        c = view.columns[i]
        t.add_column(c.brief if layout.brief else c.title, width=widths[n],
                     justify="right" if c.numeric else "left")
    for row in view.rows:
        t.add_row(*[Text(row[i].text, style=_style(row[i].tone, row[i].strong)) for i in keep])
    return t


def column_widths(view: TableView, layout: Layout) -> tuple[list[int], list[int]]:
    """(narrowest, natural) width of each shown column: the narrowest never breaks a word
    (identifiers such as bucket names are one word), the natural one breaks no line."""
    keep = [i for i, c in enumerate(view.columns) if layout.details or not c.detail]
    lows, highs = [], []
    for i in keep:
        title = view.columns[i].brief if layout.brief else view.columns[i].title
        texts = [title, *(row[i].text for row in view.rows)]
        highs.append(max(cell_len(t) for t in texts) or 1)
        cells = [row[i].text for row in view.rows] if view.columns[i].nowrap else []
        lows.append(max([_longest_word(t) for t in texts] + [cell_len(t) for t in cells]) or 1)
    return lows, highs


def fit_widths(lows: list[int], highs: list[int], room: int) -> list[int] | None:
    """Column widths within `room`, taking space from the columns that can wrap the most (at
    word boundaries); None when even the narrowest widths do not fit."""
    if sum(lows) > room:
        return None
    widths = list(highs)
    while sum(widths) > room:
        i = max(range(len(widths)), key=lambda k: widths[k] - lows[k])
        widths[i] -= 1
    return widths


def _frame_table(layout: Layout, title: str = "") -> Table:
    return Table(title=title or None, title_justify="left", box=box.HEAVY_HEAD if layout.boxed
                 else box.SIMPLE_HEAD, show_edge=layout.boxed, pad_edge=layout.boxed,
                 padding=(0, 1) if layout.boxed else 0)


def _frame(layout: Layout, columns: int) -> int:
    """Width a layout adds to the cells: rules, edges and padding."""
    probe = _frame_table(layout)
    for _ in range(columns):
        probe.add_column(width=1)
    return Measurement.get(out, out.options.update_width(10_000), probe).maximum - columns


def table_renderable(view: TableView, title: str, width: int) -> tuple[Table, int]:
    """The table and the width to print it at: the roomiest layout whose natural widths fit
    `width`; else the tightest layout with its cells wrapped at word boundaries; else (a very
    narrow terminal) the tightest at its narrowest widths, wider than the terminal rather than
    splitting an identifier."""
    for layout in LAYOUTS:
        lows, highs = column_widths(view, layout)
        if sum(highs) + _frame(layout, len(highs)) <= width:
            return _rich_table(view, title, layout, highs), width
    tight = LAYOUTS[-1]
    lows, highs = column_widths(view, tight)
    frame = _frame(tight, len(lows))
    widths = fit_widths(lows, highs, width - frame)
    if widths is None:
        wide = _rich_table(view, title, tight, lows)
        wide.width = sum(lows) + frame
        return wide, wide.width
    return _rich_table(view, title, tight, widths), width


def show_table(view: TableView, title: str = "", *, every_row: bool = True,
               unit: str = "bucket", side: str | None = None) -> None:
    """Lay out a table view-model (see optimizer/report/table.py) to fit the terminal. Unless
    `every_row`, quiet rows (unchanged buckets) are left out and counted below the table.
    With `side` (a gate table: "candidate", "head"), a legend of the shown columns follows."""
    shown = view if every_row else view.changed()
    hidden = len(view.rows) - len(shown.rows)
    if shown.rows:
        renderable, width = table_renderable(shown, title, out.width)
        out.print(renderable, crop=width <= out.width)
        if side is not None:
            titles = [str(c.header) for c in renderable.columns]
            keys = {t: c.key for c in shown.columns for t in (c.title, c.brief)}
            say("columns: " + plain.legend([(t, keys.get(t, "")) for t in titles], side),
                style="dim")
    elif title:
        say(title)
    if hidden:
        say(f"{hidden} unchanged {unit}{'s' if hidden > 1 else ''} not shown (--all lists them)")


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    show_table(TableView.of(columns, rows), title)


def show_summary(summary: RunSummary, report_path: str | None = None) -> None:
    """The closing per-bucket table of an eval run."""
    s, u = summary, summary.usage
    say(f"{s.suite_name}: task pass {fmt.pct(s.task_pass_rate)}, trial pass "
        f"{fmt.pct(s.trial_pass_rate)} ({s.original.passed_trials}/{s.num_trials}); errored "
        f"excluded: task {fmt.pct(s.counted_task_pass_rate)}, trial "
        f"{fmt.pct(s.counted_trial_pass_rate)}; "
        f"{failed_text(s)}, errored {s.errored_trials}{outside_text(s)}, cached "
        f"{s.cached_trials}")
    show_table(bucket_table(s))
    # the trials' own records: a cached trial's calls were made by the run that cached it
    made = ("" if not s.cached_trials else " (all recorded by cached trials: no call made now)"
            if s.cached_trials >= s.num_trials else
            f" ({s.cached_trials} of the {s.num_trials} trials from the cache: their calls "
            "were made before)")
    say(f"tokens: {fmt.tokens(u.total_tokens)} (in {fmt.tokens(u.input_tokens)}, out "
        f"{fmt.tokens(u.output_tokens)}), model calls {u.model_calls}, retries {u.retries}"
        f"{made}; est. cost: {fmt.usd(s.cost.total_usd)}"
        + (f", spent now {fmt.usd(s.cost.spent_usd)}" if s.cached_trials else ""))
    if report_path:
        say(f"report: {report_path}")


STATUS_WORDS = {"timedOut": "timed out"}
"""Trial statuses as a user reads them (the stored `timedOut` is the original's spelling)."""


CACHED = "cached"
"""The key under which a run's counts hold its trials reused from the trial cache (each is
counted under its status too)."""


def _counts(counts: dict[str, int]) -> str:
    """`36 passed, 14 failed (36 from cache)`: every status, then how many were reused."""
    said = ", ".join(f"{v} {STATUS_WORDS.get(k, k)}" for k, v in sorted(counts.items())
                     if k != CACHED)
    cached = counts.get(CACHED, 0)
    return f"{said} ({cached} from cache)" if cached else said


def duration(seconds: float) -> str:
    """`40 s`, `12 min`, `1 h 20 min`: a wait as a person reads it."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def estimate_text(event: TrialsEstimated) -> str:
    """`review: about 64 trials (~310k tokens, ~$0.42 at list prices, ~12 min); ...`"""
    cost = []
    if event.tokens:
        cost.append(f"~{fmt.tokens(event.tokens)} tokens")
    if event.usd is not None and (event.usd or event.tokens):
        cost.append(f"~{fmt.usd(event.usd)} at list prices")
    if event.seconds:
        cost.append(f"~{duration(event.seconds)}")
    plural = "" if event.trials == 1 else "s"
    return (f"{event.what}: about {event.trials} trial{plural}"
            + (f" ({', '.join(cost)})" if cost else "")
            + (f"; {event.basis}" if event.basis else ""))


def estimate_line(event: StepEstimated) -> str:
    """`baseline:pkm_agent: estimated ~12,000 tokens, ~$0.0400 at list prices (...)`"""
    cost = "" if event.usd is None else f", ~{fmt.usd(event.usd)} at list prices"
    if event.seconds:
        cost += f", ~{duration(event.seconds)}"
    return (f"{event.step}: estimated ~{fmt.tokens(event.tokens)} tokens{cost} "
            f"({event.basis})")


class LoopDisplay:
    """Phase messages and, per suite run, a progress bar on a terminal or one line when the
    run starts and one when it ends elsewhere (CI logs: plain lines, in order, no escape
    codes), drawn from the engine's events."""

    def __init__(self, enabled: bool = True, console: Console | None = None) -> None:
        self.console = console or err
        self.enabled = enabled
        self.live = enabled and self.console.is_terminal
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}"),
            console=self.console,
            transient=False,
            disable=not self.live,
        )
        self._runs: dict[str, tuple[str, TaskID, dict[str, int]]] = {}
        self._begun: dict[str, tuple[float, int]] = {}
        """Per run: when it started (clock) and its trial count, for the time left."""
        self.clock = time.monotonic
        self._wait: TaskID | None = None
        self._tokens_in = self._tokens_out = 0

    def __enter__(self) -> LoopDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done()
        self.progress.__exit__(None, None, None)

    def message(self, text: str) -> None:
        """A line of markup, wrapped at word boundaries (never written past the width)."""
        if self.enabled:
            c = self.progress.console
            c.print(wrapped(Text.from_markup(text), c.width), highlight=False, soft_wrap=True)

    def _waiting(self, what: str, status: str) -> None:
        """A live line (spinner, elapsed time, tokens) while a model works: on a terminal; in
        a log, one line when it starts (the end says `_done`)."""
        self._done()
        if self.live:
            self._wait = self.progress.add_task(what, total=None, status=status, left="")
        else:
            self.message(f"{escape(what)}: {escape(status)}")

    def _update(self, status: str) -> None:
        if self._wait is not None:
            self.progress.update(self._wait, status=status)

    def _done(self) -> None:
        if self._wait is not None:
            self.progress.remove_task(self._wait)
            self._wait = None

    def _replied(self, event: ProposerReplied) -> None:
        self._tokens_in += event.input_tokens
        self._tokens_out += event.output_tokens
        tokens = f"{fmt.tokens(self._tokens_in)} tokens in, {fmt.tokens(self._tokens_out)} out"
        if event.problem:
            self._update(f"reply {event.attempt} unusable, asking again; {tokens}")
            self.message(f"  [yellow]proposer reply {event.attempt} ({event.seconds:.0f} s) "
                         f"not usable:[/] {escape(event.problem)}")
            return
        self._done()
        self.message(f"  proposer replied in {event.seconds:.0f} s ({tokens})")

    def _run_started(self, event: RunStarted) -> None:
        label = event.label or event.suite
        task_id = self.progress.add_task(label, total=event.total, status="", left="")
        self._runs[event.run] = (label, task_id, {})
        self._begun[event.run] = (self.clock(), event.total)
        if not self.live:
            trials = f"{event.total} trial" + ("" if event.total == 1 else "s")
            self.message(f"run started: {escape(label)} ({trials})")

    def _run_finished(self, event: RunFinished) -> None:
        run = self._runs.get(event.run)
        if run is not None and not self.live:
            label, _, counts = run
            self.message(f"run finished: {escape(label)}: {_counts(counts) or 'no trials'}")

    def _trial_done(self, event: TrialFinished) -> None:
        run = self._runs.get(event.run)
        if run is None:
            return
        label, task_id, counts = run
        counts[event.status] = counts.get(event.status, 0) + 1
        if event.cached:
            counts[CACHED] = counts.get(CACHED, 0) + 1
        left = self.time_left(event.run, counts)
        self.progress.update(task_id, advance=1, status=_counts(counts),
                             left=f"~{left} left" if left else "")
        done = sum(v for k, v in counts.items() if k != CACHED)
        total = self._begun.get(event.run, (0.0, 0))[1]
        step = max(5, total // 10)
        if not self.live and left and total >= 20 and done % step == 0:  # a long run's log
            self.message(f"  {escape(label)}: {done}/{total} trials done, ~{left} left")

    def time_left(self, run: str, counts: dict[str, int]) -> str:
        """The run's time left at the pace of its trials so far (cached ones aside), once
        a trial not from the cache finished and some remain; else ''."""
        started, total = self._begun.get(run, (0.0, 0))
        done = sum(v for k, v in counts.items() if k != CACHED)
        fresh = done - counts.get(CACHED, 0)
        if fresh <= 0 or done >= total:
            return ""
        return duration((self.clock() - started) / fresh * (total - done))

    def on_event(self, event: Event) -> None:
        step = "[bold cyan]»[/]"
        match event:
            case RunStarted():
                self._run_started(event)
            case RunFinished():
                self._run_finished(event)
            case TrialFinished():
                self._trial_done(event)
            case RunWarning():
                self.message(f"[yellow]Warning:[/] {escape(event.message)}")
            case Phase():
                self.message(f"{step} {escape(event.message)}")
            case BaselineReady():
                self.message(
                    f"{step} baseline: {event.total} trials, {event.cached} reused from cache"
                )
            case ProposalRequested():
                self.message(f"{step} iteration {event.iteration}: asking the proposer "
                             f"(package {escape(event.package)})")
                self._tokens_in = self._tokens_out = 0
                self._waiting("proposer", "running --proposer-cmd on the package (~"
                              f"{fmt.tokens(event.tokens)} tokens), waiting for it to finish"
                              if event.command else f"~{fmt.tokens(event.tokens)} tokens sent, "
                              "waiting for its reply")
            case ProposerReplied():
                self._replied(event)
            case TrialsEstimated():
                self.message(f"{step} {escape(estimate_text(event))}")
            case ProposalRefused():
                self._done()  # why: in the verdict, printed once after the progress
                self.message(f"[yellow]  iteration {event.iteration}: refused before any "
                             "trial[/]")
            case CandidateEvaluating():
                self._done()
                self.message(f"{step} evaluating the candidate on {escape(event.branch)}")
            case ConfirmStarted():
                self.message(
                    f"[yellow]  suspected regression in {escape(', '.join(event.buckets))}: "
                    f"re-running {event.tasks} task(s) with more trials[/]"
                )
            case GateStage():
                self.message(f"[cyan]  gate {escape(event.stage)}[/] ({event.trials} trials): "
                             f"{escape(plain.plain_stage(event.reason))}")
            case VerdictReached():
                # the outcome only: the sentence saying why is printed once, after the
                # progress (show_optimize), never twice
                self._done()
                decided = {"accept": "accepted", "reject": "rejected"}.get(event.decision,
                                                                           event.decision)
                self.message(f"[bold]  iteration {event.iteration}: {decided}[/]")
            case IterationAbandoned():
                self.message("[yellow]  cleaned up after a killed run:[/] "
                             + escape(event.describe()))
            case ScreeningRound():
                self.message(f"[cyan]  screening round {event.round}[/] ({event.trials} "
                             f"trials): {escape(', '.join(event.candidates))}")
            case CandidateStopped():
                self.message(f"[yellow]  candidate {escape(event.name)} out:[/] "
                             + escape(event.reason))
            case StepEstimated():
                self.message(f"{step} {escape(estimate_line(event))}")
            case BudgetStopped():
                self.message(
                    f"{step} stopped: budget {event.budget} before {escape(event.step)} "
                    f"({escape(event.detail)})"
                )


DIFF_LINES = 30
"""Lines of a proposed diff shown in the terminal (all with --verbose)."""
FOLD = "↳ "
"""What starts the continuation of a diff line folded at the terminal's width, after the
line's own `+`, `-` or ` `: a folded `+` line never reads as a context line."""


def diff_rows(line: str, width: int) -> list[str]:
    """One diff line as terminal rows of at most `width` cells: folded at spaces (a word too
    long for a row is cut), each continuation starting with the line's own prefix and FOLD."""
    if cell_len(line) <= width:
        return [line]
    prefix, body = (line[:1], line[1:]) if line[:1] in "+- " else ("", line)
    lead = body[: len(body) - len(body.lstrip())]
    first = textwrap.wrap(body, width=width - len(prefix), initial_indent="",
                          subsequent_indent="", break_long_words=True, drop_whitespace=True)
    if not first:
        return [line[:width]]
    rows = [prefix + lead + first[0]]
    rest = " ".join(first[1:])
    cont = width - len(prefix) - cell_len(FOLD)
    rows += [prefix + FOLD + r for r in textwrap.wrap(rest, width=cont, break_long_words=True)]
    if cell_len(rows[0]) > width:  # the leading blanks did not fit: fold that row again
        return [rows[0][:width], *rows[1:]]
    return rows


def show_diff(diff: str, *, limit: int | None = DIFF_LINES, where: str = "") -> None:
    """A proposed diff, coloured (+ green, - red, hunk headers cyan), each line folded at the
    terminal's width with its prefix repeated (`diff_rows`), cut after `limit` lines with a
    count of the lines not shown."""
    lines = diff.rstrip("\n").splitlines()
    shown = lines if limit is None else lines[:limit]
    indent = 4
    for line in shown:
        style = ("bold" if line.startswith(("---", "+++")) else "green" if line[:1] == "+"
                 else "red" if line[:1] == "-" else "cyan" if line.startswith("@@") else "")
        for row in diff_rows(line, max(20, out.width - indent)):
            out.print(Text(" " * indent + row, style=style), soft_wrap=True, highlight=False)
    if len(shown) < len(lines):
        more = len(lines) - len(shown)
        say(f"... {more} more line{'s' if more > 1 else ''} of the diff not shown"
            + (f" (all of it: {where}, or --verbose)" if where else " (--verbose shows all)"),
            style="dim", indent=indent)


_TONES = {"accepted": "green", "rejected": "red", "inconclusive": "yellow", "refused": "yellow",
          "error": "red", "abandoned": "yellow", "nothing": "yellow", "no": "yellow"}


def _lead(sentence: str, lead: str) -> None:
    """`sentence` with its first `lead` characters (the outcome) in bold and coloured."""
    word = lead.split()[-1] if lead.split() else ""
    tone = _TONES.get(word, _TONES.get(lead.split()[0] if lead.split() else "", ""))
    out.print(wrapped(Text.assemble((lead, f"bold {tone}".strip()), sentence[len(lead):]),
                      out.width), soft_wrap=True, highlight=False)


def _iteration_headline(it: Any) -> str:
    summary = getattr(it, "summary", "") or ("; ".join(it.reasons[:1]) or "no details")
    return plain.without_class_names(f"iteration {it.iteration} {it.outcome}: {summary}")


def show_iteration(it: Any, *, every_row: bool = False, verbose: bool = False,
                   compare: str | None = None, headline: bool = True) -> None:
    """One iteration: its plain sentence (unless `headline` is False: the session's verdict
    already said it), what was tried (the idea and its diff), its branch; the per-bucket
    table with its legend, the gate's findings and method, and the paths only with `verbose`
    (they are in the PR body, the ledger and --json too)."""
    head = _iteration_headline(it)
    if headline:
        out.print()
        _lead(head, f"iteration {it.iteration} {it.outcome}")
    findings, method = plain.split_method(it.reasons)
    listed = len(it.reasons) > 1 or verbose or head.endswith("...")
    if it.outcome in ("refused", "error", "abandoned") and listed:
        for r in it.reasons:
            say(f"- {plain.without_class_names(r)}", indent=2)
    folder = Path(it.package_path).parent if it.package_path else None
    if it.outcome in ("refused", "error") and folder and any(folder.glob("reply-attempt-*")):
        say(f"the proposer's replies: {folder}/reply-attempt-*.md", indent=2)
    if it.hypothesis:
        say(f"idea: {it.hypothesis}", indent=2)
    if it.file_diff or it.diff:
        say("diff:", indent=2)
        # a prompt inside a source file: the file's own line numbers, as the branch has them
        show_diff(it.file_diff or it.diff, limit=None if verbose else DIFF_LINES,
                  where=it.pr_body_path or "")
    if it.branch:
        say(f"branch: {it.branch}", indent=2)
    if it.pr_body_path:
        say(f"PR body: {it.pr_body_path}", indent=2)
    how = getattr(it, "method", "") or "; ".join(method)
    if not verbose:
        if it.verdict_table or how:
            say("per-bucket table and how it was decided: --verbose, the PR body or --json",
                indent=2, style="dim")
        return
    if it.verdict_table:
        verdict_rows(it.verdict_table, every_row=every_row)
    if it.outcome not in ("refused", "error", "abandoned"):
        # each finding once: the bucket statements under their state, the target's paired
        # movement in the table above (the findings give it against each task's record)
        statements = [h for h in it.harm if h.startswith("[")]
        said = {h.split("] ", 1)[-1] for h in statements}
        for r in findings:
            if r not in said:
                say(f"- {r}", indent=2)
        for line in [*(m for m in it.movement if not m.startswith("visible ")), *statements]:
            say(line, indent=2)
    if how:
        say(f"how it was decided: {how.removeprefix('tests: ')}", indent=2, style="dim")
    if compare:
        command("compare: ", compare)


def show_optimize(result: Any, *, every_row: bool = False,
                  compare: Mapping[int, str] | None = None, verbose: bool = False) -> None:
    """The session: its verdict first, in one sentence printed once (`result.message`); then,
    compactly, what each iteration tried; the tables, the method and the paths with
    `verbose`."""
    message = plain.without_class_names(result.message)
    lead = message.split(":", 1)[0] if ":" in message else message.split(";", 1)[0]
    _lead(message, lead)
    single = len(result.iterations) == 1
    for it in result.iterations:
        show_iteration(it, every_row=every_row, verbose=verbose, headline=not single,
                       compare=(compare or {}).get(it.iteration))
    for w in result.warnings:
        warn(w)
    if not verbose:
        say(f"session: {result.session_dir} (the proposer's packages and replies, PR "
            "bodies; --verbose prints the rest)", style="dim", indent=2)
        return
    out.print()
    out.rule(f"optimize {result.suite} / {result.bucket}")
    say(f"base commit {result.base_commit[:12]}; baseline {result.baseline_trials} trials "
        f"({result.baseline_cached_trials} reused from cache)")
    runs = Path(result.ledger_path).parent / "runs"
    say(f"ledger: {result.ledger_path}")
    say(f"reports: {runs} (baseline runs: {', '.join(result.baseline_runs)})")
    say(f"session: {result.session_dir} (proposal packages, every reply of the proposer, "
        "PR bodies)")


def show_review_agent(a: Mapping[str, Any], *, every_row: bool = False,
                      verbose: bool = False) -> None:
    """One reviewed agent (an `AgentReview` as JSON): the verdict in one plain sentence,
    the per-bucket table with its legend, the newly failing trials; its findings and the
    method (each once) only with `verbose`."""
    comps = [BucketComparison.model_validate(c) for c in a["comparisons"]]
    headline = plain.review_headline(
        a["decision"], comps, a.get("regressed", []), a.get("improved", []), a.get("open", []),
        reasons=a.get("reasons", []), moved=(len(a.get("fixed", [])),
                                             len(a.get("newly_failing", [])),
                                             a.get("paired_trials", 0)))
    tone = {"regresses": "red", "improves": "green", "inconclusive": "yellow"}.get(
        a["decision"], "")
    lead = f"{a['agent']} {a['decision']}"
    out.print()
    out.print(wrapped(Text.assemble((lead, f"bold {tone}".strip()), f": {headline}"),
                      out.width), soft_wrap=True, highlight=False)
    comparison_rows(f"per bucket, head against base (base {a['base_trials']} trials, "
                    f"{a['base_cached_trials']} cached; head {a['head_trials']}, "
                    f"{a['head_cached_trials']} cached):", comps, cand="Head",
                    every_row=every_row,
                    harm={b["bucket"]: b["state"] for b in a.get("buckets", [])}
                    | dict.fromkeys(a.get("improved", []), "improved")
                    | dict.fromkeys(a.get("regressed", []), "regressed"))
    findings, method = plain.split_method(a["reasons"])
    statements = [f"[{b['state']}] {b['statement']}" for b in a.get("buckets", [])]
    if verbose:
        said = {b["statement"] for b in a.get("buckets", [])}
        for r in findings:
            if r not in said:
                say(f"- {r}", indent=2)
        for line in statements:
            say(line, indent=2)
        for m in method:
            say(f"how it was decided: {m.removeprefix('tests: ')}", indent=2, style="dim")
    elif method:
        say("how it was decided: --verbose, the comment or --json", indent=2, style="dim")
    if a["newly_failing"]:
        failing = a["newly_failing"]
        say(f"newly failing: {', '.join(_trial(c) for c in failing[:10])}"
            + (f" and {len(failing) - 10} more" if len(failing) > 10 else ""), indent=2)
    if a["fixed"]:
        say(f"fixed: {len(a['fixed'])} trial(s)", indent=2)


def _trial(c: Mapping[str, Any]) -> str:
    return f"{c['task_id']}#{c['trial_index']} ({c['bucket']})"


LOCAL_HINT = (
    "Note: local:smollm2 is a 135M-parameter model that runs on your CPU; it shows the loop "
    "working, not good prompts. Point the same command at a real model:\n"
    "  ANTHROPIC_API_KEY: --agent-model anthropic:claude-haiku-4-5\n"
    "                     --proposer-model anthropic:claude-sonnet-4-5\n"
    "  OPENAI_API_KEY:    --agent-model openai:gpt-4.1-mini\n"
    "                     --proposer-model openai:gpt-4.1\n"
    "  a local server:    --agent-model openai:<model>\n"
    "                     --base-url http://localhost:8000/v1  (vLLM, Ollama, llama.cpp)"
)
"""Each line under 80 columns, so no terminal splits a flag from its value."""


def verdict_rows(rows: list[dict[str, Any]], *, every_row: bool = True) -> None:
    """The per-bucket gate table (stored rows of an iteration): candidate vs base, paired,
    with the legend of its columns."""
    say("per bucket, candidate against base:", indent=2)
    show_table(gate_table(rows), every_row=every_row, side="candidate")


def comparison_rows(title: str, comparisons: list[BucketComparison], cand: str = "Cand", *,
                    every_row: bool = True, harm: Mapping[str, str] | None = None) -> None:
    """The per-bucket gate table straight from the gate's comparisons, with its legend
    (`harm`: review's per-bucket harm statements, `report.table.comparison_table`)."""
    say(title, indent=2)
    show_table(comparison_table(comparisons, cand=cand, harm=harm), every_row=every_row,
               side="head" if cand == "Head" else "candidate")


# --- --help -----------------------------------------------------------------------------------

MIN_HELP_WIDTH = 30
"""Below this many columns beside the option names, help text goes under the names."""


def _help_text(row: Row) -> Text:
    text = Text(row.help)
    if row.default:
        text.append(f" [default: {row.default}]", style="dim")
    if row.required:
        text.append(" [required]", style="red")
    return text


def _help_panel(title: str, rows: list[Row], name_width: int, width: int) -> Panel:
    """Names and help side by side; a name longer than the names column (or every name, on a
    terminal too narrow for two columns) gets its own line, its help indented below it."""
    stacked = width - name_width - 6 < MIN_HELP_WIDTH
    lines: list[RenderableType] = []
    for row in rows:
        label, text = Text(row.name, style="bold cyan"), _help_text(row)
        if stacked or len(row.name) > name_width:
            indent = 4 if stacked else name_width + 2
            lines += [label, Padding(text, (0, 0, 0, indent))]
            continue
        grid = Table.grid(padding=(0, 2))
        grid.add_column(width=name_width, no_wrap=True)
        grid.add_column()
        grid.add_row(label, text)
        lines.append(grid)
    return Panel(Group(*lines), title=title, title_align="left", border_style="dim",
                 box=box.ROUNDED)


def names_width(names: list[str], width: int) -> int:
    """Width of the names column: the longest name up to a third of the terminal (longer
    names go on a line of their own)."""
    cap = max(18, min(28, width // 3))
    fitting = [len(n) for n in names if len(n) <= cap]
    return max(fitting, default=cap)


def show_help(page: Page, console: Console | None = None) -> None:
    """Print a help page (cli/help.py): usage, description, option panels, the commands of a
    group, environment variables, examples."""
    c = console or _Console(emoji=False)
    parts: list[RenderableType] = [Text(page.usage, style="bold"), Text("")]
    for i, paragraph in enumerate(page.paragraphs):
        parts += [Text(paragraph, style="" if i == 0 else "dim"), Text("")]
    panels = dict(page.panels)
    if page.commands:
        panels["Commands"] = page.commands
    every = [r.name for rows in panels.values() for r in rows]
    name_width = names_width(every, c.width)
    for title, rows in panels.items():
        parts.append(_help_panel(title, rows, name_width, c.width))
    if page.env:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True, style="yellow")
        grid.add_column(no_wrap=True, style="cyan")
        for env, option in page.env:
            grid.add_row(env, option)
        parts += [Text(""), Text("Environment variables (a flag beats its variable, which "
                                 "beats promptloop.toml):"), grid]
    if page.examples:
        parts += [Text(""), Text("Examples:")]
        parts += [Text(f"  {line}", style="green", overflow="fold") for line in page.examples]
    c.print(Padding(Group(*parts), (1, 1, 0, 1)))


def help_text(page: Page, width: int = 80) -> str:
    """A help page as plain text (`promptloop help --json`)."""
    import io

    console = Console(file=io.StringIO(), width=width, color_system=None, record=True,
                      emoji=False)
    show_help(page, console)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()).strip("\n")
