"""Trend statistics: an OLS slope with a Student-t interval, and the t quantile it needs.

No numerical library is a dependency of promptloop, so the t distribution is computed here
from the regularised incomplete beta function (Lentz's continued fraction), and the quantile
by bisection on the CDF. tests/optimizer/lifecycle/test_stats.py checks them against table
values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

_EPS = 1e-14
_TINY = 1e-300


def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) for a, b > 0 and x in [0, 1]."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (bisection on the CDF; |error| < 1e-10)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


@dataclass(frozen=True)
class Slope:
    """An OLS slope of y on x = 0, 1, ..., n-1 with its two-sided t-interval."""

    n: int
    slope: float | None
    """None with fewer than two points."""
    low: float | None
    """Interval bounds; None with fewer than three points (no residual degrees of freedom)."""
    high: float | None

    @property
    def direction(self) -> str:
        """'improving' / 'declining' when the interval excludes 0, 'flat' when it holds 0,
        'unknown' without an interval."""
        if self.low is None or self.high is None:
            return "unknown"
        if self.low > 0:
            return "improving"
        if self.high < 0:
            return "declining"
        return "flat"


def slope(values: Sequence[float | None]) -> float | None:
    """Least-squares slope of the defined values against their position (per step; a None is a
    gap, e.g. a run without the bucket); None with fewer than 2 defined values."""
    pts = [(float(i), v) for i, v in enumerate(values) if v is not None]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def ols_slope(ys: Sequence[float], confidence: float = 0.95) -> Slope:
    """Slope of `ys` per step, with a `confidence` t-interval on n - 2 degrees of freedom."""
    n = len(ys)
    est = slope(ys)
    if est is None:
        return Slope(n, None, None, None)
    x_mean = (n - 1) / 2.0
    y_mean = sum(ys) / n
    sxx = sum((i - x_mean) ** 2 for i in range(n))
    if n < 3:
        return Slope(n, est, None, None)
    intercept = y_mean - est * x_mean
    sse = sum((y - intercept - est * i) ** 2 for i, y in enumerate(ys))
    se = math.sqrt(max(sse, 0.0) / (n - 2) / sxx)
    half = t_quantile(0.5 + confidence / 2.0, n - 2) * se
    return Slope(n, est, est - half, est + half)
