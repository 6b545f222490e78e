"""Unusable identity files on several boards: every board and every file named in one message,
before any connection, by every command that connects (a usage error: exit 2)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import paramiko
import pytest

from orchestrator.errors import UsageError

RunOrch = Callable[..., subprocess.CompletedProcess[str]]

# Port 1 on the loopback: nothing listens there, so a command that tried to connect would say so.
INVENTORY = """\
all:
  hosts:
    noisy: {hostname: 127.0.0.1, port: 1, identity_file: keys/noisy_key}
    blank: {hostname: 127.0.0.1, port: 1, identity_file: keys/blank_key}
    fine: {hostname: 127.0.0.1, port: 1, identity_file: keys/good_key}
"""


@pytest.fixture
def fleet(orch_env: dict[str, str]) -> dict[str, str]:
    """An inventory of three boards: random bytes as one's key file, an empty file as another's,
    a valid private key as the third's."""
    inventory = Path(orch_env["ORCH_INVENTORY"])
    keys = inventory.parent / "keys"
    keys.mkdir()
    (keys / "noisy_key").write_bytes(b"\xff\xfe" + os.urandom(2046))  # never UTF-8 text
    (keys / "blank_key").write_bytes(b"")
    paramiko.RSAKey.generate(2048).write_private_key_file(str(keys / "good_key"))
    inventory.write_text(INVENTORY)
    return orch_env


@pytest.mark.parametrize(
    "command",
    [
        ("exec", "--all-devices", "--", "true"),
        ("deploy", "--all-devices", "--dry-run"),
        ("deploy", "--all-devices", "--rollback"),
        ("bench", "--all-devices", "--dry-run"),
        ("verify", "--all-devices"),
    ],
    ids=lambda command: "-".join(word for word in command if word not in ("--all-devices", "--")),
)
def test_every_unusable_identity_file_is_named_in_one_message_before_any_connection(
    fleet: dict[str, str], orch_cli: RunOrch, command: tuple[str, ...]
) -> None:
    keys = Path(fleet["ORCH_INVENTORY"]).parent / "keys"
    result = orch_cli(fleet, *command)
    said = result.stdout + result.stderr
    assert result.returncode == UsageError.exit_code, said
    errors = [line for line in said.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, said
    message = said[said.index("error:") : said.index("hint:")]
    assert "2 local SSH files cannot be used" in message, said
    assert f"board noisy: identity file {keys / 'noisy_key'} is not a private key (binary data" in message
    assert f"board blank: identity file {keys / 'blank_key'} is not a private key (no '-----BEGIN" in message
    assert "fine" not in message and "good_key" not in message, said
    # Refused before any connection: nothing says the boards were unreachable.
    assert "refused" not in said.lower() and "unreachable" not in said, said
