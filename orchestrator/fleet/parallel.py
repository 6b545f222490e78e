"""Run one task per board in parallel, keeping every board's result or error.

Like Fabric's ``GroupResult``: each board ends with a value or an error, and one
board's failure never loses the others' results. Each board gets its own deadline
(counted from when its task starts). Python threads cannot be killed, so a board
that overruns is *reported* as timed out and its daemon thread is abandoned: the
rest of the fleet finishes and the process can exit without waiting for it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar, cast

from rich.console import Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from orchestrator.adapters.signals import watch_signals
from orchestrator.board import Board
from orchestrator.console import console
from orchestrator.errors import OrchError, PartialFailure, RemoteError, UsageError

T = TypeVar("T")
# How often the main thread wakes while it waits for the boards. Python runs a signal's handler (Ctrl-C's
# KeyboardInterrupt, SIGTERM's) in the main thread only, once that thread runs again; the kernel may
# hand a signal sent to orch to any of its threads (a board's, paramiko's), and then the main thread,
# asleep until a board finishes, would hear of the Ctrl-C only after the boards went on to the end (a
# deploy's switch included). Waking it often lets the handler run within this many seconds.
WAKE_S = 0.2
# A board's line in the live view.
LiveStatus = Literal["waiting", "running", "ok", "failed", "timed out"]


class BoardTimeout(RemoteError):
    """A board's task did not finish within the fleet's per-board timeout."""


@dataclass(frozen=True, kw_only=True)
class Outcome(Generic[T]):
    """What happened on one board: a value, or an error (``timed_out`` when the deadline passed)."""

    board: Board
    value: T | None = None
    error: BaseException | None = None
    duration: float = 0.0
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def message(self) -> str:
        """The error as one line for humans ("" when the board succeeded)."""
        if self.error is None:
            return ""
        if isinstance(self.error, OrchError):
            return self.error.message
        return f"{self.board.name}: {type(self.error).__name__}: {self.error}"


@dataclass(frozen=True, kw_only=True)
class FleetResult(Generic[T]):
    """Every selected board's outcome, in selection order."""

    outcomes: dict[str, Outcome[T]] = field(default_factory=dict)

    @property
    def succeeded(self) -> dict[str, Outcome[T]]:
        return {name: o for name, o in self.outcomes.items() if o.ok}

    @property
    def failed(self) -> dict[str, Outcome[T]]:
        """Boards that raised or timed out."""
        return {name: o for name, o in self.outcomes.items() if not o.ok}

    @property
    def timed_out(self) -> dict[str, Outcome[T]]:
        return {name: o for name, o in self.outcomes.items() if o.timed_out}

    @property
    def exit_code(self) -> int:
        """0 only if every board succeeded; 8 (PartialFailure) if some did; else the first error's code."""
        failed = self.failed
        if not failed:
            return 0
        if self.succeeded:
            return PartialFailure.exit_code
        first = next(iter(failed.values())).error
        return first.exit_code if isinstance(first, OrchError) else 1

    def values(self) -> dict[str, T]:
        """The successful boards' values."""
        # A board that succeeded holds what its task returned (T: None only for a task returning None).
        return {name: cast(T, o.value) for name, o in self.succeeded.items()}

    def summary(self) -> str:
        """One line: "3 boards: 2 succeeded, 1 failed (nano01)"."""
        parts = [f"{len(self.succeeded)} succeeded"]
        errors = [name for name, o in self.failed.items() if not o.timed_out]
        if errors:
            parts.append(f"{len(errors)} failed ({', '.join(errors)})")
        if self.timed_out:
            parts.append(f"{len(self.timed_out)} timed out ({', '.join(self.timed_out)})")
        count = len(self.outcomes)
        return f"{count} board{'s' if count != 1 else ''}: " + ", ".join(parts)


class _LiveView:
    """Per-board status lines on stderr while the fleet runs (rendered by rich.Live)."""

    def __init__(self, boards: list[Board], label: str) -> None:
        self.label = label
        self.state: dict[str, tuple[LiveStatus, float, float | None]] = {
            b.name: ("waiting", 0.0, None) for b in boards
        }
        self.lock = threading.Lock()

    def set(
        self, name: str, status: LiveStatus, *, started: float | None = None, ended: float | None = None
    ) -> None:
        with self.lock:
            _, old_start, _ = self.state[name]
            self.state[name] = (status, started if started is not None else old_start, ended)

    def __rich__(self) -> Group:
        table = Table.grid(padding=(0, 2))
        now = time.monotonic()
        styles: dict[LiveStatus, str] = {
            "waiting": "dim",
            "running": "cyan",
            "ok": "green",
            "failed": "red",
            "timed out": "red",
        }
        with self.lock:
            for name, (status, start, end) in self.state.items():
                elapsed = "" if status == "waiting" else f"{(end or now) - start:6.1f}s"
                table.add_row(Text(name, style="bold"), Text(status, style=styles.get(status, "")), elapsed)
        return (
            Group(Text(self.label, style="bold", overflow="ellipsis", no_wrap=True), table)
            if self.label
            else Group(table)
        )


