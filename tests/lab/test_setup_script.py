"""scripts/setup: a no-op on a ready machine, a clear list of what to install without root,
and the bookworm-backports entry derived from the machine's own apt sources (never a fixed host)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.paths import PROJECT_ROOT

SETUP = PROJECT_ROOT / "scripts" / "setup"
# A host under the reserved .invalid domain: test data, not a real archive.
ARCHIVE = "http://archive.example.invalid/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def _digest(directory: Path) -> dict[str, str]:
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _derive(apt_root: Path) -> subprocess.CompletedProcess[str]:
    """Source the script (defines functions only) and derive bookworm-backports under apt_root."""
    return subprocess.run(
        ["bash", "-c", f"source {SETUP} && ensure_backports_source bookworm"],
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "ORCH_SETUP_APT_ROOT": str(apt_root)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.integration  # a machine that is set up: engine running, qemu registered
def test_setup_only_verifies_a_ready_machine(tmp_path: Path) -> None:
    before = _digest(Path("/etc/apt"))
    result = subprocess.run([str(SETUP)], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    for step in ("system packages", "qemu-user >= 8", "binfmt_misc", "Docker engine", "virtualenv"):
        assert step in result.stdout
    assert result.stdout.count("ok: ") == 5, result.stdout
    # Nothing was run, installed or written: no "$ command" lines, apt sources untouched, no daemon block left.
    assert "    $ " not in result.stdout, result.stdout
    assert _digest(Path("/etc/apt")) == before
    assert (
        not Path("/usr/sbin/policy-rc.d").exists() or "orch" not in Path("/usr/sbin/policy-rc.d").read_text()
    )


def test_setup_without_root_and_engine_access_says_what_to_install() -> None:
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv is missing: apt-get install util-linux"
    result = subprocess.run(
        [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "bash", str(SETUP)],
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/tmp"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "a running Docker engine" in result.stderr  # nobody cannot reach the engine's socket
    assert "apt-get install docker.io" in result.stderr
    assert "sudo scripts/setup" in result.stderr


def test_backports_entry_is_derived_from_a_deb822_source(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        f"Types: deb\nURIs: {ARCHIVE}\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: {KEYRING}\n\n"
        f"Types: deb\nURIs: {ARCHIVE}-security\nSuites: bookworm-security\nComponents: main\nSigned-By: {KEYRING}\n"
    )
    result = _derive(tmp_path)
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "sources.list.d" / "orch-backports.sources").read_text()
    assert f"URIs: {ARCHIVE}\n" in written
    assert "Suites: bookworm-backports\n" in written and f"Signed-By: {KEYRING}\n" in written
    # Idempotent: a second run sees the entry and writes nothing.
    again = _derive(tmp_path)
    assert "already has a bookworm-backports source" in again.stdout
    assert len(list((tmp_path / "sources.list.d").iterdir())) == 2


def test_backports_entry_is_derived_from_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# the machine's sources\n"
        f"deb {ARCHIVE}-security bookworm-security main\n"
        f"deb [arch=amd64 signed-by={KEYRING}] {ARCHIVE} bookworm main contrib\n"
    )
    assert _derive(tmp_path).returncode == 0
    assert (tmp_path / "sources.list.d" / "orch-backports.list").read_text().splitlines()[-1] == (
        f"deb [signed-by={KEYRING}] {ARCHIVE} bookworm-backports main"
    )
    plain = tmp_path / "plain"
    (plain / "sources.list.d").mkdir(parents=True)
    (plain / "sources.list").write_text(f"deb {ARCHIVE} bookworm main\n")
    assert _derive(plain).returncode == 0
    assert (plain / "sources.list.d" / "orch-backports.list").read_text().splitlines()[-1] == (
        f"deb {ARCHIVE} bookworm-backports main"
    )


def test_backports_derivation_fails_clearly_without_a_bookworm_source(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(f"deb {ARCHIVE} trixie main\n")
    result = _derive(tmp_path)
    assert result.returncode == 1
    assert "no apt source for 'bookworm' to derive bookworm-backports from" in result.stderr
    assert list((tmp_path / "sources.list.d").iterdir()) == []
