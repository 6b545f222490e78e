"""A deploy's progress on stderr: per board a status line, the bytes sent and the rate (rich Progress)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from orchestrator.board import Board
from orchestrator.console import console

if TYPE_CHECKING:
    from typing_extensions import Self


class TransferView:
    """Per-board progress on stderr: a status line, bytes sent and the rate (rich Progress)."""

    def __init__(self, boards: Sequence[Board], *, enabled: bool) -> None:
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]{task.fields[board]}"),
            BarColumn(bar_width=24),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            transient=False,
            disable=not enabled,
        )
        self.tasks: dict[str, TaskID] = {
            b.name: self.progress.add_task(b.name, board=escape(b.name), status="waiting", total=None)
            for b in boards
        }

    def __enter__(self) -> Self:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def status(self, board: str, text: str, *, log: bool = False) -> None:
        self.progress.update(self.tasks[board], status=escape(text))
        if log or not self.enabled:
            console.print(f"{escape(board)}: {escape(text)}", soft_wrap=True)

    def start_transfer(self, board: str, total: int) -> None:
        self.progress.reset(self.tasks[board], total=total or 1, completed=0 if total else 1)
        self.progress.start_task(self.tasks[board])

    def advance_to(self, board: str, done: int) -> None:
        self.progress.update(self.tasks[board], completed=done)
