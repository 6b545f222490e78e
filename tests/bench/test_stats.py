"""Statistics against answers worked out independently of orchestrator.bench.stats.

Three kinds of reference:

- exact answers by hand or by enumeration: percentiles of 1..100, the exact bootstrap
  distribution of a median (binomial tails: the bootstrap median of n values is <= x_(k) when at
  least (n+1)/2 of the n draws are <= x_(k)), the exact Mann-Whitney null distribution by
  enumerating every split, the tie-corrected normal approximation written out with math.erfc;
- the documented recipe run directly on scipy with the same fixed seed (the module promises a
  2000-resample percentile bootstrap at 95%, seed 0, of the ratio of medians);
- properties of the recipe that any correct run has: a 2000-resample interval barely moves when
  the seed changes.

Every random sample below comes from a fixed seed, so no test can be flaky; where a tolerance
remains, the comment next to it says why it is wide enough for a correct implementation and
narrow enough to catch a wrong one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats
from stat_references import (
    exact_bootstrap_median,
    exact_bootstrap_ratio,
    exact_interval,
    exact_mann_whitney_p,
    scipy_ratio_ci,
)

from orchestrator.bench import stats

# --- summaries ----------------------------------------------------------------------------


def test_summary_percentiles_of_1_to_100():
    summary = stats.summarize(range(1, 101))
    assert summary.n == 100
    assert summary.p50 == pytest.approx(50.5)
    assert summary.p90 == pytest.approx(90.1)
    assert summary.p99 == pytest.approx(99.01)
    assert summary.mean == pytest.approx(50.5)
    assert summary.std == pytest.approx(math.sqrt(100 * 101 / 12))  # sample std of 1..n = sqrt(n(n+1)/12)
    assert (summary.min, summary.max, summary.iqr) == (1.0, 100.0, pytest.approx(49.5))


def test_summary_rejects_empty_and_nan():
    with pytest.raises(ValueError):
        stats.summarize([])
    with pytest.raises(ValueError):
        stats.summarize([1.0, float("nan")])


# --- the ratio: medians, not means --------------------------------------------------------


def test_ratio_is_of_medians_even_with_an_outlier():
    # Medians 11 and 5.5 (hand-worked); the means (208.6, 5.9) would give 0.028.
    result = stats.compare([10, 10, 11, 12, 1000], [5, 5, 5.5, 6, 8])
    assert (result.median_a, result.median_b) == (11.0, 5.5)
    assert result.ratio == 0.5
    assert result.change_percent == pytest.approx(-50.0)


# --- the bootstrap interval: exact bootstrap distributions ---------------------------------


def test_ratio_ci_is_the_exact_95_percent_percentile_interval():
    # Small latency samples with ties: the bootstrap distribution of median(B*)/median(A*) takes a
    # handful of values whose probabilities are computed exactly above. The 2.5 % and 97.5 %
    # points are 4/15 and 13/12 (each quantile sits >= 7 Monte Carlo SEs inside its step, so 2000
    # resamples reproduce them exactly). The 50 % interval would be [1/3, 13/15]; the "basic"
    # method reflects around the estimate 5/14 and goes negative; a mean ratio never sits on
    # these values.
    a, b = [12.0, 12, 14, 15, 15], [4.0, 4, 5, 13, 13]
    distribution = exact_bootstrap_ratio(a, b)
    assert sum(distribution.values()) == pytest.approx(1.0)
    assert exact_interval(distribution, 0.95) == (pytest.approx(4 / 15), pytest.approx(13 / 12))
    result = stats.compare(a, b)
    assert result.ratio == pytest.approx(5 / 14)
    assert (result.ci_low, result.ci_high) == (pytest.approx(4 / 15), pytest.approx(13 / 12))
    # The CI contains 1: not significant, whatever the ratio.
    assert result.verdict == stats.NO_CHANGE


def test_ratio_ci_honours_the_confidence_argument():
    a, b = [12.0, 12, 14, 15, 15], [4.0, 4, 5, 13, 13]
    # At 50 %: the 25 % and 75 % points of the same exact distribution (margins checked inside).
    low, high = exact_interval(exact_bootstrap_ratio(a, b), 0.50)
    assert (low, high) == (pytest.approx(1 / 3), pytest.approx(13 / 15))
    result = stats.compare(a, b, confidence=0.50)
    assert (result.ci_low, result.ci_high) == (pytest.approx(low), pytest.approx(high))


def test_ratio_ci_against_a_constant_baseline_is_the_candidates_median_distribution():
    # A constant baseline (10 ms) divides every bootstrap median of B by 10: the interval is the
    # exact one of median(B*) / 10. For [1, 2, 3, 10, 20]: P(median* = 1) = P(median* = 20) =
    # P(Binomial(5, 1/5) >= 3) = 0.05792, so the 2.5 % and 97.5 % points are 1 and 20.
    b = [1.0, 2, 3, 10, 20]
    assert exact_bootstrap_median(b)[1.0] == pytest.approx(0.05792)
    result = stats.compare([10.0] * 5, b)
    assert (result.ci_low, result.ci_high) == (pytest.approx(0.1), pytest.approx(2.0))
    # A tie at the median: same tails (0.05792 on 3 and on 11), so [0.3, 1.1]. Here BCa's bias
    # correction (P(median* < 4) = 0.058 but P(median* > 4) = 0.317) would cut the top to 0.5.
    tied = [3.0, 4, 4, 5, 11]
    assert exact_interval(exact_bootstrap_median(tied), 0.95) == (3.0, 11.0)
    result = stats.compare([10.0] * 5, tied)
    assert (result.ci_low, result.ci_high) == (pytest.approx(0.3), pytest.approx(1.1))


def test_median_ci_of_a_skewed_sample_is_exact():
    # Same exact distribution as above: the 95 % interval is [1, 20], the 50 % one [2, 10] (the
    # 25 % and 75 % points: CDF 0.058 < 0.25 < 0.317 and 0.683 < 0.75 < 0.942). The "basic" method
    # would give [2*3 - 20, 2*3 - 1] = [-14, 5]; a mean is neither.
    sample = [1.0, 2, 3, 10, 20]
    assert exact_interval(exact_bootstrap_median(sample), 0.95) == (1.0, 20.0)
    assert stats.median_ci(sample) == (1.0, 20.0)
    assert exact_interval(exact_bootstrap_median(sample), 0.50) == (2.0, 10.0)
    assert stats.median_ci(sample, confidence=0.50) == (2.0, 10.0)
    # With a tie at the median the percentile interval is still [3, 11] (the same binomial tails);
    # BCa's bias correction would make it [3, 5].
    tied = [3.0, 4, 4, 5, 11]
    assert exact_interval(exact_bootstrap_median(tied), 0.95) == (3.0, 11.0)
    assert stats.median_ci(tied) == (3.0, 11.0)


def test_median_ci_of_201_normal_values_sits_on_the_exact_order_statistics():
    # 201 distinct values: the exact bootstrap CDF of the median at x_(k) is
    # P(Binomial(201, k/201) >= 101). Its 2.5 % and 97.5 % points are order statistics ~14 ranks
    # either side of the median; a 2000-resample estimate is within one rank of them (its MC error
    # is ~0.4 rank), hence the +-2 ranks allowed. A 50 % interval would be ~9 ranks narrower on
    # each side; a mean interval is ~20 % narrower than a median one for normal data.
    rng = np.random.default_rng(5)
    sample = rng.normal(20, 2, 201)
    ordered = np.sort(sample)
    n = sample.size
    cdf = np.array(
        [scipy_stats.binom.sf(100, n, k / n) for k in range(1, n + 1)]
    )  # P(Bin >= 101) at x_(1..n)
    k_low = int(np.searchsorted(cdf, 0.025, side="right"))  # 0-based index of the 2.5 % point
    k_high = int(np.searchsorted(cdf, 0.975, side="right"))
    assert 80 < k_low < 100 < k_high < 120
    low, high = stats.median_ci(sample)
    assert ordered[k_low - 2] <= low <= ordered[k_low + 2]
    assert ordered[k_high - 2] <= high <= ordered[k_high + 2]
    assert stats.median_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)


# --- the bootstrap interval: the documented recipe, and its Monte Carlo precision ----------


def test_ratio_ci_is_scipys_percentile_bootstrap_with_2000_resamples_and_seed_0():
    # The module's contract (its docstring and defaults): scipy.stats.bootstrap, percentile method, 95 %,
    # 2000 unpaired resamples, seed 0. Same inputs and seed: the same numbers to rounding.
    rng = np.random.default_rng(7)
    a = rng.lognormal(np.log(10.0), 0.3, 40)
    b = rng.lognormal(np.log(9.0), 0.3, 33)  # unequal sizes: the samples are resampled apart
    result = stats.compare(a, b)
    assert (result.ci_low, result.ci_high) == pytest.approx(scipy_ratio_ci(a, b), rel=1e-12)
    assert (result.ci_low, result.ci_high) != pytest.approx(scipy_ratio_ci(a, b, seed=1), rel=1e-12)
    assert stats.compare(a, b, seed=1).ci_low == pytest.approx(scipy_ratio_ci(a, b, seed=1)[0], rel=1e-12)


def test_the_interval_barely_moves_with_the_seed():
    # With B resamples the Monte Carlo SD of a 2.5 % point is about sqrt(0.025*0.975/B) /
    # phi(1.96) / 3.92 of the interval's width: 1.5 % for B = 2000, 12 % for B = 30. Over 10 seeds
    # the spread (max - min, ~3 SDs) is then ~5 % of the width for 2000 resamples (4 % measured
    # with these samples) and ~35 % for 30; 12 % separates the two with room on both sides.
    rng = np.random.default_rng(11)
    a, b = rng.normal(10, 1, 100), rng.normal(9, 1, 100)
    runs = [stats.compare(a, b, seed=seed) for seed in range(10)]
    lows = np.array([r.ci_low for r in runs])
    highs = np.array([r.ci_high for r in runs])
    width = float(np.mean(highs - lows))
    assert np.ptp(lows) < 0.12 * width and np.ptp(highs) < 0.12 * width, (np.ptp(lows), np.ptp(highs), width)
    assert len({r.ratio for r in runs}) == 1 and len({r.p_value for r in runs}) == 1  # only the CI is random


# --- the p-value ----------------------------------------------------------------------------


def test_mann_whitney_exact_p_for_complete_separation_of_three():
    # Exact two-sided p for 3 vs 3 fully separated samples is 2 / C(6,3) = 0.1: not significant at 0.05.
    result = stats.compare([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])
    assert result.p_value == pytest.approx(0.1)
    assert result.ratio == pytest.approx(0.4)
    assert result.verdict == stats.NO_CHANGE


def test_mann_whitney_p_is_two_sided_and_exact_for_small_samples_without_ties():
    a, b = [4.0, 5.0, 6.0, 7.0, 9.0], [1.0, 2.0, 3.0, 8.0]
    # U = 16 of 20. By hand: P(U >= 16) counts the partitions of 20 - U = 0..4 into at most 4 parts
    # of at most 5, 1 + 1 + 2 + 3 + 5 = 12 of the C(9,4) = 126 splits; two-sided, 24/126 = 4/21.
    expected = exact_mann_whitney_p(a, b)
    assert expected == pytest.approx(4 / 21)
    assert stats.compare(a, b).p_value == pytest.approx(expected)
    assert stats.compare(b, a).p_value == pytest.approx(expected)  # two-sided: symmetric in A and B


def test_identical_constant_samples_have_p_1_and_no_change():
    result = stats.compare([5.0] * 6, [5.0] * 6)
    assert result.p_value == 1.0
    assert (result.ratio, result.ci_low, result.ci_high) == (1.0, 1.0, 1.0)
    assert result.verdict == stats.NO_CHANGE


def test_different_constant_samples_are_significant_by_the_tie_corrected_normal_approximation():
    # 10 x 5 ms vs 10 x 4 ms: complete separation, U = 100 (A's side), ties of 10 in each group.
    # Normal approximation with tie correction and continuity correction, by hand:
    # var = m n / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1))), z = (|U - mn/2| - 0.5) / sd.
    m = n = 10
    big_n = m + n
    var = m * n / 12 * ((big_n + 1) - 2 * (10**3 - 10) / (big_n * (big_n - 1)))
    z = (abs(100 - m * n / 2) - 0.5) / math.sqrt(var)
    expected = math.erfc(z / math.sqrt(2))  # two-sided: 2 * (1 - Phi(z))
    assert expected == pytest.approx(1.594e-5, rel=1e-3)
    result = stats.compare([5.0] * 10, [4.0] * 10)
    assert result.p_value == pytest.approx(expected, rel=1e-9)
    # The bootstrap of constant samples is a point: the CI is the ratio itself, which excludes 1.
    assert (result.ratio, result.ci_low, result.ci_high) == (0.8, 0.8, 0.8)
    assert result.verdict == stats.FASTER


# --- verdicts ---------------------------------------------------------------------------------


def test_clearly_faster_candidate():
    rng = np.random.default_rng(1)
    baseline = rng.normal(10.0, 0.5, 200)
    candidate = rng.normal(8.0, 0.4, 200)
    result = stats.compare(baseline, candidate)
    assert result.ratio == pytest.approx(np.median(candidate) / np.median(baseline))
    assert result.ratio == pytest.approx(0.8, abs=0.02)
    assert result.ci_low < result.ratio < result.ci_high < 1.0
    assert result.ci_low > 0.75
    assert result.p_value < 1e-10
    assert result.verdict == stats.FASTER
    assert result.change_percent == pytest.approx(-20, abs=2)


def test_clearly_slower_candidate():
    rng = np.random.default_rng(2)
    baseline = rng.lognormal(np.log(5.0), 0.05, 100)
    result = stats.compare(baseline, baseline * 1.3)
    assert result.ratio == pytest.approx(1.3)
    assert result.ci_low > 1.2
    assert result.verdict == stats.SLOWER


def test_same_distribution_is_no_change():
    rng = np.random.default_rng(3)
    result = stats.compare(rng.normal(10, 1, 150), rng.normal(10, 1, 150))
    assert result.ci_low < 1.0 < result.ci_high
    assert result.p_value > 0.05
    assert result.verdict == stats.NO_CHANGE


def test_significant_but_below_threshold_is_no_change():
    rng = np.random.default_rng(4)
    baseline = rng.normal(10, 0.05, 300)
    candidate = baseline * 0.98  # 2 % faster, very consistent: significant, yet under the 5 % threshold
    result = stats.compare(baseline, candidate, threshold=0.05)
    assert result.p_value < 0.001 and result.ci_high < 1.0
    assert result.verdict == stats.NO_CHANGE
    assert stats.compare(baseline, candidate, threshold=0.01).verdict == stats.FASTER


def test_too_few_samples():
    result = stats.compare([1.0, 2.0], [1.0, 2.0, 3.0])
    assert result.verdict == stats.TOO_FEW
    assert math.isnan(result.ci_low)
    assert stats.compare([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]).verdict != stats.TOO_FEW  # 3 is enough


def test_verdict_rule():
    kwargs = {"threshold": 0.1, "alpha": 0.05}
    assert stats.verdict_for(ratio=0.8, ci_low=0.75, ci_high=0.85, p_value=0.001, **kwargs) == stats.FASTER
    assert stats.verdict_for(ratio=1.25, ci_low=1.2, ci_high=1.3, p_value=0.001, **kwargs) == stats.SLOWER
    # CI crosses 1: not significant even with a small p
    assert stats.verdict_for(ratio=0.8, ci_low=0.6, ci_high=1.05, p_value=0.01, **kwargs) == stats.NO_CHANGE
    # large p
    assert stats.verdict_for(ratio=0.8, ci_low=0.75, ci_high=0.85, p_value=0.2, **kwargs) == stats.NO_CHANGE
    # within threshold (1/1.1 = 0.909)
    assert (
        stats.verdict_for(ratio=0.95, ci_low=0.94, ci_high=0.96, p_value=0.001, **kwargs) == stats.NO_CHANGE
    )


def test_verdict_boundaries():
    t, alpha = 0.1, 0.05
    sig = {"p_value": 0.001, "threshold": t, "alpha": alpha}
    # "faster" means B/A below 1/(1+t) = 0.90909 (a 10 % higher throughput), not below 1 - t = 0.9.
    assert stats.verdict_for(ratio=0.905, ci_low=0.90, ci_high=0.91, **sig) == stats.FASTER
    assert stats.verdict_for(ratio=1 / 1.1, ci_low=0.90, ci_high=0.92, **sig) == stats.NO_CHANGE  # strict
    assert stats.verdict_for(ratio=1.1, ci_low=1.05, ci_high=1.15, **sig) == stats.NO_CHANGE  # strict
    assert stats.verdict_for(ratio=1.1001, ci_low=1.05, ci_high=1.15, **sig) == stats.SLOWER
    # p must be strictly below alpha; a CI that touches 1 does not exclude it.
    kw = {"ratio": 0.8, "threshold": t, "alpha": alpha}
    assert stats.verdict_for(ci_low=0.7, ci_high=0.9, p_value=alpha, **kw) == stats.NO_CHANGE
    assert stats.verdict_for(ci_low=0.7, ci_high=1.0, p_value=0.001, **kw) == stats.NO_CHANGE
    assert stats.verdict_for(ratio=1.3, ci_low=1.0, ci_high=1.5, p_value=0.001, threshold=t, alpha=alpha) == (
        stats.NO_CHANGE
    )


def test_compare_passes_alpha_and_threshold_to_the_verdict():
    # 3 vs 3 fully separated: p = 0.1 exactly (above), ratio 0.4.
    result = stats.compare([4.0, 5.0, 6.0], [1.0, 2.0, 3.0], alpha=0.2)
    assert result.alpha == 0.2 and result.p_value == pytest.approx(0.1)
    # The exact bootstrap interval of this case reaches 3/4 at most (median(B*) <= 3,
    # median(A*) >= 4), so it excludes 1 and at alpha 0.2 the change is called.
    assert result.ci_high <= 0.75
    assert result.verdict == stats.FASTER
    assert (
        stats.compare([4.0, 5.0, 6.0], [1.0, 2.0, 3.0], alpha=0.2, threshold=2.0).verdict == stats.NO_CHANGE
    )
