"""Fixtures for the SSH layer's tests: real sshd servers on 127.0.0.1, keys, boards pointing at them."""

from __future__ import annotations

import getpass
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sshd_server import SshServer, keygen

from orchestrator.board import Board

# --- fixtures -------------------------------------------------------------------------


@pytest.fixture
def orch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ORCH_HOME (orch's known_hosts lives there) for one test."""
    home = tmp_path / "orch-home"
    home.mkdir()
    monkeypatch.setenv("ORCH_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return keygen(tmp_path_factory.mktemp("client") / "id_ed25519")


@pytest.fixture
def make_server(tmp_path: Path, client_key: Path) -> Iterator[Callable[..., SshServer]]:
    """Factory: start extra sshd servers for one test; all are stopped at its end."""
    servers: list[SshServer] = []

    def make(port: int | None = None) -> SshServer:
        server = SshServer(tmp_path / f"sshd{len(servers)}", Path(f"{client_key}.pub"), port=port)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory: pytest.TempPathFactory, client_key: Path) -> Iterator[SshServer]:
    """One sshd shared by the tests that only need a healthy board."""
    server = SshServer(tmp_path_factory.mktemp("sshd"), Path(f"{client_key}.pub")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def make_board(client_key: Path) -> Callable[..., Board]:
    """Factory: a Board pointing at a test sshd (or at any 127.0.0.1 port)."""

    def make(name: str = "t1", *, port: int, **extra: object) -> Board:
        values: dict[str, object] = {"user": getpass.getuser(), "identity_file": client_key, **extra}
        return Board(name=name, hostname="127.0.0.1", port=port, **values)  # type: ignore[arg-type]

    return make
