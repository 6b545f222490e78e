"""The SSH adapter: the only way orch talks to boards (Fabric on paramiko).

``connect(board)`` opens one session per board through its ProxyJump hosts
(``orchestrator.adapters.ssh_connect``) with exactly the values the inventory resolved, host keys
verified and first contacts recorded (``orchestrator.adapters.host_keys``), keys only.

A ``RemoteSession`` runs commands as argv lists joined with ``shlex.join``; scripts are sent on
stdin to ``sh -s -- ARGS...`` so values only reach them as quoted positional args; files move
over SFTP.

Every command and stream runs under ``board_side/guard.sh`` (``guarded_command``): in a process
group of its own that the guard ends when the channel's stdin reaches its end. orch keeps that
stdin open while the command runs and closes it to stop the command (a timeout, an interrupted
orch: ``stop_running``); when orch exits, is killed or loses the connection, sshd closes it. So
nothing orch started on a board outlives it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import shlex
import stat as stat_module
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

import paramiko
from fabric import Connection

from orchestrator.adapters.host_keys import identity_file_problem, known_hosts_files, known_hosts_problem
from orchestrator.adapters.session import CommandResult
from orchestrator.adapters.ssh_connect import MIN_HANDSHAKE_TIMEOUT, board_label, open_connections
from orchestrator.board import Board
from orchestrator.board_side import read_text
from orchestrator.errors import RemoteError, UsageError

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Self


# paramiko logs transport noise through logging's last-resort handler; orch reports
# errors itself (``--debug`` can still attach a handler).
logging.getLogger("paramiko").addHandler(logging.NullHandler())

_CHUNK = 65536
# How long the output may still come after the exit status, when no EOF comes (see _finished).
EOF_GRACE_S = 2.0
# How long orch waits for a board to confirm that a stopped command ended: the guard sends SIGTERM
# at once (a stream's command first gets 3 s to end at its input's end) and SIGKILL 5 s later.
STOP_WAIT_S = 12.0
# A fleet with a bad key on every board: the first ones named, the rest counted.
_MAX_SHOWN_FILE_PROBLEMS = 50
_KNOWN_HOSTS_HINT = "fix or delete that line (`ssh-keygen -R HOST -f FILE` removes a host)"
# How the guard runs a command: an exact argv, a user's command line, a protocol on stdin/stdout.
GuardMode = Literal["run", "line", "stream"]


def guarded_command(mode: GuardMode, argv: Sequence[str], *, input_size: int = 0) -> str:
    """The command line for sshd: ``argv`` run by ``board_side/guard.sh`` (its text sent as ``sh -c``'s
    argument, every value a quoted argument); ``input_size`` bytes sent first on stdin are the
    command's stdin (0: none)."""
    if not argv:
        raise ValueError("a guarded command needs a non-empty argv")
    if mode == "line" and len(argv) != 1:
        raise ValueError("a command line is one string")
    if input_size < 0 or (input_size and mode == "stream"):
        raise ValueError(f"no input of {input_size} bytes for mode {mode}")
    size = str(input_size) if input_size else "-"
    return shlex.join(["sh", "-c", read_text("guard.sh"), "orch-guard", mode, size, *argv])


