"""What deploy, bench and lab need from a board: the ``BoardSession`` protocol and its results.

The SSH adapter (``orchestrator.adapters.ssh.RemoteSession``) implements it; everything that
talks to a board is typed against this protocol instead, so a type checker sees every call to a
board and another implementation (a local shell, a serial console) can stand in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.board import Board


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    """A finished command on a board: exit code, both streams (text), wall time seen by orch."""

    exit_code: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def tail(self, lines: int = 6) -> str:
        """The last ``lines`` lines of output (stdout, then stderr): what an error message quotes."""
        return "\n".join((self.stdout + self.stderr).strip().splitlines()[-lines:])


class Stream(Protocol):
    """A running command's stdin/stdout as a byte pipe (for protocols spoken over them)."""

    def send(self, data: bytes) -> int: ...

    def recv(self, size: int) -> bytes: ...

    def shutdown_write(self) -> None: ...

    def settimeout(self, timeout: float | None) -> None:
        """How long ``recv`` waits before raising ``socket.timeout`` (None: for ever)."""
        ...

    def close(self) -> None: ...


class BoardSession(Protocol):
    """An open connection to one board: commands, scripts on stdin, and file transfer.

    Paths on the board are POSIX strings; relative ones are relative to the login home.
    Every method raises ``RemoteError`` (or a subclass) naming the board when it fails.
    """

    board: Board
    label: str

    def close(self) -> None: ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run an exact argv (every element quoted); ``check`` raises ``CommandFailed`` on non-zero exit."""
        ...

    def run_command_line(
        self, command_line: str, *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        """Run a user's own shell command line (``orch exec -- 'a | b'``); never built from inventory values."""
        ...

    def run_script(
        self, script: str, args: Sequence[str] = (), *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        """Send ``script`` to ``sh -s -- ARGS`` on stdin: values reach it only as quoted positional args."""
        ...

    def open_stream(self, argv: Sequence[str]) -> Stream: ...

    def put(
        self, local: Path, remote_path: str, *, progress: Callable[[int, int], None] | None = None
    ) -> None: ...

    def get(self, remote_path: str, local: Path) -> None: ...

    def rename(self, src: str, dst: str) -> None:
        """Atomic rename on the board (POSIX rename: replaces ``dst``)."""
        ...

    def stat(self, path: str) -> int | None:
        """The size of a file on the board, or None when it does not exist."""
        ...

    def mkdir_p(self, path: str) -> None: ...

    def home(self) -> str:
        """The login home's absolute path."""
        ...
