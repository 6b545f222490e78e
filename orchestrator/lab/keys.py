"""SSH key material orch makes itself: the lab's client key pair and each board's host key.

Keys are ed25519, written in OpenSSH formats with the ``cryptography`` package (already a
dependency of paramiko), so no ``ssh-keygen`` is needed. Host keys made here are recorded in
orch's own known_hosts before a board ever answers: nothing is trusted on first use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from orchestrator.errors import OrchError


@dataclass(frozen=True, kw_only=True)
class KeyPair:
    private_path: Path
    public_line: str  # "ssh-ed25519 AAAA... comment"

    @property
    def public_path(self) -> Path:
        return self.private_path.with_name(self.private_path.name + ".pub")

    @property
    def key_type_and_blob(self) -> str:
        """The public key without its comment: "ssh-ed25519 AAAA..." (what known_hosts holds)."""
        return " ".join(self.public_line.split()[:2])


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # Created 0600 from the start: a private key is never readable by others, not even briefly.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def ensure_keypair(private_path: Path, comment: str) -> KeyPair:
    """An ed25519 key pair at ``private_path`` (+ ``.pub``), generated when missing, reused otherwise."""
    public_path = private_path.with_name(private_path.name + ".pub")
    if private_path.exists():
        try:
            key = serialization.load_ssh_private_key(private_path.read_bytes(), password=None)
        except (ValueError, TypeError) as error:
            raise OrchError(
                f"{private_path} is not an unencrypted OpenSSH private key ({error})",
                hint=f"remove {private_path} and {public_path} to let orch make a new one",
            ) from error
        if not isinstance(key, Ed25519PrivateKey):
            raise OrchError(
                f"{private_path} is not an ed25519 key", hint=f"remove {private_path} to regenerate it"
            )
    else:
        key = Ed25519PrivateKey.generate()
        _write_private(
            private_path,
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            ),
        )
    blob = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    public_line = f"{blob} {comment}"
    if not public_path.exists() or public_path.read_text().split()[:2] != blob.split()[:2]:
        public_path.write_text(public_line + "\n")
    return KeyPair(private_path=private_path, public_line=public_line)


def known_hosts_pattern(host: str, port: int) -> str:
    """The host pattern OpenSSH and paramiko look up: ``host`` for port 22, ``[host]:port`` otherwise."""
    return host if port == 22 else f"[{host}]:{port}"


def known_hosts_line(host: str, port: int, key: KeyPair, marker: str) -> str:
    """One known_hosts line; ``marker`` (the comment) lets orch find and remove its own lines later."""
    return f"{known_hosts_pattern(host, port)} {key.key_type_and_blob} {marker}"


def replace_known_hosts_lines(path: Path, marker: str, lines: list[str]) -> None:
    """Drop every line ending in ``marker`` and append ``lines``; other lines stay untouched. Atomic."""
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = []
    if path.exists():
        kept = [line for line in path.read_text().splitlines() if not _has_marker(line, marker)]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept + lines))
    os.replace(tmp, path)


def _has_marker(line: str, marker: str) -> bool:
    fields = line.split()
    return len(fields) >= 4 and fields[-1] == marker
