"""Opening SSH connections to a board: one Fabric ``Connection`` per hop (its ProxyJump hosts, then
the board), with exactly the values the inventory resolved (ssh_config is *not* read a second
time, so ``orch inventory show`` stays the truth; only values it shows as decided by a ``Match exec``
line are looked up again, here, where OpenSSH runs those commands), host keys checked (``host_keys``), keys only
(identity file, then ssh-agent, then the default ``~/.ssh`` keys; no passwords, no prompts), and
every failure as a ``RemoteError`` naming the board, the cause and what to try.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import paramiko
from fabric import Config, Connection
from paramiko.config import SSHConfig
from paramiko.ssh_exception import NoValidConnectionsError

from orchestrator.adapters.host_keys import (
    RecordOnFirstContact,
    changed_key_error,
    has_host,
    identity_file_problem,
    known_hosts_files,
    known_hosts_name,
    load_known_hosts,
)
from orchestrator.adapters.ssh_config import resolve_on_connect
from orchestrator.board import Board
from orchestrator.errors import RemoteError

# Emulated boards run sshd under qemu: key exchange and auth can take many seconds.
MIN_HANDSHAKE_TIMEOUT = 60.0


def board_label(name: str, hostname: str, port: int) -> str:
    return f"{name} ({hostname}:{port})"


@dataclass(frozen=True, kw_only=True)
class Hop:
    """One SSH endpoint: the board itself or a ProxyJump host in front of it."""

    label: str
    hostname: str
    port: int
    user: str | None


def parse_jumps(board: Board) -> list[Hop]:
    """``[user@]host[:port]`` entries, comma-separated, outermost first (OpenSSH's ProxyJump syntax)."""
    if not board.proxy_jump or board.proxy_jump.lower() == "none":
        return []
    return [_jump(board, entry) for entry in board.proxy_jump.split(",")]


def _jump(board: Board, given: str) -> Hop:
    entry = given.strip().removeprefix("ssh://")
    user, _, hostport = entry.rpartition("@")
    host, port = hostport, 22
    if hostport.startswith("["):  # [ipv6]:port
        host, _, rest = hostport[1:].partition("]")
        port_text = rest.removeprefix(":")
        port = int(port_text) if port_text else 22
    elif hostport.count(":") == 1:
        host, _, port_text = hostport.partition(":")
        if not port_text.isdigit():
            raise RemoteError(f"{board.name}: ProxyJump {board.proxy_jump!r} has a bad port {port_text!r}")
        port = int(port_text)
    if not host:
        raise RemoteError(f"{board.name}: cannot read ProxyJump {board.proxy_jump!r}")
    return Hop(
        label=board_label(f"jump host for {board.name}", host, port),
        hostname=host,
        port=port,
        user=user or None,
    )


def _connection(hop: Hop, board: Board, gateway: Connection | None, timeout: float) -> Connection:
    # An explicit, empty SSHConfig stops Fabric from reading ~/.ssh/config again; lazy=True
    # keeps it from reading Fabric's own config files (they could carry passwords).
    config = Config(ssh_config=SSHConfig(), lazy=True, overrides={"load_ssh_configs": False})
    connect_kwargs: dict[str, object] = {
        "allow_agent": True,
        "look_for_keys": True,
        "banner_timeout": max(timeout, MIN_HANDSHAKE_TIMEOUT),
        "auth_timeout": max(timeout, MIN_HANDSHAKE_TIMEOUT),
        "channel_timeout": max(timeout, MIN_HANDSHAKE_TIMEOUT),
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
    load_known_hosts(conn.client.get_host_keys())
    conn.client.set_missing_host_key_policy(RecordOnFirstContact(hop.label))
    return conn


def open_connections(board: Board, connect_timeout: float) -> list[Connection]:
    """The open connections to ``board``'s ProxyJump hosts, then to the board itself (last)."""
    board = resolve_on_connect(board)  # ssh_config's `Match exec` lines run here, and only here
    if board.identity_file is not None:
        problem = identity_file_problem(Path(board.identity_file))
        if problem:
            raise RemoteError(
                f"{board_label(board.name, board.hostname, board.port)}: {problem}",
                hint=f"fix identity_file in the inventory (`orch inventory show {board.name}` says where it"
                " comes from)",
            )
    opened: list[Connection] = []
    gateway: Connection | None = None
    hops = [
        *parse_jumps(board),
        Hop(
            label=board_label(board.name, board.hostname, board.port),
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
            raise translate(error, hop, board, connect_timeout) from error
        opened.append(conn)
        gateway = conn
    return opened


def translate(error: BaseException, hop: Hop, board: Board, timeout: float) -> RemoteError:
    """A paramiko/socket failure as a RemoteError naming the board, the cause and what to try."""
    if isinstance(error, RemoteError):
        return error
    if isinstance(error, paramiko.SSHException):
        return _ssh_failure(error, hop, board, timeout)
    if isinstance(error, OSError):
        return _network_failure(error, hop, board, timeout)
    return RemoteError(f"{hop.label}: {type(error).__name__}: {error}")


def _ssh_failure(error: paramiko.SSHException, hop: Hop, board: Board, timeout: float) -> RemoteError:
    """The SSH protocol failed: a changed host key, refused keys, no handshake in time."""
    label = hop.label
    if isinstance(error, paramiko.BadHostKeyException):
        name = known_hosts_name(hop.hostname, hop.port)
        orchs, users = known_hosts_files()
        path = orchs if has_host(orchs, name) else users
        return changed_key_error(label, name, error.expected_key, error.key, path)
    if isinstance(error, paramiko.AuthenticationException):
        tried = f"identity file {board.identity_file}, " if board.identity_file else ""
        return RemoteError(
            f"{label}: authentication failed for user {hop.user or board.user or '(local user)'} "
            f"(tried {tried}ssh-agent keys and default ~/.ssh keys; passwords are never used): {error}",
            hint="install your public key on the board (ssh-copy-id) or set identity_file in the inventory",
        )
    if "No existing session" in str(error) or "banner" in str(error).lower():
        # paramiko's words for "the port answered TCP but no SSH handshake completed in time".
        return RemoteError(
            f"{label}: no SSH handshake within {timeout:g}s (the port accepts connections but does not speak SSH"
            " in time)",
            hint="is this port really the board's sshd? an overloaded or emulated board may need a longer "
            "connect timeout",
        )
    return RemoteError(
        f"{label}: SSH handshake failed: {error}",
        hint="is an SSH server listening on that port? a slow board may need a longer timeout",
    )


def _network_failure(error: OSError, hop: Hop, board: Board, timeout: float) -> RemoteError:
    """The network failed: nothing listens, no such host, no answer in time."""
    label = hop.label
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
    reason = error.strerror or str(error) or type(error).__name__
    return RemoteError(f"{label}: connection failed: {reason}", hint="check the board's network and address")
