"""One writer per board: the board lock that deploy, rollback and prune take, and that ``orch
bench`` and ``orch tune`` hold while they measure (no release changes under a measurement).

The lock is held by a board-side process (``board_side/board_lock.py``: ``flock`` on
``<workdir>/.orch.lock``) whose life is tied to this orch's SSH channel: it ends, and the kernel
releases the lock, when the channel closes, so Ctrl-C, SIGKILL of orch or a cut connection free
the board by themselves. A second orch waits up to ``wait`` seconds (``--lock-timeout``), then
is refused with a message naming the holder (command, workstation host and pid, start time). A
holder whose orch ran on this workstation and is gone, while its board-side process lives on (a
connection the board has not noticed is dead), is ended with a warning: its lock is broken.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, TypedDict

from orchestrator.adapters.session import BoardSession, CommandResult, Stream
from orchestrator.board_side import read_text
from orchestrator.deploy.lock_settings import DEFAULT_LOCK_TIMEOUT
from orchestrator.errors import DeployError, RemoteError

if TYPE_CHECKING:
    from typing_extensions import Self

# --lock-timeout's default is pure (the bench's plan reads it from lock_settings); it stays importable
# from here, beside the lock it waits for.
__all__ = [
    "ANSWER_MARGIN_S",
    "DEFAULT_LOCK_TIMEOUT",
    "BoardBusy",
    "BoardLock",
    "HolderDocument",
    "LockEvent",
    "acquire",
    "describe_holder",
    "holder_document",
    "holder_is_dead",
    "parse_event",
]

# Beyond the wait: how long starting the board's Python may take (seconds under emulation).
ANSWER_MARGIN_S = 120.0


class BoardBusy(DeployError):
    """Another orch holds the board's lock and did not let go within the wait."""


def describe_holder(holder: Mapping[str, object] | None) -> str:
    """``orch deploy (pid 412 on ws1, since 2026-12-02T07:10:00+00:00)``."""
    if not holder:
        return "another orch (it left no description)"
    return (
        f"orch {holder.get('command', '?')} (pid {holder.get('pid', '?')} on {holder.get('host', '?')},"
        f" since {holder.get('started', '?')})"
    )


def holder_is_dead(holder: Mapping[str, object] | None, *, host: str | None = None) -> bool:
    """The holder's orch ran on this workstation and its process is gone. Holders on other
    workstations cannot be checked from here: they are waited for."""
    if not holder or holder.get("host") != (host or socket.gethostname()):
        return False
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass(frozen=True, kw_only=True)
class LockEvent:
    """One line of the board-side lock process."""

    event: str
    fields: Mapping[str, object]  # the event's JSON object as the board printed it

    def holder(self, key: str = "holder") -> Mapping[str, object] | None:
        """The holder an event names (``holder``, or ``previous`` for a broken one's), if any."""
        value = self.fields.get(key)
        return value if isinstance(value, dict) else None


def parse_event(line: str, *, board: str) -> LockEvent:
    """Pure: one line of board_lock.py's output."""
    try:
        document = json.loads(line)
    except json.JSONDecodeError as error:
        raise RemoteError(f"{board}: the board lock answered {line[:200]!r}, not JSON ({error})") from error
    if not isinstance(document, dict) or not isinstance(document.get("event"), str):
        raise RemoteError(f"{board}: the board lock answered {line[:200]!r}, not an event")
    return LockEvent(event=document["event"], fields=document)


class _Lines:
    """A stream's output, line by line, each within a deadline."""

    def __init__(self, stream: Stream, board: str, python: str) -> None:
        self.stream = stream
        self.board = board
        self.python = python
        self.buffer = b""

    def next(self, deadline: float) -> str:
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RemoteError(f"{self.board}: the board lock did not answer in time")
            self.stream.settimeout(left)
            try:
                chunk = self.stream.recv(65536)
            except TimeoutError as error:
                raise RemoteError(f"{self.board}: the board lock did not answer in time") from error
            if not chunk:
                raise RemoteError(
                    f"{self.board}: the board lock ended without an answer: the connection was lost, or"
                    f" the board's Python ({self.python}) could not run it"
                )
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace")


