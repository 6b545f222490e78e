"""The board lock's board-side process (board_side/board_lock.py) run for real by a local Python
on a temporary workdir: one holder at a time, a waiter told who holds it and refused when its
wait runs out, the lock freed when the holder's stdin closes (as when orch's channel closes), and
the script given to run under the lock run there."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.board_side import read_text
from orchestrator.deploy.board_lock import describe_holder, holder_is_dead, parse_event
from orchestrator.errors import RemoteError

HOLDER = {
    "command": "deploy",
    "host": "ws1",
    "pid": 4242,
    "user": "me",
    "started": "2026-12-02T07:00:00+00:00",
}


def _start(workdir: Path, holder: dict[str, object], wait: float, *then: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            read_text("board_lock.py"),
            str(workdir),
            json.dumps(holder),
            str(wait),
            *then,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _event(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, "the lock process ended without a line"
    return dict(parse_event(line, board="b1").fields)


def test_one_holder_a_waiter_is_told_who_and_refused_and_a_closed_channel_frees_it(tmp_path: Path) -> None:
    first = _start(tmp_path / "orch", HOLDER, 5, 'printf "%s" "$1"', "read under the lock")
    assert _event(first)["event"] == "acquired"
    then = _event(first)
    assert (then["event"], then["exit"], then["stdout"]) == ("then", 0, "read under the lock")
    assert json.loads((tmp_path / "orch" / ".orch.lock.holder").read_text())["pid"] == 4242

    started = time.monotonic()
    second = _start(tmp_path / "orch", {**HOLDER, "pid": 5151}, 1.5)
    held = _event(second)
    assert held["event"] == "held" and isinstance(held["holder"], dict) and held["holder"]["pid"] == 4242
    busy = _event(second)
    assert busy["event"] == "busy" and second.wait(timeout=30) == 3
    assert 1.4 < time.monotonic() - started < 20
    assert describe_holder(busy["holder"]) == "orch deploy (pid 4242 on ws1, since 2026-12-02T07:00:00+00:00)"

    # orch's channel closes (Ctrl-C, SIGKILL, a cut connection): stdin reaches EOF, the lock is free.
    assert first.stdin is not None
    first.stdin.close()
    assert first.wait(timeout=30) == 0
    assert not (tmp_path / "orch" / ".orch.lock.holder").exists()
    third = _start(tmp_path / "orch", {**HOLDER, "pid": 6161}, 5)
    acquired = _event(third)
    assert acquired == {"event": "acquired", "previous": None}
    assert third.stdin is not None
    third.stdin.write("release\n")
    third.stdin.flush()
    assert third.wait(timeout=30) == 0


def test_a_waiter_takes_the_lock_when_the_holder_lets_go_and_hears_of_one_that_died(tmp_path: Path) -> None:
    first = _start(tmp_path / "orch", HOLDER, 5)
    assert _event(first)["event"] == "acquired"
    second = _start(tmp_path / "orch", {**HOLDER, "pid": 5151}, 60)
    assert _event(second)["event"] == "held"
    first.kill()  # its board-side process killed: the kernel frees the lock, its description stays
    first.wait(timeout=30)
    acquired = _event(second)
    assert acquired["event"] == "acquired"
    assert isinstance(acquired["previous"], dict) and acquired["previous"]["pid"] == 4242
    assert second.stdin is not None
    second.stdin.close()
    assert second.wait(timeout=30) == 0


def test_break_ends_a_holder_whose_orch_is_gone(tmp_path: Path) -> None:
    first = _start(tmp_path / "orch", HOLDER, 5)
    assert _event(first)["event"] == "acquired"
    second = _start(tmp_path / "orch", {**HOLDER, "pid": 5151}, 60)
    assert _event(second)["event"] == "held"
    assert second.stdin is not None
    second.stdin.write("break\n")
    second.stdin.flush()
    assert _event(second)["event"] == "acquired"
    assert first.wait(timeout=30) != 0  # ended by the break
    second.stdin.close()
    assert second.wait(timeout=30) == 0


def test_a_holder_is_dead_only_when_its_orch_ran_here_and_is_gone() -> None:
    here = socket.gethostname()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead_pid = int(gone.stdout)
    assert holder_is_dead({"host": here, "pid": dead_pid})
    assert not holder_is_dead({"host": here, "pid": os.getppid()})  # alive
    assert not holder_is_dead({"host": "another-workstation", "pid": dead_pid})  # cannot tell: wait
    assert not holder_is_dead(None) and not holder_is_dead({"host": here, "pid": "x"})


def test_a_lock_answer_that_is_not_an_event_names_the_board() -> None:
    with pytest.raises(RemoteError, match="b1: the board lock answered"):
        parse_event("Traceback (most recent call last):", board="b1")
    with pytest.raises(RemoteError, match="not an event"):
        parse_event("[1, 2]", board="b1")
