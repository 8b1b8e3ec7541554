"""The compare page of two runs of one suite, and the side-by-side view of one trial.

The per-bucket table is the gate's own: `compare_suite_runs` pairs trials by task and trial
index and gives each bucket its mean paired difference, the display-only bootstrap interval,
the fixed/broken counts, the exact McNemar p-value and the one-sided sign-flip p-values
(nothing is recomputed here). Trials are listed flipped first: pass -> fail, then fail ->
pass, then score changes, then the rest, each linking to the two transcripts side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from promptloop.optimizer.core.project import active_project
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.gate.compare import BucketComparison, GatePolicy
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.html.kit import Chart
from promptloop.optimizer.report.html.page import bucket_chart_rows
from promptloop.optimizer.report.html.trials import DiffFile, modified_file
from promptloop.optimizer.report.summary import RunSummary, task_order
from promptloop.optimizer.report.table import Cell, Column, Table, gate_rows, gate_table
from promptloop.optimizer.run.cache import text_hash
from promptloop.optimizer.view.state import BadRequestError, NotFoundError
from promptloop.optimizer.workflows.paired import compare_suite_runs

Change = Literal["broken", "fixed", "score", "same", "only base", "only candidate"]
ORDER: dict[Change, int] = {"broken": 0, "fixed": 1, "score": 2, "same": 3, "only base": 4,
                            "only candidate": 5}
LABEL: dict[Change, str] = {"broken": "pass → fail", "fixed": "fail → pass",
                            "score": "changed", "same": "unchanged",
                            "only base": "only in base", "only candidate": "only in candidate"}


@dataclass(frozen=True)
class TrialPair:
    task_id: str
    trial_index: int
    bucket: str
    base: TrialResult | None
    cand: TrialResult | None
    change: Change

    @property
    def flipped(self) -> bool:
        return self.change in ("broken", "fixed")

    @property
    def label(self) -> str:
        return LABEL[self.change]

    @property
    def delta(self) -> float | None:
        if self.base is None or self.cand is None:
            return None
        return self.cand.score - self.base.score


def _change(b: TrialResult | None, c: TrialResult | None) -> Change:
    if b is None:
        return "only candidate"
    if c is None:
        return "only base"
    if b.passed and not c.passed and c.counts:
        return "broken"
    if c.passed and not b.passed and b.counts:
        return "fixed"
    if b.status != c.status or abs(c.score - b.score) > 1e-9:
        return "score"
    return "same"


def trial_pairs(base: RunResult, cand: RunResult) -> list[TrialPair]:
    """Every (task, trial index) of either run, flipped first, then in the suite's order."""
    b_ix = {(t.task_id, t.trial_index): t for t in base.trials}
    c_ix = {(t.task_id, t.trial_index): t for t in cand.trials}
    order = {tid: n for n, tid in enumerate(dict.fromkeys([*task_order(base),
                                                           *task_order(cand)]))}
    out = []
    for key in b_ix.keys() | c_ix.keys():
        b, c = b_ix.get(key), c_ix.get(key)
        some = b or c
        assert some is not None
        out.append(TrialPair(key[0], key[1], some.bucket, b, c, _change(b, c)))
    out.sort(key=lambda p: (ORDER[p.change], order.get(p.task_id, len(order)), p.task_id,
                            p.trial_index))
    return out


def check_pairable(base: RunResult, cand: RunResult) -> None:
    if (base.suite_name, base.suite_kind) != (cand.suite_name, cand.suite_kind):
        raise BadRequestError(
            f"{base.run_name} is a run of {base.suite_name} ({base.suite_kind}) and "
            f"{cand.run_name} of {cand.suite_name} ({cand.suite_kind}): only runs of the same "
            "suite can be paired")
    if base.run_name == cand.run_name:
        raise BadRequestError("pick two different runs to compare")


def _with_sign_flip(table: Table, comps: list[BucketComparison]) -> Table:
    """The gate's table plus the one-sided sign-flip p-values the gate decides with."""
    cols = (*table.columns, Column("p_improve", "p improve", True),
            Column("p_regress", "p regress", True))
    by_bucket = {c.bucket: c for c in comps}
    rows = []
    for row in table.rows:
        c = by_bucket.get(str(row[0].value))
        extra = ((Cell(fmt.p_value(c.p_improve), c.p_improve),
                  Cell(fmt.p_value(c.p_regress), c.p_regress)) if c else (Cell(""), Cell("")))
        rows.append((*row, *extra))
    return Table(cols, tuple(rows))