def run_on_boards(  # noqa: PLR0913 -- the fleet's one entry point: each option keyword-only, with a default
    boards: Iterable[Board],
    task: Callable[[Board], T],
    *,
    parallel: int = 8,
    timeout: float | None = None,
    label: str = "",
    progress: bool | None = None,
) -> FleetResult[T]:
    """Run ``task(board)`` for every board, at most ``parallel`` at once.

    ``timeout`` is per board, counted from the start of its task. ``progress``
    shows live per-board status on stderr (default: when stderr is a terminal).
    Never raises for a board's failure: inspect the returned ``FleetResult``.
    """
    if parallel < 1:
        raise UsageError(f"--parallel must be at least 1 (got {parallel})")
    if timeout is not None and timeout <= 0:
        raise UsageError(f"--timeout must be positive (got {timeout:g})")
    unique = list({board.name: board for board in boards}.values())
    fleet = _FleetRun(unique, task, timeout=timeout, label=label)
    show = console.is_terminal if progress is None else progress
    live = (
        Live(fleet.view, console=console, refresh_per_second=4, transient=True) if show and unique else None
    )
    if live is not None:
        live.start()
    try:
        with watch_signals() as signals:
            while fleet.pending or fleet.running:
                fleet.start_up_to(parallel)
                fleet.wait_for_one()
                fleet.expire_overdue()
            # A Ctrl-C that came as the last board ended, its handler not run yet: an interruption.
            signals.raise_received()
    finally:
        if live is not None:
            live.stop()
    return FleetResult(outcomes={board.name: fleet.outcomes[board.name] for board in unique})


class _FleetRun(Generic[T]):
    """The boards waiting, running (since when) and done, while ``run_on_boards`` runs."""

    def __init__(self, boards: list[Board], task: Callable[[Board], T], *, timeout: float | None, label: str):
        self.boards = boards
        self.task = task
        self.timeout = timeout
        self.label = label
        self.pending = deque(boards)
        self.running: dict[str, float] = {}
        self.outcomes: dict[str, Outcome[T]] = {}
        self.finished: queue.Queue[Outcome[T]] = queue.Queue()
        self.view = _LiveView(boards, label)

    def _work(self, board: Board, start: float) -> None:
        try:
            outcome: Outcome[T] = Outcome(
                board=board, value=self.task(board), duration=time.monotonic() - start
            )
        except BaseException as error:  # noqa: BLE001 - any failure of a board is its outcome, not ours
            outcome = Outcome(board=board, error=error, duration=time.monotonic() - start)
        self.finished.put(outcome)

    def _record(self, outcome: Outcome[T]) -> None:
        name = outcome.board.name
        self.running.pop(name, None)
        self.outcomes[name] = outcome
        status: LiveStatus = "ok" if outcome.ok else ("timed out" if outcome.timed_out else "failed")
        self.view.set(name, status, ended=time.monotonic())

    def start_up_to(self, parallel: int) -> None:
        while self.pending and len(self.running) < parallel:
            board = self.pending.popleft()
            start = time.monotonic()
            self.running[board.name] = start
            self.view.set(board.name, "running", started=start)
            # Daemon: a hung board must never keep the process alive at exit.
            threading.Thread(
                target=self._work, args=(board, start), name=f"orch-{board.name}", daemon=True
            ).start()

    def wait_for_one(self) -> None:
        """Until a board finishes, the first running board's deadline passes or WAKE_S have gone by."""
        wait = WAKE_S
        if self.timeout is not None:
            wait = min(wait, max(0.0, min(self.running.values()) + self.timeout - time.monotonic()))
        try:
            outcome = self.finished.get(timeout=wait)
        except queue.Empty:
            return
        # A late result from a board already reported as timed out is dropped.
        if outcome.board.name in self.running:
            self._record(outcome)

    def expire_overdue(self) -> None:
        """Report every board past its deadline as timed out (its thread is abandoned)."""
        if self.timeout is None:
            return
        now = time.monotonic()
        for name, start in list(self.running.items()):
            if now - start >= self.timeout:
                board = next(b for b in self.boards if b.name == name)
                what = f" ({self.label})" if self.label else ""
                error = BoardTimeout(
                    f"{name} ({board.address}): timed out after {self.timeout:g}s{what}",
                    hint="the board may be hung or very slow; raise --timeout or check it with `orch exec`",
                )
                self._record(Outcome(board=board, error=error, duration=now - start, timed_out=True))


def print_failures(result: FleetResult[T]) -> None:
    """One red line per failed board naming its cause (for commands' human output)."""
    for outcome in result.failed.values():
        console.print(f"[red]✗[/] {escape(outcome.message)}", soft_wrap=True)
        hint = getattr(outcome.error, "hint", None)
        if hint:
            console.print(f"  [yellow]hint:[/] {escape(hint)}", soft_wrap=True)
