"""Showing results: rich tables for the terminal, an HTML report with PNG plots, CSV/JSON export.

Tables always print the sample count and the spread next to every figure (a p50 without its n
and IQR invites over-reading). Plots are drawn with matplotlib's Agg backend (no display needed)
at a fixed size, so a report is the same whatever machine renders it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table

from orchestrator.bench import stats
from orchestrator.bench.results import RunRecord
from orchestrator.bench.series import Pairing, Series

_SHORT = {
    "opt_level": "opt",
    "intra_threads": "threads",
    "inter_threads": "inter",
    "quant": "",
    "variant": "",
}
_VERDICT_STYLE = {stats.FASTER: "bold green", stats.SLOWER: "bold red"}


def fmt_ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


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
            fmt_ms(summary.p50),
            fmt_ms(summary.p99),
            f"{fmt_ms(summary.mean)}±{fmt_ms(summary.std)}",
            fmt_ms(summary.iqr),
            f"{sum(throughput) / len(throughput):.3g}" if throughput else "-",
        )
    return table


def side_label(series: Series, dimension: str) -> str:
    if dimension == "run":
        return series.label
    return _value(dimension, getattr(series.key, dimension))


def comparison_table(
    pairings: Sequence[Pairing], *, title: str = "A/B comparisons (B vs baseline A)"
) -> Table:
    table = Table(
        title=title, title_justify="left", caption=comparison_caption(pairings), caption_justify="left"
    )
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
            escape(f"{label}{side_label(pair.a, pair.dimension)} → {side_label(pair.b, pair.dimension)}"),
            f"{c.n_a}/{c.n_b}",
            f"{fmt_ms(c.median_a)}→{fmt_ms(c.median_b)}",
            f"{c.ratio:.2f}{ci}",
            p_value,
            f"[{style}]{verdict}[/]" if style else verdict,
        )
    return table


def comparison_caption(pairings: Sequence[Pairing]) -> str:
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
