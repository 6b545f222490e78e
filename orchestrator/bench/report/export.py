"""Flat rows of a run's series (and optionally every sample) for CSV and JSON export."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence

from orchestrator.bench.results import RunRecord, SeriesRow, flatten_series
from orchestrator.bench.series import KeyColumns


class SampleRow(KeyColumns):
    """One timed inference as an export row."""

    run_id: str
    board: str
    round: int
    sample: int
    latency_ms: float


def export_rows(records: Sequence[RunRecord], *, samples: bool = False) -> list[SeriesRow] | list[SampleRow]:
    if not samples:
        return flatten_series(records)
    rows: list[SampleRow] = []
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


def to_csv(rows: Sequence[Mapping[str, object]]) -> str:
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
