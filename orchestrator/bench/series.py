"""Series and comparisons: what tables, plots and verdicts work on.

A *series* is every timed latency of one (board, release, model, quantisation, setting) over all
rounds of a run, kept per round: each round is its own agent process (a *run*, the independent
unit of the statistics). A *pairing* compares two series of one board that differ in exactly one
dimension, run against run (``stats.compare_runs``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypedDict

from orchestrator.bench import stats
from orchestrator.bench.records import (
    AgentDocument,
    BoardRecord,
    ComparisonRecord,
    MeasurementKey,
    ReleaseRecord,
    StoredMeasurement,
)

# What a series' key is made of besides its release; a pairing differs in one of them, or in the run
# (``pairings_between``: the same measurement in two runs).
Dimension = Literal[
    "variant", "model", "quant", "ep", "opt_level", "intra_threads", "inter_threads", "runner"
]
Compared = Literal[Dimension, "run"]


class KeyColumns(TypedDict):
    """A series key as the columns of an export row (``SeriesKey.as_dict``)."""

    variant: str
    model: str
    quant: str
    ep: str
    opt_level: str
    intra_threads: int
    inter_threads: int
    runner: str
    release: str


class SideColumns(KeyColumns):
    ort_version: str
    route: str


class PairingRecord(ComparisonRecord):
    """A pairing as `--json` documents and report.json give it."""

    board: str
    dimension: str
    a: SideColumns
    b: SideColumns
    version_mismatch: bool


@dataclass(frozen=True, kw_only=True, order=True)
class SeriesKey:
    """What was measured: release (variant), model, quantisation and session setting."""

    variant: str
    release: str
    model: str
    quant: str = "fp32"
    ep: str = "cpu"
    opt_level: str = "all"
    intra_threads: int = 0
    inter_threads: int = 0
    runner: str = "python"  # the Python agent or the native runner (results of older orch: python)

    DIMENSIONS: ClassVar[tuple[Dimension, ...]] = (
        "variant",
        "model",
        "quant",
        "ep",
        "opt_level",
        "intra_threads",
        "inter_threads",
        "runner",
    )

    @classmethod
    def from_json(cls, key: MeasurementKey) -> SeriesKey:
        return cls(
            variant=key["variant"],
            release=key["release"],
            model=key["model"],
            quant=key["quant"],
            ep=key["ep"],
            opt_level=key["opt_level"],
            intra_threads=key["intra_threads"],
            inter_threads=key["inter_threads"],
            runner=key["runner"],
        )

    def as_dict(self) -> KeyColumns:
        return {
            "variant": self.variant,
            "model": self.model,
            "quant": self.quant,
            "ep": self.ep,
            "opt_level": self.opt_level,
            "intra_threads": self.intra_threads,
            "inter_threads": self.inter_threads,
            "runner": self.runner,
            "release": self.release,
        }

    def label(self) -> str:
        threads = "default" if self.intra_threads == 0 else str(self.intra_threads)
        parts = [
            self.variant,
            self.model,
            self.quant,
            f"{self.ep}",
            f"opt={self.opt_level}",
            f"threads={threads}",
        ]
        if self.inter_threads:
            parts.append(f"inter={self.inter_threads}")
        if self.runner != "python":
            parts.append(self.runner)
        return " · ".join(parts)

    def without(self, dimension: Literal[Dimension, "release"]) -> tuple[str | int, ...]:
        """The key with one dimension left out (release follows variant)."""
        skip = {dimension, "release"}
        return tuple(getattr(self, name) for name in self.DIMENSIONS if name not in skip)


@dataclass(frozen=True, kw_only=True)
class Series:
    board: str
    key: SeriesKey
    latencies_ms: tuple[float, ...]
    # Per round: (round index, latencies) so the report can plot drift over the run.
    rounds: tuple[tuple[int, tuple[float, ...]], ...] = ()
    agents: tuple[AgentDocument, ...] = field(default=(), compare=False)
    # What the release is: the ORT version its agents loaded and the build route of its artifact.
    ort_version: str = field(default="", compare=False)
    route: str = field(default="", compare=False)

    @property
    def label(self) -> str:
        return self.key.label()

    @property
    def runs(self) -> tuple[tuple[float, ...], ...]:
        """The latencies of each agent run (one per round); the whole series as one run when the
        rounds were not recorded."""
        return tuple(values for _, values in self.rounds if values) or (self.latencies_ms,)

    @property
    def build(self) -> str:
        """``variant ORT-version route``: which build ran, as every comparison names it."""
        return " ".join(part for part in (self.key.variant, self.ort_version or "?", self.route) if part)

    def summary(self) -> stats.Summary:
        return stats.summarize(self.latencies_ms)


def series_of(board: BoardRecord) -> list[Series]:
    """Series of one board record, in first-measured order."""
    grouped: dict[SeriesKey, list[StoredMeasurement]] = {}
    for measurement in board["measurements"]:
        grouped.setdefault(SeriesKey.from_json(measurement["key"]), []).append(measurement)
    known = {release["id"]: release for release in board["releases"]}
    result = []
    for key, items in grouped.items():
        rounds = [
            (item["round"], tuple(float(v) for v in item["agent"].get("timing", {}).get("latencies_ms", [])))
            for item in items
        ]
        release: ReleaseRecord = known.get(key.release) or {"id": key.release}
        result.append(
            Series(
                board=board["board"],
                key=key,
                latencies_ms=tuple(value for _, values in rounds for value in values),
                rounds=tuple(rounds),
                agents=tuple(item["agent"] for item in items),
                ort_version=_loaded_version(items) or release.get("ort_version") or "",
                route=release.get("route") or "",
            )
        )
    return result


def _loaded_version(items: Sequence[StoredMeasurement]) -> str:
    """The ORT version(s) the agents of a series really loaded (what the board ran, not what the
    release claims)."""
    versions = dict.fromkeys(item["agent"].get("ort", {}).get("version") or "" for item in items)
    return ",".join(v for v in versions if v)


@dataclass(frozen=True, kw_only=True)
class Pairing:
    """Baseline A and candidate B of one board that differ in exactly one dimension."""

    board: str
    dimension: Compared
    a: Series
    b: Series
    comparison: stats.Comparison

    @property
    def version_mismatch(self) -> bool:
        """A and B ran different ORT releases: the comparison mixes upstream changes with the build."""
        return self.a.ort_version != self.b.ort_version

    def as_dict(self) -> PairingRecord:
        return {
            "board": self.board,
            "dimension": self.dimension,
            "a": {**self.a.key.as_dict(), "ort_version": self.a.ort_version, "route": self.a.route},
            "b": {**self.b.key.as_dict(), "ort_version": self.b.ort_version, "route": self.b.route},
            "version_mismatch": self.version_mismatch,
            **self.comparison.as_dict(),
        }


def pairings_within(series: Sequence[Series], *, threshold: float = stats.DEFAULT_THRESHOLD) -> list[Pairing]:
    """Comparisons inside one run: per board and dimension, every value against the first one measured
    (the first ``--variant``, ``--threads`` or ``--opt-level`` value given is the baseline)."""
    pairings = []
    boards = list(dict.fromkeys(s.board for s in series))
    for board in boards:
        mine = [s for s in series if s.board == board]
        for dimension in SeriesKey.DIMENSIONS:
            values = list(dict.fromkeys(getattr(s.key, dimension) for s in mine))
            if len(values) < 2 or dimension == "model":
                continue
            baseline_value = values[0]
            for candidate in mine:
                if getattr(candidate.key, dimension) == baseline_value:
                    continue
                baseline = next(
                    (
                        s
                        for s in mine
                        if getattr(s.key, dimension) == baseline_value
                        and s.key.without(dimension) == candidate.key.without(dimension)
                    ),
                    None,
                )
                if baseline is not None:
                    pairings.append(_pair(board, dimension, baseline, candidate, threshold))
    return pairings


def pairings_between(
    run_a: Sequence[Series], run_b: Sequence[Series], *, threshold: float = stats.DEFAULT_THRESHOLD
) -> list[Pairing]:
    """Comparisons across two runs: the same board and measurement in both (run A is the baseline).

    Matched on every dimension except the release id; when a board has exactly one series per
    model in each run, those are matched even if their variant or setting differs.
    """
    pairings = []
    for b_series in run_b:
        match = [
            a
            for a in run_a
            if a.board == b_series.board and a.key.without("release") == b_series.key.without("release")
        ]
        if not match:
            same_model_a = [
                a for a in run_a if a.board == b_series.board and a.key.model == b_series.key.model
            ]
            same_model_b = [
                b for b in run_b if b.board == b_series.board and b.key.model == b_series.key.model
            ]
            if len(same_model_a) == 1 and len(same_model_b) == 1:
                match = same_model_a
        if match:
            pairings.append(_pair(b_series.board, "run", match[0], b_series, threshold))
    return pairings


def _pair(board: str, dimension: Compared, a: Series, b: Series, threshold: float) -> Pairing:
    comparison = stats.compare_runs(a.runs, b.runs, threshold=threshold)
    return Pairing(board=board, dimension=dimension, a=a, b=b, comparison=comparison)
