"""Commands end with orch, through a real sshd on 127.0.0.1 (its commands run on this machine, so
what is left of them is seen in /proc): a timeout, an interrupted orch (``stop_running``), a closed
stream and a dropped connection each end the command's whole process group, and say so."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from sshd_server import SshServer

from orchestrator.adapters import ssh


def _processes(mark: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                line = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"sleep {mark}" in line:
            found.append(pid)
    return found


def _mark() -> str:
    return f"{time.time_ns() % 10**9}.25"  # a duration no other process sleeps


def _gone_within(mark: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _processes(mark):
            return True
        time.sleep(0.1)
    return False


def _started(mark: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not _processes(mark):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)


@pytest.fixture
def not_stopping(monkeypatch: pytest.MonkeyPatch) -> None:
    """stop_running() marks the process as stopping for good: undone after the test."""
    monkeypatch.setattr(ssh._Running, "stopping", False)


def test_a_timeout_ends_the_command_and_its_children(ssh_server: SshServer, make_board, orch_home: Path):
    mark = _mark()
    with ssh.connect(make_board(port=ssh_server.port)) as session:
        with pytest.raises(ssh.CommandTimeout) as timed_out:
            session.run(["sh", "-c", f"sleep {mark} & sleep {mark}"], timeout=1)
        # Checked while the connection is still open: the stop, not the disconnection, ended it.
        assert _processes(mark) == [], "the command outlived its timeout"
    assert timed_out.value.stopped
    assert "timed out after 1s" in timed_out.value.message
    assert "stopped the command on t1 (127.0.0.1:" in timed_out.value.message


def test_a_dropped_connection_ends_the_command(ssh_server: SshServer, make_board, orch_home: Path):
    mark = _mark()
    session = ssh.connect(make_board(port=ssh_server.port))
    worker = threading.Thread(
        target=session.run, args=(["sleep", mark],), kwargs={"check": False}, daemon=True
    )
    worker.start()
    _started(mark)
    session.close()  # what a killed orch or a cut connection leaves sshd with
    assert _gone_within(mark, 10), "the command outlived its connection"


def test_stop_running_ends_every_command_and_stream_and_starts_nothing_new(
    ssh_server: SshServer, make_board, orch_home: Path, not_stopping: None
):
    command_mark, stream_mark = _mark(), _mark().replace(".25", ".75")
    errors: list[BaseException] = []

    def run(session: ssh.RemoteSession) -> None:
        try:
            session.run(["sleep", command_mark])
        except BaseException as error:  # noqa: BLE001 -- the test looks at what it was
            errors.append(error)

    with ssh.connect(make_board(port=ssh_server.port)) as session:
        worker = threading.Thread(target=run, args=(session,), daemon=True)
        worker.start()
        # A stream whose command ignores the end of its input: ended 3 s after it.
        session.open_stream(["sh", "-c", f"sleep {stream_mark}"])
        _started(command_mark)
        _started(stream_mark)
        stopped = ssh.stop_running()
        assert stopped.confirmed == (session.label,) and stopped.unconfirmed == ()
        assert stopped.lines() == [f"stopped the command on {session.label}"]
        assert _processes(command_mark) == [] and _processes(stream_mark) == []
        worker.join(10)
        assert len(errors) == 1 and isinstance(errors[0], ssh.CommandStopped), errors
        with pytest.raises(ssh.CommandStopped, match="orch is stopping"):
            session.run(["true"])
        with ssh.cleanup():  # putting back what orch changed is still allowed
            assert session.run(["echo", "restored"]).stdout == "restored\n"
