"""The exact tests, the Holm correction and alpha spending, against hand-computed values."""

from __future__ import annotations

import itertools
import math

import pytest

from optimizer.gate.compare import GatePolicy, compare_bucket
from optimizer.gate.exact import (
    holm,
    inverse_normal_combination,
    look_alpha,
    mcnemar_pvalue,
    sign_flip_pvalue,
    spent_alpha,
)
from optimizer.gate.pairing import Pair


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
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_a_single_pair_or_identical_differences_are_never_significant(value: float,
                                                                      k: int) -> None:
    """The old gate read a zero-width bootstrap interval as certainty: one 0->1 pair was
    accepted. Identical differences now get the exact p of k equal signs, 2^-k (> 0.05 for
    k <= 4), and no interval at all."""
    diffs = [value] * k
    assert sign_flip_pvalue(diffs, "greater") == pytest.approx(2.0**-k)
    pairs = [Pair(f"t{i}", 0, 0.0, value, False, value == 1.0) for i in range(k)]
    comp = compare_bucket("b", pairs, GatePolicy())
    assert comp.ci_low is None and comp.ci_high is None
    assert comp.status != "improved"
    assert comp.p_improve > 0.05


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


def test_inverse_normal_combination() -> None:
    assert inverse_normal_combination(0.5, 0.5) == pytest.approx(0.5)
    assert inverse_normal_combination(0.01, 0.01) < 0.01
    assert inverse_normal_combination(1.0, 0.001) > 0.001
    z = 2 * 1.6448536 / math.sqrt(2)
    assert inverse_normal_combination(0.05, 0.05) == pytest.approx(
        0.5 * math.erfc(z / math.sqrt(2)), rel=1e-4)
