"""The t distribution, the OLS slope interval and the agreement coefficients, against
published values."""

from __future__ import annotations

import random

import pytest

from promptloop.optimizer.lifecycle.agreement import (
    cohen_kappa,
    confusion_at,
    krippendorff_alpha,
    mean_absolute_error,
    to_level,
)
from promptloop.optimizer.lifecycle.stats import ols_slope, t_cdf, t_quantile


@pytest.mark.parametrize(
    ("df", "q"),
    [(1, 12.7062047), (2, 4.3026527), (5, 2.5705818), (10, 2.2281389), (30, 2.0422725)],
)
def test_t_quantile_matches_tables(df: int, q: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(q, abs=1e-6)
    assert t_quantile(0.025, df) == pytest.approx(-q, abs=1e-6)
    assert t_cdf(q, df) == pytest.approx(0.975, abs=1e-7)


def test_t_cdf_is_symmetric() -> None:
    assert t_cdf(0.0, 4) == pytest.approx(0.5)
    assert t_cdf(-1.3, 7) == pytest.approx(1 - t_cdf(1.3, 7))


def test_ols_slope_interval_by_hand() -> None:
    s = ols_slope([1, 3, 2, 5, 4])
    assert s.slope == pytest.approx(0.8)
    # se = sqrt(SSE/(n-2)/Sxx) = sqrt(3.6/3/10); t(0.975, 3) = 3.182446
    assert s.low == pytest.approx(0.8 - 3.182446 * (0.12 ** 0.5), abs=1e-5)
    assert s.high == pytest.approx(0.8 + 3.182446 * (0.12 ** 0.5), abs=1e-5)
    assert s.direction == "flat"


def test_ols_slope_directions_and_small_samples() -> None:
    assert ols_slope([0.0, 0.5, 1.0]).direction == "improving"
    assert ols_slope([1.0, 0.6, 0.1, 0.0]).direction == "declining"
    two = ols_slope([0.2, 0.4])
    assert two.slope == pytest.approx(0.2) and two.low is None and two.direction == "unknown"
    assert ols_slope([0.5]).slope is None


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers,
# twelve units, missing values; alpha nominal 0.743, ordinal 0.815, interval 0.849.
_N = None
KRIPP = [
    [1, 1, _N, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
    [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [_N, 5, 5, 5], [_N, _N, 1, 1], [_N, 3, _N, _N],
]


@pytest.mark.parametrize(("metric", "alpha"),
                         [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_krippendorff_alpha_textbook(metric: str, alpha: float) -> None:
    assert krippendorff_alpha(KRIPP, metric) == pytest.approx(alpha, abs=5e-4)  # type: ignore[arg-type]


def test_krippendorff_alpha_two_coders_binary() -> None:
    # Same paper, section A: two observers, ten units, binary values: alpha = 0.095.
    a = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    b = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    units = [[float(x), float(y)] for x, y in zip(a, b, strict=True)]
    assert krippendorff_alpha(units, "nominal") == pytest.approx(0.095, abs=5e-4)


def test_krippendorff_alpha_undefined_and_perfect() -> None:
    assert krippendorff_alpha([[1.0, 1.0], [1.0, 1.0]]) is None
    assert krippendorff_alpha([[0.2, None], [0.4]]) is None
    assert krippendorff_alpha([[0.0, 0.0], [1.0, 1.0], [0.5, 0.5]]) == pytest.approx(1.0)


def test_cohen_kappa_unweighted_textbook() -> None:
    # 50 items: both yes 20, A yes B no 5, A no B yes 10, both no 15: p_o 0.7, p_e 0.5.
    a = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(a, b, 2) == pytest.approx(0.4)


def test_cohen_kappa_linear_by_hand() -> None:
    # observed disagreement weight 1/6, expected 1/2 -> 2/3
    assert cohen_kappa([0, 1, 2], [0, 2, 2], 3, "linear") == pytest.approx(2 / 3)


def test_quadratic_kappa_equals_the_moment_identity() -> None:
    # Fleiss & Cohen (1973): quadratic-weighted kappa = 2 cov / (var_a + var_b + (mean diff)^2)
    rng = random.Random(7)
    a = [rng.randrange(5) for _ in range(60)]
    b = [min(4, max(0, x + rng.choice((-1, 0, 0, 1)))) for x in a]
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True)) / n
    va = sum((x - ma) ** 2 for x in a) / n
    vb = sum((y - mb) ** 2 for y in b) / n
    expected = 2 * cov / (va + vb + (ma - mb) ** 2)
    assert cohen_kappa(a, b, 5, "quadratic") == pytest.approx(expected)


def test_cohen_kappa_edges() -> None:
    assert cohen_kappa([], [], 3) is None
    assert cohen_kappa([1, 1], [1, 1], 3) is None
    with pytest.raises(ValueError, match="outside"):
        cohen_kappa([3], [0], 3)


def test_mae_confusion_and_levels() -> None:
    assert mean_absolute_error([0.2, 0.8], [0.4, 0.8]) == pytest.approx(0.1)
    c = confusion_at([0.9, 0.9, 0.1, 0.1, 0.7], [0.8, 0.2, 0.7, 0.0, 0.6], 0.6)
    assert (c.both_pass, c.judge_only_pass, c.human_only_pass, c.both_fail) == (2, 1, 1, 1)
    assert c.agreement == pytest.approx(0.6)
    assert [to_level(v, 5) for v in (0.0, 0.1, 0.13, 0.5, 0.9, 1.0)] == [0, 0, 1, 2, 4, 4]