class CommandFailed(RemoteError):
    """A remote command exited non-zero while ``check=True``; ``.result`` holds its output."""

    def __init__(self, message: str, *, result: CommandResult, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.result = result


class CommandTimeout(RemoteError):
    """A remote command ran longer than its timeout; the output received so far is kept.
    ``stopped``: the board confirmed that the command ended (False: it did not answer in time)."""

    def __init__(
        self, message: str, *, stdout: str, stderr: str, duration: float, stopped: bool = False
    ) -> None:
        super().__init__(message, hint="raise the timeout (--timeout) or check what the command waits for")
        self.stdout = stdout
        self.stderr = stderr
        self.duration = duration
        self.stopped = stopped


class CommandStopped(RemoteError):
    """orch stopped this command (it was interrupted), or refused to start one while stopping."""


def stop_note(label: str, stopped: bool) -> str:
    """What a message says about a command orch stopped on ``label``'s board."""
    if stopped:
        return f"stopped the command on {label}"
    return f"{label} did not confirm within {STOP_WAIT_S:g}s that the command ended (its guard ends it)"


@dataclass(frozen=True, kw_only=True)
class Stopped:
    """What ``stop_running`` did: the boards whose commands ended, and those that did not say so."""

    confirmed: tuple[str, ...]
    unconfirmed: tuple[str, ...]

    def lines(self) -> list[str]:
        return [stop_note(label, True) for label in self.confirmed] + [
            stop_note(label, False) for label in self.unconfirmed
        ]


class _Running:
    """The channels of this process's commands and streams (channel -> board label), so that an
    interrupted orch can stop them all; once stopping, no new command starts (but cleanup)."""

    lock = threading.Lock()
    channels: dict[paramiko.Channel, str] = {}  # noqa: RUF012 -- one registry per process, by design
    stopped: set[paramiko.Channel] = set()  # noqa: RUF012 -- idem
    stopping = False
    cleanup = threading.local()


def _register(channel: paramiko.Channel, label: str) -> None:
    with _Running.lock:
        _Running.channels[channel] = label


def _forget(channel: paramiko.Channel) -> None:
    with _Running.lock:
        _Running.channels.pop(channel, None)
        _Running.stopped.discard(channel)


def _ended(channel: paramiko.Channel) -> bool:
    return bool(channel.exit_status_ready() or channel.closed or channel.eof_received)


def _end_input(channel: paramiko.Channel) -> None:
    """End the channel's stdin: the board's guard ends the command's process group."""
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
        channel.shutdown_write()


def _await_end(channels: Sequence[paramiko.Channel], wait: float) -> set[paramiko.Channel]:
    """Those of ``channels`` that ended within ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not all(_ended(channel) for channel in channels):
        time.sleep(0.05)
    return {channel for channel in channels if _ended(channel)}


def stopping() -> bool:
    """True once ``stop_running`` was called: orch is on its way out."""
    return _Running.stopping


def stop_running(wait: float = STOP_WAIT_S) -> Stopped:
    """Stop every command and stream this process runs on boards (orch was interrupted) and wait up
    to ``wait`` seconds for the boards to confirm; nothing new starts after this (``cleanup`` aside)."""
    with _Running.lock:
        _Running.stopping = True
        running = {channel: label for channel, label in _Running.channels.items() if not _ended(channel)}
        _Running.stopped.update(running)
    for channel in running:
        _end_input(channel)
    ended = _await_end(list(running), wait)
    confirmed = sorted({label for channel, label in running.items() if channel in ended})
    unconfirmed = sorted({label for channel, label in running.items() if channel not in ended})
    return Stopped(confirmed=tuple(confirmed), unconfirmed=tuple(unconfirmed))


@contextlib.contextmanager
def cleanup() -> Iterator[None]:
    """Commands in this block may start after ``stop_running`` (putting back what orch changed)."""
    _Running.cleanup.allowed = True
    try:
        yield
    finally:
        _Running.cleanup.allowed = False


def check_local_files(boards: Sequence[Board]) -> None:
    """Before any connection: orch's and the user's known_hosts parse, and every identity file is a
    private key file. Bad input here is the user's to fix (UsageError, exit 2), not an unreachable
    board; every unusable file is named in one message, with the boards that use it."""
    known_hosts = [problem for problem in map(known_hosts_problem, known_hosts_files()) if problem]
    users: dict[Path, list[str]] = {}  # identity file -> the boards that use it, in selection order
    for board in boards:
        if board.identity_file is not None:
            users.setdefault(Path(board.identity_file), []).append(board.name)
    identities = []
    for path, names in users.items():
        problem = identity_file_problem(path)
        if problem:
            which = f"board {names[0]}" if len(names) == 1 else "boards " + ", ".join(names)
            identities.append((f"{which}: {problem}", names))
    hints = [_KNOWN_HOSTS_HINT] if known_hosts else []
    if identities:
        named = identities[0][1][0] if len(identities) == 1 and len(identities[0][1]) == 1 else "BOARD"
        hints.append(
            f"fix identity_file in the inventory (`orch inventory show {named}` says where it comes from)"
        )
    problems = [*known_hosts, *(message for message, _ in identities)]
    if len(problems) == 1:
        raise UsageError(problems[0], hint=hints[0])
    if problems:
        shown = problems[:_MAX_SHOWN_FILE_PROBLEMS]
        lines = [f"{len(problems)} local SSH files cannot be used:", *(f"  {line}" for line in shown)]
        if len(problems) > len(shown):
            lines.append(f"  ... and {len(problems) - len(shown)} more (fix these and run again)")
        raise UsageError("\n".join(lines), hint="; ".join(hints))


def connect(board: Board, *, connect_timeout: float = 15) -> RemoteSession:
    """Open an SSH session to ``board`` (through its ProxyJump hosts); raises RemoteError/HostKeyError."""
    opened = open_connections(board, connect_timeout)
    return RemoteSession(board, opened[-1], opened[:-1])


def _sftp_path(path: str) -> str:
    # sftp starts in the login home but does not expand "~".
    if path == "~":
        return "."
    return path.removeprefix("~/")


class RemoteSession:
    """An open SSH connection to one board: commands, scripts and file transfer (a ``BoardSession``)."""

    def __init__(self, board: Board, conn: Connection, gateways: Sequence[Connection] = ()) -> None:
        self.board = board
        self._conn = conn
        self._gateways = list(gateways)
        self._sftp: paramiko.SFTPClient | None = None
        self.label = board_label(board.name, board.hostname, board.port)

    # --- context manager -------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for conn in (self._conn, *reversed(self._gateways)):
            # Closing a dead connection must not hide the error that killed it.
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                conn.close()

    # --- commands --------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run an exact argv (each element shell-quoted) on the board."""
        if isinstance(argv, str):
            raise TypeError("run() takes an argv list; use run_command_line() for a shell command line")
        if not argv:
            raise ValueError("run() needs a non-empty argv")
        return self._execute("run", argv, timeout=timeout, check=check, stdin=stdin)

    def run_command_line(
        self, command_line: str, *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        """Run a command line the *user* typed, interpreted by their login shell (like ``ssh host 'cmd'``).

        Only for text a user gave orch as a command line (``orch exec -- 'a | b'``);
        never build one from inventory values.
        """
        return self._execute("line", [command_line], timeout=timeout, check=check, stdin=None)

    def run_script(
        self, script: str, args: Sequence[str] = (), *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        """Run a project-written POSIX sh script sent on stdin; values reach it only as quoted ``$1``, ``$2``..."""
        argv = ["sh", "-s", "--", *args]
        return self._execute("run", argv, timeout=timeout, check=check, stdin=script.encode())

    def open_stream(self, argv: Sequence[str]) -> paramiko.Channel:
        """Start argv (each element shell-quoted) and return its channel as a byte stream
        (``send``/``recv``/``shutdown_write``/``close``), for protocols spoken over stdin/stdout.
        The end of its stdin is passed on; what still runs 3 s later is ended by the guard."""
        channel = self._start(guarded_command("stream", argv))
        _register(channel, self.label)
        return channel

    def _start(self, command: str) -> paramiko.Channel:
        """A new session channel on this connection running ``command``."""
        if _Running.stopping and not getattr(_Running.cleanup, "allowed", False):
            raise CommandStopped(f"{self.label}: orch is stopping; nothing more is started on the board")
        transport: paramiko.Transport | None = self._conn.transport
        if transport is None or not transport.is_active():
            raise RemoteError(f"{self.label}: the SSH connection is closed", hint="connect again")
        try:
            channel = transport.open_session(timeout=MIN_HANDSHAKE_TIMEOUT)
            channel.exec_command(command)
        except (paramiko.SSHException, OSError) as error:
            raise RemoteError(f"{self.label}: cannot start a command: {error}") from error
        return channel

    def _execute(
        self,
        mode: GuardMode,
        argv: Sequence[str],
        *,
        timeout: float | None,
        check: bool,
        stdin: bytes | None,
    ) -> CommandResult:
        start = time.monotonic()
        command = argv[0] if mode == "line" else shlex.join(argv)
        channel = self._start(guarded_command(mode, argv, input_size=len(stdin or b"")))
        _register(channel, self.label)
        exchange = _Exchange(channel, stdin)
        deadline = start + timeout if timeout is not None else None
        try:
            exchange.run(deadline)
            exit_code = channel.recv_exit_status() if channel.exit_status_ready() else -1
        except _Overdue:
            stopped = self._stop(channel, exchange)
            raise CommandTimeout(
                f"{self.label}: timed out after {timeout:g}s running {command};"
                f" {stop_note(self.label, stopped)}",
                stdout=exchange.out.decode(errors="replace"),
                stderr=exchange.err.decode(errors="replace"),
                duration=time.monotonic() - start,
                stopped=stopped,
            ) from None
        except (paramiko.SSHException, OSError) as error:
            raise RemoteError(f"{self.label}: connection lost while running {command}: {error}") from error
        except BaseException:
            # Ctrl-C in the thread that runs it: the command ends with orch.
            self._stop(channel, exchange)
            raise
        finally:
            was_stopped = channel in _Running.stopped
            _forget(channel)
            channel.close()
        if was_stopped:
            raise CommandStopped(
                f"{self.label}: stopped the command on the board (orch was interrupted): {command}"
            )
        result = CommandResult(
            exit_code=exit_code,
            stdout=exchange.out.decode(errors="replace"),
            stderr=exchange.err.decode(errors="replace"),
            duration=time.monotonic() - start,
        )
        if check and exit_code != 0:
            tail = result.stderr.strip().splitlines()[-5:]
            detail = ("; stderr: " + " | ".join(tail)) if tail else ""
            cause = "was killed or lost its connection" if exit_code == -1 else f"exited with {exit_code}"
            raise CommandFailed(f"{self.label}: `{command}` {cause}{detail}", result=result)
        return result

    @staticmethod
    def _stop(channel: paramiko.Channel, exchange: _Exchange) -> bool:
        """End the command's stdin and wait for the board to report its end; True once it did."""
        with _Running.lock:
            _Running.stopped.add(channel)
        _end_input(channel)
        deadline = time.monotonic() + STOP_WAIT_S
        try:
            while time.monotonic() < deadline and not _ended(channel):
                exchange.receive()
                time.sleep(0.05)
        except (paramiko.SSHException, OSError):
            return False
        return _ended(channel)

    # --- files -----------------------------------------------------------------------
    def _sftp_client(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            try:
                self._sftp = self._conn.sftp()
            except (paramiko.SSHException, OSError) as error:
                raise RemoteError(
                    f"{self.label}: cannot open SFTP: {error}",
                    hint="the board's sshd needs the sftp subsystem (openssh-sftp-server)",
                ) from error
        return self._sftp

    def _file_error(self, action: str, path: str, error: Exception) -> RemoteError:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        return RemoteError(f"{self.label}: {action} {path} failed: {reason}")

    def put(
        self, local: Path, remote_path: str, *, progress: Callable[[int, int], None] | None = None
    ) -> None:
        """Upload a file; ``progress(bytes_done, bytes_total)`` is called as it goes."""
        local = Path(local)
        if not local.is_file():
            raise RemoteError(f"{self.label}: cannot upload {local}: no such file")
        try:
            self._sftp_client().put(str(local), _sftp_path(remote_path), callback=progress, confirm=True)
        except (OSError, paramiko.SSHException) as error:
            raise self._file_error(f"upload of {local} to", remote_path, error) from error

    def get(self, remote_path: str, local: Path) -> None:
        """Download a file (parent directories of ``local`` are created)."""
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._sftp_client().get(_sftp_path(remote_path), str(local))
        except (OSError, paramiko.SSHException) as error:
            raise self._file_error("download of", remote_path, error) from error

    def rename(self, src: str, dst: str) -> None:
        """Atomic rename that replaces ``dst`` (POSIX rename, OpenSSH extension)."""
        try:
            self._sftp_client().posix_rename(_sftp_path(src), _sftp_path(dst))
        except (OSError, paramiko.SSHException) as error:
            raise self._file_error(f"rename to {dst} of", src, error) from error

    def stat(self, path: str) -> int | None:
        """Size in bytes of a remote file, or None when it does not exist."""
        try:
            attrs = self._sftp_client().stat(_sftp_path(path))
        except FileNotFoundError:
            return None
        except (OSError, paramiko.SSHException) as error:
            raise self._file_error("stat of", path, error) from error
        return attrs.st_size or 0

    def mkdir_p(self, path: str) -> None:
        """Create a directory and its parents (relative paths are relative to the login home)."""
        sftp = self._sftp_client()
        current = PurePosixPath("/") if path.startswith("/") else PurePosixPath()
        for part in PurePosixPath(_sftp_path(path)).parts:
            if part == "/":
                continue
            current = current / part
            try:
                attrs = sftp.stat(str(current))
            except FileNotFoundError:
                try:
                    sftp.mkdir(str(current))
                except OSError as error:
                    # Another session may have created it in between.
                    if getattr(error, "errno", None) != errno.EEXIST:
                        try:
                            sftp.stat(str(current))
                        except OSError:
                            raise self._file_error("mkdir of", str(current), error) from error
                continue
            except (OSError, paramiko.SSHException) as error:
                raise self._file_error("stat of", str(current), error) from error
            if attrs.st_mode is not None and not stat_module.S_ISDIR(attrs.st_mode):
                raise RemoteError(
                    f"{self.label}: cannot create directory {path}: {current} is not a directory"
                )

    def home(self) -> str:
        """The absolute path of the login home directory."""
        try:
            return self._sftp_client().normalize(".")
        except (OSError, paramiko.SSHException) as error:
            raise self._file_error("resolving the home directory", "~", error) from error


class _Overdue(Exception):
    """The command's deadline passed (``_execute`` stops it and raises CommandTimeout)."""


class _Exchange:
    """One command's channel: its input sent in chunks, both output streams gathered until it exits.
    The channel's stdin stays open after the input: its end is what stops the command."""

    def __init__(self, channel: paramiko.Channel, stdin: bytes | None) -> None:
        self.channel = channel
        self.out = bytearray()
        self.err = bytearray()
        self.pending = memoryview(stdin) if stdin else None
        self.status_seen: float | None = None  # when the exit status came

    def run(self, deadline: float | None) -> None:
        """Until the command has exited and its output is read; ``_Overdue`` past ``deadline``."""
        idle = 0.001
        while True:
            progressed = self._send() | self.receive()
            if self._finished():
                return
            if deadline is not None and time.monotonic() > deadline:
                raise _Overdue
            if progressed:
                idle = 0.001
            else:
                time.sleep(idle)
                idle = min(idle * 2, 0.05)

    def _send(self) -> bool:
        if self.pending is None or not self.channel.send_ready():
            return False
        sent = self.channel.send(bytes(self.pending[:_CHUNK]))
        self.pending = self.pending[sent:]
        if not self.pending:
            self.pending = None
        return sent > 0

    def receive(self) -> bool:
        progressed = False
        while self.channel.recv_ready():
            self.out += self.channel.recv(_CHUNK)
            progressed = True
        while self.channel.recv_stderr_ready():
            self.err += self.channel.recv_stderr(_CHUNK)
            progressed = True
        return progressed

    def _finished(self) -> bool:
        channel = self.channel
        # The exit status can come before the last of the output (sshd reports the guard's exit
        # while the command's last bytes are still in its pipe, seen under load): the output is
        # complete at the channel's EOF, which sshd sends once the pipes are drained. A command that
        # left a process holding its output open sends no EOF: EOF_GRACE_S after the status, done.
        if channel.exit_status_ready() and self.status_seen is None:
            self.status_seen = time.monotonic()
        drained = (
            bool(channel.eof_received)
            or channel.closed
            or (self.status_seen is not None and time.monotonic() - self.status_seen > EOF_GRACE_S)
        )
        ended = channel.exit_status_ready() or channel.closed
        return ended and drained and not channel.recv_ready() and not channel.recv_stderr_ready()