class BoardLock:
    """A held board lock; ``release()`` (or closing the connection) lets it go."""

    def __init__(self, stream: Stream, *, board: str, broken: str | None, then: CommandResult | None):
        self._stream = stream
        self.board = board
        # A warning (without the board's name): the lock of a dead holder was broken to get this one.
        self.broken = broken
        self.then = then  # the script run under the lock, when one was given

    def release(self) -> None:
        try:
            self._stream.send(b"release\n")
            self._stream.shutdown_write()
        except OSError:
            pass  # a lost connection released it on the board already
        finally:
            self._stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


class HolderDocument(TypedDict):
    """The lock holder's description, kept on the board (``.orch.lock.holder``) for whoever waits.

    Read back from the board as it is (a holder of another orch version may say less):
    ``describe_holder`` and ``holder_is_dead`` check each key they use."""

    command: str
    host: str
    pid: int
    user: str
    started: str  # UTC, ISO 8601


def holder_document(command: str) -> HolderDocument:
    """What a waiting orch is told about this one."""
    return HolderDocument(
        command=command,
        host=socket.gethostname(),
        pid=os.getpid(),
        user=os.environ.get("USER") or os.environ.get("LOGNAME") or "",
        started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def acquire(  # noqa: PLR0913 -- keyword-only options of one board's lock, each with its meaning
    session: BoardSession,
    workdir: str,
    *,
    command: str,
    wait: float = DEFAULT_LOCK_TIMEOUT,
    then: tuple[str, Sequence[str]] | None = None,
    on_wait: Callable[[str], None] = lambda _message: None,
    refused: str = "nothing was changed",
) -> BoardLock:
    """Take the board's lock, waiting up to ``wait`` seconds; ``then`` (a script and its args) runs
    under it in the same round trip (its result is ``lock.then``). ``on_wait`` hears who holds it
    (a message without the board's name).
    Raises BoardBusy naming the holder when the wait runs out (its message ends with ``refused``:
    what the refusal means for the command)."""
    board = session.board.name
    argv = [session.board.python, "-c", read_text("board_lock.py"), workdir]
    argv += [json.dumps(holder_document(command)), f"{wait:g}"]
    if then is not None:
        argv += [then[0], *then[1]]
    stream = session.open_stream(argv)
    try:
        lines = _Lines(stream, board, session.board.python)
        return _await_lock(lines, wait=wait, on_wait=on_wait, then=then is not None, refused=refused)
    except BaseException:
        stream.close()
        raise


def _await_lock(
    lines: _Lines, *, wait: float, on_wait: Callable[[str], None], then: bool, refused: str
) -> BoardLock:
    stream, board = lines.stream, lines.board
    deadline = time.monotonic() + wait + ANSWER_MARGIN_S
    broken: str | None = None
    while True:
        event = parse_event(lines.next(deadline), board=board)
        holder = event.holder()
        if event.event == "held":
            if holder_is_dead(holder):
                broken = f"broke the board lock of {describe_holder(holder)}: that process is gone"
                stream.send(b"break\n")
            else:
                on_wait(f"waiting for the board lock, held by {describe_holder(holder)}")
        elif event.event == "busy":
            raise BoardBusy(
                f"{board}: the board is busy: {describe_holder(holder)} holds its lock;"
                f" waited {wait:g}s, {refused}",
                hint="wait for it to finish, or give a longer --lock-timeout",
            )
        elif event.event == "acquired":
            previous = event.holder("previous")
            if previous and broken is None:
                broken = f"the board lock of {describe_holder(previous)} was left behind; broken"
            result = _then_result(lines, deadline, board) if then else None
            return BoardLock(stream, board=board, broken=broken, then=result)


def _exit_code(value: object) -> int:
    """The script's exit code as the board lock reported it (-1: it did not say)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _then_result(lines: _Lines, deadline: float, board: str) -> CommandResult:
    event = parse_event(lines.next(deadline + 600), board=board)
    if event.event != "then":
        raise RemoteError(f"{board}: the board lock answered {event.event!r} instead of the script's result")
    return CommandResult(
        exit_code=_exit_code(event.fields.get("exit")),
        stdout=str(event.fields.get("stdout", "")),
        stderr=str(event.fields.get("stderr", "")),
        duration=0.0,
    )
