"""Statistics of latency samples: summaries, A/B comparisons and verdicts.

A benchmark's independent unit is the *run* (one agent process): latencies inside one process
share its caches, clocks, thermal state and allocator, so they are correlated and pooling them
as independent draws makes every interval and p-value far too confident. ``compare_runs``
therefore works on runs, as asv and pyperf do (many processes, several values per process):

- the ratio of medians ``median(B) / median(A)`` of every inference (below 1: B is faster),
- its 95% confidence interval from a *hierarchical* bootstrap: resample the runs, then the
  inferences within each resampled run, and take the pooled median (scipy.stats.bootstrap
  resamples one level only; the small vectorised resampler is ``hierarchical_medians``),
- the two-sided Mann-Whitney U p-value of the per-run medians (scipy.stats.mannwhitneyu),
- the between-run spread of each side (range of its per-run medians, relative to their median),
  and whether the runs disagree more than the effect,
- a verdict, like asv's: a change is only called when it is statistically significant
  (p < alpha AND the CI excludes 1) AND larger than an explicit threshold
  (ratio < 1/(1+threshold): "faster"; ratio > 1+threshold: "slower");
  everything else is "no significant change", or "too few runs" when no rank test on that many
  runs could reach p < alpha (4 runs per side at alpha 0.05).

``compare`` is the one-level version for samples that really are independent (each value its
own run): scipy.stats.bootstrap of the ratio of medians and the U test of the values.

numpy/scipy do the arithmetic; this module only decides what to ask them and what the answer means.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

import numpy as np

from orchestrator.bench.records import ComparisonRecord, SummaryRecord


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported on first use: it costs ~1.5 s, which every `orch` call would pay at start-up.
    (scipy has no type information: what it returns is untyped.)"""
    return importlib.import_module("scipy.stats")


Verdict = Literal["faster", "slower", "no significant change", "too few samples", "too few runs"]
FASTER: Verdict = "faster"
SLOWER: Verdict = "slower"
NO_CHANGE: Verdict = "no significant change"
TOO_FEW: Verdict = "too few samples"
TOO_FEW_RUNS: Verdict = "too few runs"
# How a comparison was made: one-level (compare) or on runs (compare_runs).
Method = Literal["independent samples", "hierarchical bootstrap CI; U test of per-run medians"]
INDEPENDENT: Method = "independent samples"
RUN_METHOD: Method = "hierarchical bootstrap CI; U test of per-run medians"

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.05
DEFAULT_RESAMPLES = 2000
# Fewer samples than this per side cannot support a bootstrap CI or a meaningful U test.
MIN_SAMPLES = 3
# A hierarchical interval needs at least two runs per side: with one, nothing says how runs vary.
MIN_RUNS_CI = 2
# The resampler works in chunks of at most this many values (memory stays ~100 MB for any run length).
_CHUNK_VALUES = 4_000_000


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

    def as_dict(self) -> SummaryRecord:
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
    verdict: Verdict
    # Run-level facts (compare_runs); 0 / NaN for compare(), whose values are each their own run.
    runs_a: int = 0
    runs_b: int = 0
    spread_a: float = float("nan")  # range of A's per-run medians / their median
    spread_b: float = float("nan")
    runs_disagree: bool = False  # the runs of a side differ more than the effect (and the threshold)
    method: Method = INDEPENDENT

    @property
    def change_percent(self) -> float:
        """Change of the median latency in percent (negative: B is faster)."""
        return (self.ratio - 1.0) * 100.0

    def as_dict(self) -> ComparisonRecord:
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
            "runs_a": self.runs_a,
            "runs_b": self.runs_b,
            "run_spread_a": self.spread_a,
            "run_spread_b": self.spread_b,
            "runs_disagree": self.runs_disagree,
            "method": self.method,
        }


def _array(samples: Sequence[float] | np.ndarray) -> np.ndarray:
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
    samples: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
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


def verdict_for(  # noqa: PLR0913 -- the rule's six inputs, named at every call so none is swapped
    *, ratio: float, ci_low: float, ci_high: float, p_value: float, threshold: float, alpha: float
) -> Verdict:
    """The asv-style decision, kept apart so its rule is testable on its own."""
    significant = p_value < alpha and (ci_high < 1.0 or ci_low > 1.0)
    if significant and ratio < 1.0 / (1.0 + threshold):
        return FASTER
    if significant and ratio > 1.0 + threshold:
        return SLOWER
    return NO_CHANGE


@dataclass(frozen=True, kw_only=True)
class _Sides:
    """The two sides' pooled sizes and medians, and their ratio (B over A)."""

    n_a: int
    n_b: int
    median_a: float
    median_b: float

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray) -> _Sides:
        median_a, median_b = float(np.median(a)), float(np.median(b))
        if median_a <= 0:
            raise ValueError("baseline median must be positive")
        return cls(n_a=int(a.size), n_b=int(b.size), median_a=median_a, median_b=median_b)

    @property
    def ratio(self) -> float:
        return self.median_b / self.median_a


