"""The exact tests, the Holm correction and alpha spending, against hand-computed values."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from promptloop.optimizer.gate.compare import GatePolicy, compare_bucket
from promptloop.optimizer.gate.exact import (
    anytime_pvalue,
    betting_log_wealth,
    holm,
    look_alpha,
    mcnemar_pvalue,
    sign_flip_pvalue,
    spent_alpha,
)
from promptloop.optimizer.gate.pairing import Pair


def brute_force(diffs: list[float], alternative: str) -> float:
    """Enumerate every sign assignment (the definition of the sign-flip test)."""
    obs = sum(diffs)
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(diffs)):
        s = sum(sg * abs(d) for sg, d in zip(signs, diffs, strict=True))
        total += 1
        if alternative == "greater":
            hits += s >= obs - 1e-9
        elif alternative == "less":
            hits += s <= obs + 1e-9
        else:
            hits += abs(s) >= abs(obs) - 1e-9
    return hits / total


@pytest.mark.parametrize("diffs", [
    [1.0, 1.0, -1.0], [0.5, 1.0, 0.25, -0.5], [1 / 3, 2 / 3, -1 / 3, 1.0, 0.5],
    [0.2, -0.4, 0.6, 0.8, -1.0, 0.1], [1.0] * 7,
])
@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
def test_sign_flip_matches_enumeration(diffs: list[float], alternative: str) -> None:
    assert sign_flip_pvalue(diffs, alternative) == pytest.approx(  # type: ignore[arg-type]
        brute_force(diffs, alternative))


def test_zero_differences_carry_no_information() -> None:
    assert sign_flip_pvalue([]) == 1.0
    assert sign_flip_pvalue([0.0, 0.0, 0.0]) == 1.0
    assert sign_flip_pvalue([1.0, 0.0, 0.0]) == sign_flip_pvalue([1.0]) == 0.5


@pytest.mark.parametrize("value", [1.0, 0.5, 1 / 3, 0.05])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 7, 8])
def test_identical_differences_get_the_exact_p_of_k_equal_signs(value: float, k: int) -> None:
    """k identical differences get p = 2^-k exactly (6 identical drops: 1/64, significant at
    0.05); up to 4 they are never significant, and never get an interval."""
    diffs = [value] * k
    assert sign_flip_pvalue(diffs, "greater") == pytest.approx(2.0**-k)
    assert sign_flip_pvalue([-value] * k, "less") == pytest.approx(2.0**-k)
    pairs = [Pair(f"t{i}", 0, 0.0, value, False, value == 1.0) for i in range(k)]
    comp = compare_bucket("b", pairs, GatePolicy())
    assert comp.ci_low is None and comp.ci_high is None
    assert comp.p_improve == pytest.approx(2.0**-k)
    if k <= 4:
        assert comp.status != "improved" and comp.p_improve > 0.05
    # the anytime-valid form used for harm is never more confident than the exact test
    wealth = betting_log_wealth([-value] * k, GatePolicy().bucket_bet)
    assert anytime_pvalue(wealth) >= 2.0**-k


def test_six_identical_drops_give_one_in_64() -> None:
    assert sign_flip_pvalue([-1.0] * 6, "less") == pytest.approx(1 / 64)


def test_agrapa_betting_pvalue_is_valid_under_a_symmetric_null() -> None:
    """Differences of random magnitude with a fair random sign: the largest wealth over 40
    looks reaches 1/alpha in at most alpha of the sequences (Ville), within Monte Carlo
    tolerance."""
    rng = random.Random(7)
    alpha, n_seq, hits = 0.05, 2000, 0
    for _ in range(n_seq):
        diffs = [rng.choice((-1.0, 1.0)) * rng.choice((1.0, 0.5, 0.25)) for _ in range(40)]
        best = max(betting_log_wealth(diffs[:n], 0.9) for n in range(1, 41, 4))
        hits += anytime_pvalue(best) <= alpha
    assert hits / n_seq <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / n_seq)


def test_agrapa_betting_pvalue_is_powerful_on_a_consistent_drop() -> None:
    """A consistent drop crosses 1/alpha = 20 within a handful of pairs: 5 full drops
    (1.9^5 = 24.8); graded drops with a tie and a rise among them within 9."""
    assert anytime_pvalue(betting_log_wealth([-1.0] * 5, 0.9)) <= 0.05
    assert anytime_pvalue(betting_log_wealth([-1.0] * 4, 0.9)) > 0.05
    mixed = [-1.0, -0.5, -1.0, 0.0, -1.0, 0.5, -1.0, -1.0, -0.5, -1.0, -1.0, -1.0]
    wealth = [betting_log_wealth(mixed[:i], 0.9) for i in range(1, len(mixed) + 1)]
    n = next(i for i in range(len(mixed)) if anytime_pvalue(max(wealth[: i + 1])) <= 0.05)
    assert n + 1 <= 9


def test_mcnemar_is_the_binomial_tail() -> None:
    assert mcnemar_pvalue(0, 0) == 1.0
    assert mcnemar_pvalue(5, 0, "greater") == pytest.approx(1 / 32)
    assert mcnemar_pvalue(2, 0, "greater") == pytest.approx(0.25)
    assert mcnemar_pvalue(0, 4) == pytest.approx(0.125)
    assert mcnemar_pvalue(7, 1, "greater") == pytest.approx(9 / 256)
    # binary outcomes: the sign-flip test is McNemar
    assert sign_flip_pvalue([1.0] * 7 + [-1.0] + [0.0] * 5) == pytest.approx(9 / 256)


def test_holm_step_down() -> None:
    assert holm([0.01, 0.04, 0.2], 0.05) == [True, False, False]
    assert holm([0.01, 0.02, 0.03], 0.05) == [True, True, True]
    assert holm([0.02, 0.02], 0.05) == [True, True]
    assert holm([0.03, 0.04], 0.05) == [False, False]
    # weights: the heavy hypothesis gets the larger share of alpha
    assert holm([0.03, 0.06], 0.05, weights=[0.9, 0.1]) == [True, False]
    assert holm([0.03, 0.06], 0.05) == [False, False]
    with pytest.raises(ValueError):
        holm([0.1], 0.05, weights=[0.0])


def test_alpha_spending_adds_up_to_alpha() -> None:
    for kind in ("pocock", "obrien-fleming", "linear"):
        looks = [0.25, 0.5, 0.75, 1.0]
        spent = sum(look_alpha(t, prev, 0.05, kind)  # type: ignore[arg-type]
                    for prev, t in zip([0.0, *looks[:-1]], looks, strict=True))
        assert spent == pytest.approx(0.05)
        assert spent_alpha(1.0, 0.05, kind) == pytest.approx(0.05)  # type: ignore[arg-type]
    assert spent_alpha(0.25, 0.05, "obrien-fleming") < 1e-3 < spent_alpha(0.25, 0.05, "pocock")


def test_betting_wealth_is_a_fair_game_under_sign_flips() -> None:
    """Averaged over every sign assignment (the null), the wealth is exactly 1 after any
    number of pairs: a martingale, so Ville's inequality bounds P(wealth >= 1/a) by a."""
    diffs = [1.0, 0.5, -0.25, 1.0, 0.75]
    for bet in (0.3, 0.5, 0.9):
        total = 0.0
        for signs in itertools.product((1, -1), repeat=len(diffs)):
            flipped = [sg * d for sg, d in zip(signs, diffs, strict=True)]
            total += math.exp(betting_log_wealth(flipped, bet))
        assert total / 2 ** len(diffs) == pytest.approx(1.0)


def test_betting_wealth_and_its_pvalue() -> None:
    assert betting_log_wealth([], 0.5) == 0.0
    assert betting_log_wealth([-1.0, -1.0], 0.5) == pytest.approx(2 * math.log(1.5))
    # the adaptive stake stops betting once the evidence runs against it
    assert betting_log_wealth([-1.0, -1.0], 0.5, "greater") == pytest.approx(math.log(0.5))
    assert betting_log_wealth([-3.0], 0.5) == betting_log_wealth([-1.0], 0.5)  # clipped
    assert anytime_pvalue(-2.0) == anytime_pvalue(0.0) == 1.0
    assert anytime_pvalue(math.log(40)) == pytest.approx(0.025)
    with pytest.raises(ValueError):
        betting_log_wealth([1.0], 1.0)


