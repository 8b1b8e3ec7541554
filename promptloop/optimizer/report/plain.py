"""Verdicts in plain words: the one sentence a user reads first (what was tried, what moved,
what was ruled out, what to do next), the legend of the per-bucket table, and the words for
what went wrong (never a Python class name, never an instruction meant for the proposer).

Pure: strings from the gate's verdicts (`optimizer.gate.verdict`) and comparisons. The method
texts (`gate/policy.py`) are left to `--verbose`, the report and the JSON; no sentence here
names a statistical test.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from promptloop.optimizer.core.results import TrialResult
from promptloop.optimizer.gate.compare import BucketComparison
from promptloop.optimizer.gate.verdict import POOLED, Verdict

HEADLINE_MAX = 130
"""A verdict's first line stays under 160 characters with its `iteration N: outcome: ` prefix."""

SESSION_MAX = 160
"""A session's verdict sentence stays under this many characters where its parts allow."""

METHOD_PREFIXES = ("tests: ", "harm per task", "paired (seeded)", "paired (unseeded)")
"""Reasons that describe how the gate decided (the method), not what it found."""


def names(buckets: Sequence[str], limit: int = 2) -> str:
    """`a`, `a and b`, `a, b and 3 more`: bucket names for a sentence."""
    shown = ["the other buckets together" if b == POOLED else b for b in buckets]
    if len(shown) <= limit:
        return " and ".join(shown)
    return f"{', '.join(shown[:limit])} and {len(shown) - limit} more"


def _fixed(c: BucketComparison | None) -> str:
    if c is None or not c.n_pairs:
        return "ran no paired target trial"
    broke = f" and broke {c.broken}" if c.broken else ""
    failing = round(c.n_pairs * (1.0 - c.base_pass_rate)) if c.base_pass_rate is not None \
        else c.n_pairs
    if 0 < failing < c.n_pairs:  # trials that passed on the base had nothing to fix
        return (f"fixed {c.fixed} of the {failing} target trials that failed on the base"
                f"{broke.replace(' and broke', '; broke')}")
    return f"fixed {c.fixed}{broke} of {c.n_pairs} target trials"


HELD_OUT = " (held-out)"
"""The suffix of the target's held-out tasks in a verdict's bucket statements: part of the
target bucket, never "another bucket"."""


def broken_tasks(verdict: Verdict) -> list[str]:
    """The tasks a rejection for harm found broken, `task (bucket)`, from the regressed
    buckets' statements (held-out tasks stay unnamed: their names never reach the proposer)."""
    out: list[str] = []
    for b in verdict.buckets:
        if b.state != "regressed":
            continue
        tasks = re.findall(r"task '([^']+)'", b.statement)
        if b.bucket.endswith(HELD_OUT) or not tasks:
            out.append(b.bucket)
        else:
            out += [f"{t} ({b.bucket})" for t in tasks]
    return list(dict.fromkeys(out))


def agree_with_harm(rows: list[dict[str, object]], verdict: Verdict) -> list[dict[str, object]]:
    """The per-bucket table's rows with the status the verdict gave each bucket where harm
    detection decided it, so the table never calls "inconclusive" a bucket the verdict
    rejected the patch for ("regressed") or cleared ("no harm"); "unchanged" (nothing
    moved) and the target's label stay."""
    states = {b.bucket: b.state for b in verdict.buckets}
    for row in rows:
        state = states.get(str(row.get("bucket")))
        if state == "regressed" or (state in ("no harm", "harm not ruled out")
                                     and row.get("status") == "inconclusive"):
            row["status"] = state
    return rows


