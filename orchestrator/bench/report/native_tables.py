"""Tables of cold starts and footprint (``orch bench --runner native|both``), next to the latency tables.

Every figure carries its sample count and spread: cold start is one sample per process launch, so
n is small (``--cold-starts`` per round), and a median without its n would read as more than it is.

The cells, headers and captions are plain text shared by the terminal tables and the HTML report,
so ``orch bench``, ``orch results show`` and ``orch report`` show the same figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.markup import escape
from rich.table import Table

from orchestrator.bench.native import ColdStart, cold_starts, pair_runners, ratio
from orchestrator.bench.records import BoardRecord, MeasurementKey, SummaryRecord
from orchestrator.bench.report.quantisation import quantisation_table
from orchestrator.bench.report.tables import fmt_ms
from orchestrator.bench.series import Series

EMULATED_NOTE = "on emulated (lab) boards these timings are for relative comparison only"


def _mb(value: int | None) -> str:
    return f"{value / 1e6:.1f} MB" if value else "-"


def footprint(item: ColdStart) -> str:
    """What the runner needs on disk: the runner + ORT's C library (native), the wheel (Python)."""
    if item.key["runner"] == "native":
        if item.runner_bytes is None and item.library_bytes is None:
            return "-"
        return f"{(item.runner_bytes or 0) / 1e3:.0f} kB + {_mb(item.library_bytes)}"
    return f"wheel {_mb(item.library_bytes)} + Python, numpy" if item.library_bytes else "-"


COLD_START_TITLE = "Cold start and footprint"
COLD_START_HEADERS = (
    "board",
    "variant",
    "model",
    "runner",
    "n",
    "cold p50 ms",
    "IQR",
    "min-max",
    "exec->main p50",
    "peak RSS",
    "on disk",
)
COLD_START_CAPTION = (
    "cold start = process exec -> first result, one sample per launch; "
    f"RSS = peak resident memory of the processes; {EMULATED_NOTE}"
)
RATIO_TITLE = "Cold start: native runner vs Python agent"
RATIO_HEADERS = ("board", "variant", "model", "n native/python", "p50 native→python ms", "native/python")
RATIO_CAPTION = (
    f"native/python = median(native)/median(python), below 1: native starts faster; {EMULATED_NOTE}"
)


def _model(item: ColdStart) -> str:
    return item.key["model"].removesuffix(".onnx")


def cold_start_cells(item: ColdStart) -> list[str]:
    """One row of the cold-start table, as plain text (COLD_START_HEADERS)."""
    summary = item.first_result()
    to_main = item.to_main()
    rss = max(item.peak_rss_kb) if item.peak_rss_kb else None
    return [
        item.board,
        item.key["variant"],
        _model(item),
        item.key["runner"],
        str(summary.n),
        fmt_ms(summary.p50),
        fmt_ms(summary.iqr),
        f"{fmt_ms(summary.min)}-{fmt_ms(summary.max)}",
        fmt_ms(to_main.p50) if to_main else "-",
        f"{rss / 1e3:.0f} MB (n={len(item.peak_rss_kb)})" if rss else "-",
        footprint(item),
    ]


def ratio_cells(native: ColdStart, python: ColdStart) -> list[str]:
    """One row of the runner ratio table, as plain text (RATIO_HEADERS)."""
    return [
        native.board,
        native.key["variant"],
        _model(native),
        f"{native.first_result().n}/{python.first_result().n}",
        f"{fmt_ms(native.first_result().p50)}→{fmt_ms(python.first_result().p50)}",
        f"{ratio(native, python):.2f}",
    ]


def _table(
    title: str, caption: str, headers: Sequence[str], rows: Sequence[Sequence[str]], left: int
) -> Table:
    """A terminal table of plain-text cells: the first ``left`` columns are names, the rest figures."""
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for index, header in enumerate(headers):
        table.add_column(
            header, style="bold" if index == 0 else "", justify="left" if index < left else "right"
        )
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def cold_start_table(found: Sequence[ColdStart], *, title: str = COLD_START_TITLE) -> Table:
    rows = [cold_start_cells(item) for item in found]
    return _table(title, COLD_START_CAPTION, COLD_START_HEADERS, rows, left=4)


def runner_ratio_table(found: Sequence[ColdStart]) -> Table | None:
    """Native against Python, per board and measurement: the ratio of median cold starts."""
    pairs = pair_runners(found)
    if not pairs:
        return None
    return _table(RATIO_TITLE, RATIO_CAPTION, RATIO_HEADERS, [ratio_cells(*pair) for pair in pairs], left=3)


class ColdStartRow(MeasurementKey):
    """One cold start as the JSON documents give it."""

    board: str
    launch_to_first_result: SummaryRecord
    peak_rss_kb: int | None
    runner_bytes: int | None
    library_bytes: int | None


def cold_start_rows(boards: Mapping[str, BoardRecord]) -> list[ColdStartRow]:
    """The "cold_starts" list of the JSON documents (bench --json, results show --json, report.json)."""
    return [
        {
            "board": item.board,
            **item.key,
            "launch_to_first_result": item.first_result().as_dict(),
            "peak_rss_kb": max(item.peak_rss_kb) if item.peak_rss_kb else None,
            "runner_bytes": item.runner_bytes,
            "library_bytes": item.library_bytes,
        }
        for item in cold_starts(boards.values())
    ]


def after_run_tables(boards: Mapping[str, BoardRecord], series: Sequence[Series]) -> list[Table]:
    """The tables printed after the run tables, those the run has data for: fp32 vs int8, cold
    start and footprint, native vs Python."""
    found = cold_starts(boards.values())
    tables = [quantisation_table(boards, series)]
    if found:
        tables += [cold_start_table(found), runner_ratio_table(found)]
    return [table for table in tables if table is not None]
