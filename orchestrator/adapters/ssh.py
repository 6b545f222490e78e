"""The SSH adapter: the only module that talks to boards (Fabric on paramiko).

``connect(board)`` opens one Fabric ``Connection`` per board with exactly the
values the inventory resolved (hostname, port, user, identity file, ProxyJump):
ssh_config is *not* read a second time, so ``orch inventory show`` stays the truth.

Security choices, each on purpose:

- Host keys are always verified against orch's known_hosts and the user's
  ``~/.ssh/known_hosts`` (read-only). A changed key is refused with both
  fingerprints and the exact command to accept the change deliberately. A host
  never seen before is trusted on first use, but its key is *recorded* in orch's
  known_hosts and a line with its fingerprint is printed: never silent.
- Authentication uses keys only (identity file, then ssh-agent, then the default
  ``~/.ssh`` keys); no passwords, no prompts, nothing read from stdin.
- Commands are argv lists joined with ``shlex.join``; scripts are sent on stdin
  to ``sh -s -- ARGS...`` so values only reach them as quoted positional args.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import hashlib
import logging
import shlex
import socket
import stat as stat_module
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import paramiko
from fabric import Config, Connection
from paramiko.config import SSHConfig
from paramiko.ssh_exception import NoValidConnectionsError
from rich.markup import escape

from orchestrator.adapters.session import CommandResult
from orchestrator.board import Board
from orchestrator.console import console
from orchestrator.errors import HostKeyError, RemoteError, UsageError
from orchestrator.paths import known_hosts_path
from orchestrator.textfiles import TEXT_FILE_LIMIT, read_capped

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Self


# paramiko logs transport noise through logging's last-resort handler; orch reports
# errors itself (``--debug`` can still attach a handler).
logging.getLogger("paramiko").addHandler(logging.NullHandler())

USER_KNOWN_HOSTS = Path("~/.ssh/known_hosts").expanduser()
# Emulated boards run sshd under qemu: key exchange and auth can take many seconds.
_MIN_HANDSHAKE_TIMEOUT = 60.0
_CHUNK = 65536

# Appends to orch's known_hosts come from many fleet threads at once.
_known_hosts_lock = threading.Lock()


class CommandFailed(RemoteError):
    """A remote command exited non-zero while ``check=True``; ``.result`` holds its output."""

    def __init__(self, message: str, *, result: CommandResult, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.result = result


class CommandTimeout(RemoteError):
    """A remote command ran longer than its timeout; the output received so far is kept."""

    def __init__(self, message: str, *, stdout: str, stderr: str, duration: float) -> None:
        super().__init__(message, hint="raise the timeout (--timeout) or check what the command waits for")
        self.stdout = stdout
        self.stderr = stderr
        self.duration = duration


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style fingerprint: ``SHA256:`` + unpadded base64 of the key blob's digest."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(hostname: str, port: int) -> str:
    """The name a host key is filed under in known_hosts (OpenSSH's convention)."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


def _label(name: str, hostname: str, port: int) -> str:
    return f"{name} ({hostname}:{port})"


def read_host_keys(path: Path, into: paramiko.HostKeys | None = None) -> paramiko.HostKeys:
    """A known_hosts file's keys. Unlike ``paramiko.HostKeys(path)``, a marker line (``@revoked``,
    ``@cert-authority``: orch uses neither) is passed over instead of failing the whole file."""
    keys = into if into is not None else paramiko.HostKeys()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith(("#", "@")):
            continue
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
        except Exception:  # noqa: BLE001, S112 -- a damaged line; known_hosts_problem() names it
            continue
        if entry is not None and entry.key is not None:
            for name in entry.hostnames:
                known = keys.lookup(name)
                if known is None or entry.key.get_name() not in known:  # the first entry wins, as in load()
                    keys.add(name, entry.key.get_name(), entry.key)
    return keys


def _has_host(path: Path, name: str) -> bool:
    try:
        return path.is_file() and read_host_keys(path).lookup(name) is not None
    except (OSError, paramiko.SSHException, UnicodeDecodeError):
        return False


class _RecordOnFirstContact(paramiko.MissingHostKeyPolicy):
    """Trust on first use, recorded and visible: append the key to orch's known_hosts and say so.

    Called by paramiko only when *no* key at all is known for the host; a known host
    presenting another key never gets here (paramiko raises BadHostKeyException).
    """

    def __init__(self, label: str) -> None:
        self.label = label

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        path = known_hosts_path()
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with _known_hosts_lock:
            # Another thread (or the lab) may have recorded this host meanwhile.
            current = read_host_keys(path) if path.is_file() else paramiko.HostKeys()
            recorded = current.lookup(hostname)
            if recorded is not None:
                if recorded.get(key.get_name()) == key:
                    return
                expected = next(iter(recorded.values()))
                raise _changed_key_error(self.label, hostname, expected, key, path)
            prefix = ""
            if path.is_file() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
                prefix = "\n"
            with path.open("a") as handle:
                handle.write(prefix + line)
        client.get_host_keys().add(hostname, key.get_name(), key)
        console.print(
            f"[yellow]{escape(self.label)}: first contact, recorded its {key.get_name()} host key "
            f"{fingerprint(key)} in {escape(str(path))}[/]",
            soft_wrap=True,
        )


def _changed_key_error(
    label: str, hostname: str, expected: paramiko.PKey, presented: paramiko.PKey, path: Path
) -> HostKeyError:
    return HostKeyError(
        f"{label}: HOST KEY CHANGED, refusing to connect. known_hosts ({path}) has "
        f"{expected.get_name()} {fingerprint(expected)}, the board presented "
        f"{presented.get_name()} {fingerprint(presented)}. Either the board was reinstalled "
        "or someone is intercepting the connection.",
        hint=(
            "if the change is expected, forget the old key deliberately and connect again "
            f"(the new key is then recorded): ssh-keygen -R {shlex.quote(hostname)} -f {shlex.quote(str(path))}"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class _Hop:
    """One SSH endpoint: the board itself or a ProxyJump host in front of it."""

    label: str
    hostname: str
    port: int
    user: str | None


def _parse_jumps(board: Board) -> list[_Hop]:
    """``[user@]host[:port]`` entries, comma-separated, outermost first (OpenSSH's ProxyJump syntax)."""
    if not board.proxy_jump or board.proxy_jump.lower() == "none":
        return []
    hops = []
    for entry in board.proxy_jump.split(","):
        entry = entry.strip().removeprefix("ssh://")
        user, _, hostport = entry.rpartition("@")
        host, port = hostport, 22
        if hostport.startswith("["):  # [ipv6]:port
            host, _, rest = hostport[1:].partition("]")
            port_text = rest.removeprefix(":")
            port = int(port_text) if port_text else 22
        elif hostport.count(":") == 1:
            host, _, port_text = hostport.partition(":")
            if not port_text.isdigit():
                raise RemoteError(
                    f"{board.name}: ProxyJump {board.proxy_jump!r} has a bad port {port_text!r}"
                )
            port = int(port_text)
        if not host:
            raise RemoteError(f"{board.name}: cannot read ProxyJump {board.proxy_jump!r}")
        hops.append(
            _Hop(
                label=_label(f"jump host for {board.name}", host, port),
                hostname=host,
                port=port,
                user=user or None,
            )
        )
    return hops


def _connection(hop: _Hop, board: Board, gateway: Connection | None, timeout: float) -> Connection:
    # An explicit, empty SSHConfig stops Fabric from reading ~/.ssh/config again; lazy=True
    # keeps it from reading Fabric's own config files (they could carry passwords).
    config = Config(ssh_config=SSHConfig(), lazy=True, overrides={"load_ssh_configs": False})
    connect_kwargs: dict[str, object] = {
        "allow_agent": True,
        "look_for_keys": True,
        "banner_timeout": max(timeout, _MIN_HANDSHAKE_TIMEOUT),
        "auth_timeout": max(timeout, _MIN_HANDSHAKE_TIMEOUT),
        "channel_timeout": max(timeout, _MIN_HANDSHAKE_TIMEOUT),
    }
    if board.identity_file is not None:
        connect_kwargs["key_filename"] = [str(Path(board.identity_file).expanduser())]
    kwargs: dict[str, object] = {
        "host": hop.hostname,
        "port": hop.port,
        "config": config,
        "connect_kwargs": connect_kwargs,
        "connect_timeout": max(1, round(timeout)),
        # False (not None) disables Fabric's own gateway lookup.
        "gateway": gateway if gateway is not None else False,
    }
    if hop.user:
        kwargs["user"] = hop.user
    conn = Connection(**kwargs)
    store = conn.client.get_host_keys()
    # orch's file first: for a host in both, paramiko compares against the first entry found.
    for path in (known_hosts_path(), USER_KNOWN_HOSTS):
        if path.is_file():
            problem = known_hosts_problem(path)
            if problem:
                raise HostKeyError(
                    problem, hint="fix or delete that line; orch never skips a damaged host key"
                )
            try:
                read_host_keys(path, into=store)
            except (OSError, paramiko.SSHException, UnicodeDecodeError) as error:
                raise RemoteError(f"cannot read known_hosts {path}: {error}") from error
    conn.client.set_missing_host_key_policy(_RecordOnFirstContact(hop.label))
    return conn


def _translate(error: BaseException, hop: _Hop, board: Board, timeout: float) -> RemoteError:
    """A paramiko/socket failure as a RemoteError naming the board, the cause and what to try."""
    label = hop.label
    if isinstance(error, RemoteError):
        return error
    if isinstance(error, paramiko.BadHostKeyException):
        name = known_hosts_name(hop.hostname, hop.port)
        path = known_hosts_path() if _has_host(known_hosts_path(), name) else USER_KNOWN_HOSTS
        return _changed_key_error(label, name, error.expected_key, error.key, path)
    if isinstance(error, NoValidConnectionsError):
        causes = {type(e) for e in error.errors.values()}
        if causes <= {ConnectionRefusedError}:
            return RemoteError(
                f"{label}: connection refused (nothing listens on port {hop.port})",
                hint="is the board up and sshd running? check hostname/port with `orch inventory show "
                f"{board.name}` (lab boards: `orch lab status`)",
            )
        return RemoteError(f"{label}: cannot connect: {error}", hint="check the board's network and address")
    if isinstance(error, ConnectionRefusedError):
        return RemoteError(
            f"{label}: connection refused (nothing listens on port {hop.port})",
            hint=f"is the board up and sshd running? check `orch inventory show {board.name}`",
        )
    if isinstance(error, socket.gaierror):
        return RemoteError(
            f"{label}: cannot resolve host name {hop.hostname!r}: {error.strerror}",
            hint=f"fix the hostname with `orch inventory show {board.name}`",
        )
    if isinstance(error, (TimeoutError, socket.timeout)):
        return RemoteError(
            f"{label}: connection timed out after {timeout:g}s",
            hint="is the board powered and reachable? a slow board may need a longer connect timeout",
        )
    if isinstance(error, paramiko.AuthenticationException):
        tried = f"identity file {board.identity_file}, " if board.identity_file else ""
        return RemoteError(
            f"{label}: authentication failed for user {hop.user or board.user or '(local user)'} "
            f"(tried {tried}ssh-agent keys and default ~/.ssh keys; passwords are never used): {error}",
            hint="install your public key on the board (ssh-copy-id) or set identity_file in the inventory",
        )
    if isinstance(error, paramiko.SSHException) and (
        "No existing session" in str(error) or "banner" in str(error).lower()
    ):
        # paramiko's words for "the port answered TCP but no SSH handshake completed in time".
        return RemoteError(
            f"{label}: no SSH handshake within {timeout:g}s (the port accepts connections but does not speak SSH"
            " in time)",
            hint="is this port really the board's sshd? an overloaded or emulated board may need a longer "
            "connect timeout",
        )
    if isinstance(error, paramiko.SSHException):
        return RemoteError(
            f"{label}: SSH handshake failed: {error}",
            hint="is an SSH server listening on that port? a slow board may need a longer timeout",
        )
    if isinstance(error, OSError):
        reason = error.strerror or str(error) or type(error).__name__
        return RemoteError(
            f"{label}: connection failed: {reason}", hint="check the board's address and network"
        )
    return RemoteError(f"{label}: {type(error).__name__}: {error}")


def known_hosts_problem(path: Path) -> str | None:
    """Why a known_hosts file cannot be trusted as it is (``FILE:LINE: ...``), or None.

    paramiko skips lines it cannot parse; a damaged line may be the very board's key, and
    skipping it would turn a known host into a "first contact" whose new key is recorded."""
    try:
        data, more = read_capped(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path}: cannot read known_hosts: {error.strerror or error}"
    if more:
        return f"{path}: larger than {TEXT_FILE_LIMIT >> 20} MiB (or endless): not a known_hosts file"
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            return f"{path}:{number}: damaged line in known_hosts (bytes that are not text)"
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):  # @revoked / @cert-authority: a marker, then a regular entry
            line = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
        except Exception as error:  # noqa: BLE001 -- paramiko's InvalidHostKey is a bare Exception
            reason = error.args[1] if isinstance(error, paramiko.hostkeys.InvalidHostKey) else error
            return f"{path}:{number}: damaged line in known_hosts ({reason})"
        if entry is None and not _well_formed(line):
            return f"{path}:{number}: damaged line in known_hosts (not `host key-type base64-key`)"
    return None


def _well_formed(line: str) -> bool:
    """``hosts key-type base64`` with a key type paramiko does not know (sk-ssh-ed25519@...): fine."""
    fields = line.split()
    if len(fields) < 3:
        return False
    try:
        base64.b64decode(fields[2], validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def identity_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be an SSH private key file, or None (whether it opens is the agent's and
    paramiko's business; this catches the wrong file)."""
    shown = str(path)
    try:
        data, more = read_capped(Path(path).expanduser(), 1 << 20)
    except FileNotFoundError:
        return f"identity file {shown} does not exist"
    except IsADirectoryError:
        return f"identity file {shown} is a directory, not a key file"
    except OSError as error:
        return f"identity file {shown} cannot be read: {error.strerror or error}"
    if more:
        return f"identity file {shown} is not a private key (larger than 1 MiB, or endless like a device)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"identity file {shown} is not a private key (binary data, not a PEM/OpenSSH key)"
    if text.lstrip().startswith(("ssh-", "ecdsa-", "sk-")):
        return f"identity file {shown} is a public key; identity_file names the private key (without .pub)"
    if "PRIVATE KEY-----" not in text:
        return f"identity file {shown} is not a private key (no '-----BEGIN ... PRIVATE KEY-----' line)"
    return None


def check_local_files(boards: Sequence[Board]) -> None:
    """Before any connection: orch's and the user's known_hosts parse, and every identity file is a
    private key file. Bad input here is the user's to fix (UsageError, exit 2), not an unreachable board."""
    for path in (known_hosts_path(), USER_KNOWN_HOSTS):
        problem = known_hosts_problem(path)
        if problem:
            raise UsageError(
                problem, hint="fix or delete that line (`ssh-keygen -R HOST -f FILE` removes a host)"
            )
    for board in boards:
        if board.identity_file is not None:
            problem = identity_file_problem(Path(board.identity_file))
            if problem:
                raise UsageError(
                    f"board {board.name}: {problem}",
                    hint=f"fix identity_file in the inventory (`orch inventory show {board.name}` says where it"
                    " comes from)",
                )


def connect(board: Board, *, connect_timeout: float = 15) -> RemoteSession:
    """Open an SSH session to ``board`` (through its ProxyJump hosts); raises RemoteError/HostKeyError."""
    if board.identity_file is not None:
        problem = identity_file_problem(Path(board.identity_file))
        if problem:
            raise RemoteError(
                f"{_label(board.name, board.hostname, board.port)}: {problem}",
                hint=f"fix identity_file in the inventory (`orch inventory show {board.name}` says where it"
                " comes from)",
            )
    opened: list[Connection] = []
    gateway: Connection | None = None
    hops = [
        *_parse_jumps(board),
        _Hop(
            label=_label(board.name, board.hostname, board.port),
            hostname=board.hostname,
            port=board.port,
            user=board.user,
        ),
    ]
    for hop in hops:
        conn = _connection(hop, board, gateway, connect_timeout)
        try:
            conn.open()
        except Exception as error:  # every failure becomes a RemoteError naming the board
            conn.close()
            for earlier in reversed(opened):
                earlier.close()
            raise _translate(error, hop, board, connect_timeout) from error
        opened.append(conn)
        gateway = conn
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
        self.label = _label(board.name, board.hostname, board.port)

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
        return self._execute(shlex.join(argv), timeout=timeout, check=check, stdin=stdin)

    def run_command_line(
        self, command_line: str, *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        """Run a command line the *user* typed, interpreted by their login shell (like ``ssh host 'cmd'``).

        Only for text a user gave orch as a command line (``orch exec -- 'a | b'``);
        never build one from inventory values.
        """
        return self._execute(command_line, timeout=timeout, check=check, stdin=None)

    def run_script(
        self, script: str, args: Sequence[str] = (), *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        """Run a project-written POSIX sh script sent on stdin; values reach it only as quoted ``$1``, ``$2``..."""
        command = shlex.join(["sh", "-s", "--", *args])
        return self._execute(command, timeout=timeout, check=check, stdin=script.encode())

    def open_stream(self, argv: Sequence[str]) -> paramiko.Channel:
        """Start argv (each element shell-quoted) and return its channel as a byte stream
        (``send``/``recv``/``shutdown_write``/``close``), for protocols spoken over stdin/stdout."""
        return self._start(shlex.join(argv))

    def _start(self, command: str) -> paramiko.Channel:
        """A new session channel on this connection running ``command``."""
        transport: paramiko.Transport | None = self._conn.transport
        if transport is None or not transport.is_active():
            raise RemoteError(f"{self.label}: the SSH connection is closed", hint="connect again")
        try:
            channel = transport.open_session(timeout=_MIN_HANDSHAKE_TIMEOUT)
            channel.exec_command(command)
        except (paramiko.SSHException, OSError) as error:
            raise RemoteError(f"{self.label}: cannot start a command: {error}") from error
        return channel

    def _execute(
        self, command: str, *, timeout: float | None, check: bool, stdin: bytes | None
    ) -> CommandResult:
        start = time.monotonic()
        channel = self._start(command)
        out, err = bytearray(), bytearray()
        pending = memoryview(stdin) if stdin else None
        if pending is None:
            channel.shutdown_write()
        deadline = start + timeout if timeout is not None else None
        idle = 0.001
        try:
            while True:
                progressed = False
                if pending is not None and channel.send_ready():
                    sent = channel.send(bytes(pending[:_CHUNK]))
                    pending = pending[sent:]
                    progressed = sent > 0
                    if not pending:
                        channel.shutdown_write()  # EOF: `sh -s` stops reading the script here
                        pending = None
                while channel.recv_ready():
                    out += channel.recv(_CHUNK)
                    progressed = True
                while channel.recv_stderr_ready():
                    err += channel.recv_stderr(_CHUNK)
                    progressed = True
                # sshd sends all output before the exit status, so once it is here the buffers are complete.
                if (
                    channel.exit_status_ready()
                    and not channel.recv_ready()
                    and not channel.recv_stderr_ready()
                ):
                    break
                if channel.closed and not channel.recv_ready() and not channel.recv_stderr_ready():
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise CommandTimeout(
                        f"{self.label}: timed out after {timeout:g}s running {command}",
                        stdout=out.decode(errors="replace"),
                        stderr=err.decode(errors="replace"),
                        duration=time.monotonic() - start,
                    )
                if progressed:
                    idle = 0.001
                else:
                    time.sleep(idle)
                    idle = min(idle * 2, 0.05)
            exit_code = channel.recv_exit_status() if channel.exit_status_ready() else -1
        except (paramiko.SSHException, OSError) as error:
            raise RemoteError(f"{self.label}: connection lost while running {command}: {error}") from error
        finally:
            channel.close()
        result = CommandResult(
            exit_code=exit_code,
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            duration=time.monotonic() - start,
        )
        if check and exit_code != 0:
            tail = result.stderr.strip().splitlines()[-5:]
            detail = ("; stderr: " + " | ".join(tail)) if tail else ""
            cause = "was killed or lost its connection" if exit_code == -1 else f"exited with {exit_code}"
            raise CommandFailed(f"{self.label}: `{command}` {cause}{detail}", result=result)
        return result

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
