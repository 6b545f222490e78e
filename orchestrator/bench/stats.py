"""Statistics of latency samples: summaries, A/B comparisons and verdicts.

A comparison of a baseline A with a candidate B (both raw latency samples) gives:

- the ratio of medians ``median(B) / median(A)`` (below 1: B is faster),
- its bootstrap 95% confidence interval (scipy.stats.bootstrap, resampling both samples),
- the two-sided Mann-Whitney U p-value (scipy.stats.mannwhitneyu),
- a verdict, like asv's: a change is only called when it is statistically significant
  (p < alpha AND the CI excludes 1) AND larger than an explicit threshold
  (ratio < 1/(1+threshold): "faster"; ratio > 1+threshold: "slower");
  everything else is "no significant change".

numpy/scipy do the arithmetic; this module only decides what to ask them and what the answer means.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported on first use: it costs ~1.5 s, which every `orch` call would pay at start-up.
    (scipy has no type information: what it returns is untyped.)"""
    return importlib.import_module("scipy.stats")


FASTER = "faster"
SLOWER = "slower"
NO_CHANGE = "no significant change"
TOO_FEW = "too few samples"

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_RESAMPLES = 2000
# Fewer samples than this per side cannot support a bootstrap CI or a meaningful U test.
MIN_SAMPLES = 3


@dataclass(frozen=True, kw_only=True)
class Summary:
    n: int
    p50: float
    p90: float
    p99: float
    mean: float
    std: float
    min: float
    max: float
    iqr: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "n": self.n,
            "p50_ms": self.p50,
            "p90_ms": self.p90,
            "p99_ms": self.p99,
            "mean_ms": self.mean,
            "std_ms": self.std,
            "min_ms": self.min,
            "max_ms": self.max,
            "iqr_ms": self.iqr,
        }


@dataclass(frozen=True, kw_only=True)
class Comparison:
    n_a: int
    n_b: int
    median_a: float
    median_b: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    threshold: float
    alpha: float
    verdict: str

    @property
    def change_percent(self) -> float:
        """Change of the median latency in percent (negative: B is faster)."""
        return (self.ratio - 1.0) * 100.0

    def as_dict(self) -> dict[str, float | int | str]:
        return {
            "n_a": self.n_a,
            "n_b": self.n_b,
            "median_a_ms": self.median_a,
            "median_b_ms": self.median_b,
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "verdict": self.verdict,
            "change_percent": self.change_percent,
        }


def _array(samples: Sequence[float]) -> np.ndarray:
    array = np.asarray(samples, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError("samples must be a non-empty 1-D sequence")
    if not np.all(np.isfinite(array)):
        raise ValueError("samples contain NaN or infinity")
    return array


def summarize(samples: Sequence[float]) -> Summary:
    array = _array(samples)
    p25, p50, p75, p90, p99 = np.percentile(array, [25, 50, 75, 90, 99])
    return Summary(
        n=int(array.size),
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        mean=float(array.mean()),
        std=float(array.std(ddof=1)) if array.size > 1 else 0.0,
        min=float(array.min()),
        max=float(array.max()),
        iqr=float(p75 - p25),
    )


def _ratio_of_medians(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.median(b, axis=axis) / np.median(a, axis=axis))


def median_ci(
    samples: Sequence[float], *, confidence: float = 0.95, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap confidence interval of the median (for the p50 error bars of the report)."""
    array = _array(samples)
    if array.size < MIN_SAMPLES or np.ptp(array) == 0:
        value = float(np.median(array))
        return value, value
    result = _scipy_stats().bootstrap(
        (array,),
        np.median,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def verdict_for(
    *, ratio: float, ci_low: float, ci_high: float, p_value: float, threshold: float, alpha: float
) -> str:
    """The asv-style decision, kept apart so its rule is testable on its own."""
    significant = p_value < alpha and (ci_high < 1.0 or ci_low > 1.0)
    if significant and ratio < 1.0 / (1.0 + threshold):
        return FASTER
    if significant and ratio > 1.0 + threshold:
        return SLOWER
    return NO_CHANGE


def compare(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Compare candidate B against baseline A (latencies: smaller is better)."""
    if threshold < 0:
        raise ValueError("threshold must be >= 0")
    a, b = _array(baseline), _array(candidate)
    median_a, median_b = float(np.median(a)), float(np.median(b))
    if median_a <= 0:
        raise ValueError("baseline median must be positive")
    ratio = median_b / median_a
    if a.size < MIN_SAMPLES or b.size < MIN_SAMPLES:
        return Comparison(
            n_a=int(a.size),
            n_b=int(b.size),
            median_a=median_a,
            median_b=median_b,
            ratio=ratio,
            ci_low=float("nan"),
            ci_high=float("nan"),
            p_value=float("nan"),
            threshold=threshold,
            alpha=alpha,
            verdict=TOO_FEW,
        )
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        # Constant samples: the bootstrap distribution is a point and the U test is exact.
        ci_low = ci_high = ratio
    else:
        result = _scipy_stats().bootstrap(
            (a, b),
            _ratio_of_medians,
            n_resamples=resamples,
            confidence_level=confidence,
            method="percentile",
            vectorized=True,
            paired=False,
            rng=np.random.default_rng(seed),
        )
        ci_low, ci_high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if np.array_equal(np.unique(a), np.unique(b)) and np.ptp(a) == 0:
        p_value = 1.0
    else:
        p_value = float(_scipy_stats().mannwhitneyu(a, b, alternative="two-sided").pvalue)
    return Comparison(
        n_a=int(a.size),
        n_b=int(b.size),
        median_a=median_a,
        median_b=median_b,
        ratio=ratio,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        threshold=threshold,
        alpha=alpha,
        verdict=verdict_for(
            ratio=ratio, ci_low=ci_low, ci_high=ci_high, p_value=p_value, threshold=threshold, alpha=alpha
        ),
    )
