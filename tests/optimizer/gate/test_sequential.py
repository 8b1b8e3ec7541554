"""The per-task harm rules, the per-bucket statements and the sequential gate (issue 18)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.exact import drop_log_bf
from promptloop.optimizer.gate.harm import bucket_statement
from promptloop.optimizer.gate.policy import sensitivity_statement
from promptloop.optimizer.gate.review_harm import HarmOnlyGate, HarmResult
from promptloop.optimizer.gate.sequential import SequentialGate, TaskKey, TrialAsk, heldout_tasks
from promptloop.optimizer.gate.tasks import (
    HarmScale,
    TaskRecord,
    break_log_bf,
    estimate_scale,
    judge_task,
    pass_drop,
    pooled_pvalue,
)
from promptloop.optimizer.gate.verdict import POOLED, Verdict

POLICY = GatePolicy()


def record(key: TaskKey = ("b", "t"), history: list[bool] = (), base: list[bool] = (),  # type: ignore[assignment]
           cand: list[bool] = ()) -> TaskRecord:  # type: ignore[assignment]
    return TaskRecord(key, [(float(x), x) for x in history],
                      {i: (float(x), x) for i, x in enumerate(base)},
                      {i: (float(x), x) for i, x in enumerate(cand)})


# --- one task against its own record ---------------------------------------------------------

def test_a_break_needs_the_bayes_factor_bonferroni_over_tasks() -> None:
    rec = record(history=[True] * 10, base=[True] * 2, cand=[False, False])
    alone = judge_task(rec, POLICY, HarmScale(tasks=1))
    assert alone.state == "break" and alone.log_bf >= math.log(1 / POLICY.harm_break_alpha)
    assert alone.cand_failed == [0, 1] and "Bayes factor" in alone.why
    assert "failed trial(s) #0, #1" in alone.describe() and "'t'" in alone.describe()
    # among 50 harm tasks two failures are no break yet (the level is 50 / alpha) ...
    many = HarmScale(tasks=50)
    assert judge_task(rec, POLICY, many).state == "undecided"
    # ... five in a row are
    five = record(history=[True] * 10, base=[True] * 2, cand=[False] * 5)
    assert judge_task(five, POLICY, many).state == "break"
    # a record of 2 passes says little: two failures there are no break even alone
    assert judge_task(record(base=[True] * 2, cand=[False] * 2), POLICY,
                      HarmScale(tasks=1)).state == "undecided"


def _sup_reaches(p: float, rng: random.Random, bound: float, n_ref: int, cap: int,
                 drop: float) -> bool:
    ref = sum(rng.random() < p for _ in range(n_ref))
    c = 0
    for m in range(1, cap + 1):
        c += rng.random() < p
        if drop_log_bf(ref, n_ref, c, m, drop)[0] >= bound:
            return True
    return False


def test_false_breaks_are_controlled_over_looks() -> None:
    """Ville's inequality: a task that did not change (its rate drawn from the prior, record
    and candidate from that rate) reaches the break level 1/a at ANY of 20 looks with
    probability at most a."""
    rng = random.Random(7)
    a, n = 0.05, 3000
    hits = sum(_sup_reaches(rng.random(), rng, math.log(1 / a), 12, 20, 0.5)
               for _ in range(n))
    assert hits / n <= a


@pytest.mark.parametrize("ceiling", [1.0, 0.89])
def test_the_break_mixture_keeps_false_breaks_controlled_over_looks(ceiling: float) -> None:
    """The factor that calls a break mixes in a fall to the noise floor (`break_log_bf`):
    still a martingale under no change, so a task that did not change reaches 1/a at any of
    20 looks with probability at most a (rates drawn from the prior, as above)."""
    rng = random.Random(11)
    a, n, bound = 0.05, 3000, math.log(1 / 0.05)
    scale = HarmScale(ceiling=ceiling)
    hits = 0
    for _ in range(n):
        p = rng.random()
        hist = [rng.random() < p for _ in range(12)]
        cand: list[bool] = []
        for _ in range(20):
            cand.append(rng.random() < p)
            rec = record(history=hist, cand=cand)
            r, m, c, k = rec.stratum()
            if break_log_bf(rec, scale, drop_log_bf(r, m, c, k, pass_drop(POLICY, scale))[0]
                            ) >= bound:
                hits += 1
                break
    assert hits / n <= a


def test_a_task_that_stops_passing_is_called_broken_sooner() -> None:
    """A reliable task broken to the noise floor: the mixture calls it in fewer trials than
    the halving's factor alone (which needed 5 from a clean record of 12 among 50 tasks, and
    about 15 from 11 of 12 at noise 0.1)."""
    def first_break(hist: list[bool], rate: float, ceiling: float, seed: int) -> int:
        rng = random.Random(seed)
        draws = [rng.random() < rate for _ in range(POLICY.harm_max_trials)]
        for k in range(1, POLICY.harm_max_trials + 1):
            f = judge_task(record(history=hist, cand=draws[:k]), POLICY,
                           HarmScale(ceiling=ceiling, tasks=50))
            if f.state == "break":
                assert "mixture" in f.why
                return k
        return POLICY.harm_max_trials + 1

    assert first_break([True] * 12, 0.0, 1.0, 0) == 4
    noisy = [first_break([True] * 11 + [False], 0.11, 0.89, i) for i in range(200)]
    assert sum(noisy) / len(noisy) < 12.5


def test_a_half_broken_task_rarely_says_no_harm() -> None:
    """A reliable task whose pass rate halves reaches "no harm" by its Bayes factor with
    probability about `task_beta` (0.2 under half) at most; the terminal rule at the cap
    adds a little: about a fifth together (19.7% on these 1,000 tasks, 21.5% on 2,000 others;
    this per-task rate is not the
    issue's bound: a half-break iteration is kept only if the target also improves and no
    other test sees the drop, 11-16.5% in bench/RESULTS.md's v4, bound 20%). Each task's
    trials are drawn before it is judged, so a change of when the test stops cannot change
    which tasks later iterations draw."""
    n = 1000
    bayes = terminal = 0
    for i in range(n):
        rng = random.Random(f"half-broken:{i}")
        hist = [rng.random() < 0.99 for _ in range(12)]
        draws = [rng.random() < 0.495 for _ in range(POLICY.harm_max_trials)]
        for k in range(1, POLICY.harm_max_trials + 1):
            f = judge_task(record(history=hist, cand=draws[:k]), POLICY, HarmScale(tasks=50))
            if f.state != "undecided":
                break
        bayes += f.basis == "bayes"
        terminal += f.basis == "terminal"
    assert bayes / n <= POLICY.task_beta
    assert (bayes + terminal) / n <= 0.24


def test_a_task_never_run_never_says_no_harm() -> None:
    steady = judge_task(record(history=[True] * 10, base=[True] * 2), POLICY)
    assert steady.state == "undecided" and steady.need >= 1 and steady.cand_mean is None
    assert judge_task(record(), POLICY).state == "undecided"  # no record at all
    statement = bucket_statement("b", [steady], None, POLICY)
    assert statement.state == "harm not ruled out" and "would need" in statement.statement
    # a task failing most of its record cannot lose half of a passing task's rate
    low = judge_task(record(history=[False] * 8 + [True] * 2, base=[False] * 2), POLICY)
    assert low.state == "no harm" and low.basis == "cannot lose"


def test_fresh_baseline_trials_never_end_a_test_as_cannot_lose() -> None:
    """Bench v2 seed (card 10-task, narrow-1, noise 0, iteration 51): a reliable task broken
    to 10% failed 8 of 11 candidate trials while its fresh baseline twins, added because it was
    a suspect, pulled its record to 16/20, under narrow's drop of 0.8; "cannot lose" then
    cleared it. A record under the drop says "cannot lose" only while the candidate's trials
    do not favour the drop by `STILL_LOSING` (10:1); here they do (10.6:1): the test goes on,
    and further failures call the break."""
    narrow = POLICY.model_copy(update={"harm_sensitivity": "narrow"})
    cand = [False, False, True, False, False, True, False, False, False, False, True]
    rec = record(history=[True] * 10, base=[True] * 6 + [False] * 4, cand=cand)
    found = judge_task(rec, narrow, HarmScale(tasks=50))
    assert found.state == "undecided" and found.log_bf > math.log(10), found
    more = list(cand)
    while found.state == "undecided" and len(more) < narrow.harm_max_trials:
        more.append(False)  # the broken task goes on failing: the break is called
        found = judge_task(record(history=[True] * 10, base=[True] * 6 + [False] * 4,
                                  cand=more), narrow, HarmScale(tasks=50))
    assert found.state == "break", found
    # before the candidate ran it, the same record is skipped: it cannot lose the drop
    skipped = judge_task(record(history=[True] * 10, base=[True] * 6 + [False] * 4), narrow)
    assert skipped.state == "no harm" and skipped.basis == "cannot lose"


def test_clean_candidate_trials_rule_the_drop_out() -> None:
    """Under `half` a reliable 12/12 task is cleared by 3 clean trials (factor 0.11 <= 0.2)
    and not by 2 (0.23); under `narrow` by 2 (0.031 <= 0.11) and not by 1 (0.17)."""
    f = judge_task(record(history=[True] * 10, base=[True] * 2, cand=[True] * 3), POLICY)
    assert f.state == "no harm" and f.basis == "bayes" and "Bayes factor" in f.why
    assert judge_task(record(history=[True] * 10, base=[True] * 2, cand=[True] * 2),
                      POLICY).state == "undecided"
    narrow = POLICY.model_copy(update={"harm_sensitivity": "narrow"})
    assert judge_task(record(history=[True] * 10, base=[True] * 2, cand=[True] * 2),
                      narrow).state == "no harm"
    assert judge_task(record(history=[True] * 10, base=[True] * 2, cand=[True] * 1),
                      narrow).state == "undecided"
    statement = bucket_statement("b", [f], None, POLICY)
    assert statement.state == "no harm" and "no harm" in statement.statement
    broken = bucket_statement("b", [f, judge_task(record(
        ("b", "u"), history=[True] * 10, base=[True] * 2, cand=[False] * 2), POLICY)], None,
        POLICY)
    assert broken.state == "regressed" and "'u'" in broken.statement


def test_the_terminal_rule_decides_at_the_cap() -> None:
    """A flaky task whose factor wanders ends at the cap: no harm when the drop is not the
    likelier story by `harm_terminal_bf`, else harm not ruled out (never a run-out)."""
    capped = POLICY.model_copy(update={"harm_max_trials": 4})
    hist = [True] * 9 + [False] * 3
    even = judge_task(record(history=hist, cand=[True, False, True, False]), capped,
                      HarmScale(tasks=50))
    assert even.state == "no harm" and even.basis == "terminal" and "terminal" in even.why
    worse = judge_task(record(history=hist, cand=[False] * 4), capped,
                       HarmScale(tasks=50))
    assert worse.state == "undecided" and worse.need == 0 and "cap" in worse.why
    # under the cap the same evidence asks for more trials
    assert judge_task(record(history=hist, cand=[True, False, True, False]), POLICY,
                      HarmScale(tasks=50)).state == "undecided"


def test_sensitivity_narrow_only_rules_out_near_total_breaks() -> None:
    narrow = POLICY.model_copy(update={"harm_sensitivity": "narrow"})
    rec = record(history=[True] * 12, cand=[True, True])
    # two clean trials rule out a near-total break; half needs three
    assert judge_task(rec, narrow).state == "no harm"
    assert judge_task(rec, POLICY).state == "undecided"
    # a task passing 70% cannot lose 80% of a passing task's rate
    flaky = record(history=[True] * 7 + [False] * 3 + [True, False])
    assert judge_task(flaky, narrow).basis == "cannot lose"
    assert "near-total" in sensitivity_statement(narrow)
    assert "half or more of its pass rate" in sensitivity_statement(POLICY)
    assert "not ruled out" in sensitivity_statement(POLICY)
    # a judge-scored task's ruled-out drop is the tolerance under either sensitivity (a
    # task broken to 10% loses 0.33-0.43 of its mean score: a 0.4 test let it through)
    assert POLICY.regression_tolerance == narrow.regression_tolerance == 0.25
    assert "no judge-scored task 0.25 or more" in sensitivity_statement(narrow)
    ref = [0.85 + 0.01 * (k % 5) for k in range(12)]
    low = graded(("b", "j"), ref, [0.55] * 6)  # 0.3 below its record on every trial
    assert judge_task(low, narrow, HarmScale(tasks=10)).state == "break"


def graded(key: TaskKey, ref: list[float], cand: list[float]) -> TaskRecord:
    return TaskRecord(key, [(x, x >= 0.6) for x in ref], {},
                      {i: (x, x >= 0.6) for i, x in enumerate(cand)})


def test_judge_scores_with_reflected_noise_are_no_break() -> None:
    """A judge-scored task whose record is bimodal (noise reflects scores around the
    threshold): the same mixture on the candidate says no harm; a drop of the tolerance on
    every trial is a break."""
    rng = random.Random(11)

    def draw(shift: float = 0.0) -> float:
        x = min(1.0, max(0.0, rng.gauss(0.85, 0.1) + shift))
        return 1.2 - x if rng.random() < 0.15 else x

    ref = [draw() for _ in range(12)]
    same = judge_task(graded(("b", "j"), ref, [draw() for _ in range(6)]), POLICY,
                      HarmScale(tasks=50))
    assert same.state == "no harm"
    dropped = [draw(-0.35) for _ in range(POLICY.harm_max_trials)]
    states = [judge_task(graded(("b", "j"), ref, dropped[:k]), POLICY, HarmScale(tasks=50))
              .state for k in range(1, len(dropped) + 1)]
    assert "no harm" not in states and states[-1] == "break"


def test_drift_is_estimated_by_level_and_removed() -> None:
    """Every graded task moves with the model's drift, those far from the threshold most:
    the estimate follows each level, and a task moved by the drift alone is no break."""
    rng = random.Random(5)
    records = []
    for k in range(12):
        high = k % 2 == 0
        centre, move = (0.88, -0.09) if high else (0.6, -0.005)
        ref = [rng.gauss(centre, 0.05) for _ in range(12)]
        cand = [rng.gauss(centre + move, 0.05) for _ in range(4)]
        records.append(graded(("b", f"t{k}"), ref, cand))
    scale = estimate_scale(records, POLICY)
    assert scale.score_drift[2] == pytest.approx(-0.09, abs=0.04)
    assert abs(scale.score_drift[1]) < 0.04
    for rec in records:
        f = judge_task(replace(rec, shift=scale.drift_of(rec)), POLICY, scale)
        assert f.state != "break"


def test_the_pooled_test_reads_first_trials_and_removes_the_drift() -> None:
    """A broad harm (every task a little worse) shows in the pooled test; later trials of a
    suspect task (chosen by what it showed) never count there."""
    fine = [record(("b", f"t{k}"), history=[True] * 12, cand=[True, False, False, False])
            for k in range(20)]
    assert pooled_pvalue(fine, HarmScale()) > 0.5  # every first trial passed
    broad = [record(("b", f"t{k}"), history=[True] * 12, cand=[k % 3 != 0])
             for k in range(30)]
    assert pooled_pvalue(broad, HarmScale()) < 0.001


# --- held-out tasks -----------------------------------------------------------------------------

def test_heldout_tasks_are_drawn_among_failing_tasks_and_never_all_of_them() -> None:
    ids = [f"t{i}" for i in range(9)]
    for n_failing in range(2, 10):
        rates = {t: (0.0 if i < n_failing else 1.0) for i, t in enumerate(ids)}
        failing = {t for t, r in rates.items() if r < 0.5}
        for salt in ("a", "b", "c"):
            held = heldout_tasks(ids, POLICY, salt=salt, rates=rates)
            assert held and held & failing and not failing <= held, (n_failing, salt, held)
            assert held == heldout_tasks(ids, POLICY, salt=salt, rates=rates)  # seeded
    assert heldout_tasks(["a", "b"], POLICY) == frozenset()  # under heldout_min_tasks
    assert len(heldout_tasks(["a", "b", "c"], POLICY)) == 1
    # a bucket with one failing task keeps it visible, whatever the salt (a team's bucket of
    # 4 with one failing task: the draw held it out, and optimize said "no failing trials")
    one = {t: (0.0 if t == "t3" else 1.0) for t in ids[:4]}
    for salt in map(str, range(40)):
        held = heldout_tasks(ids[:4], POLICY, salt=salt, rates=one)
        assert held and "t3" not in held, (salt, held)


# --- the gate, driven by a deterministic agent ---------------------------------------------------

BUCKETS = {"target": ["t0", "t1", "t2"], "other": ["o0", "o1", "o2"],
           "regression/plain": ["r0", "r1"]}
Outcome = Callable[[TaskKey, str], bool]


def drive(g: SequentialGate | HarmOnlyGate, outcome: Outcome, ran: int = 2
          ) -> tuple[Verdict | HarmResult, list[TrialAsk]]:
    """A deterministic agent: `outcome(key, side)` for every trial. The baseline's first `ran`
    trials exist before the gate starts (the candidate's too for a harm-only gate); the gate
    must ask for every other trial exactly once."""
    obs = {(b, t): TaskRecord((b, t)) for b, ts in BUCKETS.items() for t in ts}
    sides = ("base", "cand") if isinstance(g, HarmOnlyGate) else ("base",)
    for key, rec in obs.items():
        for side in sides:
            for i in range(ran):
                ok = outcome(key, side)
                getattr(rec, side)[i] = (float(ok), ok)
    requests: list[TrialAsk] = []
    step = g.first() if isinstance(g, SequentialGate) else g.step(obs)
    while isinstance(step, TrialAsk):
        requests.append(step)
        for side, wanted in (("base", step.base), ("cand", step.indices)):
            for key, indices in wanted.items():
                for i in indices:
                    assert i not in getattr(obs[key], side), (key, i, side)
                    ok = outcome(key, side)
                    getattr(obs[key], side)[i] = (float(ok), ok)
        step = g.step(obs)
    return step, requests


def gate(heldout: frozenset[str] = frozenset()) -> SequentialGate:
    return SequentialGate(POLICY, "target", BUCKETS,
                          {(b, t): 2 for b, ts in BUCKETS.items() for t in ts}, heldout)


def agent(fixed: set[str], broken: set[str] = frozenset()) -> Outcome:  # type: ignore[assignment]
    def outcome(key: TaskKey, side: str) -> bool:
        if key[0] == "target":
            return side == "cand" and key[1] in fixed
        return not (side == "cand" and key[1] in broken)
    return outcome


def test_a_null_patch_is_rejected_by_the_screen_without_running_the_rest() -> None:
    v, reqs = drive(gate(), agent(fixed=set()))
    assert isinstance(v, Verdict) and v.decision == "reject" and v.stopped == "screen"
    assert len(reqs) == 1 and {k[0] for k in reqs[0].indices} == {"target"}


def test_a_good_patch_is_accepted_only_once_every_bucket_says_no_harm() -> None:
    v, reqs = drive(gate(), agent(fixed={"t0", "t1", "t2"}))
    assert isinstance(v, Verdict) and v.decision == "accept", v.reasons
    assert [b.state for b in v.buckets] == ["no harm"] * 2
    assert any(r.startswith("no bucket regressed") for r in v.reasons)
    harm = [r for r in reqs if r.stage == "harm"]
    assert harm  # the target's passing tasks (all fixed here) are none of harm's business
    assert "stratified Fisher" in v.test and "Bayes factor" in v.test and "never decide" in v.test
    assert v.ruled_out.startswith("Ruled out: no pass/fail task lost half or more")
    assert v.ruled_out in v.reasons


def test_the_accept_reason_counts_the_other_buckets_as_the_headline_does() -> None:
    """A team's verdict said "no harm in the 2 other buckets" and then "every other bucket
    showed no harm (3 bucket(s))": the finding counted the target's own passing task as a
    bucket. t2 passes on the base (a passing target task, harm-tested)."""
    from promptloop.optimizer.report.plain import optimize_headline

    def outcome(key: TaskKey, side: str) -> bool:
        if key[0] == "target":
            return key[1] == "t2" or side == "cand"
        return True

    v, _ = drive(gate(), outcome)
    assert isinstance(v, Verdict) and v.decision == "accept", v.reasons
    assert "target" in {b.bucket for b in v.buckets}  # t2 was harm-tested
    [reason] = [r for r in v.reasons if r.startswith("no bucket regressed")]
    assert "(2 bucket(s); so did the target's passing tasks)" in reason, reason
    assert "no harm in the 2 other buckets" in optimize_headline(v)


def test_one_broken_task_elsewhere_rejects_and_is_named() -> None:
    v, reqs = drive(gate(), agent(fixed={"t0", "t1", "t2"}, broken={"o1"}))
    assert isinstance(v, Verdict) and v.decision == "reject" and v.stopped == "regression"
    assert "'o1'" in v.reasons[0] and "failed trial(s) #0" in v.reasons[0]
    assert {b.bucket: b.state for b in v.buckets}["other"] == "regressed"
    assert not any(r.startswith("no bucket regressed") for r in v.reasons)
    # the suspect's thin record (2 baseline trials) got fresh baseline trials
    assert any(("other", "o1") in r.base for r in reqs if r.stage == "harm")


def test_an_unchanged_failing_heldout_task_rejects() -> None:
    v, _ = drive(gate(frozenset({"t2"})), agent(fixed={"t0", "t1"}))
    assert isinstance(v, Verdict) and v.decision == "reject" and v.stopped == "held-out"
    assert "did not improve" in v.reasons[0] and "t2" not in " ".join(v.reasons)
    assert v.heldout is not None and v.heldout.delta == 0
    assert v.visible is not None and v.visible.delta == 1.0


def test_review_efficacy_is_not_called_on_an_unchanged_bucket() -> None:
    """A head that changes nothing improves no bucket (the failing tasks are tested and stop
    for futility), and its trials stay under the cap."""
    g = HarmOnlyGate(POLICY, BUCKETS, {(b, t): (2, 2) for b, ts in BUCKETS.items()
                                        for t in ts})
    res, reqs = drive(g, agent(fixed=set()))
    assert isinstance(res, HarmResult) and res.improved == [] and res.efficacy == []
    assert res.regressed == []
    assert all(max(r.indices[k]) < POLICY.max_trials for r in reqs for k in r.indices)
    # tasks failing on their record cannot lose the drop: never harm-tested, no gain: no
    # efficacy trials either
    assert not any(k[0] == "target" for r in reqs for k in (*r.indices, *r.base))


def test_harm_only_gate_for_review() -> None:
    g = HarmOnlyGate(POLICY, BUCKETS, {(b, t): (2, 2) for b, ts in BUCKETS.items()
                                        for t in ts})
    res, reqs = drive(g, agent(fixed={"t0"}, broken={"r1"}))
    assert isinstance(res, HarmResult) and res.regressed[0] == "regression/plain"
    assert set(res.regressed) <= {"regression/plain", POOLED}  # the pooled pairs may too
    assert "'r1'" in " ".join(res.reasons())
    g = HarmOnlyGate(POLICY, BUCKETS, {(b, t): (2, 2) for b, ts in BUCKETS.items()
                                        for t in ts})
    clean, reqs = drive(g, agent(fixed={"t0"}))
    assert isinstance(clean, HarmResult) and clean.regressed == [] and clean.open == []
    assert all(min(r.indices[k]) >= 2 for r in reqs for k in r.indices)
    # efficacy with optimize's test and looks: the fixed task's bucket is shown improved,
    # its failing tasks got the looks' trials, and the reasons say how many head trials
    assert clean.improved == ["target"] and clean.efficacy[0].startswith(
        "bucket 'target' improved at look")
    assert any(("target", "t0") in r.indices for r in reqs)
    assert f"decided on {clean.head_trials} head trial(s)" in clean.reasons()[-1]
    assert clean.head_trials == 16 + clean.added_trials and clean.added_trials > 0
    # at the cap the terminal rule decides: an unchanged task says no harm, a task that
    # failed both trials against two recorded passes stays "harm not ruled out"
    strict = POLICY.model_copy(update={"harm_max_trials": 2, "harm_task_beta": 0.01,
                                       "harm_terminal_bf": 1.0})
    capped = HarmOnlyGate(strict, BUCKETS,
                          {(b, t): (2, 2) for b, ts in BUCKETS.items() for t in ts})
    open_, reqs = drive(capped, agent(fixed=set(), broken={"o1"}))
    assert isinstance(open_, HarmResult) and not reqs and open_.stopped == "max trials"
    assert open_.open == ["other"] and open_.regressed == []
    assert "other" in open_.open and math.isfinite(open_.pooled_p)


def test_a_no_harm_statement_says_how_each_task_got_there() -> None:
    """A bucket cleared partly by the terminal rule must not read "each task ruled out a
    drop" (that rule means "not shown unlikely, only not shown"); a bucket whose tasks the
    improvement test settled must not read "each task ruled out ... (); not run"."""
    cleared = judge_task(record(history=[True] * 10, base=[True] * 2, cand=[True] * 3), POLICY)
    low = judge_task(record(("b", "low"), history=[False] * 8 + [True] * 2, base=[False] * 2),
                     POLICY)
    said = bucket_statement("b", [cleared, low], None, POLICY).statement
    assert "of its 2 task(s), 1 ruled it out by its Bayes factor, 1 cannot lose it" in said
    assert "each task ruled out" not in said
    empty = bucket_statement("dates", [], None, POLICY)
    assert empty.state == "no harm" and "()" not in empty.statement
    assert "decided by the improvement test" in empty.statement