def optimize_headline(verdict: Verdict) -> str:
    """One sentence on an evaluated candidate, its outcome left to the prefix that states it
    (`rejected: ...`): what the patch did, what the gate found, what to do next (never "the
    next iteration": the session says what follows, `session_headline`)."""
    moved = _fixed(verdict.visible or verdict.target)
    bad = broken_tasks(verdict)
    bad += [b for b in verdict.suspected_regressions if b == POOLED and b not in bad]
    open_ = [b.bucket for b in verdict.buckets if b.state == "harm not ruled out"]
    others = [b for b in verdict.buckets if not b.bucket.endswith(HELD_OUT)
              and b.bucket != verdict.target_bucket]
    held = any(b.bucket.endswith(HELD_OUT) for b in verdict.buckets)
    stop, decision = verdict.stopped, verdict.decision
    if decision == "accept":
        n = len(others)
        found = (f"the gate found no harm in the {n} other bucket{'s' if n != 1 else ''}"
                 if n else "there was no other bucket to harm")
        if held:
            found += " nor in the held-out target tasks"
        text = f"the patch {moved} and {found}; review its branch and merge it"
    elif "outside its workspace" in stop:  # gating.refuse_outside_writes: the reason first
        text = (f"the patch made the agent write outside its workspace ({stop}): whatever the "
                "scores, its prompt drove the agent there; try another idea")
    elif stop == "screen":
        text = f"the patch {moved}, so the other buckets were not run"
    elif stop == "futility":
        text = f"the patch {moved}, no better than the base prompt"
    elif stop == "held-out" and decision == "reject":
        text = (f"the patch {moved} the proposer saw, but the held-out target tasks did not "
                "improve (it overfits)")
    elif stop == "held-out":
        text = (f"the patch {moved}, but the held-out target tasks did not clearly improve; "
                "raise --max-trials to decide")
    elif bad:
        text = f"the patch {moved} but broke {names(bad)}; try an idea that leaves it alone"
    elif open_:
        text = (f"the patch {moved}, but harm to {names(open_)} was not ruled out after "
                f"{verdict.trials_per_task} trials per task; raise --max-trials")
    else:
        text = (f"after {verdict.trials_per_task} trials per task the patch {moved}, too few "
                "to show an improvement; raise --max-trials or try another idea")
    return _short(text)


OUTCOME_WORDS = {"error": "ended in error"}
"""An iteration's outcome after a count (`2 ended in error`, `1 rejected`)."""


def session_headline(outcomes: Sequence[tuple[int, str, str]], accepted: Sequence[str],
                     iterations: int) -> str:
    """The one sentence an optimize session ends with, printed first and once: its outcome
    and why, from each iteration's (number, outcome, sentence) and the accepted branches.
    One iteration: `rejected: <its sentence>; the base prompt stays`; several: which one was
    accepted, or how each ended."""
    if accepted:
        [(n, _, said)] = [o for o in outcomes if o[1] == "accepted"][:1]
        lead = "accepted" if len(outcomes) == 1 else f"iteration {n} accepted"
        more = (f" ({len(accepted)} branches accepted: {', '.join(accepted)})"
                if len(accepted) > 1 else "")
        return f"{lead}: {said}{more}"
    if not outcomes:
        return "nothing was tried; the base prompt stays"
    stays = "the base prompt stays"
    if len(outcomes) == 1:
        _, outcome, said = outcomes[0]
        whole = f"{outcome}: {said}; {stays}"
        return whole if len(whole) < SESSION_MAX else f"{outcome}: {said}"
    counts: dict[str, int] = {}
    for _, outcome, _ in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    how = ", ".join(f"{n} {OUTCOME_WORDS.get(outcome, outcome)}" for outcome, n in counts.items())
    left = (f" (stopped before iteration {len(outcomes) + 1} of {iterations})"
            if len(outcomes) < iterations else "")
    return (f"no proposal was accepted in {len(outcomes)} iterations ({how}){left}; {stays}")


def refusal_headline(reasons: Sequence[str]) -> str:
    """A proposal refused before any trial (a guard, or no usable reply): its reason inline
    when there is one (cut with `...` when long: every reason is listed below it then)."""
    if len(reasons) == 1:
        return _short(f"nothing was evaluated: {reasons[0]}")
    return f"nothing was evaluated ({len(reasons)} reasons below)"


def error_headline(what: str) -> str:
    """The proposer (or its model) failed: nothing was evaluated."""
    return _short(f"the proposer failed, so nothing was evaluated: {what}; check the model "
                  "with `promptloop doctor`")


def trials_error_headline(what: str) -> str:
    """The candidate's trials all errored (a provider down mid-gate): no verdict."""
    return _short(f"the candidate's trials failed, so no verdict was reached: {what}; check the "
                  "model with `promptloop doctor`, then rerun (the idea is not counted as tried)")


