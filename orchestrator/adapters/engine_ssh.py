"""Reach a Docker engine on another machine over orch's own SSH layer (``--docker-host ssh://...``).

The engine is spoken to the way the ``docker`` CLI does it: each API connection is one SSH
channel running ``docker system dial-stdio`` on the build machine. A private Unix socket on
this side carries those connections, so the Docker SDK talks to it like a local engine.

Going through ``orchestrator.adapters.ssh`` rather than the SDK's own paramiko client means the build
machine is treated like a board: its host key is checked against orch's known_hosts and
``~/.ssh/known_hosts`` (first contact recorded and printed, a changed key refused), and
``~/.ssh/config`` (HostName, Port, User, IdentityFile, ProxyJump) and the SSH agent are used.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.adapters import ssh
from orchestrator.adapters.ssh_config import load_ssh_config
from orchestrator.board import Board
from orchestrator.errors import RemoteError, UsageError

DIAL_STDIO = ["docker", "system", "dial-stdio"]
_CHUNK = 1 << 16


def build_host_board(url: str) -> Board:
    """``ssh://[user@]host[:port]`` -> the Board to connect to (values from the URL win over ssh_config)."""

    parsed = urllib.parse.urlparse(url)
    if parsed.scheme != "ssh" or not parsed.hostname or parsed.path not in ("", "/"):
        raise UsageError(f"--docker-host {url!r} is not an ssh://[user@]host[:port] address")
    try:
        port = parsed.port
    except ValueError as error:
        raise UsageError(f"--docker-host {url!r}: {error}") from error
    values: dict[str, Any] = {}
    config = load_ssh_config()
    if config is not None:
        values.update(config.defaults_for(parsed.hostname, None).values)
    values.setdefault("hostname", parsed.hostname)
    if port is not None:
        values["port"] = port
    if parsed.username:
        values["user"] = parsed.username
    return Board(name=parsed.hostname, **values)


class DockerOverSSH:
    """A local Unix socket whose every connection is piped to ``docker system dial-stdio`` over SSH."""

    def __init__(self, url: str) -> None:
        self.board = build_host_board(url)
        # sshd caps the sessions of one connection (MaxSessions, 10 by default) and the SDK keeps a
        # few idle API connections: when the newest SSH connection is full, another one is opened.
        self._sessions = [ssh.connect(self.board)]
        self._directory = Path(tempfile.mkdtemp(prefix="orch-docker-ssh-"))
        self._path = self._directory / "docker.sock"
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self._path))  # the directory is 0700: only this user can use the socket
        self._server.listen(16)
        self._closed = False
        threading.Thread(target=self._accept, name="orch-docker-ssh", daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"unix://{self._path}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                channel = self._open_channel()
            except RemoteError:  # the SDK sees the closed socket and reports the engine unreachable
                client.close()
                continue
            threading.Thread(target=_pump, args=(client, channel), daemon=True).start()
            threading.Thread(target=_pump_back, args=(channel, client), daemon=True).start()

    def _open_channel(self) -> Any:
        try:
            return self._sessions[-1].open_stream(DIAL_STDIO)
        except RemoteError:
            self._sessions.append(ssh.connect(self.board))
            return self._sessions[-1].open_stream(DIAL_STDIO)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.close()
        for session in self._sessions:
            session.close()
        shutil.rmtree(self._directory, ignore_errors=True)


def _pump(client: socket.socket, channel: Any) -> None:
    """Local socket -> remote stdin; EOF is passed on so the engine sees the request end."""

    def finish() -> None:
        with contextlib.suppress(OSError, EOFError):
            channel.shutdown_write()

    _relay(client.recv, channel.sendall, finish)


def _pump_back(channel: Any, client: socket.socket) -> None:
    """Remote stdout -> local socket; when the engine closes, so does the local end."""

    def finish() -> None:
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            client.close()
        channel.close()

    _relay(channel.recv, client.sendall, finish)


def _relay(receive: Callable[[int], bytes], send: Callable[[bytes], Any], finish: Callable[[], None]) -> None:
    """Copy until the reading side ends (or either side breaks), then ``finish``."""
    try:
        while data := receive(_CHUNK):
            send(data)
    except OSError:
        pass
    finally:
        finish()
