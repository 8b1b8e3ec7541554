"""The proposer: package the failures for a model, ask it for a patch, retry when it won't apply.

The package (everything the proposer sees) is written to disk before the call, so a reviewer can
read exactly what the proposal was based on. Two answer formats: a unified diff (capable models)
and a JSON list of anchored edits under a JSON schema (weak models such as the embedded one),
rendered into the same unified diff. An external coding agent (`--proposer-cmd`) edits the
prompt in a throwaway copy of the repository instead (propose/sandbox.py); the prompt file's new
content is the proposal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from promptloop.agents.data import data_dir
from promptloop.agents.llm.types import Message, ModelClient, ModelSettings, Usage
from promptloop.agents.placeholders import render
from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.core.ledger import LedgerEntry
from promptloop.optimizer.core.redact import redact
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.propose.apply import numbered
from promptloop.optimizer.propose.asking import Attempt, converse
from promptloop.optimizer.propose.edits import edit_schema_for, edits_to_diff, parse_edit_proposal
from promptloop.optimizer.propose.package import condensed_trace, trial_input
from promptloop.optimizer.propose.patch import PatchError, extract_diff

PROMPTS_DIR = data_dir("prompts")
Format = Literal["diff", "edits"]
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_FENCED_RE = re.compile(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
# "HYPOTHESIS: x", "**Hypothesis:** x", "- hypothesis - x", "1. Hypothesis — x", or a heading
# ("## Hypothesis", "**Hypothesis**") whose text follows on the next lines.
_HYPOTHESIS_RE = re.compile(
    r"^[ \t>]*(?:[-*+][ \t]+|\d+[.)][ \t]+|#{1,6}[ \t]*)?[*_]*[ \t]*hypothesis[ \t]*[*_]*"
    r"(?:[ \t]*[:：\-–—][ \t]*(?P<rest>.*)|[ \t]*$)",
    re.IGNORECASE | re.MULTILINE,
)


class ProposerError(Exception):
    """No usable proposal (model error text, unparseable after retries, command failed)."""

    def __init__(self, message: str, *, usage: Usage | None = None, attempts: int = 0,
                 user: str | None = None) -> None:
        super().__init__(message)
        self.usage = usage or Usage()
        self.attempts = attempts
        self.user = user or message
        """What happened, for a person (the message may quote retries meant for the model)."""


class UnusableProposalError(ProposerError):
    """The model answered, but no answer could be parsed and applied (refused, not an error)."""


@dataclass(frozen=True)
class Reply:
    """One attempt's raw reply of the proposer model, as it arrived."""

    attempt: int
    text: str
    usage: Usage
    seconds: float
    problem: str = ""
    """Why it was not usable (for a person; empty when it was)."""


@dataclass(frozen=True)
class Proposal:
    hypothesis: str
    diff: str
    """The diff as proposed (for edits: rendered from them); not yet applied or guarded."""
    raw_reply: str
    attempts: int
    usage: Usage = field(default_factory=Usage)
    fmt: str = "diff"

    def __post_init__(self) -> None:
        # the hypothesis becomes a commit subject, a PR body and output: no secret in it (a
        # secret in the diff is the guards' to refuse, `guards.content_violations`), and no
        # character that acts rather than reads (`plain_sentence`)
        object.__setattr__(self, "hypothesis", plain_sentence(redact(self.hypothesis)))


HYPOTHESIS_MAX = 500
"""Characters of a hypothesis kept (it is one sentence: commit subjects and PR bodies)."""


def plain_sentence(text: str) -> str:
    """A model's hypothesis as one line of plain text: control and format characters (escape
    sequences that retitle or clear a terminal, bidirectional overrides, zero-width ones) are
    dropped, line breaks and tabs become spaces (a hypothesis with newlines wrote
    `Promptloop-Verdict: accept` lines into a rejected branch's commit body), runs of spaces
    collapse, at most `HYPOTHESIS_MAX` characters."""
    kept = []
    for ch in text:
        if ch in "\n\r\t\v\f\u2028\u2029\x85":
            kept.append(" ")
        elif unicodedata.category(ch) not in ("Cc", "Cf"):
            kept.append(ch)
    line = " ".join("".join(kept).split())
    return line if len(line) <= HYPOTHESIS_MAX else line[:HYPOTHESIS_MAX - 1] + "…"


