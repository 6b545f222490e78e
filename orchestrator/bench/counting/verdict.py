"""Instruction counts summarised and compared. Pure.

A count is not a time: memory stalls, caches and vector width are invisible to it, and counts compare
only under the same emulated CPU (``-cpu``). What it gives is repeatability: the same build on the
same input retires nearly the same instructions every round, so a build that retires more is seen
in minutes where wall time under emulation spreads more than any compiler flag moves it.

The rule (after rustc's performance suite, which uses counts as its CI metric for the same reason):
a difference counts when it is larger than the noise seen between identical runs by a margin.
Here the noise is the larger relative spread ((max - min) / median) of the two sides' per-round
counts; a change is called when |B / A - 1| exceeds both NOISE_MARGIN times that noise and the
floor MIN_CHANGE. With DEFAULT_ROUNDS rounds per side the noise is measured, not assumed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal, TypedDict

NOISE_MARGIN = 3.0
MIN_CHANGE = 0.002  # 0.2%: below it, a difference is not called whatever the noise
# The rule as every table and page states it.
RULE = (
    f"a change is called when |ratio - 1| > max({MIN_CHANGE:.1%}, {NOISE_MARGIN:g} x the larger"
    " spread between rounds)"
)
Verdict = Literal[
    "more instructions", "fewer instructions", "more cycles", "fewer cycles", "no significant change"
]
Metric = Literal["instructions", "cycles"]


class SeriesDocument(TypedDict):
    board: str
    model: str
    release: str
    variant: str
    ort_version: str
    per_inference: list[float]
    median: float
    spread: float
    rounds: int


@dataclass(frozen=True, kw_only=True)
class CountSeries:
    """One release's instructions per inference of one model on one board, one value per round."""

    board: str
    model: str
    release: str
    variant: str
    ort_version: str
    per_inference: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.per_inference)

    @property
    def spread(self) -> float:
        """(max - min) / median of the rounds: the noise between identical runs."""
        values = self.per_inference
        return (max(values) - min(values)) / self.median if len(values) > 1 and self.median else 0.0

    def as_json(self) -> SeriesDocument:
        return {
            "board": self.board,
            "model": self.model,
            "release": self.release,
            "variant": self.variant,
            "ort_version": self.ort_version,
            "per_inference": list(self.per_inference),
            "median": self.median,
            "spread": self.spread,
            "rounds": len(self.per_inference),
        }


class ComparisonDocument(TypedDict):
    board: str
    model: str
    baseline: str
    candidate: str
    ratio: float
    change: float
    noise: float
    threshold: float
    verdict: Verdict
    rounds: list[int]


@dataclass(frozen=True, kw_only=True)
class CountComparison:
    baseline: CountSeries
    candidate: CountSeries
    metric: Metric = "instructions"

    @property
    def ratio(self) -> float:
        """Candidate / baseline instructions per inference (medians)."""
        return self.candidate.median / self.baseline.median

    @property
    def noise(self) -> float:
        return max(self.baseline.spread, self.candidate.spread)

    @property
    def threshold(self) -> float:
        return max(MIN_CHANGE, NOISE_MARGIN * self.noise)

    @property
    def verdict(self) -> Verdict:
        change = self.ratio - 1
        if abs(change) <= self.threshold:
            return "no significant change"
        if self.metric == "cycles":
            return "more cycles" if change > 0 else "fewer cycles"
        return "more instructions" if change > 0 else "fewer instructions"

    def regression_above(self, fail_above: float) -> bool:
        """Whether the candidate counts significantly more, and more than ``fail_above`` (a fraction)."""
        return self.verdict.startswith("more") and self.ratio - 1 > fail_above

    def as_json(self) -> ComparisonDocument:
        return {
            "board": self.baseline.board,
            "model": self.baseline.model,
            "baseline": self.baseline.release,
            "candidate": self.candidate.release,
            "ratio": self.ratio,
            "change": self.ratio - 1,
            "noise": self.noise,
            "threshold": self.threshold,
            "verdict": self.verdict,
            "rounds": [len(self.baseline.per_inference), len(self.candidate.per_inference)],
        }


def comparisons(series: list[CountSeries], metric: Metric = "instructions") -> list[CountComparison]:
    """Per board and model, every other release against the first one measured (the first --variant)."""
    found: list[CountComparison] = []
    groups: dict[tuple[str, str], list[CountSeries]] = {}
    for one in series:
        groups.setdefault((one.board, one.model), []).append(one)
    for members in groups.values():
        found += [
            CountComparison(baseline=members[0], candidate=other, metric=metric) for other in members[1:]
        ]
    return found
