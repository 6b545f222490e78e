"""Bad input through real processes: closed pipes, a read-only directory, inputs that used to hang.

What the in-process corpus (test_cli_corpus.py) cannot show: the exit status a shell sees when
the reader of a pipe went away, a directory the command really may not write to, and commands
that must end quickly instead of hanging (alias bomb, 10,000 boards).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_corpus import INVENTORY, make_store

BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head -1`


def _env(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ORCH_HOME": str(root / "home"),
        "ORCH_INVENTORY": str(root / "inventory.yaml"),
        "ORCH_RESULTS": str(root / "results"),
        "ORCH_ARTIFACTS": str(root / "artifacts"),
        "ORCH_SSH_CONFIG": str(root / "ssh_config"),
        "DOCKER_HOST": "unix:///nonexistent/orch-test-engine.sock",
        "MPLCONFIGDIR": str(root / "mpl"),
        "HOME": str(root / "userhome"),
        "COLUMNS": "200",
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "w"
    for name in ("home", "mpl", "userhome"):
        (path / name).mkdir(parents=True)
    (path / "inventory.yaml").write_text(INVENTORY)
    return path


def _orch(root: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        check=False,
        env=_env(root),
        cwd=root,
        text=True,
        timeout=kwargs.pop("timeout", 120),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[call-overload]
    )


def _closed_pipe() -> int:
    """The write end of a pipe whose reader is gone: every write fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.mark.parametrize(
    "args, stream",
    [
        (("inventory", "list", "--json"), "stdout"),
        (("results", "export", "--csv"), "stdout"),
        (("inventory", "list"), "stderr"),  # tables go to stderr: `orch inventory list 2>&1 | head -1`
        (("build", "--target", "lab", "--dry-run", "--json"), "stdout"),
    ],
    ids=["json", "export", "table-on-stderr", "build-plan"],
)
def test_output_to_a_closed_pipe_ends_quietly(root: Path, args: tuple[str, ...], stream: str) -> None:
    make_store(root / "results")
    pipe = _closed_pipe()
    try:
        if stream == "stdout":
            result = _orch(root, *args, stdout=pipe, stderr=subprocess.PIPE)
            assert result.stderr == "", "nothing complains about the reader that went away"
        else:
            result = _orch(root, *args, stdout=subprocess.PIPE, stderr=pipe)
    finally:
        os.close(pipe)
    assert result.returncode == BROKEN_PIPE


def test_report_into_a_read_only_directory(root: Path) -> None:
    make_store(root / "results")
    locked = root / "locked"
    locked.mkdir()
    argv = [sys.executable, "-m", "orchestrator", "report", "latest", "--html", str(locked / "r.html")]
    if os.geteuid() == 0:
        # root writes through permission bits: give the command a really read-only file system
        # there, in a mount namespace of its own (nothing stays mounted afterwards).
        unshare = shutil.which("unshare")
        if unshare is None:
            pytest.fail(
                "running as root needs util-linux's unshare for a read-only directory: apt-get install util-linux"
            )
        script = 'mount -t tmpfs -o ro,size=64k tmpfs "$1" && shift && exec "$@"'
        argv = [unshare, "--mount", "sh", "-c", script, "sh", str(locked), *argv]
    else:
        locked.chmod(0o555)
    result = subprocess.run(
        argv, check=False, env=_env(root), cwd=root, text=True, capture_output=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"--html {locked / 'r.html'}: cannot write the report" in result.stderr
    assert "Read-only file system" in result.stderr or "Permission denied" in result.stderr
    assert not list(locked.iterdir())


def test_a_match_block_in_ssh_config_works_in_the_real_cli(root: Path) -> None:
    (root / "ssh_config").write_text("Match host 127.0.0.1\n  User bob\nHost *\n  ServerAliveInterval 5\n")
    (root / "inventory.yaml").write_text("all:\n  hosts:\n    pi01: {hostname: 127.0.0.1}\n")
    result = _orch(root, "inventory", "show", "pi01", capture_output=True)
    assert result.returncode == 0, result.stderr
    assert "bob" in result.stderr and "Traceback" not in result.stderr


def test_an_alias_bomb_is_refused_at_once(root: Path) -> None:
    lines = [
        "all:",
        "  hosts:",
        "    pi01:",
        "      vars:",
        '        a: &a ["lol", "lol", "lol", "lol", "lol"]',
    ]
    for previous, name in zip("abcdefghijklm", "bcdefghijklmn", strict=True):
        lines.append(f"        {name}: &{name} [{', '.join(['*' + previous] * 5)}]")
    (root / "inventory.yaml").write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    result = _orch(root, "inventory", "list", "--json", capture_output=True, timeout=60)
    assert time.monotonic() - started < 30
    assert result.returncode == 2
    assert "alias bomb" in result.stderr and "Traceback" not in result.stderr


def test_ten_thousand_boards_do_not_look_hung(root: Path) -> None:
    lines = ["all:", "  vars: {user: orch}", "  children:"]
    for group in range(100):
        lines += [f"    g{group}:", "      vars: {target: rpi4}", "      hosts:"]
        lines += [f"        b{group}_{n}: {{hostname: 192.0.2.{n}, port: {1000 + n}}}" for n in range(100)]
    (root / "inventory.yaml").write_text("\n".join(lines) + "\n")
    (root / "ssh_config").write_text("Host b1_*\n  User x\nMatch host 192.0.2.5\n  Port 2222\n")
    started = time.monotonic()
    result = _orch(root, "inventory", "list", "--limit", "g7:&b7_1*", "--json", capture_output=True)
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stdout.count('"name": "b7_1') == 11
    assert took < 30, f"10,000 boards took {took:.1f} s"


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")],
    ids=["sigterm", "ctrl-c"],
)
def test_a_signal_ends_a_command_as_an_interruption(
    root: Path, sig: signal.Signals, code: int, said: str
) -> None:
    # orch waits for the writer of a named pipe given as the inventory; the signal comes meanwhile.
    fifo = root / "inventory.fifo"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "inventory", "list", "-i", str(fifo)],
        env=_env(root),
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _holds_open(process.pid, fifo):  # orch has opened the pipe and waits for data
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(sig)
    _, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert err.strip().splitlines()[-1] == said and "Traceback" not in err, err


def _holds_open(pid: int, path: Path) -> bool:
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) == str(path):
                return True
        except OSError:
            continue
    return False
