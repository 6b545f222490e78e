"""Run-level statistics (``stats.compare_runs``) against answers worked out independently.

A benchmark's independent unit is the agent process (a *run*); the inferences inside one run are
correlated. The references here are:

- analytic reductions of the hierarchical bootstrap to cases with exact answers: runs of one
  inference each are the ordinary bootstrap, and runs that are constant inside (equal lengths,
  an odd number of runs) are the ordinary bootstrap of the run values; both have exact
  distributions from binomial tails (stat_references.py);
- the same two-level resampling written as plain Python loops on ``random.Random`` with a fixed
  seed, many more resamples, compared within its Monte Carlo error;
- the exact Mann-Whitney p-value of the per-run medians by enumerating every split, and counts of
  what a rank test on m + n values can reach at all;
- coverage on synthetic AR(1) runs (autocorrelated latencies, as inside a real process): the
  pooled interval that treats every inference as independent misses the true ratio most of the
  time, the hierarchical one keeps close to its 95 %.

Every random sample comes from a fixed seed, so no test can be flaky.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from stat_references import (
    exact_bootstrap_median,
    exact_bootstrap_ratio,
    exact_interval,
    exact_mann_whitney_p,
)

from orchestrator.bench import stats


def pooled_values(runs: list[list[float]]) -> list[float]:
    """Every inference of every run in one list: what pooling treats as independent draws."""
    return [value for run in runs for value in run]


# --- analytic reductions ------------------------------------------------------------------


def test_runs_of_one_inference_are_the_ordinary_bootstrap():
    # With one inference per run, resampling runs and then the one inference inside is the
    # ordinary bootstrap of the values: its exact 95 % interval for these samples is [4/15, 13/12]
    # (stat_references computes the exact distribution; test_stats checks the same numbers).
    a, b = [12.0, 12, 14, 15, 15], [4.0, 4, 5, 13, 13]
    expected = exact_interval(exact_bootstrap_ratio(a, b), 0.95)
    assert expected == (pytest.approx(4 / 15), pytest.approx(13 / 12))
    result = stats.compare_runs([[x] for x in a], [[x] for x in b])
    assert (result.ci_low, result.ci_high) == (pytest.approx(expected[0]), pytest.approx(expected[1]))
    assert result.ratio == pytest.approx(5 / 14)
    assert (result.runs_a, result.runs_b, result.n_a, result.n_b) == (5, 5, 5, 5)


def test_constant_runs_are_resampled_as_runs_not_as_inferences():
    # Five runs per side, each run constant over its 30 inferences: resampling inside a run
    # changes nothing, and the pooled median of 5 drawn runs of 30 equal values is the median of
    # the 5 drawn run values. So the hierarchical interval is the exact ordinary-bootstrap
    # interval of the 5 run values per side, [4/15, 13/12]. Pooling the 150 inferences as if
    # independent gives a far narrower interval that excludes 1 (and a "significant" U test).
    a_values, b_values = [12.0, 12, 14, 15, 15], [4.0, 4, 5, 13, 13]
    a_runs = [[v] * 30 for v in a_values]
    b_runs = [[v] * 30 for v in b_values]
    low, high = exact_interval(exact_bootstrap_ratio(a_values, b_values), 0.95)
    result = stats.compare_runs(a_runs, b_runs)
    assert (result.ci_low, result.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert result.ci_low < 1.0 < result.ci_high
    # The U test of the 5 run medians per side, exactly (by enumeration): 4 and 5 tie with nothing
    # in A, 13 sits below 14 and 15.
    assert result.p_value == pytest.approx(exact_mann_whitney_p(a_values, b_values))
    assert result.verdict == stats.NO_CHANGE
    pooled = stats.compare(pooled_values(a_runs), pooled_values(b_runs))
    assert pooled.ci_high < 1.0 and pooled.p_value < 1e-6  # what pooling would have claimed


# --- the resampler against plain loops ------------------------------------------------------


def loop_hierarchical_ratio_ci(
    a_runs: list[list[float]], b_runs: list[list[float]], *, resamples: int, seed: int
) -> tuple[float, float]:
    """The two-level bootstrap of median(B)/median(A) with explicit loops and the standard library."""
    rng = random.Random(seed)

    def one(runs: list[list[float]]) -> float:
        drawn: list[float] = []
        for _ in range(len(runs)):
            run = runs[rng.randrange(len(runs))]
            drawn.extend(run[rng.randrange(len(run))] for _ in range(len(run)))
        drawn.sort()
        middle = len(drawn) // 2
        return drawn[middle] if len(drawn) % 2 else (drawn[middle - 1] + drawn[middle]) / 2

    ratios = sorted(one(b_runs) / one(a_runs) for _ in range(resamples))
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def test_vectorised_resampler_matches_a_loop_reference_on_runs_of_different_lengths():
    # Runs of different lengths and levels (a board whose runs differ, each with its own length
    # because --min-duration decides it). The loop reference uses 10,000 resamples (Monte Carlo SD
    # of its 2.5 % point ~0.7 % of the width), the implementation 2,000 (~1.5 %): 10 % of the
    # width is > 5 SDs of their difference. Pooling would give an interval ~3 times narrower.
    rng = np.random.default_rng(8)
    a_runs = [
        list(rng.normal(level, 0.4, size)) for level, size in ((10, 12), (10.6, 17), (9.7, 9), (10.3, 14))
    ]
    b_runs = [
        list(rng.normal(level, 0.4, size)) for level, size in ((9.1, 15), (9.8, 11), (9.4, 13), (9.0, 16))
    ]
    low, high = loop_hierarchical_ratio_ci(a_runs, b_runs, resamples=10_000, seed=3)
    result = stats.compare_runs(a_runs, b_runs)
    width = high - low
    assert abs(result.ci_low - low) < 0.1 * width and abs(result.ci_high - high) < 0.1 * width, (
        (result.ci_low, result.ci_high),
        (low, high),
    )
    pooled = stats.compare(pooled_values(a_runs), pooled_values(b_runs))
    assert pooled.ci_high - pooled.ci_low < 0.6 * width


def test_the_median_is_of_every_inference_and_the_p_value_of_run_medians():
    # Hand-made runs: A's pooled inferences are 1..9 and 20 -> median 5.5; B's 2 x 3 -> 3.
    a_runs = [[1.0, 2, 3], [4.0, 5, 6], [7.0, 8, 9, 20]]
    b_runs = [[3.0, 3], [3.0, 3]]
    result = stats.compare_runs(a_runs, b_runs)
    assert (result.median_a, result.median_b, result.ratio) == (5.5, 3.0, pytest.approx(3 / 5.5))
    assert (result.n_a, result.n_b, result.runs_a, result.runs_b) == (10, 4, 3, 2)
    # Per-run medians: A 2, 5, 8.5; B 3, 3. By enumeration of the 10 splits of {2, 5, 8.5, 3, 3}.
    assert exact_mann_whitney_p([2.0, 5.0, 8.5], [3.0, 3.0]) == pytest.approx(0.7)
    assert result.p_value == pytest.approx(0.7)
    # Spread: A's run medians range over 8.5 - 2 = 6.5 around their median 5; B's do not vary.
    assert result.spread_a == pytest.approx(6.5 / 5) and result.spread_b == 0.0


def test_exact_run_level_p_value_without_ties():
    a_runs = [[4.0, 4.1], [5.0, 5.2], [6.0, 6.1], [7.0, 7.3], [9.0, 9.1]]
    b_runs = [[1.0, 1.1], [2.0, 2.2], [3.0, 3.1], [8.0, 8.4]]
    medians_a = [4.05, 5.1, 6.05, 7.15, 9.05]
    medians_b = [1.05, 2.1, 3.05, 8.2]
    # Same ranks as test_stats' hand-worked case: p = 24/126 = 4/21.
    assert exact_mann_whitney_p(medians_a, medians_b) == pytest.approx(4 / 21)
    assert stats.compare_runs(a_runs, b_runs).p_value == pytest.approx(4 / 21)
    assert stats.compare_runs(b_runs, a_runs).p_value == pytest.approx(4 / 21)


# --- how many runs a verdict needs ----------------------------------------------------------


def test_fewest_runs_for_a_verdict():
    # Complete separation of m vs n values is the most extreme rank outcome: 2 of C(m+n, m) splits.
    assert stats.min_rank_p(3, 3) == pytest.approx(2 / 20)
    assert stats.min_rank_p(4, 4) == pytest.approx(2 / 70)
    assert stats.min_rank_p(2, 2) == pytest.approx(2 / 6)
    assert stats.min_rank_p(1, 9) == pytest.approx(2 / 10)
    assert stats.runs_needed(0.05) == 4 and stats.runs_needed(0.2) == 3 and stats.runs_needed(0.001) == 7
    # 3 runs per side, however far apart: no verdict is possible at alpha 0.05.
    fast = [[1.0, 1.1, 0.9]] * 3
    slow = [[10.0, 10.1, 9.9]] * 3
    assert stats.compare_runs(slow, fast).verdict == stats.TOO_FEW_RUNS
    spread = [[10.0, 10.1], [10.2, 10.3], [9.9, 10.0], [10.1, 10.2]]
    quick = [[5.0, 5.1], [5.1, 5.2], [4.9, 5.0], [5.05, 5.1]]
    result = stats.compare_runs(spread, quick)
    assert result.p_value == pytest.approx(2 / 70) and result.verdict == stats.FASTER
    # One run per side: no interval (nothing says how runs vary), no verdict.
    single = stats.compare_runs([[10.0, 11, 12]], [[5.0, 6, 7]])
    assert math.isnan(single.ci_low) and single.verdict == stats.TOO_FEW_RUNS


# --- between-run spread -----------------------------------------------------------------------


def test_runs_that_disagree_more_than_the_effect_are_flagged():
    # A's runs have medians 10 and 12 (spread 2/11 = 18 %), B's 10.3 and 10.5: the 4 % effect is
    # smaller than the disagreement between A's own runs, and bigger than the 5 % threshold is not.
    a_runs = [[10.0] * 5, [12.0] * 5]
    b_runs = [[10.3] * 5, [10.5] * 5]
    result = stats.compare_runs(a_runs, b_runs)
    assert result.spread_a == pytest.approx(2 / 11) and result.spread_b == pytest.approx(0.2 / 10.4)
    assert result.runs_disagree
    # Runs that agree within 1 % behind a 50 % effect: nothing to flag.
    steady = stats.compare_runs([[10.0] * 5, [10.1] * 5], [[5.0] * 5, [5.02] * 5])
    assert not steady.runs_disagree
    # Disagreement below the threshold is not flagged even when the effect is nil.
    calm = stats.compare_runs([[10.0] * 5, [10.2] * 5], [[10.0] * 5, [10.1] * 5], threshold=0.05)
    assert calm.spread_a == pytest.approx(0.2 / 10.1) and not calm.runs_disagree


# --- autocorrelated runs: where pooling is wrong --------------------------------------------


def ar1_runs(
    rng: np.random.Generator, runs: int, length: int, *, phi: float, scale: float = 1.0
) -> list[list[float]]:
    """Latencies of `runs` independent processes, each an AR(1) series (stationary from its first
    value): e_t = phi e_(t-1) + sqrt(1 - phi^2) z_t, latency = 10 ms * scale * exp(0.05 e_t)."""
    out = []
    for _ in range(runs):
        noise = rng.normal(size=length)
        e = [noise[0]]
        for t in range(1, length):
            e.append(phi * e[-1] + math.sqrt(1 - phi * phi) * noise[t])
        out.append([10.0 * scale * math.exp(0.05 * value) for value in e])
    return out


def test_ar1_runs_pooled_intervals_are_too_narrow_hierarchical_ones_cover():
    # 100 synthetic A/B experiments, 6 runs x 40 inferences per side, AR(1) with phi = 0.9 inside
    # each run (an effective sample of ~2 values per run), B = A's process scaled by 1.1, so the
    # true ratio of medians is exactly 1.1. Measured with these seeds: hierarchical coverage 0.95,
    # pooled 0.5; pooled U test "significant" at 0.05 in about half of null experiments, the
    # run-level test in 2-5 %. The bounds leave room for Monte Carlo error of 100 experiments
    # (SD ~2 % at 95 %, ~5 % at 50 %) and fail for either method swapped for the other.
    rng = np.random.default_rng(2024)
    covered_hierarchical = covered_pooled = 0
    false_hierarchical = false_pooled = 0
    experiments = 100
    for index in range(experiments):
        a = ar1_runs(rng, 6, 40, phi=0.9)
        b = ar1_runs(rng, 6, 40, phi=0.9, scale=1.1)
        hierarchical = stats.compare_runs(a, b, resamples=1000, seed=index)
        pooled = stats.compare(pooled_values(a), pooled_values(b), resamples=1000, seed=index)
        covered_hierarchical += hierarchical.ci_low <= 1.1 <= hierarchical.ci_high
        covered_pooled += pooled.ci_low <= 1.1 <= pooled.ci_high
        null = ar1_runs(rng, 6, 40, phi=0.9)
        false_hierarchical += stats.compare_runs(a, null, resamples=200, seed=index).p_value < 0.05
        false_pooled += (
            stats.compare(pooled_values(a), pooled_values(null), resamples=200, seed=index).p_value < 0.05
        )
    assert covered_hierarchical / experiments >= 0.88, covered_hierarchical
    assert covered_pooled / experiments <= 0.75, covered_pooled
    assert false_hierarchical / experiments <= 0.10, false_hierarchical
    assert false_pooled / experiments >= 0.30, false_pooled


def test_the_reports_p50_bars_come_from_runs_too():
    # Runs constant inside, 5 of them: the interval of the pooled median is the exact ordinary
    # bootstrap interval of the 5 run values ([1, 20] for these, by binomial tails), not the far
    # narrower one of 5 x 40 pooled inferences.
    values = [1.0, 2, 3, 10, 20]
    assert exact_interval(exact_bootstrap_median(values), 0.95) == (1.0, 20.0)
    runs = [[v] * 40 for v in values]
    assert stats.median_ci_runs(runs) == (pytest.approx(1.0), pytest.approx(20.0))
    pooled_low, pooled_high = stats.median_ci(pooled_values(runs))
    assert pooled_high - pooled_low < 10
    assert stats.median_ci_runs([values]) == stats.median_ci(values)  # one run: the one-level interval