@dataclass(frozen=True, kw_only=True)
class _Evidence:
    """What a comparison found beyond the medians: the ratio's interval, the p-value and the verdict,
    and (compare_runs) the run-level facts. The defaults: too few samples for any of it."""

    ci_low: float = float("nan")
    ci_high: float = float("nan")
    p_value: float = float("nan")
    verdict: Verdict = TOO_FEW
    runs_a: int = 0
    runs_b: int = 0
    spread_a: float = float("nan")
    spread_b: float = float("nan")
    method: Method = INDEPENDENT


def _comparison(sides: _Sides, evidence: _Evidence, *, threshold: float, alpha: float) -> Comparison:
    effect = abs(sides.ratio - 1.0)
    return Comparison(
        n_a=sides.n_a,
        n_b=sides.n_b,
        median_a=sides.median_a,
        median_b=sides.median_b,
        ratio=sides.ratio,
        ci_low=evidence.ci_low,
        ci_high=evidence.ci_high,
        p_value=evidence.p_value,
        threshold=threshold,
        alpha=alpha,
        verdict=evidence.verdict,
        runs_a=evidence.runs_a,
        runs_b=evidence.runs_b,
        spread_a=evidence.spread_a,
        spread_b=evidence.spread_b,
        # NaN spreads (one-level compare) compare False: no runs to disagree.
        runs_disagree=max(evidence.spread_a, evidence.spread_b) > max(effect, threshold),
        method=evidence.method,
    )


def compare(  # noqa: PLR0913 -- the samples, then the method's keyword-only knobs as scipy names them
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
    sides = _Sides.of(a, b)
    if a.size < MIN_SAMPLES or b.size < MIN_SAMPLES:
        return _comparison(sides, _Evidence(), threshold=threshold, alpha=alpha)
    ratio = sides.ratio
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
    verdict = verdict_for(
        ratio=ratio, ci_low=ci_low, ci_high=ci_high, p_value=p_value, threshold=threshold, alpha=alpha
    )
    evidence = _Evidence(ci_low=ci_low, ci_high=ci_high, p_value=p_value, verdict=verdict)
    return _comparison(sides, evidence, threshold=threshold, alpha=alpha)


# --------------------------------------------------------------------------- runs


# One agent run's latencies (a list, or an array already made from one).
Run = Sequence[float] | np.ndarray


def _runs(runs: Sequence[Run]) -> list[np.ndarray]:
    arrays = [_array(run) for run in runs]
    if not arrays:
        raise ValueError("a side needs at least one run")
    return arrays


def run_medians(runs: Sequence[Run]) -> np.ndarray:
    return np.array([float(np.median(run)) for run in _runs(runs)])


def run_spread(runs: Sequence[Run]) -> float:
    """How much the runs of one side disagree: (max - min) of the per-run medians over their median.
    0 for a single run (nothing to disagree with)."""
    medians = run_medians(runs)
    centre = float(np.median(medians))
    return float(np.ptp(medians) / centre) if centre > 0 else 0.0


def min_rank_p(runs_a: int, runs_b: int) -> float:
    """The smallest two-sided p-value a rank test of runs_a vs runs_b values can give (complete
    separation, no ties): 2 / C(m + n, m). At or above alpha no verdict is possible."""
    if runs_a < 1 or runs_b < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(runs_a + runs_b, runs_a))


