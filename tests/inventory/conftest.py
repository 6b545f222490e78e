"""Fixtures of the inventory tests: a real sshd on 127.0.0.1 for the few that connect.

The server is the SSH layer's own test server (tests/remote/sshd_server.py), started here so that
these tests run on their own too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "remote"))
from sshd_server import SshServer, keygen


@pytest.fixture
def ssh_server(tmp_path: Path) -> Iterator[tuple[SshServer, Path]]:
    """A real sshd on 127.0.0.1 and the private key it accepts (its name marks a test `integration`)."""
    key = keygen(tmp_path / "client_key")
    server = SshServer(tmp_path / "sshd", Path(f"{key}.pub")).start()
    yield server, key
    server.stop()
