"""Keys orch makes: private files stay private, keys are reused, known_hosts lines of others are kept."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import OrchError
from orchestrator.lab.keys import ensure_keypair, known_hosts_line, replace_known_hosts_lines


def test_keypair_is_made_once_private_and_readable_by_openssh(tmp_path: Path) -> None:
    key = ensure_keypair(tmp_path / "keys" / "id_ed25519", comment="orch-test")
    assert key.private_path.stat().st_mode & 0o777 == 0o600
    assert key.public_line.startswith("ssh-ed25519 ") and key.public_line.endswith(" orch-test")
    assert key.public_path.read_text().strip() == key.public_line
    # OpenSSH itself derives the same public key from the private file.
    derived = subprocess.run(
        ["ssh-keygen", "-y", "-f", str(key.private_path)], capture_output=True, text=True, check=True
    ).stdout.split()[:2]
    assert derived == key.public_line.split()[:2]
    again = ensure_keypair(key.private_path, comment="orch-test")
    assert again.public_line == key.public_line, "an existing key is reused, never replaced"


def test_a_broken_key_file_is_reported_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "id_ed25519"
    path.write_text("not a key\n")
    with pytest.raises(OrchError, match="is not an unencrypted OpenSSH private key") as error:
        ensure_keypair(path, comment="x")
    assert "remove" in (error.value.hint or "")
    assert path.read_text() == "not a key\n"


def test_known_hosts_lines_are_replaced_by_marker_only(tmp_path: Path) -> None:
    key = ensure_keypair(tmp_path / "host_key", comment="h")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(
        "nano01 ssh-ed25519 AAAAuser\n[127.0.0.1]:2201 ssh-ed25519 AAAAother orch-lab-other\n"
    )
    line = known_hosts_line("127.0.0.1", 32768, key, "orch-lab-abc")
    assert line == f"[127.0.0.1]:32768 {key.key_type_and_blob} orch-lab-abc"
    assert known_hosts_line("nano01", 22, key, "m").startswith("nano01 ssh-ed25519 ")
    replace_known_hosts_lines(known_hosts, "orch-lab-abc", [line])
    replace_known_hosts_lines(known_hosts, "orch-lab-abc", [line])
    assert known_hosts.read_text().splitlines() == [
        "nano01 ssh-ed25519 AAAAuser",
        "[127.0.0.1]:2201 ssh-ed25519 AAAAother orch-lab-other",
        line,
    ]
    replace_known_hosts_lines(known_hosts, "orch-lab-abc", [])
    assert line not in known_hosts.read_text() and "AAAAuser" in known_hosts.read_text()