OUTSIDE_REASON = "wrote outside their workspace"
"""How review's reason names head trials that wrote outside (`review.regress_on_outside_writes`)."""


def review_headline(decision: str, comparisons: Sequence[BucketComparison],
                    regressed: Sequence[str], improved: Sequence[str],
                    open_: Sequence[str], where: Sequence[str] = (),
                    reasons: Sequence[str] = (),
                    moved: tuple[int, int, int] | None = None) -> str:
    """One sentence on a reviewed prompt change: what moved, what was ruled out, what to do.
    A "broken" head names where (`where`: 'lib/p.dart line 14' per failing target); a head
    that regressed because its trials wrote outside their workspace says that first (the
    reason review puts first, `reasons`), not a move of the scores. `moved` (fixed, broken,
    paired) counts the final runs, harm detection's trials included, as the comment's lists of
    fixed and newly failing trials do; without it (or with 0 paired) the first round's
    `comparisons` are counted."""
    if decision == "broken":
        files = names(where) if where else "a prompt's source file"
        return _short(f"the head breaks {files}, so no trial was run: fix the prompt's "
                      "source before merging")
    wrote = next((r for r in reasons if r.startswith("regresses: ")
                  and "outside their workspace" in r), None)
    if decision == "regresses" and wrote is not None:
        # "N head trial(s) wrote outside their workspace" (or "tried to write ...": refused)
        what = wrote.removeprefix("regresses: ").split(" (", 1)[0]
        return _short(f"{what}, whatever the scores; do not merge it as is")
    fixed = sum(c.fixed for c in comparisons)
    broken = sum(c.broken for c in comparisons)
    n = sum(c.n_pairs for c in comparisons)
    said = f"fixed {fixed} and broke {broken} of {n} paired trials"
    if moved is not None and moved[2]:
        # the comment's lists: paired trials, and harm detection's later head trials against
        # their task's base trials, so the counts are not "of N paired" alone
        fixed, broken, n = moved
        said = f"fixed {fixed} and broke {broken} trials ({n} paired)"
    if n == 0:
        return _short("nothing was compared: no paired trials ran; check the suites and rerun")
    if decision == "regresses":
        text = (f"the change made {names(regressed)} worse ({said}); do not merge it as is: "
                "see the newly failing trials")
    elif decision == "inconclusive":
        text = (f"no bucket got worse for sure, but harm to {names(open_)} was not ruled out "
                f"({said}); rerun with more --trials before merging")
    elif decision == "improves":
        text = (f"the change improved {names(improved)} and the gate found no harm in any bucket "
                f"({said}); merge it")
    else:
        text = (f"no bucket changed beyond the thresholds and the gate found no harm ({said}); "
                "it can be merged")
    return _short(text)


def _short(text: str) -> str:
    """At most HEADLINE_MAX characters: without the advice after the last `;` when that is
    enough, else cut at a word with `...`."""
    if len(text) <= HEADLINE_MAX:
        return text
    head = text.rsplit("; ", 1)[0]
    if len(head) <= HEADLINE_MAX:
        return head
    return text[: HEADLINE_MAX - 3].rsplit(" ", 1)[0] + "..."


def split_method(reasons: Sequence[str]) -> tuple[list[str], list[str]]:
    """(findings, method): the reasons that say what the gate found, and those that say how
    it decided (the method text of `gate/policy.py`, the pairing note)."""
    found: list[str] = []
    method: list[str] = []
    for r in reasons:
        (method if r.startswith(METHOD_PREFIXES) else found).append(r)
    return found, method


LEGEND = {
    "target": "target bucket",
    "n": "paired trials",
    "dropped": "pairs dropped as errored",
    "base_pass": "base pass rate",
    "cand_pass": "{side} pass rate",
    "base_mean": "base mean score",
    "cand_mean": "{side} mean score",
    "delta": "change in mean score",
    "ci": "its 95% interval",
    "fixed_broken": "trials fixed/broken",
    "p": "chance of a change this large by luck",
    "status": "the bucket's call (harm detection's where it judged the bucket, else this "
              "table's own test, uncorrected)",
}
"""What each column of the per-bucket gate table (`report/table.gate_table`) means."""


