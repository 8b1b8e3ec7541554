"""Agreement between raters: Cohen's kappa (unweighted, linear or quadratic weights),
Krippendorff's alpha (nominal, ordinal, interval, ratio; any number of raters, missing values
allowed), mean absolute error and the confusion matrix at a pass threshold.

Implemented here rather than taken from a library: the `krippendorff` package needs numpy,
which promptloop does not otherwise depend on. The tests check both coefficients against
published worked examples (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

KappaWeights = Literal["none", "linear", "quadratic"]
AlphaMetric = Literal["nominal", "ordinal", "interval", "ratio"]


def cohen_kappa(a: Sequence[int], b: Sequence[int], categories: int,
                weights: KappaWeights = "none") -> float | None:
    """Cohen's kappa of two raters' category indices in [0, categories).

    None when undefined: no items, or the expected disagreement is 0 (both raters used one and
    the same category throughout)."""
    if len(a) != len(b):
        raise ValueError(f"raters rated different numbers of items: {len(a)} and {len(b)}")
    if categories < 2:
        raise ValueError("kappa needs at least two categories")
    n = len(a)
    if n == 0:
        return None
    for x in (*a, *b):
        if not 0 <= x < categories:
            raise ValueError(f"category {x} outside 0..{categories - 1}")
    observed = [[0.0] * categories for _ in range(categories)]
    for x, y in zip(a, b, strict=True):
        observed[x][y] += 1.0 / n
    rows = [sum(r) for r in observed]
    cols = [sum(observed[i][j] for i in range(categories)) for j in range(categories)]

    def weight(i: int, j: int) -> float:
        if weights == "none":
            return 0.0 if i == j else 1.0
        d = abs(i - j) / (categories - 1)
        return d if weights == "linear" else d * d

    obs = sum(weight(i, j) * observed[i][j] for i in range(categories) for j in range(categories))
    exp = sum(weight(i, j) * rows[i] * cols[j] for i in range(categories)
              for j in range(categories))
    if exp <= 1e-15:
        return None
    return 1.0 - obs / exp


def _delta(metric: AlphaMetric, values: Sequence[float],
           totals: Sequence[float]) -> list[list[float]]:
    """Squared distances between the distinct values (sorted) under `metric`."""
    k = len(values)
    out = [[0.0] * k for _ in range(k)]
    for c in range(k):
        for e in range(c + 1, k):
            vc, ve = values[c], values[e]
            if metric == "nominal":
                d = 1.0
            elif metric == "interval":
                d = (vc - ve) ** 2
            elif metric == "ratio":
                d = ((vc - ve) / (vc + ve)) ** 2 if vc + ve else 0.0
            else:  # ordinal: ranks by the pooled value frequencies
                d = (sum(totals[c:e + 1]) - (totals[c] + totals[e]) / 2.0) ** 2
            out[c][e] = out[e][c] = d
    return out


def krippendorff_alpha(units: Sequence[Sequence[float | None]],
                       metric: AlphaMetric = "interval") -> float | None:
    """Krippendorff's alpha of reliability data: one sequence per unit (item) holding each
    rater's value or None when that rater did not rate it.

    Units with fewer than two values are not pairable and are left out. None when undefined
    (fewer than two pairable values, or no expected disagreement)."""
    values = sorted({v for unit in units for v in unit if v is not None})
    index = {v: i for i, v in enumerate(values)}
    k = len(values)
    coincidence = [[0.0] * k for _ in range(k)]
    for unit in units:
        present = [index[v] for v in unit if v is not None]
        m = len(present)
        if m < 2:
            continue
        for i, c in enumerate(present):
            for j, e in enumerate(present):
                if i != j:
                    coincidence[c][e] += 1.0 / (m - 1)
    totals = [sum(row) for row in coincidence]
    n = sum(totals)
    if n < 2:
        return None
    delta = _delta(metric, values, totals)
    observed = sum(coincidence[c][e] * delta[c][e] for c in range(k) for e in range(k))
    expected = sum(totals[c] * totals[e] * delta[c][e] for c in range(k)
                   for e in range(k)) / (n - 1)
    if expected <= 1e-15:
        return None
    return 1.0 - observed / expected


def mean_absolute_error(a: Sequence[float], b: Sequence[float]) -> float | None:
    if len(a) != len(b):
        raise ValueError(f"different lengths: {len(a)} and {len(b)}")
    if not a:
        return None
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)


@dataclass(frozen=True)
class Confusion:
    """Pass/fail at a threshold, the human label as truth and the judge as the prediction."""

    both_pass: int
    judge_only_pass: int
    """The judge passed what the human failed (false pass)."""
    human_only_pass: int
    """The judge failed what the human passed (false fail)."""
    both_fail: int

    @property
    def n(self) -> int:
        return self.both_pass + self.judge_only_pass + self.human_only_pass + self.both_fail

    @property
    def agreement(self) -> float | None:
        return (self.both_pass + self.both_fail) / self.n if self.n else None


def confusion_at(human: Sequence[float], judge: Sequence[float], threshold: float) -> Confusion:
    counts = [0, 0, 0, 0]
    for h, j in zip(human, judge, strict=True):
        hp, jp = h >= threshold, j >= threshold
        counts[0 if hp and jp else 1 if jp else 2 if hp else 3] += 1
    return Confusion(*counts)


def to_level(value: float, levels: int) -> int:
    """A value in [0, 1] rounded to the nearest of `levels` evenly spaced grades."""
    if levels < 2:
        raise ValueError("levels must be at least 2")
    return min(levels - 1, max(0, round(value * (levels - 1))))
