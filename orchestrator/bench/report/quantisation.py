"""fp32 vs int8 side by side: speed (p50 of each series) and agreement (max abs difference, top-1
for classifiers) per board, release and model, from a stored run. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from orchestrator.bench.series import Series
from orchestrator.bench.stats import summarize


def rows(boards: Mapping[str, dict[str, Any]], series: Sequence[Series]) -> list[dict[str, Any]]:
    """One row per (board, release, model) that was quantised, with both sides' p50."""
    out = []
    for board, document in boards.items():
        for release, models in (document.get("quantization") or {}).items():
            for model, made in models.items():
                sides: dict[str, list[Series]] = {}
                for item in series:
                    key = item.key
                    if item.board == board and key.release == release and key.model == model:
                        sides.setdefault("fp32" if key.quant == "fp32" else "int8", []).append(item)
                row: dict[str, Any] = {"board": board, "release": release, "model": model, **made}
                for side in ("fp32", "int8"):
                    found = sides.get(side, [])
                    if len(found) == 1:  # one setting: a sweep shows its series in the main table
                        summary = summarize(found[0].latencies_ms)
                        row[f"{side}_p50_ms"] = summary.p50
                        row[f"{side}_n"] = summary.n
                        row[f"{side}_iqr_ms"] = summary.iqr
                out.append(row)
    return out


def agreement_cells(row: dict[str, Any]) -> tuple[str, str]:
    agreement = row.get("agreement") or {}
    outputs = agreement.get("outputs") or []
    if not outputs:
        return "-", "-"
    worst = max(outputs, key=lambda o: o["max_abs_diff"])
    diff = f"{worst['max_abs_diff']:.3g} (of |fp32| ≤ {worst['max_abs_fp32']:.3g}; {agreement['samples']} samples)"
    top1 = [o for o in outputs if o.get("classifier")]
    shown = (
        ", ".join(f"{o['top1_agreement'] * 100:.1f} % of {o['top1_rows']}" for o in top1)
        if top1
        else "not a classifier"
    )
    return diff, shown


def quantisation_table(boards: Mapping[str, dict[str, Any]], series: Sequence[Series]) -> Table | None:
    found = rows(boards, series)
    if not found:
        return None
    table = Table(
        title="fp32 vs int8: speed and agreement",
        caption="p50 (n, IQR) of every timed inference; emulated boards: relative only. Agreement on the board's "
        "CPU over the calibration samples.",
    )
    for column in (
        "board",
        "release",
        "model",
        "int8",
        "fp32 p50",
        "int8 p50",
        "int8/fp32",
        "max |diff|",
        "top-1 agree",
    ):
        table.add_column(column, overflow="fold")
    for row in found:
        timing = []
        for side in ("fp32", "int8"):
            if f"{side}_p50_ms" in row:
                timing.append(
                    f"{row[f'{side}_p50_ms']:.3g} ms (n={row[f'{side}_n']}, IQR {row[f'{side}_iqr_ms']:.2g})"
                )
            else:
                timing.append("see the table above")
        ratio = (
            f"{row['int8_p50_ms'] / row['fp32_p50_ms']:.2f}"
            if row.get("int8_p50_ms") and row.get("fp32_p50_ms")
            else "-"
        )
        ops = row.get("ops") or {}
        how = row["mode"] + (f", {row['calibration'].get('source')} data" if row.get("calibration") else "")
        shown_ops = ", ".join(f"{name} {count}" for name, count in ops.items()) or "none"
        diff, top1 = agreement_cells(row)
        table.add_row(
            row["board"], row["release"], row["model"], f"{how}: {shown_ops}", *timing, ratio, diff, top1
        )
    return table
