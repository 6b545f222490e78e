"""Statistics on synthetic samples whose answers are known in advance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrator.bench import stats


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


def test_clearly_faster_candidate():
    rng = np.random.default_rng(1)
    baseline = rng.normal(10.0, 0.5, 200)
    candidate = rng.normal(8.0, 0.4, 200)
    result = stats.compare(baseline, candidate)
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


def test_mann_whitney_exact_p_for_complete_separation_of_three():
    # Exact two-sided p for 3 vs 3 fully separated samples is 2 / C(6,3) = 0.1: not significant at 0.05.
    result = stats.compare([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])
    assert result.p_value == pytest.approx(0.1)
    assert result.ratio == pytest.approx(0.4)
    assert result.verdict == stats.NO_CHANGE


def test_too_few_samples():
    result = stats.compare([1.0, 2.0], [1.0, 2.0, 3.0])
    assert result.verdict == stats.TOO_FEW
    assert math.isnan(result.ci_low)


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


def test_median_ci_brackets_the_median():
    rng = np.random.default_rng(5)
    samples = rng.normal(20, 2, 400)
    low, high = stats.median_ci(samples)
    assert low < np.median(samples) < high
    assert high - low < 1.0  # +-0.3ish for n=400, sigma=2
    assert stats.median_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
