"""Showing results: rich tables for the terminal, an HTML report with PNG plots, CSV/JSON export.

Tables always print the sample count and the spread next to every figure (a p50 without its n
and IQR invites over-reading). Plots are drawn with matplotlib's Agg backend (no display needed)
at a fixed size, so a report is the same whatever machine renders it.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from orchestrator.bench import stats
from orchestrator.bench.results import Pairing, RunRecord, Series, flatten_series

# Every plot is FIG_SIZE inches at DPI: 1000 x 500 pixels.
FIG_SIZE = (10.0, 5.0)
DPI = 100
PLOT_PIXELS = (int(FIG_SIZE[0] * DPI), int(FIG_SIZE[1] * DPI))

_SHORT = {
    "opt_level": "opt",
    "intra_threads": "threads",
    "inter_threads": "inter",
    "quant": "",
    "variant": "",
}
_VERDICT_STYLE = {stats.FASTER: "bold green", stats.SLOWER: "bold red"}


def _ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


# --------------------------------------------------------------------------- terminal tables


def varying_dimensions(series: Sequence[Series]) -> list[str]:
    """Dimensions whose value differs between the series: the only ones worth a column."""
    return [
        d
        for d in ("variant", "model", "quant", "ep", "opt_level", "intra_threads", "inter_threads")
        if len({getattr(s.key, d) for s in series}) > 1
    ]


def _value(dimension: str, value: Any) -> str:
    if dimension.endswith("threads") and value == 0:
        return "default"
    return str(value)


def _constant_caption(series: Sequence[Series]) -> str:
    """The dimensions every series shares, said once under the table instead of in every row."""
    if not series:
        return ""
    varying = set(varying_dimensions(series))
    key = series[0].key
    names = {
        "variant": "variant",
        "model": "model",
        "quant": "quant",
        "ep": "EP",
        "opt_level": "opt",
        "intra_threads": "threads",
        "inter_threads": "inter-op threads",
    }
    return "all rows: " + ", ".join(
        f"{names[d]}={_value(d, getattr(key, d))}" for d in names if d not in varying
    )


def summary_table(
    series: Sequence[Series], *, title: str = "P50 / P99 latency per board and variant"
) -> Table:
    varying = varying_dimensions(series)
    table = Table(
        title=title, title_justify="left", caption=_constant_caption(series), caption_justify="left"
    )
    table.add_column("board", style="bold")
    for dimension in varying:
        table.add_column(dimension.replace("intra_threads", "threads").replace("_", " "))
    for column in ("n", "p50 ms", "p99 ms", "mean±std", "IQR", "inf/s"):
        table.add_column(column, justify="right")
    for item in series:
        summary = item.summary()
        throughput = [a["stats"]["throughput_ips"] for a in item.agents if "stats" in a]
        table.add_row(
            escape(item.board),
            *(escape(_value(d, getattr(item.key, d))) for d in varying),
            str(summary.n),
            _ms(summary.p50),
            _ms(summary.p99),
            f"{_ms(summary.mean)}±{_ms(summary.std)}",
            _ms(summary.iqr),
            f"{sum(throughput) / len(throughput):.3g}" if throughput else "-",
        )
    return table


def _side(series: Series, dimension: str) -> str:
    if dimension == "run":
        return series.label
    return _value(dimension, getattr(series.key, dimension))


def comparison_table(
    pairings: Sequence[Pairing], *, title: str = "A/B comparisons (B vs baseline A)"
) -> Table:
    table = Table(title=title, title_justify="left", caption=_caption(pairings), caption_justify="left")
    table.add_column("board", style="bold")
    table.add_column("model")
    table.add_column("A → B")
    for column in ("n A/B", "p50 A→B ms", "B/A [95% CI]", "p"):
        table.add_column(column, justify="right")
    table.add_column("verdict")
    for pair in pairings:
        c = pair.comparison
        ci = "" if math.isnan(c.ci_low) else f" [{c.ci_low:.2f},{c.ci_high:.2f}]"
        p_value = "-" if math.isnan(c.p_value) else f"{c.p_value:.2g}"
        style = _VERDICT_STYLE.get(c.verdict, "")
        verdict = f"{c.verdict} ({c.change_percent:+.0f}%)"
        short = "" if pair.dimension == "run" else _SHORT.get(pair.dimension, pair.dimension)
        label = f"{short} " if short else ""
        table.add_row(
            escape(pair.board),
            escape(pair.b.key.model.removesuffix(".onnx")),
            escape(f"{label}{_side(pair.a, pair.dimension)} → {_side(pair.b, pair.dimension)}"),
            f"{c.n_a}/{c.n_b}",
            f"{_ms(c.median_a)}→{_ms(c.median_b)}",
            f"{c.ratio:.2f}{ci}",
            p_value,
            f"[{style}]{verdict}[/]" if style else verdict,
        )
    return table


def _caption(pairings: Sequence[Pairing]) -> str:
    if not pairings:
        return ""
    c = pairings[0].comparison
    return (
        f"B/A = median(B)/median(A), below 1: B is faster. Called faster/slower only when the U test's"
        f" p < {c.alpha:g}, the CI excludes 1 and the change exceeds {c.threshold:.0%}."
    )


def failures_table(failed: dict[str, str]) -> Table:
    table = Table(title="Failed boards", title_justify="left", title_style="bold red")
    table.add_column("board", style="bold")
    table.add_column("error")
    for board, error in failed.items():
        table.add_row(escape(board), escape(error))
    return table


def run_tables(series: Sequence[Series], pairings: Sequence[Pairing], failed: dict[str, str]) -> list[Table]:
    """The tables a run is shown with, after `orch bench` and in `orch results show`: what exists of them."""
    tables = []
    if series:
        tables.append(summary_table(series))
    if pairings:
        tables.append(comparison_table(pairings))
    if failed:
        tables.append(failures_table(failed))
    return tables


def board_state_table(record: RunRecord) -> Table:
    table = Table(title="Boards", title_justify="left")
    for column in (
        "board",
        "status",
        "ORT",
        "kernel",
        "CPU",
        "cores",
        "governor",
        "°C before→after",
        "pinned",
    ):
        table.add_column(column)
    for name, doc in record.boards.items():
        facts = board_facts(doc)
        table.add_row(
            escape(name),
            doc.get("status", "?"),
            *(
                escape(str(facts[k]))
                for k in ("ort", "kernel", "cpu", "cores", "governor", "temperature", "pinned")
            ),
        )
    return table


def board_facts(doc: dict[str, Any]) -> dict[str, str]:
    """Readable board state from the first and last agent runs of a board document."""
    measurements = doc.get("measurements") or []
    first = measurements[0]["agent"] if measurements else {}
    last = measurements[-1]["agent"] if measurements else {}
    before = (first.get("board") or {}).get("before") or {}
    after = (last.get("board") or {}).get("after") or {}
    governors = sorted(
        {str(core["governor"]) for core in (before.get("cpufreq") or {}).values() if core.get("governor")}
    )

    def temp(state: dict[str, Any]) -> str:
        values = [zone["temp_c"] for zone in state.get("thermal") or [] if zone.get("temp_c") is not None]
        return f"{max(values):.1f}" if values else "n/a"

    clocks = doc.get("clocks")
    pinned = "-" if not clocks else ("yes" if clocks.get("pinned") else "no")
    if clocks and clocks.get("restored") is False:
        pinned += " (NOT restored)"
    return {
        "ort": (first.get("ort") or {}).get("version", "-"),
        "kernel": before.get("kernel", "-"),
        "cpu": before.get("cpu_model") or "-",
        "cores": str(before.get("online_cores", "-")),
        "governor": ",".join(governors) if governors else "n/a",
        "temperature": "n/a" if temp(before) == temp(after) == "n/a" else f"{temp(before)}→{temp(after)}",
        "pinned": pinned,
    }


# --------------------------------------------------------------------------- export


def export_rows(records: Sequence[RunRecord], *, samples: bool = False) -> list[dict[str, Any]]:
    if not samples:
        return flatten_series(records)
    rows = []
    for record in records:
        for series in record.series():
            index = 0
            for round_index, values in series.rounds:
                for value in values:
                    rows.append(
                        {
                            "run_id": record.run_id,
                            "board": series.board,
                            **series.key.as_dict(),
                            "round": round_index,
                            "sample": index,
                            "latency_ms": value,
                        }
                    )
                    index += 1
    return rows


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


# --------------------------------------------------------------------------- plots


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
    fig, ax = plt.subplots(figsize=FIG_SIZE, dpi=DPI)
    data = [list(s.latencies_ms) for s in series]
    positions = list(range(1, len(series) + 1))
    if any(len(values) > 1 for values in data):
        ax.violinplot(data, positions=positions, showmedians=True, widths=0.8)
    for position, values in zip(positions, data):
        ax.scatter([position] * len(values), values, s=6, alpha=0.4, color="black")
    ax.set_xticks(positions, [_short(s, many) for s in series], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("latency per inference (ms)")
    ax.set_title("Latency distribution per board and variant (every timed run)")
    ax.grid(axis="y", alpha=0.3)
    fig.subplots_adjust(bottom=0.3)
    return _save(fig, path, plt)


def plot_p50_ci(series: Sequence[Series], path: Path) -> Path:
    plt = _pyplot()
    many = len({s.board for s in series}) > 1
    fig, ax = plt.subplots(figsize=FIG_SIZE, dpi=DPI)
    medians, lows, highs = [], [], []
    for item in series:
        median = item.summary().p50
        low, high = stats.median_ci(item.latencies_ms)
        medians.append(median)
        lows.append(median - low)
        highs.append(high - median)
    positions = list(range(len(series)))
    ax.bar(positions, medians, yerr=[lows, highs], capsize=6, color="#4c72b0", alpha=0.8)
    for position, item, median in zip(positions, series, medians):
        ax.annotate(
            f"{median:.3g} ms\nn={len(item.latencies_ms)}",
            (position, median),
            ha="center",
            va="bottom",
            fontsize=7,
            xytext=(0, 4),
            textcoords="offset points",
        )
    ax.set_xticks(positions, [_short(s, many) for s in series], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("p50 latency (ms), bars: bootstrap 95% CI")
    ax.set_title("Median latency with 95% confidence interval")
    ax.grid(axis="y", alpha=0.3)
    fig.subplots_adjust(bottom=0.3)
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


def _save(fig: Any, path: Path, plt: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # No bbox_inches="tight": the PNG keeps exactly FIG_SIZE x DPI pixels.
    fig.savefig(path, format="png", dpi=DPI)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- HTML


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
.faster { color: #080; font-weight: bold; } .slower { color: #b00; font-weight: bold; }
.failed { color: #b00; } img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
"""


