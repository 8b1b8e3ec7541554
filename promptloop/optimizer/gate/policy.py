"""How the gate decides, and how its verdicts name their statistics. Pure.

`GatePolicy` holds every threshold of the gate (optimize's sequential gate, review's fixed
family and harm detection); the method texts below are the one place a verdict's "tests: ..."
reason is worded, for optimize (`gate_method_text`) and review (`review_method_text`,
`harm_method_text`). A new gate test names itself here. The verdicts themselves are built in
`promptloop.optimizer.gate.verdict` (review) and `promptloop.optimizer.gate.sequential` (optimize).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from promptloop.optimizer.gate.exact import SPENDING_NAMES, Spending

Sensitivity = Literal["half", "narrow"]
DROP_SHARE: dict[str, float] = {"half": 0.5, "narrow": 0.8}
"""The share of a passing task's pass rate each sensitivity's harm test is built to catch."""
TASK_BETA: dict[str, float] = {"half": 0.2, "narrow": 0.11}
"""Each sensitivity's default `harm_task_beta` (issue 31, chosen on the `tune` seeds): under
`half` a task halved says "no harm" at most about a fifth of the time (a reliable task is
cleared by 3 clean trials at noise 0, where 0.11 took 4; the half-break bound is 20%); under
`narrow` the factor of one clean trial (0.17-0.19 at noise 0) must not clear a task (a task
broken to 10% would pass one trial in ten, and narrow-1's bound is 1%), so it stays 0.11
(2 clean trials)."""


class GatePolicy(BaseModel):
    """How the gate decides. Defaults are calibrated by bench/gate_calibration.py."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """One-sided level of the target bucket's improvement test, spent across sequential looks."""
    min_improvement: float = Field(default=0.05, ge=0.0, le=1.0)
    """Minimum mean score gain of the target bucket (the practical effect size)."""
    regression_alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Family-wise level of the regression tests (Holm over the buckets + the pooled rest)."""
    regression_tolerance: float = Field(default=0.25, ge=0.0, le=1.0)
    """The drop in a task's mean score (graded and judge-scored tasks) that harm detection
    must rule out before a task says "no harm", under either sensitivity (a drop scaled to 0.4
    under `narrow` let narrow-1 through: bench/RESULTS.md, v4); review also calls a bucket whose
    mean score fell by this much regressed once its tasks confirm it."""
    suspect_p: float = Field(default=0.1, gt=0.0, le=1.0)
    """Review only: uncorrected one-sided p-value below which a falling bucket is a suspect
    worth confirming too."""
    pooled_weight: float = Field(default=0.5, gt=0.0, lt=1.0)
    """Share of the regression alpha given to the pooled test over all non-target buckets
    (a broad, thin regression), the rest being shared by the per-bucket tests."""
    max_trials: int = Field(default=24, ge=1)
    """Trials per task the sequential gate may reach (baseline and candidate alike)."""
    round_trials: int = Field(default=2, ge=1)
    """Trials added per task and side in each round on the target or on held-out tasks."""
    sweep_trials: int = Field(default=1, ge=1)
    """Trials per task in each round of harm detection, while the task is undecided (one run
    per round, so a task's evidence spreads over runs and their conditions)."""
    harm_sensitivity: Sensitivity = "half"
    """The smallest drop per task the harm test is built to catch: `half` (a drop of half a
    passing task's pass rate) or `narrow` (near-total breaks only, 80% of it: far cheaper)."""
    harm_max_trials: int = Field(default=20, ge=1)
    """Candidate trials per task harm detection may reach; at the cap the terminal rule
    decides (no harm when the Bayes factor favours no change, else harm not ruled out)."""
    harm_terminal_bf: float = Field(default=10.0, ge=1.0)
    """The terminal rule at the cap: a task says "no harm" when its Bayes factor of the drop
    is below this (the drop is then not the likelier story by this much: a flaky task whose
    record cannot tell its rate to within the drop ends here, not in a run-out)."""
    harm_break_alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Family-wise level of the break tests, over every harm task and every look (each task's
    Bayes factor must reach (tasks / this) to call a break)."""
    harm_task_beta: float | None = Field(default=None, gt=0.0, lt=1.0)
    """Bayes factor (drop against no change) at or below which a task says "no harm": a task
    broken by the drop says it with probability at most about this. None: the
    sensitivity's default (`TASK_BETA`: half 0.2, narrow 0.11; see `task_beta`)."""
    drift_limit: float = Field(default=0.1, ge=0.0, le=0.5)
    """Largest common drift of graded scores removed before any test (pass rates: half)."""
    score_slack: float = Field(default=0.025, ge=0.0, le=0.5)
    """A graded task's own move (after the common drift is removed) that is no harm: the
    no-change side of its score test may move the record by up to this either way."""
    history_min: int = Field(default=10, ge=0)
    """A record with fewer trials is ambiguous (`tasks.classify`)."""
    twin_record: int = Field(default=40, ge=0)
    """A suspect harm task whose record has fewer trials gets fresh baseline trials beside
    its candidate trials (from its third candidate trial on)."""
    bucket_bet: float = Field(default=0.9, gt=0.0, lt=1.0)
    """Largest stake of the adaptive (aGRAPA) betting tests on each bucket's and the pooled
    paired differences."""
    spending: Spending = "pocock"
    """Lan-DeMets spending function of the target's looks: the Pocock-type function
    alpha*ln(1+(e-1)t), tested at union-bound increments (issue 31: its first look, at the
    screen's 2 trials per task, has 0.0067 to spend, so a patch that plainly fixed the
    target stops there; O'Brien-Fleming's first look had 1e-11 and always asked 2 more
    trials per task). Held-out tasks spend by `blend` (`heldout_spending`)."""
    heldout_share: float = Field(default=1 / 3, ge=0.0, lt=1.0)
    """Share of the target bucket's tasks never shown to the proposer (at least one task once
    the bucket has `heldout_min_tasks`)."""
    heldout_min_tasks: int = Field(default=3, ge=2)
    heldout_alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """One-sided level of the held-out improvement test (its own alpha, spent over looks)."""
    heldout_spending: Spending = "blend"
    """Spending function of the held-out test's looks: 0.3 Pocock + 0.7 O'Brien-Fleming
    (`exact.BLEND_POCOCK`), so a plainly fixed held-out task stops at its second look (4
    trials at noise 0; O'Brien-Fleming alone took 8) while most of the alpha stays for the
    late looks a flaky held-out task needs (issue 31; v3 and v4's first measurement:
    O'Brien-Fleming)."""
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    """Level of the displayed bootstrap interval (display only)."""
    n_boot: int = Field(default=2000, ge=1)
    seed: int = 0
    require_significant_improvement: bool = True

    @property
    def drop_share(self) -> float:
        return DROP_SHARE[self.harm_sensitivity]

    @property
    def task_beta(self) -> float:
        """The "no harm" level of a task's Bayes factor: `harm_task_beta`, or the
        sensitivity's default (`TASK_BETA`)."""
        if self.harm_task_beta is not None:
            return self.harm_task_beta
        return TASK_BETA[self.harm_sensitivity]


def sensitivity_statement(policy: GatePolicy) -> str:
    """What harm detection ruled out when every task said "no harm", and what it did not, in
    one plain sentence (verdicts, PR bodies and review comments all carry it)."""
    p = policy
    if p.harm_sensitivity == "half":
        caught = "half or more of its pass rate"
        missed = ("smaller drops (a task going from 100% to 60% can pass) and any drop of a "
                  "task that passes under half the time")
    else:
        caught = "80% or more of its pass rate (a near-total break)"
        missed = ("any smaller drop (a task going from 100% to 50% can pass: "
                  "--harm-sensitivity half rules that out) and any drop of a task that passes "
                  "under 80% of the time")
    return (f"Ruled out: no pass/fail task lost {caught} and no judge-scored task "
            f"{p.regression_tolerance:g} or more of its mean score, each task by a Bayes factor "
            f"of {1 / p.task_beta:.0f}:1 against such a drop, except a task still "
            f"undecided at the {p.harm_max_trials}-trial cap, which passes when the evidence "
            f"for the drop is under {p.harm_terminal_bf:g}:1 (not shown unlikely, only not "
            f"shown); harm sensitivity {p.harm_sensitivity}; not ruled out: {missed}.")


def ruled_out_for(policy: GatePolicy, states: Sequence[str]) -> str:
    """`sensitivity_statement` for the buckets it holds for: every bucket when each said "no
    harm"; only those when some regressed or did not rule harm out (a verdict that found a
    break must not read "Ruled out: no task lost ..."); none, "" ."""
    cleared = sum(s == "no harm" for s in states)
    if not cleared:
        return ""
    text = sensitivity_statement(policy)
    if cleared == len(states):
        return text
    body = text.removeprefix("Ruled out: ")
    return (f"In the {cleared} bucket(s) that showed no harm (not the {len(states) - cleared} "
            f"other(s)), ruled out: {body}")


def _harm_per_task(p: GatePolicy) -> str:
    """Harm detection per task, as optimize and review both run it."""
    return (f"a sequential Bayes factor against the task's own baseline record (posterior of "
            f"its pass rate; judge scores by a robust kernel density of its recorded scores, "
            f"the common drift estimated over all tasks and removed) of a drop of "
            f"{p.drop_share:g} x a passing task's pass rate ({p.harm_sensitivity}) or "
            f"{p.regression_tolerance:g} in mean score: break at (tasks / "
            f"{p.harm_break_alpha:g}), Bonferroni over tasks and approximately anytime-valid "
            f"over looks; "
            f"no harm at <= {p.task_beta:g}; at {p.harm_max_trials} trials the terminal "
            f"rule (no harm below {p.harm_terminal_bf:g})")


def _harm_per_bucket(p: GatePolicy) -> str:
    """Review's bucket family (its pairs ran side by side: anytime-valid betting tests)."""
    return (f"per bucket and pooled: adaptive (aGRAPA) sign-flip betting tests, anytime-valid, "
            f"weighted Holm at alpha={p.regression_alpha:g}")


def _harm_family(p: GatePolicy) -> str:
    """Optimize's family test: the candidate against every task's record at once, at the end,
    net of the common drift."""
    return ("pooled over all other tasks: a one-sided test that the candidate passes less "
            "often than the tasks' records, the common drift in pass rate removed, at "
            f"alpha={p.regression_alpha * p.pooled_weight:g} on the final look")


def gate_method_text(policy: GatePolicy, harm: bool = True) -> str:
    """The statistics of an optimize verdict (the sequential gate), named as in a methods
    section; without `harm` only the target's tests (the gate stopped before harm detection)."""
    p = policy
    target = (f"tests: target improvement on the visible tasks by a one-sided exact "
              f"stratified Fisher test of the candidate's passes against each task's own "
              f"record (lineage history + baseline) at alpha={p.alpha:g}, spent over looks by "
              f"the Lan-DeMets {SPENDING_NAMES[p.spending]} function at union-bound increments; "
              f"held-out "
              f"tasks that failed on the baseline by the same test at their own "
              f"alpha={p.heldout_alpha:g} ({SPENDING_NAMES[p.heldout_spending]} spending)")
    if not harm:
        return target
    return (f"{target}; harm per task: {_harm_per_task(p)}; {_harm_family(p)}; McNemar "
            "p-values are shown, never decide")


def review_method_text(policy: GatePolicy, tested: int, sequential: bool = False) -> str:
    """The statistics of review's fixed-sample decision, for the reasons list; `sequential`:
    improvement was decided by the sequential efficacy test (`harm_method_text`) instead."""
    improve = ("" if sequential else
               f"improvement per bucket at alpha={policy.alpha:g} (Holm); ")
    return (f"tests: one-sided paired sign-flip permutation tests (exact), weighted Holm, fixed "
            f"sample (no sequential looks): {improve}regression family of {tested} hypotheses "
            f"(buckets + pooled) at alpha={policy.regression_alpha:g}; a drop of "
            f"{policy.regression_tolerance:g} in a bucket's mean score confirmed with more "
            "trials; McNemar p-values are shown, never decide")


def harm_method_text(policy: GatePolicy) -> str:
    """The statistics of review's harm detection, named as in a methods section."""
    p = policy
    return (f"improvement per bucket, as optimize's target: a one-sided exact stratified "
            f"Fisher test of the head's passes against each task's own record (lineage history "
            f"+ base) on the bucket's tasks that do not pass on it, at alpha={p.alpha:g} split "
            f"over the buckets tested (Bonferroni), spent over looks at 2, 4, 8, 16, "
            f"{p.max_trials} trials per task by the Lan-DeMets "
            f"{SPENDING_NAMES[p.spending]} function, and a mean gain >= "
            f"{p.min_improvement:g}; "
            f"harm per task (every bucket, no target): {_harm_per_task(p)} (no harm); "
            f"{_harm_per_bucket(p)}; trials added in rounds of {p.round_trials} up to "
            f"{p.harm_max_trials} per task")
