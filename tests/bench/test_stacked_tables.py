"""Tables too wide for the terminal are printed stacked: one block per row, or per section where
rows belong together (the two sides of an A/B)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from orchestrator.console import stacked


def _text(table: Table) -> list[str]:
    buffer = io.StringIO()
    Console(file=buffer, width=60, color_system=None).print(stacked(table))
    return [line.rstrip() for line in buffer.getvalue().splitlines()]


def test_a_table_without_sections_is_one_block_per_row() -> None:
    table = Table()
    table.add_column("board")
    table.add_column("p50 ms")
    table.add_row("rpi5-1", "8143")
    table.add_row("rpi5-2", "2663")
    assert _text(table) == ["board  rpi5-1", "p50 ms 8143", "", "board  rpi5-2", "p50 ms 2663"]


def test_rows_of_one_section_stay_in_one_block() -> None:
    table = Table()
    table.add_column("side")
    table.add_column("CI")
    table.add_row("A stock", "1.00")
    table.add_row("B tuned", "[0.81,1.23]", end_section=True)
    table.add_row("A stock", "0.90")
    table.add_row("B tuned", "[0.70,1.17]", end_section=True)
    assert _text(table) == [
        "side A stock",
        "     B tuned",
        "CI   1.00",
        "     [0.81,1.23]",
        "",
        "side A stock",
        "     B tuned",
        "CI   0.90",
        "     [0.70,1.17]",
    ]
