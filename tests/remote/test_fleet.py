"""The fleet runner: bounded parallelism, per-board deadlines, no lost results (real threads)."""

from __future__ import annotations

import threading
import time

import pytest

from orchestrator.board import Board
from orchestrator.errors import PartialFailure, RemoteError, UsageError
from orchestrator.fleet.parallel import BoardTimeout, run_on_boards


def boards(*names: str) -> list[Board]:
    return [Board(name=name, hostname="127.0.0.1", port=22000 + i) for i, name in enumerate(names)]


def test_a_hung_board_is_reported_and_the_others_finish():
    release = threading.Event()

    def task(board: Board) -> str:
        if board.name == "hung":
            release.wait(60)  # a board that never answers
        return board.name.upper()

    start = time.monotonic()
    result = run_on_boards(
        boards("a", "hung", "b"), task, parallel=2, timeout=1.0, label="probe", progress=False
    )
    elapsed = time.monotonic() - start
    release.set()
    assert elapsed < 5, "the fleet must not wait for the hung board"
    assert result.values() == {"a": "A", "b": "B"}
    hung = result.outcomes["hung"]
    assert hung.timed_out and isinstance(hung.error, BoardTimeout)
    assert hung.message == "hung (127.0.0.1:22001): timed out after 1s (probe)"
    assert list(result.outcomes) == ["a", "hung", "b"], "outcomes keep the selection order"
    assert result.exit_code == PartialFailure.exit_code
    assert result.summary() == "3 boards: 2 succeeded, 1 timed out (hung)"


def test_one_failure_never_loses_the_others():
    def task(board: Board) -> int:
        if board.name == "bad":
            raise RemoteError("bad (127.0.0.1:22001): connection refused")
        return len(board.name)

    result = run_on_boards(boards("good", "bad", "other"), task, progress=False)
    assert set(result.succeeded) == {"good", "other"}
    assert set(result.failed) == {"bad"}
    assert result.failed["bad"].message == "bad (127.0.0.1:22001): connection refused"
    assert result.exit_code == PartialFailure.exit_code


def test_all_failed_uses_the_errors_exit_code_and_success_is_zero():
    def refuse(board: Board) -> None:
        raise RemoteError(f"{board.name}: connection refused")

    assert run_on_boards(boards("a", "b"), refuse, progress=False).exit_code == RemoteError.exit_code
    assert run_on_boards(boards("a", "b"), lambda b: b.name, progress=False).exit_code == 0


def test_unexpected_exceptions_are_kept_with_the_board_name():
    result = run_on_boards(boards("a"), lambda b: 1 / 0, progress=False)
    assert result.outcomes["a"].message == "a: ZeroDivisionError: division by zero"
    assert result.exit_code == 1


def test_parallelism_is_bounded():
    lock = threading.Lock()
    active, peak = 0, 0

    def task(board: Board) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.3)  # long enough that all three overlap even on a loaded machine
        with lock:
            active -= 1

    result = run_on_boards(boards(*[f"b{i}" for i in range(7)]), task, parallel=3, progress=False)
    assert result.exit_code == 0 and len(result.outcomes) == 7
    assert peak == 3


def test_bad_parallel_and_timeout_are_usage_errors():
    with pytest.raises(UsageError, match="--parallel must be at least 1"):
        run_on_boards(boards("a"), lambda b: None, parallel=0)
    with pytest.raises(UsageError, match="--timeout must be positive"):
        run_on_boards(boards("a"), lambda b: None, timeout=0)
