"""The one rich Console of the project.

Human output (progress, tables, messages) goes to stderr so that ``--json`` can
print exactly one JSON document on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader of stderr went away (``orch inventory list 2>&1 | head -1``): end as for a
        closed stdout (``cli.main`` exits 141), not with rich's own exit status 1."""
        quiet_stdout()
        _to_devnull(sys.stderr)
        raise BrokenPipeError


console = _Console(stderr=True, highlight=False)


def quiet_stdout() -> None:
    """After a broken pipe: stdout goes to /dev/null, so nothing (not the interpreter's last flush)
    complains about the reader that went away."""
    _to_devnull(sys.stdout)


def _to_devnull(stream: TextIO) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # already closed or not a real file: nothing left to quiet


def emit_json(document: Any) -> None:
    """Print one JSON document on stdout (the machine-readable result of a command).

    A reader that closes the pipe early (``| head``) raises BrokenPipeError, which ``cli.main``
    turns into the quiet exit status a shell expects (141)."""
    text = json.dumps(document, indent=2, sort_keys=True, default=str)
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
        raise


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain-text table (cells are text, never markup), drawn as rich draws a ``Table`` with
    ``title_justify="left"`` and ``overflow="fold"`` columns.

    Rich lays out and renders every cell on its own: 10,000 rows (an inventory of that size) take
    it 3.5 s. When every cell is one line of printable text and the table fits the console, the
    rows here are padded and joined directly instead, to the same characters (the title and
    header through rich, for their styles); anything else goes through rich's Table."""
    widths = [cell_len(name) for name in columns]
    plain = all(name.isprintable() for name in columns) and title.isprintable()
    for row in rows:
        if not plain:
            break
        for index, cell in enumerate(row):
            if not cell.isprintable():
                plain = False
                break
            widths[index] = max(widths[index], cell_len(cell))
    table_width = sum(widths) + 3 * len(widths) + 1
    if not plain or not columns or table_width > console.width or cell_len(title) > table_width:
        table = Table(title=escape(title), title_justify="left")
        for name in columns:
            table.add_column(name, overflow="fold")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
        return
    # The title, the header and the first row through rich (their styles), every column at its
    # final width; then the other rows and the bottom edge, as rich would draw them.
    head = Table(title=escape(title), title_justify="left")
    for name, width in zip(columns, widths, strict=True):
        head.add_column(name, min_width=width, overflow="fold")
    if rows:
        head.add_row(*(Text(cell) for cell in rows[0]))
    with console.capture() as capture:
        console.print(head)
    drawn = capture.get().split("\n")
    edge = head.box or box.HEAVY_HEAD
    if not rows:
        console.file.write("\n".join(drawn))
        console.file.flush()
        return
    body = drawn[:-2]  # the bottom edge (and the empty string after the last newline)
    body.extend(
        edge.mid_left
        + edge.mid_vertical.join(f" {_pad(cell, width)} " for cell, width in zip(row, widths, strict=True))
        + edge.mid_right
        for row in rows[1:]
    )
    body.append(drawn[-2])
    console.file.write("\n".join(body) + "\n")
    console.file.flush()


def _pad(cell: str, width: int) -> str:
    return cell + " " * (width - cell_len(cell))
