"""Exact paired tests, multiplicity corrections and alpha spending. Pure math, no I/O.

- `sign_flip_pvalue`: the paired permutation test on score differences. Under the null
  hypothesis (the prompt change does nothing) each paired difference is as likely to have
  either sign, so the null distribution of the sum is the distribution over all 2^n sign
  flips. It is computed exactly by convolution (zero differences carry no information and drop
  out); only when the differences take so many distinct values that the exact distribution
  would exceed `max_states` support points does it fall back to a seeded Monte Carlo estimate
  (never with binary outcomes, never below a few hundred pairs).
- `mcnemar_pvalue`: the exact McNemar (binomial) test on pass flips; with pass/fail scores it
  equals the sign-flip test.
- `mcnemar_pvalue`: display only (the verdicts never decide on it): the two-sided exact
  McNemar test shown beside each bucket.
- `two_sample_pvalue`: the one-sided two-sample permutation test of one task's candidate
  scores against its own baseline record (history + baseline trials). With pass/fail scores it
  is Fisher's exact test (hypergeometric); with graded scores it enumerates every split when
  there are at most `max_splits` of them, else draws seeded random splits.
- `stratified_pvalue`: the exact stratified Fisher test that the candidate passes more (or
  less) often than each task's own record (efficacy, held-out tasks, the bucket family).
- `holm`: Holm's step-down correction, with optional weights (weighted Bonferroni-Holm).
- `spent_alpha`: Lan-DeMets alpha-spending functions (a Pocock-type function, an O'Brien-
  Fleming-type one, a linear one, and `blend`: 0.3 Pocock + 0.7 O'Brien-Fleming).
  `look_alpha` tests each look at the alpha spent since the previous look (union-bound
  increments): valid at any correlation between looks, but
  conservative; these are not Pocock's or O'Brien-Fleming's exact group-sequential boundaries.
- `betting_log_wealth`: the sign-flip test in its anytime-valid form. Under the null each
  paired difference is symmetric about zero given everything seen before it, so a bettor who
  stakes a predictable share of their wealth on the sign of each new difference holds a
  nonnegative martingale; by Ville's inequality the wealth ever reaches 1/alpha with
  probability at most alpha, however often it is looked at and however the next trials are
  chosen. 1 / (the largest wealth seen) is therefore a valid p-value under optional stopping.
  The stake is adaptive (aGRAPA, Waudby-Smith & Ramdas 2023): before each difference it is the
  growth-rate-optimal stake for the differences seen so far, clipped to [0, `max_bet`], so a
  consistent drop is bet on ever harder and noise is bet on little.

Any number k of identical non-zero differences gets exactly the p-value of the sign-flip test,
2^-k one-sided: six equal drops give 1/64, never 0: the zero spread of such a sample is never
read as certainty, as a bootstrap interval of zero width would be.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence
from typing import Literal

Alternative = Literal["greater", "less", "two-sided"]
OneSided = Literal["greater", "less"]
Spending = Literal["pocock", "obrien-fleming", "linear", "blend"]
BLEND_POCOCK = 0.3
"""Share of `blend` spending that follows the Pocock-type function (the rest O'Brien-Fleming):
enough for a plain fix of a held-out task to stop at its second look (4 trials at noise 0),
most of the alpha kept for the late looks a flaky task needs."""

_SCALE = 10**6
"""Differences are compared on a grid of 1e-6 (scores are fractions of a few assertions)."""


def _grid(diffs: Sequence[float]) -> list[int]:
    return [abs(round(d * _SCALE)) for d in diffs if round(d * _SCALE) != 0]


def _null_distribution(magnitudes: Sequence[int], max_states: int) -> dict[int, int] | None:
    """Counts of each achievable signed sum over all 2^n sign assignments (None if too big)."""
    dist: dict[int, int] = {0: 1}
    for m in magnitudes:
        nxt: dict[int, int] = {}
        for s, c in dist.items():
            nxt[s + m] = nxt.get(s + m, 0) + c
            nxt[s - m] = nxt.get(s - m, 0) + c
        if len(nxt) > max_states:
            return None
        dist = nxt
    return dist


def sign_flip_pvalue(
    diffs: Sequence[float],
    alternative: Alternative = "greater",
    *,
    max_states: int = 200_000,
    n_resamples: int = 20_000,
    seed: int = 0,
) -> float:
    """p-value of the paired sign-flip permutation test on the sum of `diffs` (cand - base).

    `greater`: evidence that the candidate scores higher; `less`: lower; `two-sided`: either.
    No differences, or only zero differences, give p = 1.
    """
    mags = _grid(diffs)
    if not mags:
        return 1.0
    observed = sum(round(d * _SCALE) for d in diffs)
    dist = _null_distribution(mags, max_states)
    if dist is not None:
        total = 2 ** len(mags)
        ge = sum(c for s, c in dist.items() if s >= observed)
        le = sum(c for s, c in dist.items() if s <= observed)
        two = sum(c for s, c in dist.items() if abs(s) >= abs(observed))
        counts = {"greater": ge, "less": le, "two-sided": two}
        return min(1.0, counts[alternative] / total)
    rng = random.Random(seed)
    hits = 0
    for _ in range(n_resamples):
        s = sum(m if rng.random() < 0.5 else -m for m in mags)
        if alternative == "greater":
            hits += s >= observed
        elif alternative == "less":
            hits += s <= observed
        else:
            hits += abs(s) >= abs(observed)
    return (hits + 1) / (n_resamples + 1)


def mcnemar_pvalue(fixed: int, broken: int, alternative: Alternative = "two-sided") -> float:
    """Exact McNemar test on discordant pairs (fail->pass `fixed`, pass->fail `broken`)."""
    n = fixed + broken
    if n == 0:
        return 1.0

    def upper(k: int) -> float:  # P(X >= k), X ~ Bin(n, 1/2)
        return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n

    if alternative == "greater":
        return upper(fixed)
    if alternative == "less":
        return upper(broken)
    return min(1.0, 2 * upper(max(fixed, broken)))


def holm(
    pvalues: Sequence[float], alpha: float, weights: Sequence[float] | None = None
) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise error `alpha`.

    With `weights` (positive, any scale) this is the weighted Bonferroni-Holm procedure: at each
    step the hypothesis with the smallest p/w is tested against alpha * w / (sum of the weights
    still in play). Equal weights give the classic Holm procedure.
    """
    n = len(pvalues)
    w = [1.0] * n if weights is None else [float(x) for x in weights]
    if len(w) != n or any(x <= 0 for x in w):
        raise ValueError("holm: one positive weight per p-value")
    order = sorted(range(n), key=lambda i: pvalues[i] / w[i])
    rejected = [False] * n
    remaining = math.fsum(w)
    for i in order:
        if pvalues[i] <= alpha * w[i] / remaining + 1e-15:
            rejected[i] = True
            remaining -= w[i]
        else:
            break
    return rejected


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _phi_inv(p: float) -> float:
    """Inverse standard normal CDF by bisection (accurate to ~1e-12; no SciPy needed)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _phi(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def spent_alpha(t: float, alpha: float, kind: Spending = "pocock") -> float:
    """Cumulative alpha spent at information fraction t in [0, 1] (Lan-DeMets functions)."""
    t = min(max(t, 0.0), 1.0)
    if t == 0.0:
        return 0.0
    if kind == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    if kind == "obrien-fleming":
        z = _phi_inv(1.0 - alpha / 2.0)
        return min(alpha, 2.0 * (1.0 - _phi(z / math.sqrt(t))))
    if kind == "blend":  # a mixture of two spending functions is one
        return (BLEND_POCOCK * spent_alpha(t, alpha, "pocock")
                + (1.0 - BLEND_POCOCK) * spent_alpha(t, alpha, "obrien-fleming"))
    return alpha * t


SPENDING_NAMES: dict[str, str] = {
    "pocock": "Pocock-type", "obrien-fleming": "O'Brien-Fleming-type", "linear": "linear",
    "blend": f"{BLEND_POCOCK:g} Pocock-type + {1 - BLEND_POCOCK:g} O'Brien-Fleming-type"}
"""How a verdict names each spending function."""


def look_alpha(t_now: float, t_before: float, alpha: float, kind: Spending = "pocock") -> float:
    """Nominal level of one look: the alpha spent between the previous look and this one.

    Testing each look at its increment keeps P(any false rejection) <= alpha by the union
    bound, whatever the correlation between looks (conservative, valid for exact tests)."""
    return max(0.0, spent_alpha(t_now, alpha, kind) - spent_alpha(t_before, alpha, kind))


def betting_log_wealth(diffs: Sequence[float], max_bet: float, alternative: OneSided = "less"
                       ) -> float:
    """Log-wealth of the aGRAPA sign-flip bettor over the paired differences d (clipped to
    [-1, 1]) in the order given: prod(1 + b_i * s * d_i), s = -1 when betting that the
    candidate scores lower (`less`) and +1 for `greater`.

    b_i depends only on d_1..d_{i-1}: the approximate growth-rate-optimal stake
    mean / (mean^2 + variance) of the signed differences so far (shrunk toward a prior drop of
    0.5 over one pseudo-observation), clipped to [0, max_bet]; max_bet < 1 keeps every factor
    positive."""
    if not 0.0 <= max_bet < 1.0:
        raise ValueError("max_bet must be in [0, 1)")
    s = -1.0 if alternative == "less" else 1.0
    total, n, sum_x, sum_x2 = 0.0, 1, 0.5, 0.25
    for raw in diffs:
        x = s * min(1.0, max(-1.0, raw))
        mean = sum_x / n
        var = max(sum_x2 / n - mean * mean, 0.0)
        bet = min(max_bet, max(0.0, mean / (mean * mean + var + 1e-12)))
        total += math.log1p(bet * x)
        n += 1
        sum_x += x
        sum_x2 += x * x
    return total
def anytime_pvalue(max_log_wealth: float) -> float:
    """The p-value of a betting test: 1 / (largest wealth reached at any look), capped at 1."""
    return 1.0 if max_log_wealth <= 0.0 else math.exp(-max_log_wealth)


def _hypergeom_lower(base_pass: int, base_n: int, cand_pass: int, cand_n: int) -> float:
    """P(X <= cand_pass), X the candidate's share of all passes when the labels are shuffled."""
    total, passes = base_n + cand_n, base_pass + cand_pass
    denom = math.comb(total, cand_n)
    return min(1.0, sum(math.comb(passes, k) * math.comb(total - passes, cand_n - k)
                        for k in range(0, cand_pass + 1)) / denom)


def two_sample_pvalue(base: Sequence[float], cand: Sequence[float], *,
                      max_splits: int = 5_000, n_resamples: int = 2_000, seed: int = 0) -> float:
    """One-sided p-value that `cand` scores lower than `base` (two-sample permutation test on
    the candidate's mean; exact Fisher test for pass/fail scores). Empty sides give 1."""
    if not base or not cand:
        return 1.0
    if all(x in (0.0, 1.0) for x in (*base, *cand)):
        return _hypergeom_lower(int(sum(base)), len(base), int(sum(cand)), len(cand))
    pooled = [round(x * _SCALE) for x in (*base, *cand)]
    observed = sum(round(x * _SCALE) for x in cand)
    k = len(cand)
    if math.comb(len(pooled), k) <= max_splits:
        from itertools import combinations
        hits = total = 0
        for idx in combinations(range(len(pooled)), k):
            total += 1
            hits += sum(pooled[i] for i in idx) <= observed
        return hits / total
    rng = random.Random(seed)
    hits = sum(sum(rng.sample(pooled, k)) <= observed for _ in range(n_resamples))
    return (hits + 1) / (n_resamples + 1)


def wilson_upper(successes: float, n: int, z: float = 1.2816) -> float:
    """Upper end of the Wilson score interval of a rate (one-sided 90% at the default z)."""
    if n <= 0:
        return 1.0
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def _hypergeom_pmf(passes: int, total: int, draws: int) -> list[float]:
    denom = math.comb(total, draws)
    return [math.comb(passes, k) * math.comb(total - passes, draws - k) / denom
            for k in range(draws + 1)]


def stratified_pvalue(strata: Sequence[tuple[int, int, int, int]],
                      alternative: OneSided = "greater") -> float:
    """One-sided p-value that the candidate passes more (`greater`) or less (`less`) often
    than each task's own record: strata of (record passes, record trials, candidate passes,
    candidate trials), labels permuted within each task only (an exact stratified Fisher
    test: the null distribution of the candidate's total passes is the convolution of the
    tasks' hypergeometric laws)."""
    dist = [1.0]
    observed = 0
    for ref_pass, ref_n, cand_pass, cand_n in strata:
        if cand_n == 0:
            continue
        observed += cand_pass
        pmf = _hypergeom_pmf(ref_pass + cand_pass, ref_n + cand_n, cand_n)
        nxt = [0.0] * (len(dist) + len(pmf) - 1)
        for i, a in enumerate(dist):
            for j, b in enumerate(pmf):
                nxt[i + j] += a * b
        dist = nxt
    tail = dist[observed:] if alternative == "greater" else dist[:observed + 1]
    return min(1.0, math.fsum(tail))


def wilson_lower(successes: float, n: int, z: float = 1.2816) -> float:
    """Lower end of the Wilson score interval of a rate (one-sided 90% at the default z)."""
    if n <= 0:
        return 0.0
    return 1.0 - wilson_upper(n - successes, n, z)


# --- per-task Bayes factors of a drop (harm detection) ----------------------------------------

PRIOR = 0.5
"""Jeffreys' prior Beta(1/2, 1/2) on a task's pass rate: a record of 12 passes puts its rate
near 0.96 (the uniform prior's 0.93 would read a reliable task as a flaky one)."""
_GRID = 128
"""Midpoints of the quadrature over the record's pass rate (the truncated H1 prior)."""


def _lbeta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _logsumexp(xs: Sequence[float]) -> float:
    top = max(xs)
    if top == -math.inf:
        return -math.inf
    return top + math.log(math.fsum(math.exp(x - top) for x in xs))


@functools.lru_cache(maxsize=200_000)
def drop_log_bf(ref_pass: int, ref_n: int, cand_pass: int, cand_n: int, drop: float,
                floor: float = 0.01) -> tuple[float, float]:
    """(log Bayes factor, P(rate > drop)) of "the candidate's pass rate is the record's rate
    minus `drop`" (H1) against "it is the record's rate" (H0), for a task whose record passed
    `ref_pass` of `ref_n` trials and whose candidate passed `cand_pass` of `cand_n`.

    The record's rate p has the posterior Beta(ref_pass + 1/2, ref_n - ref_pass + 1/2)
    (Jeffreys' prior). H0's marginal likelihood is the beta-binomial one, in closed form;
    H1's integrates max(p - drop, floor) over the posterior truncated to p > drop (only a
    task whose rate
    exceeds the drop can lose it), by the midpoint rule on `_GRID` points. Under H0 the
    factor is a nonnegative martingale in the candidate's trials (a ratio of predictive
    likelihoods, H0's being the true one), so by Ville's inequality it ever reaches 1/a with
    probability at most a, however often it is looked at. The second value, the posterior
    mass above `drop`, says whether the task can lose the drop at all."""
    a, b = ref_pass + PRIOR, ref_n - ref_pass + PRIOR
    fails = cand_n - cand_pass
    log0 = _lbeta(a + cand_pass, b + fails) - _lbeta(a, b)
    lo = min(max(drop, 0.0), 1.0)
    if lo >= 1.0:
        return -math.inf, 0.0
    width = (1.0 - lo) / _GRID
    logs_w, logs_l = [], []
    base = -_lbeta(a, b) + math.log(width)
    for i in range(_GRID):
        p = lo + (i + 0.5) * width
        w = base + (a - 1.0) * math.log(p) + (b - 1.0) * math.log1p(-p)
        q = max(p - drop, floor)
        logs_w.append(w)
        logs_l.append(w + cand_pass * math.log(q) + fails * math.log1p(-q))
    mass = _logsumexp(logs_w)
    if mass == -math.inf:
        return -math.inf, 0.0
    return _logsumexp(logs_l) - mass - log0, min(1.0, math.exp(mass))


def floor_log_bf(ref_pass: int, ref_n: int, cand_pass: int, cand_n: int,
                 rate: float) -> float:
    """Log Bayes factor of "the candidate passes at `rate`" (a task broken down to the
    suite's noise floor) against "at the record's rate" (H0 as in `drop_log_bf`). A simple
    alternative: its likelihood is `rate`^passes x (1 - `rate`)^fails, so a task that stops
    passing is told apart from its record in a few trials where the sensitivity's drop (a
    rate halved still passes half the time) needs many; under H0 it is a nonnegative
    martingale like `drop_log_bf`'s, and so is any mixture of the two."""
    a, b = ref_pass + PRIOR, ref_n - ref_pass + PRIOR
    fails = cand_n - cand_pass
    log0 = _lbeta(a + cand_pass, b + fails) - _lbeta(a, b)
    rate = min(max(rate, 1e-6), 1.0 - 1e-6)
    return cand_pass * math.log(rate) + fails * math.log1p(-rate) - log0


def kde_bandwidth(ref: Sequence[float]) -> float:
    """The kernel width of the record's scores: their robust spread (the smaller of the
    standard deviation and IQR / 1.349, at least 0.05). A kernel as wide as the spread makes
    the density a predictive one (a new score's spread is the record's plus its estimate's),
    never a spiky estimate whose tails a drift of a few hundredths would read as harm; it
    still keeps two modes apart where noise reflects scores."""
    n = len(ref)
    if n < 2:
        return 0.1
    xs = sorted(ref)
    mean = math.fsum(xs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    iqr = xs[(3 * n) // 4] - xs[n // 4]
    spread = min(sd, iqr / 1.349) if iqr > 0 else sd
    return max(0.05, spread)


def shift_log_bf(ref: Sequence[float], cand: Sequence[float], drop: float,
                 contamination: float = 0.05, slack: float = 0.0) -> float:
    """Log Bayes factor of "the candidate's scores are the record's scores lowered by `drop`"
    against "they are the record's scores, moved by at most `slack` either way" (a task's own
    drift is no harm), each side a kernel density of the record (`kde_bandwidth`) mixed with
    `contamination` of a uniform score: the record's own shape, two modes where noise
    reflects scores, and no single trial worth more than a bounded factor. The no-change side
    takes its best move on a grid of nine (a profile likelihood: conservative, it favours no
    change)."""
    if not ref:
        return 0.0
    bw = kde_bandwidth(ref)
    norm = 1.0 / (len(ref) * bw * math.sqrt(2.0 * math.pi))
    keep = 1.0 - contamination

    def log_lik(shift: float) -> float:
        return math.fsum(math.log(keep * norm * math.fsum(
            math.exp(-0.5 * ((y + shift - x) / bw) ** 2) for x in ref) + contamination)
            for y in cand)

    moves = [slack * (k / 4.0 - 1.0) for k in range(9)] if slack > 0 else [0.0]
    return log_lik(drop) - max(log_lik(-m) for m in moves)


def pooled_drop_pvalue(strata: Sequence[tuple[int, int, int, int]], drift: float = 0.0
                       ) -> float:
    """One-sided p-value that the candidate passes less often than the tasks' records, over
    all tasks at once, the common drift `drift` (in pass rate) removed first: the sum over
    tasks of (candidate passes - expected), each task's expectation and beta-binomial
    variance from its record (posterior mean (passes + 0.5) / (trials + 1), plus the drift),
    standardised (normal approximation: many tasks)."""
    total = var = 0.0
    for ref_pass, ref_n, cand_pass, cand_n in strata:
        if cand_n == 0:
            continue
        mu = min(0.995, max(0.005, (ref_pass + 0.5) / (ref_n + 1.0) + drift))
        total += cand_pass - cand_n * mu
        var += cand_n * mu * (1 - mu) * (ref_n + 2.0 + cand_n) / (ref_n + 3.0)
    if var <= 0:
        return 1.0
    return _phi(total / math.sqrt(var))


def rate_above(passes: int, n: int, level: float, grid: int = 512) -> float:
    """Posterior probability that a rate is above `level`, given `passes` of `n` (Jeffreys'
    prior), by the midpoint rule in u = sqrt(1 - p): the substitution removes the prior's
    singularity at 1, so a record of 40 passes gets its mass near 1 right."""
    a, b = passes + PRIOR, n - passes + PRIOR
    lo = min(max(level, 0.0), 1.0)
    top = math.sqrt(1.0 - lo)
    if top <= 0.0:
        return 0.0
    du = top / grid
    logs = []
    for i in range(grid):
        u = (i + 0.5) * du
        p = 1.0 - u * u
        logs.append((a - 1.0) * math.log(p) + (2.0 * b - 1.0) * math.log(u) + math.log(2.0 * du)
                    - _lbeta(a, b))
    return min(1.0, math.exp(_logsumexp(logs)))