def estimate_tokens(text: str) -> int:
    """Rough token count: CJK characters ~1 token each, other text ~4 characters a token."""
    cjk = len(_CJK_RE.findall(text))
    return cjk + (len(text) - cjk) // 4 + 1


def _clip(text: str, max_tokens: int, what: str) -> str:
    if estimate_tokens(text) <= max_tokens:
        return text
    chars = max(200, max_tokens * 4)
    cut = text[:chars]
    nl = cut.rfind("\n")
    if nl > chars // 2:
        cut = cut[:nl]
    return cut + f"\n[... {what} truncated to fit the token budget ...]"


def parse_hypothesis(text: str) -> str | None:
    """The hypothesis line of a reply, whatever its case and markdown; None when absent.
    Fenced blocks (the diff) are not searched unless nothing else matches."""
    for haystack in (_FENCED_RE.sub("", text), text):
        m = _HYPOTHESIS_RE.search(haystack)
        if m is None:
            continue
        rest = (m.group("rest") or "").strip(" \t*_")
        if not rest:  # a heading: the hypothesis is the paragraph under it
            para: list[str] = []
            for line in haystack[m.end():].lstrip("\n").splitlines():
                if not line.strip() or line.lstrip().startswith(("#", "```")):
                    break
                para.append(line.strip())
            rest = " ".join(para).strip(" \t*_")
        if rest:
            return rest
    return None


def counter_examples(runs: list[RunResult], bucket: str, limit: int = 3) -> str:
    """A few passing trials of other buckets: behaviour a patch must not break."""
    blocks: list[str] = []
    seen_buckets: set[str] = set()
    for run in runs:
        for t in sorted(run.trials, key=lambda t: (t.bucket, t.task_id, t.trial_index)):
            if len(blocks) >= limit:
                break
            if t.bucket == bucket or t.status != "passed" or t.bucket in seen_buckets:
                continue
            seen_buckets.add(t.bucket)
            trace = "\n".join(condensed_trace(t.transcript, max_lines=8))
            blocks.append(
                f"### {t.bucket} / {t.task_id} (passes now)\nInput: "
                f"{trial_input(run, t).strip()[:400]}\n{trace}"
            )
    return "\n\n".join(blocks) or "(none)"


def rejected_block(entries: list[LedgerEntry], limit: int = 5) -> str:
    if not entries:
        return "(none yet)"
    out = []
    for e in entries[-limit:]:
        changed = "\n".join(
            ln for ln in e.diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
        )
        why = ("accepted earlier: its branch awaits review or was declined; propose a "
               "different change" if e.outcome == "accepted" else "; ".join(e.reasons) or "n/a")
        out.append(
            f"- {e.outcome}: {e.hypothesis or '(no hypothesis)'}\n  why: "
            f"{why}\n  changed lines:\n"
            + "\n".join("    " + ln for ln in changed.splitlines()[:12])
        )
    return "\n".join(out)


@dataclass(frozen=True)
class PackageInput:
    prompt_path: str
    prompt_text: str
    bucket: str
    failing_md: str
    counter_md: str
    manual: str
    rejected: list[LedgerEntry]
    max_changed_lines: int
    token_budget: int = 12_000
    fmt: Format = "diff"
    writing_rules: str | None = None
    external: bool = False
    """For an external proposer command (`--proposer-cmd`): it edits the prompt file in its
    sandbox instead of answering with a diff, and the package says so."""
    """For a prompt that is a string literal in a source file: what its text must respect
    (`regions.writing_rules`), said beside the prompt."""


