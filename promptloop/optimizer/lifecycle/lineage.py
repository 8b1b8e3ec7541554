"""Which saved runs make up the history of one suite's prompt: the lineage.

The lineage of suite S at git ref R with agent model M is the saved runs of S that
- were run with the agent model M (default: the model of the newest saved run of S), because
  another model is another population of trials;
- were not replays (`--mode replay` repeats recorded model replies, not new evidence);
- evaluated a prompt the ref has carried: the sha256 of the prompt text equals that of
  `prompts/<agent>.md` after one of the commits in R's history that changed it (plus, when R is
  HEAD, the file in the checkout, which is what `eval` runs). Runs of rejected candidates and of
  other branches are left out; runs of every earlier prompt of the branch stay in, so a trend
  shows how the branch's prompt changes moved the rates;
- made at least one trial of their own: a run served wholly from the trial cache (a nightly
  baseline of an unchanged prompt) repeats earlier runs' trials and takes no room in the window.
Without a git repository, or with `any_prompt`, the prompt condition is dropped. The window is
the runs of the newest `window` commands of the lineage (the runs one command made count once:
`session_groups`), oldest first.

A trial is counted once: a cached trial is a copy of the trial some earlier run made (same
task, trial index and start time), so it belongs to the earliest run of the window holding it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.project import active_project
from promptloop.optimizer.core.prompt_target import open_target
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.git import GitOps, GitOpsError
from promptloop.optimizer.lifecycle.errors import LifecycleError, UnknownNameError
from promptloop.optimizer.report.store import list_runs, load_run

DEFAULT_WINDOW = 10


@dataclass(frozen=True)
class LineageSpec:
    suite_name: str
    agent_model: str | None = None
    """None: the model of the newest run of the suite."""
    prompt_hashes: frozenset[str] | None = None
    """sha256 of every prompt version the ref carried; None: any prompt."""
    ref: str | None = None
    ref_commit: str | None = None
    window: int = DEFAULT_WINDOW


@dataclass(frozen=True)
class Lineage:
    spec: LineageSpec
    agent_model: str
    runs: tuple[RunResult, ...]
    """Oldest first, at most `spec.window`."""
    excluded: dict[str, int] = field(default_factory=dict)
    """Why other runs of the suite were left out -> how many."""

    @property
    def definition(self) -> str:
        prompts = ("any prompt" if self.spec.prompt_hashes is None else
                   f"the {len(self.spec.prompt_hashes)} prompt version(s) in the history of "
                   f"{self.spec.ref or 'the ref'}"
                   + (f" ({self.spec.ref_commit[:12]})" if self.spec.ref_commit else ""))
        return (f"up to the newest {self.spec.window} non-replay runs of suite "
                f"{self.spec.suite_name} with agent model {self.agent_model or '(unknown)'} on "
                f"{prompts}")


def prompt_hash(run: RunResult) -> str | None:
    hashes = run.provenance.prompt_hashes
    return hashes.get(run.agent_name) or next(iter(hashes.values()), None)


def _exclusion(run: RunResult, spec: LineageSpec, model: str) -> str | None:
    if run.suite_name != spec.suite_name:
        return "other suite"
    if run.provenance.mode == "replay":
        return "replay"
    if run.provenance.agent_model != model:
        return "other agent model"
    if spec.prompt_hashes is not None and prompt_hash(run) not in spec.prompt_hashes:
        return "prompt not in the ref's history"
    return None


def select_lineage(runs: Sequence[RunResult], spec: LineageSpec) -> Lineage:
    """The lineage among `runs` (any order): a pure filter, then the newest window."""
    ordered = sorted(runs, key=lambda r: (r.started_at, r.run_name))
    model = spec.agent_model
    if model is None:
        live = [r for r in ordered if r.suite_name == spec.suite_name
                and r.provenance.mode != "replay"]
        model = live[-1].provenance.agent_model if live else ""
    kept: list[RunResult] = []
    excluded: dict[str, int] = {}
    for run in ordered:
        reason = _exclusion(run, spec, model)
        if reason is None and run.trials and all(t.cached for t in run.trials):
            # copies of earlier runs' trials: no evidence of its own, and no room in the window
            # (nightly re-evaluates an unchanged prompt from the cache every night)
            reason = "no fresh trial (all served from the trial cache)"
        elif reason is None and run.trials and not any(t.counts for t in run.trials):
            reason = "no counted trial (every trial errored)"  # a server down: no evidence
        if reason is None:
            kept.append(run)
        else:
            excluded[reason] = excluded.get(reason, 0) + 1
    groups = session_groups(kept)
    if len(groups) > spec.window:  # the window counts commands, not the rounds of one
        older = groups[:-spec.window]
        excluded["older than the window"] = sum(len(g) for g in older)
        kept = [r for g in groups[-spec.window:] for r in g]
    return Lineage(spec, model, tuple(kept), excluded)


def session_groups(runs: Sequence[RunResult]) -> list[list[RunResult]]:
    """`runs` (oldest first) grouped by the command that made them (`Provenance.session`: an
    optimize session's gate runs a suspect task's fresh baseline trials in runs of their own,
    a review and a profile run in rounds), in the order of each group's first run; a run with
    no session (saved before sessions were recorded) is a group of its own."""
    groups: dict[str, list[RunResult]] = {}
    for run in runs:
        groups.setdefault(run.provenance.session or f"run:{run.run_name}", []).append(run)
    return list(groups.values())


def trial_key(t: TrialResult) -> tuple[str, int, str]:
    return (t.task_id, t.trial_index, t.started_at.isoformat())


def trial_id(run_name: str, t: TrialResult) -> str:
    """The id of a trial in reports and labels: `<runName>/<taskId>#<trialIndex>`."""
    return f"{run_name}/{t.task_id}#{t.trial_index}"


def distinct_trials(runs: Sequence[RunResult]) -> Iterator[tuple[RunResult, TrialResult]]:
    """Every trial once, with the earliest run (in the given order) that holds it."""
    seen: set[tuple[str, int, str]] = set()
    for run in runs:
        for t in run.trials:
            key = trial_key(t)
            if key not in seen:
                seen.add(key)
                yield run, t


# --- I/O edges -------------------------------------------------------------------------


def prompt_versions(repo: Path, agent_name: str, ref: str = "HEAD",
                    include_checkout: bool = True) -> tuple[frozenset[str], str]:
    """sha256 of every version of the agent's prompt (its first prompt target in promptloop.toml:
    a whole file or a region of one) in `ref`'s history, and the ref's commit.

    With `include_checkout` and ref HEAD, the checked-out file counts too (eval runs it)."""
    agent = active_project().agent(agent_name)
    target = agent.target()
    path = target.path
    with GitOps(repo) as git:
        commit = git.resolve(ref)
        files = [text for _, text in git.file_versions(commit, path)]
    if include_checkout and ref == "HEAD" and (repo / path).is_file():
        files.append((repo / path).read_text(encoding="utf-8"))
    texts = []
    for text in files:
        try:  # a version where the region is missing or broken is no version of this prompt
            texts.append(open_target(agent, target, text).text)
        except ConfigError:
            continue
    hashes = frozenset(hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts)
    return hashes, commit


def stored_suite_names(store_dir: Path) -> list[str]:
    return sorted({e.suite_name for e in list_runs(store_dir)})


def load_lineage(store_dir: Path, suite_name: str, *, repo: Path | None = None,
                 ref: str = "HEAD", agent_model: str | None = None,
                 window: int = DEFAULT_WINDOW, any_prompt: bool = False) -> Lineage:
    """Read the suite's runs from the store and select its lineage.

    Runs are read newest first and reading stops once the window is full: once it holds
    `window` commands with fresh trials (as `select_lineage` counts it; runs served wholly from
    the trial cache take no room, a command's later rounds share its place)."""
    if window < 1:
        raise LifecycleError(f"the window must hold at least one run, got {window}")
    entries = [e for e in list_runs(store_dir) if e.suite_name == suite_name]
    if not entries:
        raise UnknownNameError("suite", suite_name, stored_suite_names(store_dir))
    newest = load_run(store_dir, max(entries, key=lambda e: e.started_at).run_name)
    hashes: frozenset[str] | None = None
    commit: str | None = None
    if not any_prompt and repo is not None:
        try:
            hashes, commit = prompt_versions(repo, newest.agent_name, ref)
        except GitOpsError as err:
            if "not a git repository" not in str(err):
                raise
    spec = LineageSpec(suite_name, agent_model or newest.provenance.agent_model or None,
                       hashes, ref if hashes is not None else None, commit, window)
    model = spec.agent_model or ""
    runs: list[RunResult] = []
    skipped: dict[str, int] = {}
    fresh: set[str] = set()  # the commands read so far that ran trials of their own
    for entry in sorted(entries, key=lambda e: e.started_at, reverse=True):
        if len(fresh) >= window and (entry.session is None or entry.session not in fresh):
            skipped["not read: the window was full"] = \
                skipped.get("not read: the window was full", 0) + 1
            continue
        run = newest if entry.run_name == newest.run_name else load_run(store_dir, entry.run_name)
        reason = _exclusion(run, spec, model)
        if reason is None:
            runs.append(run)
            if any(not t.cached and t.counts for t in run.trials):
                fresh.add(run.provenance.session or f"run:{run.run_name}")
        else:
            skipped[reason] = skipped.get(reason, 0) + 1
    lineage = select_lineage(runs, spec)
    return Lineage(spec, model, lineage.runs, skipped)
