"""A real OpenSSH server on 127.0.0.1 for the SSH layer's tests (no mocks).

Each server has its own temporary host key, authorized_keys and pid file, and runs
``/usr/sbin/sshd -D -e`` in the foreground so the test owns the process and kills it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def keygen(path: Path, comment: str = "orch-test") -> Path:
    keygen_bin = shutil.which("ssh-keygen")
    if keygen_bin is None:
        raise RuntimeError("ssh-keygen is missing: apt-get install openssh-client")
    subprocess.run(
        [keygen_bin, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path


class SshServer:
    """sshd on 127.0.0.1:<port>, key-only auth for the current user (root in CI)."""

    def __init__(self, root: Path, client_public_key: Path, port: int | None = None) -> None:
        if not SSHD.exists():
            raise RuntimeError(f"{SSHD} is missing: apt-get install openssh-server")
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        (root / "authorized_keys").write_bytes(client_public_key.read_bytes())
        self.new_host_key()

    def new_host_key(self) -> None:
        """Replace the host key (the next start presents a different identity)."""
        key = self.root / "ssh_host_ed25519_key"
        key.unlink(missing_ok=True)
        Path(f"{key}.pub").unlink(missing_ok=True)
        keygen(key, comment="host")
        self.host_key = key

    def config(self) -> Path:
        path = self.root / "sshd_config"
        path.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"PidFile {self.root / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    # The temp dir's permissions are not sshd's business in a test.
                    "StrictModes no",
                    "UsePAM no",
                    "Subsystem sftp internal-sftp",
                    "",
                ]
            )
        )
        return path

    def start(self) -> SshServer:
        # sshd refuses to start without its privilege separation directory.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        log = (self.root / "sshd.log").open("ab")
        self.process = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(self.config())],
            stdout=log,
            stderr=log,
            env={**os.environ},
            # Own process group: stopping it also ends the per-connection sshd children.
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.root / 'sshd.log').read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None
        # Wait until the port is free again so a restart on the same port works.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    time.sleep(0.05)
            except OSError:
                return