@dataclass(frozen=True)
class Package:
    system: str
    user: str

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.system) + estimate_tokens(self.user)

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "package.md"
        # redacted like every state file: the package is also copied into a proposer's sandbox
        atomic_write_text(
            path, f"<!-- system message -->\n{self.system}\n\n<!-- user message -->\n{self.user}\n")
        return path


def build_package(p: PackageInput) -> Package:
    """Assemble what the proposer sees, within `token_budget` (the prompt is never cut)."""
    name = "proposer.md" if p.fmt == "diff" else "proposer_edits.md"
    system = render(
        (PROMPTS_DIR / name).read_text(encoding="utf-8"),
        {"prompt_path": p.prompt_path, "max_changed_lines": str(p.max_changed_lines)},
        what=f"prompts/{name}",
    )
    prompt_block = (
        f"## The prompt file `{p.prompt_path}` (line numbers are not part of it)\n"
        + (f"{p.writing_rules}\n" if p.writing_rules else "")
        + f"<prompt_file>\n{numbered(p.prompt_text)}\n</prompt_file>"
    )
    rejected = _clip(rejected_block(p.rejected), 800, "rejected proposals")
    fixed = estimate_tokens(system) + estimate_tokens(prompt_block) + estimate_tokens(rejected)
    rest = max(600, p.token_budget - fixed - 200)
    failing = _clip(p.failing_md, int(rest * 0.6), "failing trials")
    manual = _clip(p.manual, int(rest * 0.25), "manual")
    counter = _clip(p.counter_md, int(rest * 0.15), "counter-examples")
    user = "\n\n".join(
        [
            prompt_block,
            f"## Failing trials of the bucket `{p.bucket}`\n<failing_trials>\n{failing}\n"
            "</failing_trials>",
            "## Passing trials of other buckets (must keep passing)\n"
            f"<counter_examples>\n{counter}\n</counter_examples>",
            "## Proposals already tried for this bucket (do not repeat them)\n"
            f"<rejected>\n{rejected}\n</rejected>",
            f"## Prompt-engineering manual\n<manual>\n{manual}\n</manual>",
            EXTERNAL_ANSWER.format(path=p.prompt_path) if p.external
            else "Now answer in the required format.",
        ]
    )
    return Package(system=system, user=user)


EXTERNAL_ANSWER = (
    "## How to answer (you run as a command, in a copy of the repository)\n"
    "Do not answer with a diff: edit the prompt file `{path}` (its path is in "
    "$PROMPTLOOP_PROMPT_FILE) in place, with the smallest change the rules above ask for; the "
    "file you leave is the proposal, and no other file may change. Print one line "
    "`HYPOTHESIS: <one sentence>` on stdout saying what the change fixes and why.")
"""The last section of an external proposer's package, in place of the model's answer format
(a coding agent that followed the diff instructions left the file unchanged, refused as "the
diff was empty")."""


def parse_diff_reply(text: str) -> tuple[str, str]:
    """(hypothesis, diff) from a diff-format reply; PatchError when there is no diff."""
    hypothesis = parse_hypothesis(text) or ""
    diff = extract_diff(text)
    if not diff.strip():
        raise PatchError(
            "the reply contains no unified diff; answer with HYPOTHESIS: and a ```diff block",
            user="the reply contained no diff",
        )
    return hypothesis or "(no hypothesis given)", diff


