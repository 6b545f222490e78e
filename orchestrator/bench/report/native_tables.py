"""Tables of cold starts and footprint (``orch bench --runner native|both``), next to the latency tables.

Every figure carries its sample count and spread: cold start is one sample per process launch, so
n is small (``--cold-starts`` per round), and a median without its n would read as more than it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from orchestrator.bench.native import ColdStart, pair_runners, ratio
from orchestrator.bench.report.tables import fmt_ms

EMULATED_NOTE = "on emulated (lab) boards these timings are for relative comparison only"


def _mb(value: int | None) -> str:
    return f"{value / 1e6:.1f} MB" if value else "-"


def footprint(item: ColdStart) -> str:
    """What the runner needs on disk: the runner + ORT's C library (native), the wheel (Python)."""
    if item.key.get("runner") == "native":
        if item.runner_bytes is None and item.library_bytes is None:
            return "-"
        return f"{(item.runner_bytes or 0) / 1e3:.0f} kB + {_mb(item.library_bytes)}"
    return f"wheel {_mb(item.library_bytes)} + Python, numpy" if item.library_bytes else "-"


def cold_start_table(found: Sequence[ColdStart], *, title: str = "Cold start and footprint") -> Table:
    table = Table(
        title=title,
        title_justify="left",
        caption="cold start = process exec -> first result, one sample per launch; "
        f"RSS = peak resident memory of the processes; {EMULATED_NOTE}",
        caption_justify="left",
    )
    table.add_column("board", style="bold")
    for column in ("variant", "model", "runner"):
        table.add_column(column)
    for column in ("n", "cold p50 ms", "IQR", "min-max", "exec->main p50", "peak RSS", "on disk"):
        table.add_column(column, justify="right")
    for item in found:
        summary = item.first_result()
        to_main = item.to_main()
        rss = max(item.peak_rss_kb) if item.peak_rss_kb else None
        table.add_row(
            escape(item.board),
            escape(str(item.key.get("variant"))),
            escape(str(item.key.get("model", "")).removesuffix(".onnx")),
            escape(str(item.key.get("runner"))),
            str(summary.n),
            fmt_ms(summary.p50),
            fmt_ms(summary.iqr),
            f"{fmt_ms(summary.min)}-{fmt_ms(summary.max)}",
            fmt_ms(to_main.p50) if to_main else "-",
            f"{rss / 1e3:.0f} MB (n={len(item.peak_rss_kb)})" if rss else "-",
            footprint(item),
        )
    return table


def runner_ratio_table(found: Sequence[ColdStart]) -> Table | None:
    """Native against Python, per board and measurement: the ratio of median cold starts."""
    pairs = pair_runners(found)
    if not pairs:
        return None
    table = Table(
        title="Cold start: native runner vs Python agent",
        title_justify="left",
        caption=f"native/python = median(native)/median(python), below 1: native starts faster; {EMULATED_NOTE}",
        caption_justify="left",
    )
    table.add_column("board", style="bold")
    for column in ("variant", "model"):
        table.add_column(column)
    for column in ("n native/python", "p50 native→python ms", "native/python"):
        table.add_column(column, justify="right")
    for native, python in pairs:
        table.add_row(
            escape(native.board),
            escape(str(native.key.get("variant"))),
            escape(str(native.key.get("model", "")).removesuffix(".onnx")),
            f"{native.first_result().n}/{python.first_result().n}",
            f"{fmt_ms(native.first_result().p50)}→{fmt_ms(python.first_result().p50)}",
            f"{ratio(native, python):.2f}",
        )
    return table
