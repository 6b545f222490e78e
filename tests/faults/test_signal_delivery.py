"""A Ctrl-C that the kernel hands to one of orch's other threads (a board's, paramiko's) instead of
the main one: Python runs its handler in the main thread only, once that thread runs again. The
fleet's wait must wake often enough for it, or the boards go on to the end (a deploy's switch
included) before orch hears it was interrupted; and a board's thread, about to switch, must know of
the signal already. Unit tests: a real signal, real threads."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from orchestrator.adapters.signals import watch_signals
from orchestrator.board import Board
from orchestrator.deploy.switch_gate import SwitchGate
from orchestrator.errors import DeployError
from orchestrator.fleet.parallel import WAKE_S, run_on_boards

BOARD_WORK_S = 5.0


@pytest.mark.parametrize("timeout", [None, 3600.0], ids=["no-timeout", "deploy-timeout"])
def test_a_signal_taken_by_a_board_thread_interrupts_the_main_thread_while_the_board_works(
    timeout: float | None,
) -> None:
    board_thread: list[int] = []
    finished = threading.Event()

    def task(_board: Board) -> str:
        board_thread.append(threading.get_ident())
        time.sleep(BOARD_WORK_S)  # the board is frozen; it thaws later
        finished.set()
        return "switched"

    def ctrl_c_to_the_board_thread() -> None:
        while not board_thread:
            time.sleep(0.01)
        time.sleep(0.3)
        signal.pthread_kill(board_thread[0], signal.SIGINT)

    threading.Thread(target=ctrl_c_to_the_board_thread, daemon=True).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_on_boards([Board(name="b1", hostname="127.0.0.1")], task, timeout=timeout, progress=False)
    waited = time.monotonic() - start
    assert not finished.is_set(), f"the interruption came only once the board had finished ({waited:.1f} s)"
    assert waited < 0.3 + WAKE_S + 1.0, waited


def test_a_board_thread_knows_of_a_signal_before_the_main_thread_has_run_its_handler() -> None:
    seen: list[bool] = []
    with pytest.raises(KeyboardInterrupt), watch_signals() as signals:
        assert not signals.received()

        def board() -> None:
            # The signal comes to this thread: its C handler runs here, the Python one later, in
            # the main thread.
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            seen.append(signals.received())

        worker = threading.Thread(target=board)
        worker.start()
        worker.join()
        time.sleep(1)  # the main thread's handler runs at the latest here
    assert seen == [True]


def test_the_switch_gate_refuses_to_switch_once_orch_received_a_signal() -> None:
    received = [False]
    gate = SwitchGate(stopped=lambda: received[0])
    gate.seen("b1", "A")
    switched: list[str] = []
    gate.switch("b1", "B", lambda: switched.append("B"))
    received[0] = True
    with pytest.raises(DeployError, match=r"b1: stopped before switching to C: B stays current"):
        gate.switch("b1", "C", lambda: switched.append("C"))
    assert switched == ["B"]
    assert gate.close("b1").describe() == "B"