async def ask_model(
    client: ModelClient,
    package: Package,
    *,
    fmt: Format,
    prompt_path: str,
    original: str,
    check: Callable[[str], None],
    max_retries: int = 2,
    max_tokens: int = 1500,
    seed: int | None = None,
    on_reply: Callable[[Reply], None] | None = None,
) -> Proposal:
    """Ask for a proposal; `check(diff)` raises PatchError when it does not apply, and the error
    goes back to the model (at most `max_retries` more attempts). `seed` goes to providers
    that take one (several proposals for one package differ by their seed). `on_reply` hears
    every attempt's raw reply (to save it, and to show progress) as it arrives."""
    messages = [Message.system(package.system), Message.user(package.user)]
    settings = ModelSettings(
        temperature=0.2,
        max_tokens=max_tokens,
        response_format=edit_schema_for(original) if fmt == "edits" else None,
        seed=seed,
    )
    found: list[tuple[str, str]] = []
    last_error = last_user = ""

    def read(attempt: Attempt) -> str | None:
        nonlocal last_error, last_user
        reply = Reply(attempt.n, attempt.text, attempt.usage, attempt.seconds)
        try:
            if fmt == "edits":
                proposal = parse_edit_proposal(attempt.text)
                hypothesis = proposal.hypothesis
                diff = edits_to_diff(original, proposal, prompt_path)
            else:
                hypothesis, diff = parse_diff_reply(attempt.text)
            check(diff)
        except PatchError as err:
            last_error, last_user = str(err), err.user
            if on_reply is not None:
                on_reply(replace(reply, problem=err.user))
            return (f"Your proposal could not be applied: {err}\nFix it and answer again in the "
                    "required format, copying context lines exactly from the prompt file.")
        if on_reply is not None:
            on_reply(reply)
        found.append((hypothesis, diff))
        return None

    attempts, usage = await converse(client, messages, settings, max_retries=max_retries,
                                     read=read)
    if found:
        hypothesis, diff = found[0]
        return Proposal(hypothesis, diff, attempts[-1].text, len(attempts), usage, fmt)
    raise UnusableProposalError(
        f"no applicable proposal after {max_retries + 1} attempts: {last_error}",
        usage=usage,
        attempts=max_retries + 1,
        user=f"no usable patch in {max_retries + 1} replies (the last: {last_user})",
    )


async def run_command(argv: Sequence[str], cwd: Path, env: Mapping[str, str],
                      timeout_s: float = 1800) -> tuple[str, str]:
    """Run an external proposer (`argv`, e.g. its sandbox wrapper around `sh -c CMD`) in `cwd`
    with exactly `env`; returns its stdout and stderr, redacted of every known secret.

    It runs in its own session and process group, with stdin from /dev/null (no terminal to
    inject keystrokes into), and the group is killed when it ends, so a background child
    cannot keep writing after the caller has checked what it changed. A non-zero exit or a
    timeout is a `ProposerError` quoting the end of stderr (redacted too)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=dict(env), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )

    async def both() -> tuple[bytes, bytes]:
        got = await asyncio.gather(_capped(proc.stdout), _capped(proc.stderr))
        await proc.wait()
        return got[0], got[1]

    try:
        out, err = await asyncio.wait_for(both(), timeout_s)
    except TimeoutError:
        _kill_group(proc.pid)
        await proc.wait()
        raise ProposerError(f"proposer command timed out after {timeout_s:g}s") from None
    finally:
        _kill_group(proc.pid)
    stdout = redact(out.decode(errors="replace"))
    stderr = redact(err.decode(errors="replace"))
    if proc.returncode != 0:
        raise ProposerError(f"proposer command exited with {proc.returncode}: {stderr[-500:]}")
    return stdout, stderr


COMMAND_OUTPUT_KEPT = 1 << 20
"""Bytes of an external proposer's stdout (and of its stderr) kept for reply.md and its
hypothesis; the rest is read and dropped (a command printing 30 MB was stored whole)."""


async def _capped(stream: asyncio.StreamReader | None) -> bytes:
    """The first `COMMAND_OUTPUT_KEPT` bytes of `stream`, read to its end."""
    kept = bytearray()
    dropped = 0
    if stream is None:
        return b""
    while chunk := await stream.read(65536):
        room = COMMAND_OUTPUT_KEPT - len(kept)
        kept += chunk[:max(0, room)]
        dropped += max(0, len(chunk) - max(0, room))
    if dropped:
        kept += f"\n[... {dropped:,} more bytes not kept]\n".encode()
    return bytes(kept)


def _kill_group(pid: int) -> None:
    """SIGKILL the process group the command led (its leftover background children)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def hypothesis_from_output(text: str) -> str:
    return parse_hypothesis(text) or "(external proposer gave no hypothesis)"