def legend(columns: Sequence[tuple[str, str]], side: str = "candidate") -> str:
    """The legend of a gate table's shown columns, given as (title shown, column key)."""
    return ", ".join(f"{title} = {LEGEND[key].format(side=side)}" for title, key in columns
                     if key in LEGEND)


_PARENS = re.compile(r" \((?:[^()]|\([^()]*\))*(?:p=|->|alpha|Fisher|look)(?:[^()]|\([^()]*\))*\)")


def plain_stage(reason: str) -> str:
    """A gate stage's reason without its statistics in parentheses (they stay in the events
    log): `target improved at look 2; harm detection on 6 other task(s), ...`; never an
    empty clause (`: ; held-out tasks improved too`) where a whole clause was statistics."""
    text = _PARENS.sub("", reason)
    parts = [p.strip() for p in text.split(";")]
    return "; ".join(p for p in parts if p)


_CLASS = re.compile(r"\b(?:[A-Z][a-z0-9]+)+(?:Error|Exception)\b")
_KNOWN = {
    "CancelledError": "cancelled",
    "KeyboardInterrupt": "Ctrl-C",
    "ReplayMissError": "no recorded reply (replay mode)",
    "TimeoutError": "timed out",
    "ProposerError": "the proposer failed",
    "UnusableProposalError": "no usable proposal",
    "PatchError": "the patch does not apply",
    "ModelError": "the model failed",
}


def error_words(name: str, message: str = "") -> str:
    """An exception as a user reads it: its message, or words for its class (never the class
    name itself)."""
    what = _KNOWN.get(name) or _words(name)
    return message if message and name not in ("CancelledError", "KeyboardInterrupt") \
        else what


def proposer_failure(err: BaseException) -> str:
    """Why no proposal came, in words: a refusal's or a failed command's own wording for a
    person (`PatchError.user`, `ProposerError.user`), else the model's error message."""
    user = getattr(err, "user", None)
    if isinstance(user, str) and user:
        return user
    return f"the proposer model failed: {error_words(type(err).__name__, str(err))}"


def interrupted(err: BaseException) -> str:
    """Why an iteration was cut short, in words."""
    name = type(err).__name__
    if name in ("KeyboardInterrupt", "CancelledError"):
        return "interrupted (Ctrl-C or a stop signal)"
    return f"interrupted: {error_words(name, str(err))}"


def errored_trials(trials: Sequence[TrialResult], most: int = 8) -> list[str]:
    """One line per distinct reason trials errored (the infrastructure's, not the agent's:
    failed in the first rates, left out of the errored-excluded ones) or timed out (the
    agent's: a failed trial that says which), naming them as
    `task#trial` (at most `most` each): `1 trial errored: trip#0: no recording
    for this request ...`. A replay that misses one recording must say which."""
    by: dict[tuple[str, str], list[str]] = {}
    for t in trials:
        if t.status in ("errored", "timedOut"):
            name = f"{t.task_id}#{t.trial_index}"
            why = without_class_names(t.infra_error or t.failure_reason or "unknown error")
            verb = "timed out" if t.status == "timedOut" else "errored"
            by.setdefault((verb, why), []).append(name)
    lines = []
    for (verb, why), ids in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most
                                         else "")
        lines.append(f"{len(ids)} trial{'s' if len(ids) != 1 else ''} {verb}: "
                     f"{shown}: {why}")
    return lines


def _words(name: str) -> str:
    core = re.sub(r"(Error|Exception)$", "", name)
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", core).lower().strip()
    return f"{spaced} error" if spaced else "an error"


def without_class_names(text: str) -> str:
    """`ReplayMissError: no reply` -> `no recorded reply (replay mode): no reply`, and
    `timedOut` -> `timed out`: for the few texts stored with a class name in them."""
    text = text.replace("timedOut", "timed out")
    return _CLASS.sub(lambda m: _KNOWN.get(m.group(0)) or _words(m.group(0)), text)


__all__ = [
    "HELD_OUT",
    "LEGEND",
    "agree_with_harm",
    "broken_tasks",
    "error_headline",
    "error_words",
    "errored_trials",
    "interrupted",
    "legend",
    "optimize_headline",
    "plain_stage",
    "proposer_failure",
    "refusal_headline",
    "review_headline",
    "session_headline",
    "split_method",
    "trials_error_headline",
    "without_class_names",
]
