"""Reference answers for the statistics tests, computed independently of orchestrator.bench.stats:
exact bootstrap distributions of medians (binomial tails), exact Mann-Whitney p-values by
enumerating every split, and the documented scipy recipe called directly."""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats as scipy_stats

# Monte Carlo standard error of a tail probability estimated from 2000 bootstrap resamples:
# sqrt(p (1 - p) / B) at p = 0.025. The exact cases below only use quantiles whose CDF step
# brackets the target probability by at least 5 of these on both sides, so 2000 resamples land
# on the exact value with certainty for practical purposes (a 5-sigma miss is ~3e-7).
MC_SE_2000 = math.sqrt(0.025 * 0.975 / 2000)


# --- independent references ---------------------------------------------------------------


def exact_bootstrap_median(sample: list[float]) -> dict[float, float]:
    """P(median of a bootstrap resample = v) for an odd-sized sample, by binomial tails."""
    n = len(sample)
    assert n % 2 == 1, "the odd-n formula: the median is one order statistic"
    need = (n + 1) // 2
    values = sorted(set(sample))
    cdf = []
    for v in values:
        p = sum(1 for x in sample if x <= v) / n
        cdf.append(sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(need, n + 1)))
    return {v: c - (cdf[i - 1] if i else 0.0) for i, (v, c) in enumerate(zip(values, cdf, strict=True))}


def exact_bootstrap_ratio(a: list[float], b: list[float]) -> dict[float, float]:
    """P(median(B*) / median(A*) = r), A and B resampled independently (the unpaired bootstrap)."""
    out: dict[float, float] = {}
    for va, pa in exact_bootstrap_median(a).items():
        for vb, pb in exact_bootstrap_median(b).items():
            out[vb / va] = out.get(vb / va, 0.0) + pa * pb
    return dict(sorted(out.items()))


def exact_quantile(distribution: dict[float, float], q: float) -> tuple[float, float]:
    """The q-quantile of a discrete distribution and its distance (in probability) to the step edges."""
    below = 0.0
    for value, mass in distribution.items():
        if below + mass > q:
            return value, min(q - below, below + mass - q)
        below += mass
    raise AssertionError("probabilities do not sum to 1")


def exact_interval(distribution: dict[float, float], confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    (low, margin_low), (high, margin_high) = (
        exact_quantile(distribution, tail),
        exact_quantile(distribution, 1 - tail),
    )
    # The case is only a fair test if 2000 resamples cannot straddle a step edge.
    assert min(margin_low, margin_high) > 5 * MC_SE_2000, (margin_low, margin_high)
    return low, high


def scipy_ratio_ci(a, b, *, seed: int = 0) -> tuple[float, float]:
    """The documented recipe, called on scipy directly."""
    result = scipy_stats.bootstrap(
        (np.asarray(a, float), np.asarray(b, float)),
        lambda x, y, axis: np.median(y, axis=axis) / np.median(x, axis=axis),
        n_resamples=2000,
        confidence_level=0.95,
        method="percentile",
        vectorized=True,
        paired=False,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def exact_mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided exact p: the share of all splits of the pooled values whose U is as extreme."""
    pooled = a + b
    m, n = len(a), len(b)

    def u_of(xs, ys):
        return sum((x > y) + 0.5 * (x == y) for x in xs for y in ys)

    centre = m * n / 2
    observed = abs(u_of(a, b) - centre)
    splits = list(itertools.combinations(range(m + n), m))
    extreme = 0
    for chosen in splits:
        xs = [pooled[i] for i in chosen]
        ys = [pooled[i] for i in range(m + n) if i not in chosen]
        extreme += abs(u_of(xs, ys) - centre) >= observed - 1e-12
    return extreme / len(splits)
