"""The report's PNG plots, drawn with matplotlib's Agg backend (no display) at a fixed size, so a
report is the same whatever machine renders it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.bench import stats
from orchestrator.bench.counting.verdict import SeriesDocument
from orchestrator.bench.series import Series

# Every plot is FIG_SIZE inches at DPI: 1000 x 500 pixels. The plots with a label per series use
# constrained layout: their axes shrink so that long series names and the axis labels stay inside.
FIG_SIZE = (10.0, 5.0)
DPI = 100
PLOT_PIXELS = (int(FIG_SIZE[0] * DPI), int(FIG_SIZE[1] * DPI))


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display on build hosts; must happen before pyplot is imported
    import matplotlib.pyplot as plt

    return plt


def _short(series: Series, many_boards: bool) -> str:
    key = series.key
    parts = [series.board] if many_boards else []
    parts += [key.variant, key.model.removesuffix(".onnx")]
    if key.quant != "fp32":
        parts.append(key.quant)
    parts.append(f"opt={key.opt_level}")
    parts.append(f"t={key.intra_threads or 'def'}")
    return " ".join(parts)


def plot_distribution(series: Sequence[Series], path: Path) -> Path:
    plt = _pyplot()
    many = len({s.board for s in series}) > 1
    fig, ax = plt.subplots(figsize=FIG_SIZE, dpi=DPI, layout="constrained")
    data = [list(s.latencies_ms) for s in series]
    positions = list(range(1, len(series) + 1))
    if any(len(values) > 1 for values in data):
        ax.violinplot(data, positions=positions, showmedians=True, widths=0.8)
    for position, values in zip(positions, data, strict=True):
        ax.scatter([position] * len(values), values, s=6, alpha=0.4, color="black")
    ax.set_xticks(positions, [_short(s, many) for s in series], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("latency per inference (ms)")
    ax.set_title("Latency distribution per board and variant (every timed run)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path, plt)


def plot_p50_ci(series: Sequence[Series], path: Path) -> Path:
    plt = _pyplot()
    many = len({s.board for s in series}) > 1
    fig, ax = plt.subplots(figsize=FIG_SIZE, dpi=DPI, layout="constrained")
    medians, lows, highs = [], [], []
    for item in series:
        median = item.summary().p50
        low, high = stats.median_ci_runs(item.runs)
        medians.append(median)
        lows.append(median - low)
        highs.append(high - median)
    notes = [
        f"{m:.3g} ms\n{len(s.runs)} runs, n={len(s.latencies_ms)}"
        for m, s in zip(medians, series, strict=True)
    ]
    positions = list(range(len(series)))
    ax.bar(positions, medians, yerr=[lows, highs], capsize=6, color="#4c72b0", alpha=0.8)
    for position, median, note in zip(positions, medians, notes, strict=True):
        ax.annotate(
            note,
            (position, median),
            ha="center",
            va="bottom",
            fontsize=7,
            xytext=(0, 4),
            textcoords="offset points",
        )
    ax.set_xticks(positions, [_short(s, many) for s in series], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("p50 latency (ms)\nbars: 95% CI (hierarchical bootstrap over runs)")
    ax.set_title("Median latency with 95% confidence interval")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path, plt)


def plot_over_runs(series: Sequence[Series], path: Path) -> Path:
    """Latency against the run index, per series: drift or thermal throttling shows up as a slope."""
    plt = _pyplot()
    many = len({s.board for s in series}) > 1
    fig, ax = plt.subplots(figsize=FIG_SIZE, dpi=DPI)
    for item in series:
        values = list(item.latencies_ms)
        ax.plot(range(len(values)), values, marker=".", linewidth=1, markersize=3, label=_short(item, many))
    ax.set_xlabel("timed run index (rounds concatenated)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Latency over the run (drift, throttling)")
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=7, loc="upper right")
    return _save(fig, path, plt)


def plot_count_medians(series: Sequence[SeriesDocument], path: Path) -> Path:
    """Instructions per inference of each release of an instruction-count run: every round a dot,
    the median a bar across them. The axis starts near the values, not at zero: the differences that
    verdicts call are fractions of a percent, which bars from zero would flatten; the axis says so."""
    plt = _pyplot()
    many = len({s["board"] for s in series}) > 1
    fig, ax = plt.subplots(figsize=FIG_SIZE, dpi=DPI, layout="constrained")
    positions = list(range(len(series)))
    for position, item in zip(positions, series, strict=True):
        rounds = item["per_inference"]
        ax.scatter([position] * len(rounds), rounds, color="#55a868", s=18, zorder=3)
        ax.hlines(item["median"], position - 0.3, position + 0.3, color="#333", linewidth=1.5)
        ax.annotate(
            f"{item['median']:,.0f}\n{item['rounds']} rounds, spread {item['spread']:.3%}",
            (position, max(rounds)),
            ha="center",
            va="bottom",
            fontsize=7,
            xytext=(0, 6),
            textcoords="offset points",
        )
    labels = [
        " ".join([*([s["board"]] if many else []), s["variant"], s["model"].removesuffix(".onnx")])
        for s in series
    ]
    ax.set_xticks(positions, labels, rotation=20, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(series) - 0.4)
    ax.margins(y=0.25)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set_ylabel("instructions per inference\n(axis not from zero; dots: rounds, bar: median)")
    ax.set_title("Instructions per inference (emulated CPU)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path, plt)


def _save(fig: Any, path: Path, plt: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # No bbox_inches="tight": the PNG keeps exactly FIG_SIZE x DPI pixels.
    fig.savefig(path, format="png", dpi=DPI)
    plt.close(fig)
    return path
