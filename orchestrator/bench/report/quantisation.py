"""fp32 vs int8 side by side: speed (p50 of each series) and agreement (max abs difference, top-1
for classifiers) per board, release and model, from a stored run. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.table import Table

from orchestrator.bench.records import BoardRecord, QuantisedRecord
from orchestrator.bench.series import Series
from orchestrator.bench.stats import summarize


@dataclass(frozen=True, kw_only=True)
class Side:
    """One side's figures: p50, n and IQR of every timed inference."""

    p50_ms: float
    n: int
    iqr_ms: float


@dataclass(frozen=True, kw_only=True)
class QuantRow:
    """A quantised (board, release, model): how its int8 copy was made, and both sides' figures when
    each is one series (a sweep shows its series in the main table)."""

    board: str
    release: str
    model: str
    made: QuantisedRecord
    fp32: Side | None
    int8: Side | None

    def ratio(self) -> str:
        if self.fp32 is None or self.int8 is None or not self.fp32.p50_ms or not self.int8.p50_ms:
            return "-"
        return f"{self.int8.p50_ms / self.fp32.p50_ms:.2f}"

    def ops(self) -> dict[str, int]:
        return self.made.get("ops") or {}


def _side(found: Sequence[Series]) -> Side | None:
    if len(found) != 1:  # none, or a sweep: its series are in the main table
        return None
    summary = summarize(found[0].latencies_ms)
    return Side(p50_ms=summary.p50, n=summary.n, iqr_ms=summary.iqr)


def rows(boards: Mapping[str, BoardRecord], series: Sequence[Series]) -> list[QuantRow]:
    """One row per (board, release, model) that was quantised, with both sides' p50."""
    out = []
    for board, document in boards.items():
        for release, models in document.get("quantization", {}).items():
            for model, made in models.items():
                sides: dict[str, list[Series]] = {"fp32": [], "int8": []}
                for item in series:
                    key = item.key
                    if item.board == board and key.release == release and key.model == model:
                        sides["fp32" if key.quant == "fp32" else "int8"].append(item)
                out.append(
                    QuantRow(
                        board=board,
                        release=release,
                        model=model,
                        made=made,
                        fp32=_side(sides["fp32"]),
                        int8=_side(sides["int8"]),
                    )
                )
    return out


def agreement_cells(made: QuantisedRecord) -> tuple[str, str]:
    agreement = made.get("agreement") or {}
    outputs = agreement.get("outputs") or []
    if not outputs:
        return "-", "-"
    worst = max(outputs, key=lambda o: o.get("max_abs_diff", 0.0))
    diff = (
        f"{worst.get('max_abs_diff', 0.0):.3g} (of |fp32| ≤ {worst.get('max_abs_fp32', 0.0):.3g};"
        f" {agreement.get('samples')} samples)"
    )
    top1 = [o for o in outputs if o.get("classifier")]
    shown = (
        ", ".join(f"{o.get('top1_agreement', 0.0) * 100:.1f} % of {o.get('top1_rows')}" for o in top1)
        if top1
        else "not a classifier"
    )
    return diff, shown


def _timing(side: Side | None) -> str:
    return f"{side.p50_ms:.3g} ms (n={side.n}, IQR {side.iqr_ms:.2g})" if side else "see the table above"


def quantisation_table(boards: Mapping[str, BoardRecord], series: Sequence[Series]) -> Table | None:
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
        calibration = row.made.get("calibration")
        how = row.made["mode"] + (f", {calibration.get('source')} data" if calibration else "")
        shown_ops = ", ".join(f"{name} {count}" for name, count in row.ops().items()) or "none"
        diff, top1 = agreement_cells(row.made)
        table.add_row(
            row.board,
            row.release,
            row.model,
            f"{how}: {shown_ops}",
            _timing(row.fp32),
            _timing(row.int8),
            row.ratio(),
            diff,
            top1,
        )
    return table
