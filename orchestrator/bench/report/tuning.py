"""What `orch tune` found, as the terminal shows it (after the run and in `orch results show`) and as the
HTML report's Tuning section shows it: the rungs (candidates, runs each, who was dropped and why),
then per board the best configuration with its interval and run count, its ratio to the default
settings and to stock, and the `orch bench` line that measures that comparison again."""

from __future__ import annotations

import math

from rich.markup import escape
from rich.table import Table

from orchestrator.bench.records import Against, RungRecord, TuneRecord
from orchestrator.bench.report.native_tables import EMULATED_NOTE
from orchestrator.bench.report.tables import fmt_ms
from orchestrator.bench.results import RunRecord
from orchestrator.console import compact_table

RATIO_NOTE = (
    "best/baseline = median(best)/median(baseline) of every inference (below 1: the best is faster), 95% CI"
    " from a hierarchical bootstrap (runs, then inferences); runs (n) = agent processes (inferences), best/baseline"
)


def tuned_boards(record: RunRecord) -> dict[str, TuneRecord]:
    """Per board of a run, its stored tune record (none for a bench run)."""
    return {name: doc["tune"] for name, doc in record.boards.items() if "tune" in doc}


def emulated(record: RunRecord) -> bool:
    return any("emulated" in doc["board_info"].get("tags", []) for doc in record.boards.values())


def _ci(low: float | None, high: float | None) -> str:
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "[-]"
    return f"[{low:.2f}, {high:.2f}]"


def dropped_text(rung: RungRecord) -> str:
    return "; ".join(f"{item['label']}: {item['reason']}" for item in rung.get("dropped", [])) or "-"


def rung_rows(tuned: dict[str, TuneRecord]) -> list[list[str]]:
    """board, rung, kind, candidates, runs each, dropped (and why), wall time."""
    rows = []
    for board, found in tuned.items():
        for rung in found["rungs"]:
            runs = str(rung["runs_each"])
            if rung["runs_each"] < rung.get("wanted_runs", rung["runs_each"]):
                runs += f" (of {rung['wanted_runs']}: budget)"
            rows.append(
                [
                    board,
                    str(rung["rung"]),
                    rung["kind"],
                    str(rung["candidates"]),
                    runs,
                    dropped_text(rung),
                    f"{rung.get('wall_s', 0):.0f} s",
                ]
            )
    return rows


def against(found: Against) -> str:
    """One comparison of the result: the ratio with its interval, runs and inferences, and the verdict."""
    if "missing" in found:
        return str(found["missing"])
    if found.get("same"):
        return "the best is this configuration"
    return (
        f"{found['ratio']:.2f} {_ci(found['ci_low'], found['ci_high'])} vs {found['label']}; runs"
        f" {found['runs_b']}/{found['runs_a']} (n {found['n_b']}/{found['n_a']}); {found['verdict']}"
    )


def result_rows(tuned: dict[str, TuneRecord]) -> list[list[str]]:
    """board, best configuration, p50 [CI], runs (n), vs default settings, vs stock, why the search stopped."""
    rows = []
    for board, found in tuned.items():
        result = found.get("result")
        if not result:
            rows.append(
                [
                    board,
                    "no result (the board failed before the search ended)",
                    "-",
                    "-",
                    "-",
                    "-",
                    found["stopped"] or "-",
                ]
            )
            continue
        rows.append(
            [
                board,
                result["label"],
                f"{fmt_ms(result['median_ms'])} {_ci(result['ci_low'], result['ci_high'])}",
                f"{result['runs']} ({result['n']})",
                against(result["vs_default"]),
                against(result["vs_stock"]),
                found["stopped"],
            ]
        )
    return rows


RESULT_HEADERS = [
    "board",
    "best configuration",
    "p50 ms [95% CI]",
    "runs (n)",
    "vs default settings",
    "vs stock",
    "search ended",
]
RUNG_HEADERS = [
    "board",
    "rung",
    "kind",
    "candidates",
    "runs each",
    "dropped (ratio to the best, 95% CI)",
    "wall",
]


def caption(record: RunRecord) -> str:
    return RATIO_NOTE + (f"; {EMULATED_NOTE}" if emulated(record) else "")


def tuning_tables(record: RunRecord) -> list[Table]:
    """The rungs and the result, for the terminal; none for a bench run."""
    tuned = tuned_boards(record)
    if not tuned:
        return []
    rungs = compact_table(title="Tuning: rungs", title_justify="left", show_lines=True)
    for header in RUNG_HEADERS:
        rungs.add_column(header, overflow="fold", no_wrap=header in ("rung", "runs each", "wall"))
    for row in rung_rows(tuned):
        rungs.add_row(*(escape(cell) for cell in row))
    best = compact_table(
        title="Tuning: the best configuration",
        title_justify="left",
        caption=caption(record),
        caption_justify="left",
        show_lines=True,
    )
    for header in RESULT_HEADERS:
        best.add_column(header, overflow="fold")
    for row in result_rows(tuned):
        best.add_row(*(escape(cell) for cell in row))
    return [rungs, best]


def commands(record: RunRecord) -> dict[str, str]:
    """Per board, the `orch bench` line that measures the best against its baselines again."""
    return {
        board: command
        for board, found in tuned_boards(record).items()
        if (command := found.get("result", {}).get("command"))
    }
