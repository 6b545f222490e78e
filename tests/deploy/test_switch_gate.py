"""The switch gate: once a board's gate is closed (its --timeout ran out, or Ctrl-C), a deploy
thread still working on it can no longer switch it, so what orch reported stays true."""

from __future__ import annotations

import threading
import time

import pytest

from orchestrator.deploy.switch_gate import KnownCurrent, SwitchGate
from orchestrator.errors import DeployError


def test_a_switch_is_recorded_and_a_closed_gate_refuses_the_next_naming_what_stays_current() -> None:
    gate = SwitchGate()
    switched: list[str] = []
    gate.seen("b1", "old")
    gate.switch("b1", "new", lambda: switched.append("new"))
    assert gate.close("b1") == KnownCurrent(release="new")
    with pytest.raises(DeployError, match="b1: stopped before switching to newer: new stays current"):
        gate.switch("b1", "newer", lambda: switched.append("newer"))
    assert switched == ["new"]
    # Another board's gate is its own.
    gate.seen("b2", None)
    gate.switch("b2", "first", lambda: None)
    assert gate.close("b2").describe() == "first"
    assert gate.close("b3").describe() == "not known (the board was not read)"


def test_closing_waits_for_a_switch_under_way_and_then_reports_it() -> None:
    gate = SwitchGate()
    gate.seen("b1", "old")
    started = threading.Event()

    def slow_switch() -> None:
        started.set()
        time.sleep(0.5)

    worker = threading.Thread(target=gate.switch, args=("b1", "new", slow_switch))
    worker.start()
    started.wait(5)
    assert gate.close("b1") == KnownCurrent(release="new")
    worker.join(5)


def test_a_failed_switch_leaves_the_known_current_as_it_was() -> None:
    gate = SwitchGate()
    gate.seen("b1", "old")

    def broken() -> None:
        raise DeployError("b1: cannot switch to new: release new is not verified on this board")

    with pytest.raises(DeployError):
        gate.switch("b1", "new", broken)
    assert gate.close("b1") == KnownCurrent(release="old")