def hierarchical_medians(runs: Sequence[Run], *, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap distribution of the pooled median under two-level resampling.

    Each resample draws as many runs as there are, with replacement; each drawn run contributes
    as many inferences as it has, drawn with replacement from that run; the statistic is the median
    of everything drawn. Runs of different lengths are padded with NaN (sorted last, not counted)."""
    arrays = _runs(runs)
    sizes = np.array([a.size for a in arrays])
    count, longest = len(arrays), int(sizes.max())
    padded = np.zeros((count, longest))
    for index, values in enumerate(arrays):
        padded[index, : values.size] = values
    # Slots past a drawn run's end are padding, half of it below every value and half above, so the
    # drawn values' median sits at row position width//2 - 1 or width//2 of every row and one
    # partition finds it (a sort costs 2-3 times more on long runs).
    below, above = float(padded.min()) - 1.0, float(padded.max()) + 1.0
    width = count * longest
    kth = (width // 2 - 1, width // 2) if width > 1 else (0,)
    slots = np.arange(longest)
    out = np.empty(resamples)
    chunk = max(1, _CHUNK_VALUES // width)
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        picked = rng.integers(0, count, size=(size, count))  # which runs
        lengths = sizes[picked]  # (size, count)
        uniform = rng.random((size, count, longest), dtype=np.float32)
        within = np.minimum(uniform * lengths[..., None], lengths[..., None] - 1).astype(np.intp)
        drawn = padded[picked[..., None], within]
        total = lengths.sum(axis=1)
        padding = width - total
        if padding.any():
            unused = slots >= lengths[..., None]
            rank = np.cumsum(unused.reshape(size, -1), axis=1).reshape(unused.shape)
            drawn[unused] = above
            drawn[unused & (rank <= (padding // 2)[:, None, None])] = below
        rows = np.partition(drawn.reshape(size, -1), kth, axis=1)
        line = np.arange(size)
        low, high = padding // 2 + (total - 1) // 2, padding // 2 + total // 2
        out[start : start + size] = (rows[line, low] + rows[line, high]) / 2
    return out


# Up to this many splits of the per-run medians, a tied U test is enumerated exactly.
_EXACT_SPLITS = 50_000


def _rank_p(medians_a: np.ndarray, medians_b: np.ndarray) -> float:
    """Two-sided U test of the per-run medians. Few runs are the normal case, where the normal
    approximation is poor: without ties scipy's exact null distribution, with ties an exact
    enumeration of every split (scipy.stats.permutation_test of |U - mn/2|); only beyond
    ``_EXACT_SPLITS`` splits the tie-corrected normal approximation."""
    pooled = np.concatenate([medians_a, medians_b])
    if np.ptp(pooled) == 0:
        return 1.0
    scipy_stats = _scipy_stats()
    if np.unique(pooled).size == pooled.size:
        return float(scipy_stats.mannwhitneyu(medians_a, medians_b, method="exact").pvalue)
    if math.comb(pooled.size, medians_a.size) > _EXACT_SPLITS:
        return float(scipy_stats.mannwhitneyu(medians_a, medians_b, method="asymptotic").pvalue)
    centre = medians_a.size * medians_b.size / 2

    def distance(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(
            np.abs(scipy_stats.mannwhitneyu(x, y, axis=axis, method="asymptotic").statistic - centre)
        )

    result = scipy_stats.permutation_test(
        (medians_a, medians_b),
        distance,
        permutation_type="independent",
        alternative="greater",
        n_resamples=np.inf,
        vectorized=True,
    )
    return float(result.pvalue)


def compare_runs(  # noqa: PLR0913 -- the runs, then the method's keyword-only knobs as compare's
    baseline: Sequence[Run],
    candidate: Sequence[Run],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Compare candidate B against baseline A, each given as its runs (one list of latencies per
    agent process; smaller is better)."""
    if threshold < 0:
        raise ValueError("threshold must be >= 0")
    runs_a, runs_b = _runs(baseline), _runs(candidate)
    a, b = np.concatenate(runs_a), np.concatenate(runs_b)
    sides = _Sides.of(a, b)
    ratio = sides.ratio
    medians_a, medians_b = run_medians(runs_a), run_medians(runs_b)
    ci_low = ci_high = float("nan")
    if len(runs_a) >= MIN_RUNS_CI and len(runs_b) >= MIN_RUNS_CI:
        if np.ptp(a) == 0 and np.ptp(b) == 0:
            ci_low = ci_high = ratio  # constant samples: the bootstrap distribution is a point
        else:
            rng = np.random.default_rng(seed)
            boot_a = hierarchical_medians(runs_a, resamples=resamples, rng=rng)
            boot_b = hierarchical_medians(runs_b, resamples=resamples, rng=rng)
            tail = (1.0 - confidence) / 2 * 100
            ci_low, ci_high = (float(v) for v in np.percentile(boot_b / boot_a, [tail, 100 - tail]))
    p_value = _rank_p(medians_a, medians_b)
    if min_rank_p(len(runs_a), len(runs_b)) >= alpha or math.isnan(ci_low):
        verdict = TOO_FEW_RUNS
    else:
        verdict = verdict_for(
            ratio=ratio, ci_low=ci_low, ci_high=ci_high, p_value=p_value, threshold=threshold, alpha=alpha
        )
    evidence = _Evidence(
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        verdict=verdict,
        runs_a=len(runs_a),
        runs_b=len(runs_b),
        spread_a=run_spread(runs_a),
        spread_b=run_spread(runs_b),
        method=RUN_METHOD,
    )
    return _comparison(sides, evidence, threshold=threshold, alpha=alpha)


def median_ci_runs(
    runs: Sequence[Run], *, confidence: float = 0.95, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Hierarchical bootstrap interval of the median of all inferences of several runs (the report's
    p50 error bars); one run gives the one-level interval of ``median_ci``, a bound on what one
    process can show, not on how processes vary."""
    arrays = _runs(runs)
    if len(arrays) < MIN_RUNS_CI:
        return median_ci(arrays[0], confidence=confidence, resamples=resamples, seed=seed)
    pooled = np.concatenate(arrays)
    if np.ptp(pooled) == 0:
        value = float(pooled[0])
        return value, value
    boot = hierarchical_medians(arrays, resamples=resamples, rng=np.random.default_rng(seed))
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return float(low), float(high)


def runs_needed(alpha: float = DEFAULT_ALPHA) -> int:
    """Fewest runs per side (equal on both) for which a verdict is possible at all."""
    runs = 1
    while min_rank_p(runs, runs) >= alpha:
        runs += 1
    return runs
