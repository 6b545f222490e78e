"""The one rich Console of the project.

Human output (progress, tables, messages) goes to stderr so that ``--json`` can
print exactly one JSON document on stdout.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
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


class PlainProgress:
    """Progress of long counted work as plain lines, for output that is not a terminal (CI logs,
    ``| tee``), where a live bar draws nothing and an ORT build would say nothing for most of an
    hour, and for builds that share one terminal. One line at most every ``interval_s``, and one
    when the work is done."""

    def __init__(
        self,
        what: str,
        *,
        say: Callable[[str], None] | None = None,
        interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.say = say or console.print
        self.interval_s = interval_s
        self.clock = clock
        self.started: float | None = None
        self.last_line = float("-inf")
        self.finished = False

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.started is None:
            self.started = now
        complete = total > 0 and done >= total
        if self.finished or (not complete and now - self.last_line < self.interval_s):
            return
        self.last_line, self.finished = now, complete
        elapsed = int(now - self.started)
        percent = f" ({100 * done // total}%)" if total > 0 else ""
        self.say(f"{self.what}: {done}/{total}{percent} after {elapsed // 60}m{elapsed % 60:02d}s")


@contextmanager
def compile_progress() -> Iterator[Callable[[int, int], None]]:
    """ninja's [n/N] as a live bar on a terminal, as plain lines elsewhere (CI logs)."""
    plain = None if console.is_terminal else PlainProgress("compiling (ninja steps)")
    with Progress(
        TextColumn("[bold]compiling"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=plain is not None,
    ) as progress:
        task = progress.add_task("compile", total=None)

        def on_progress(done: int, total: int) -> None:
            if plain is not None:
                plain(done, total)
            else:
                progress.update(task, completed=done, total=total)

        yield on_progress


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


def duration_text(seconds: float) -> str:
    """``90 s``, ``3 min``, ``2.5 min``, ``1.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    value, unit = (seconds / 60, "min") if seconds < 7200 else (seconds / 3600, "h")
    return f"{value:.1f}".removesuffix(".0") + f" {unit}"


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


def compact_table(**options: Any) -> Table:
    """The style of orch's wide tables: a rule under the header, no vertical rules, two spaces
    between columns (9 columns cost 17 characters of rules and padding instead of 28 boxed), so
    more of 80 columns goes to the figures."""
    return Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), pad_edge=False, **options)


# A name (board, model) may fold across lines rather than force the whole table into stacked form,
# but not into pieces shorter than this.
FOLD_MIN = 10


def fit(table: Table, width: int, on: Console | None = None) -> bool:
    """Give the wrappable columns of ``table`` widths that fit ``width`` while keeping every word of
    theirs whole (names in ``overflow="fold"`` columns may fold down to FOLD_MIN), and the
    ``no_wrap`` columns their full width. False when no such widths exist.

    rich's own shrinking narrows the widest columns first and, when that is not enough, cuts every
    column with an ellipsis: a CI bound or a version would be lost. Here the columns start from
    their longest word and share what is left, up to their natural width."""
    target = on or console
    wide = target.options.update_width(10_000)
    natural = Measurement.get(target, wide, table).maximum
    if natural <= width:
        return True
    ranges = []
    for column in table.columns:
        measures = [Measurement.get(target, wide, cell) for cell in (column.header, *column.cells)]
        longest_word = max(m.minimum for m in measures)
        full = max(m.maximum for m in measures)
        if column.overflow == "fold":
            longest_word = min(longest_word, FOLD_MIN)
        ranges.append((longest_word, full))
    overhead = natural - sum(full for _, full in ranges)
    room = (
        width
        - overhead
        - sum(full for column, (_, full) in zip(table.columns, ranges, strict=True) if column.no_wrap)
    )
    flexible = {
        i: low
        for i, (column, (low, _)) in enumerate(zip(table.columns, ranges, strict=True))
        if not column.no_wrap
    }
    spare = room - sum(flexible.values())
    if spare < 0:
        return False
    while spare > 0:
        growing = [i for i, now in flexible.items() if now < ranges[i][1]]
        if not growing:
            break
        for i in growing[:spare]:
            flexible[i] += 1
        spare -= min(spare, len(growing))
    for i, now in flexible.items():
        table.columns[i].width = now
    return True


def cuts(table: Table, width: int) -> bool:
    """Whether rich, drawing ``table`` in ``width`` columns, would cut a cell (it marks a cut with an
    ellipsis): the table is drawn once into a buffer to find out."""
    buffer = io.StringIO()
    Console(width=width, file=buffer, color_system=None, highlight=False).print(table)
    return "\u2026" in buffer.getvalue()


def stacked(table: Table) -> RenderableType:
    """The same table as one block per section (a row, or the rows drawn together up to a section
    line, as the two sides of an A/B), ``header  values`` per line: fits any width, because the values
    wrap (and long words fold) in the full width instead of a narrow column."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    columns = [(column.header, list(column.cells)) for column in table.columns]
    # Rows drawn in sections (an A/B's two sides) stay together; a table without sections is one block per row.
    in_sections = any(row.end_section for row in table.rows[:-1])
    sections: list[list[int]] = [[]]
    for index, row in enumerate(table.rows):
        sections[-1].append(index)
        if (row.end_section or not in_sections) and index < table.row_count - 1:
            sections.append([])
    for number, rows in enumerate(sections):
        if number:
            grid.add_row("", "")
        for header, cells in columns:
            label = header.plain if isinstance(header, Text) else str(header)
            values = [cells[index] for index in rows if cells[index] not in ("", None)]
            texts = [v for v in values if isinstance(v, str)]
            joined: RenderableType = "\n".join(texts) if len(texts) == len(values) else Group(*values)
            grid.add_row(" ".join(label.split()), joined)
    parts: list[RenderableType] = [part for part in (table.title, grid, table.caption) if part]
    return Group(*parts)


def print_whole(table: Table, on: Console | None = None) -> None:
    """Print a table whole, never cutting a number or a version: as a table when it fits the
    terminal or log width (80 when the output is a pipe, unless COLUMNS says otherwise), else
    stacked, one block per row."""
    target = on or console
    whole = fit(table, target.width, target) and not cuts(table, target.width)
    target.print(table if whole else stacked(table))