def write_html(record: RunRecord, pairings: Sequence[Pairing], path: Path) -> dict[str, Path]:
    """The HTML report plus its PNG plots (in ``<name>_files/``) and CSV/JSON exports next to it."""
    path = Path(path)
    assets = path.parent / f"{path.stem}_files"
    assets.mkdir(parents=True, exist_ok=True)
    series = record.series()
    written: dict[str, Path] = {}
    if series:
        written["distribution"] = plot_distribution(series, assets / "latency_distribution.png")
        written["p50_ci"] = plot_p50_ci(series, assets / "p50_ci.png")
        written["over_runs"] = plot_over_runs(series, assets / "latency_over_runs.png")
    rows = export_rows([record])
    written["csv"] = assets / "series.csv"
    written["csv"].write_text(to_csv(rows))
    written["samples_csv"] = assets / "samples.csv"
    written["samples_csv"].write_text(to_csv(export_rows([record], samples=True)))
    written["json"] = assets / "report.json"
    written["json"].write_text(
        json.dumps(
            {
                "run_id": record.run_id,
                "series": rows,
                "comparisons": [p.as_dict() for p in pairings],
                "failed": record.failed,
            },
            indent=1,
            default=str,
        )
    )

    parts = [
        (
            f"<!doctype html><html><head><meta charset='utf-8'><title>orch bench {html.escape(record.run_id)}"
            f"</title><style>{_CSS}</style></head><body>"
        ),
        f"<h1>Benchmark run {html.escape(record.run_id)}</h1>",
        (
            f"<p>Command: <code>{html.escape(str(record.meta.get('command', '')))}</code><br>"
            f"Stored in <code>{html.escape(str(record.path))}</code></p>"
        ),
    ]
    if record.failed:
        parts.append(
            "<h2 class='failed'>Failed boards</h2><ul>"
            + "".join(
                f"<li class='failed'><b>{html.escape(b)}</b>: {html.escape(e)}</li>"
                for b, e in record.failed.items()
            )
            + "</ul>"
        )
    parts.append("<h2>Boards</h2>")
    facts = [(name, doc.get("status"), *board_facts(doc).values()) for name, doc in record.boards.items()]
    parts.append(
        _html_table(
            [
                "board",
                "status",
                "ORT",
                "kernel",
                "CPU",
                "cores",
                "governor",
                "temp °C before→after",
                "clocks pinned",
            ],
            facts,
        )
    )
    parts.append("<h2>P50 / P99 latency per board and variant</h2>")
    parts.append(
        _html_table(
            [
                "board",
                "variant",
                "model",
                "quant",
                "setting",
                "n",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "mean ms",
                "std ms",
                "IQR ms",
            ],
            [
                (
                    s.board,
                    s.key.variant,
                    s.key.model,
                    s.key.quant,
                    f"{s.key.ep} opt={s.key.opt_level} threads={s.key.intra_threads or 'default'}",
                    summary.n,
                    _ms(summary.p50),
                    _ms(summary.p90),
                    _ms(summary.p99),
                    _ms(summary.mean),
                    _ms(summary.std),
                    _ms(summary.iqr),
                )
                for s in series
                for summary in [s.summary()]
            ],
        )
    )
    if pairings:
        parts.append("<h2>Comparisons (B vs baseline A)</h2>")
        comparison_rows = []
        for pair in pairings:
            c = pair.comparison
            ci = "-" if math.isnan(c.ci_low) else f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"
            comparison_rows.append(
                (
                    pair.board,
                    pair.b.key.model,
                    pair.dimension,
                    _side(pair.a, pair.dimension),
                    _side(pair.b, pair.dimension),
                    f"{c.n_a}/{c.n_b}",
                    _ms(c.median_a),
                    _ms(c.median_b),
                    f"{c.ratio:.3f}",
                    ci,
                    f"{c.change_percent:+.1f}%",
                    "-" if math.isnan(c.p_value) else f"{c.p_value:.2g}",
                    c.verdict,
                )
            )
        table = _html_table(
            [
                "board",
                "model",
                "compared",
                "A",
                "B",
                "n A/B",
                "p50 A ms",
                "p50 B ms",
                "B/A",
                "95% CI",
                "change",
                "p (U test)",
                "verdict",
            ],
            comparison_rows,
        )
        for verdict, css in ((stats.FASTER, "faster"), (stats.SLOWER, "slower")):
            table = table.replace(f"<td>{verdict}</td>", f"<td class='{css}'>{verdict}</td>")
        parts.append(table)
        parts.append(f"<p>{html.escape(_caption(pairings))}</p>")
    for key, title in (
        ("distribution", "Latency distribution"),
        ("p50_ci", "P50 with 95% CI"),
        ("over_runs", "Latency over the run"),
    ):
        if key in written:
            parts.append(
                f"<h2>{title}</h2><img src='{html.escape(assets.name)}/{written[key].name}' alt='{title}' "
                f"width='{PLOT_PIXELS[0]}' height='{PLOT_PIXELS[1]}'>"
            )
    folder = html.escape(assets.name)
    parts.append(
        f"<p>Data: <a href='{folder}/series.csv'>series.csv</a>, "
        f"<a href='{folder}/samples.csv'>samples.csv</a> (every latency), "
        f"<a href='{folder}/report.json'>report.json</a>.</p></body></html>"
    )
    path.write_text("\n".join(parts))
    written["html"] = path
    return written
