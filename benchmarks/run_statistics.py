"""Why orch's comparisons rest on runs: pooled vs hierarchical statistics on autocorrelated latencies.

    python benchmarks/run_statistics.py                  # 200 synthetic A/B experiments, ~1 min
    python benchmarks/run_statistics.py --experiments 50 --runs 10 --length 30 --phi 0.8

Each experiment draws A and B as `--runs` independent processes of `--length` inferences each, an
AR(1) series inside every process (latency = 10 ms * exp(0.05 e_t), e_t = phi e_(t-1) + noise, as
caches, clocks and heat make consecutive inferences alike), B's process scaled by 1.1: the true
ratio of medians is exactly 1.1. Printed, for the pooled statistics (every inference an independent
draw: what orch did before) and the run-level ones (``stats.compare_runs``):

- coverage: the share of 95% intervals that contain the true 1.1 (should be ~0.95),
- false positives: the share of A vs A' experiments (no difference) with p < 0.05 (should be ~0.05),

and the time one comparison takes for 10 runs per side of 300 and of 5,000 inferences (2,000
resamples). One run of the script; figures, not asserts.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from orchestrator.bench import stats


def ar1_runs(
    rng: np.random.Generator, runs: int, length: int, phi: float, scale: float = 1.0
) -> list[np.ndarray]:
    out = []
    for _ in range(runs):
        noise = rng.normal(size=length)
        e = np.empty(length)
        e[0] = noise[0]
        for t in range(1, length):
            e[t] = phi * e[t - 1] + math.sqrt(1 - phi * phi) * noise[t]
        out.append(10.0 * scale * np.exp(0.05 * e))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--experiments", type=int, default=200)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--phi", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    covered = {"pooled": 0, "runs": 0}
    false = {"pooled": 0, "runs": 0}
    for index in range(args.experiments):
        a = ar1_runs(rng, args.runs, args.length, args.phi)
        b = ar1_runs(rng, args.runs, args.length, args.phi, scale=1.1)
        null = ar1_runs(rng, args.runs, args.length, args.phi)
        for name, compare in (
            ("pooled", lambda x, y, i=index: stats.compare(np.concatenate(x), np.concatenate(y), seed=i)),
            ("runs", lambda x, y, i=index: stats.compare_runs(x, y, seed=i)),
        ):
            result = compare(a, b)
            covered[name] += result.ci_low <= 1.1 <= result.ci_high
            false[name] += compare(a, null).p_value < 0.05
    n = args.experiments
    print(
        f"{n} experiments, {args.runs} runs x {args.length} inferences per side, AR(1) phi={args.phi}, "
        f"true ratio 1.1"
    )
    for name, label in (
        ("pooled", "pooled inferences"),
        ("runs", "runs (hierarchical CI, U test of run medians)"),
    ):
        print(
            f"  {label:48s} 95% CI coverage {covered[name] / n:.2f}   false positives at 0.05: {false[name] / n:.2f}"
        )
    for length in (300, 5000):
        a = [rng.normal(10, 1, length) for _ in range(10)]
        b = [rng.normal(9, 1, length - 7) for _ in range(10)]
        started = time.perf_counter()
        stats.compare_runs(a, b)
        print(
            f"  one comparison, 10 runs x {length} inferences per side: {time.perf_counter() - started:.2f} s"
        )


if __name__ == "__main__":
    main()