# --- the prompt diff ---------------------------------------------------------------------


@dataclass(frozen=True)
class PromptSide:
    agent: str
    hash: str | None
    text: str | None


@dataclass(frozen=True)
class PromptDiff:
    base: PromptSide
    cand: PromptSide
    files: list[DiffFile]

    @property
    def same(self) -> bool:
        return self.base.hash is not None and self.base.hash == self.cand.hash

    @property
    def recovered(self) -> bool:
        return self.base.text is not None and self.cand.text is not None


def recover_prompt(run: RunResult) -> PromptSide:
    """The agent's prompt text, when some trial's system message hashes to the recorded hash.

    Runs record only the prompt's hash; the agent sends the prompt file as its system
    message, so a transcript usually holds the exact text (verified against the hash)."""
    hashes = run.provenance.prompt_hashes
    digest = hashes.get(run.agent_name) or next(iter(hashes.values()), None)
    if digest is None:
        return PromptSide(run.agent_name, None, None)
    seen: set[str] = set()
    for t in run.trials:
        for m in t.transcript.messages:
            if m.role == "system" and m.content not in seen:
                seen.add(m.content)
                if text_hash(m.content) == digest:
                    return PromptSide(run.agent_name, digest, m.content)
    return PromptSide(run.agent_name, digest, None)


def prompt_path_of(agent_name: str) -> str:
    """The file of the agent's first prompt target, as the active promptloop.toml declares it
    ("prompt" for an agent it does not declare, e.g. a run from another project)."""
    project = active_project()
    if agent_name not in project.agents:
        return "prompt"
    return project.agent(agent_name).target().path


def prompt_diff(base: RunResult, cand: RunResult) -> PromptDiff:
    b, c = recover_prompt(base), recover_prompt(cand)
    files = []
    if b.text is not None and c.text is not None and b.hash != c.hash:
        name = prompt_path_of(cand.agent_name)
        files.append(modified_file(name, b.text, c.text, (f"a/{name} ({base.run_name})",
                                                          f"b/{name} ({cand.run_name})")))
    return PromptDiff(b, c, files)


# --- the page ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ComparePage:
    base: RunResult
    cand: RunResult
    gate: Table
    comparisons: list[BucketComparison]
    chart: Chart
    prompt: PromptDiff
    pairs: list[TrialPair]

    @property
    def flipped(self) -> list[TrialPair]:
        return [p for p in self.pairs if p.flipped]

    @property
    def others(self) -> list[TrialPair]:
        return [p for p in self.pairs if not p.flipped]

    @property
    def status_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.comparisons:
            out[c.status] = out.get(c.status, 0) + 1
        return out


def compare_page(base: RunResult, cand: RunResult, base_summary: RunSummary,
                 cand_summary: RunSummary, policy: GatePolicy | None = None) -> ComparePage:
    check_pairable(base, cand)
    try:
        comps = compare_suite_runs([base], [cand], policy or GatePolicy())
    except ValueError as err:
        raise BadRequestError(str(err)) from None
    chart = Chart(tuple(bucket_chart_rows(cand_summary, base_summary)), base_label="base",
                  cand_label="candidate")
    return ComparePage(
        base=base, cand=cand, gate=_with_sign_flip(gate_table(gate_rows(comps)), comps),
        comparisons=comps, chart=chart, prompt=prompt_diff(base, cand),
        pairs=trial_pairs(base, cand))


@dataclass(frozen=True)
class SideBySide:
    base: RunResult
    cand: RunResult
    pair: TrialPair
    previous: TrialPair | None
    next: TrialPair | None


def side_by_side(base: RunResult, cand: RunResult, task_id: str, index: int) -> SideBySide:
    """One trial in both runs, with the neighbouring trials of the compare page's order."""
    check_pairable(base, cand)
    pairs = trial_pairs(base, cand)
    for n, p in enumerate(pairs):
        if (p.task_id, p.trial_index) == (task_id, index):
            return SideBySide(base, cand, p, pairs[n - 1] if n else None,
                              pairs[n + 1] if n + 1 < len(pairs) else None)
    raise NotFoundError(f"neither run has trial {index} of task {task_id!r}")
