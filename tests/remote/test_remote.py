"""The SSH layer against a real sshd on 127.0.0.1: quoting, host keys, errors, timeouts, files."""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import shlex
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sshd_server import SshServer, free_port, keygen

from orchestrator.adapters import host_keys, ssh
from orchestrator.board import Board
from orchestrator.errors import HostKeyError, RemoteError


def hostile_strings(marker: Path) -> list[str]:
    """Strings a careless shell would execute or split; each would create ``marker`` if run."""
    m = str(marker)
    return [
        "two words",
        f"; touch {m}",
        f"$(touch {m})",
        f"`touch {m}`",
        f"&& touch {m}",
        f"| touch {m}",
        f"\ntouch {m}\n",
        f"'; touch {m}; '",
        f'"; touch {m}; "',
        "back\\slash \\n",
        "$HOME ${PATH} ~ * ?",
        "-n",
        "",
        "ünïcødé ✓",
    ]


def ssh_keygen_fingerprint(public_key: Path) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(public_key)], check=True, capture_output=True, text=True
    ).stdout
    return out.split()[1]


def test_argv_is_quoted_never_interpreted(ssh_server: SshServer, make_board, orch_home: Path, tmp_path: Path):
    marker = tmp_path / "pwned"
    strings = hostile_strings(marker)
    with ssh.connect(make_board(port=ssh_server.port)) as session:
        result = session.run(["printf", r"%s\0", *strings])
    assert result.exit_code == 0
    assert result.stdout.split("\0")[:-1] == strings
    assert not marker.exists(), "a hostile argument was executed by the remote shell"


def test_script_args_are_positional_values(
    ssh_server: SshServer, make_board, orch_home: Path, tmp_path: Path
):
    marker = tmp_path / "pwned"
    strings = hostile_strings(marker)
    script = 'printf "%s\\n" "$#" >&2\nfor arg in "$@"; do printf "%s\\0" "$arg"; done\n'
    with ssh.connect(make_board(port=ssh_server.port)) as session:
        result = session.run_script(script, strings)
    assert result.stderr.strip() == str(len(strings))
    assert result.stdout.split("\0")[:-1] == strings
    assert not marker.exists()


def test_stdin_bytes_reach_the_command_intact(ssh_server: SshServer, make_board, orch_home: Path):
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value: larger than any SSH window
    with ssh.connect(make_board(port=ssh_server.port)) as session:
        result = session.run(["sha256sum"], stdin=data)
    assert result.stdout.split()[0] == hashlib.sha256(data).hexdigest()


def test_exit_code_and_check(ssh_server: SshServer, make_board, orch_home: Path):
    with ssh.connect(make_board(port=ssh_server.port)) as session:
        unchecked = session.run(["sh", "-c", "echo out; echo oops >&2; exit 7"], check=False)
        assert (unchecked.exit_code, unchecked.stdout, unchecked.stderr) == (7, "out\n", "oops\n")
        with pytest.raises(ssh.CommandFailed) as failed:
            session.run(["sh", "-c", "echo oops >&2; exit 7"])
    assert "t1 (127.0.0.1:" in failed.value.message
    assert "exited with 7" in failed.value.message and "oops" in failed.value.message
    assert failed.value.result.exit_code == 7


def test_first_contact_records_the_key_and_says_so(
    ssh_server: SshServer, make_board, orch_home: Path, capsys: pytest.CaptureFixture[str]
):
    known_hosts = orch_home / "known_hosts"
    assert not known_hosts.exists()
    board = make_board(port=ssh_server.port)
    with ssh.connect(board) as session:
        session.run(["true"])
    expected = Path(f"{ssh_server.host_key}.pub").read_text().split()[:2]
    lines = known_hosts.read_text().splitlines()
    assert [line.split() for line in lines] == [[f"[127.0.0.1]:{ssh_server.port}", *expected]]
    said = capsys.readouterr().err
    assert "first contact" in said and "t1" in said
    assert ssh_keygen_fingerprint(Path(f"{ssh_server.host_key}.pub")) in said
    # Known now: a second connection is silent and records nothing more.
    with ssh.connect(board):
        pass
    assert "first contact" not in capsys.readouterr().err
    assert len(known_hosts.read_text().splitlines()) == 1


def test_changed_host_key_is_refused_with_fingerprints_and_the_fix(
    make_server: Callable[..., SshServer], make_board, orch_home: Path
):
    server = make_server()
    board = make_board("nano01", port=server.port)
    with ssh.connect(board):
        pass
    old_fingerprint = ssh_keygen_fingerprint(Path(f"{server.host_key}.pub"))
    recorded = (orch_home / "known_hosts").read_text()

    server.stop()
    server.new_host_key()
    server.start()  # same address, another identity
    new_fingerprint = ssh_keygen_fingerprint(Path(f"{server.host_key}.pub"))
    with pytest.raises(HostKeyError) as refused:
        ssh.connect(board)
    message, hint = refused.value.message, refused.value.hint or ""
    assert f"nano01 (127.0.0.1:{server.port})" in message
    assert old_fingerprint in message and new_fingerprint in message
    assert (orch_home / "known_hosts").read_text() == recorded, "the new key must not be recorded silently"
    command = f"ssh-keygen -R '[127.0.0.1]:{server.port}' -f {orch_home / 'known_hosts'}"
    assert command in hint

    # The hint works as written: after it, the next contact records the new key.
    subprocess.run(shlex.split(command), check=True, capture_output=True)
    with ssh.connect(board) as session:
        assert session.run(["echo", "back"]).stdout == "back\n"
    assert Path(f"{server.host_key}.pub").read_text().split()[1] in (orch_home / "known_hosts").read_text()


def test_users_known_hosts_is_trusted_and_left_alone(
    ssh_server: SshServer,
    make_board,
    orch_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    users = tmp_path / "user_known_hosts"
    key_type, key = Path(f"{ssh_server.host_key}.pub").read_text().split()[:2]
    users.write_text(f"[127.0.0.1]:{ssh_server.port} {key_type} {key}\n")
    monkeypatch.setattr(host_keys, "USER_KNOWN_HOSTS", users)
    before = users.read_text()
    with ssh.connect(make_board(port=ssh_server.port)):
        pass
    assert "first contact" not in capsys.readouterr().err
    assert users.read_text() == before
    assert not (orch_home / "known_hosts").exists()


def test_closed_port_names_the_board(make_board, orch_home: Path):
    port = free_port()
    with pytest.raises(RemoteError) as error:
        ssh.connect(make_board("rpi4-kitchen", port=port))
    assert (
        error.value.message
        == f"rpi4-kitchen (127.0.0.1:{port}): connection refused (nothing listens on port {port})"
    )
    assert "orch inventory show rpi4-kitchen" in (error.value.hint or "")


def test_unauthorized_key_fails_without_prompting(
    ssh_server: SshServer, make_board, orch_home: Path, tmp_path: Path
):
    stranger = keygen(tmp_path / "stranger")
    env_agent = os.environ.pop("SSH_AUTH_SOCK", None)
    try:
        with pytest.raises(RemoteError) as error:
            ssh.connect(make_board(port=ssh_server.port, identity_file=stranger))
    finally:
        if env_agent is not None:
            os.environ["SSH_AUTH_SOCK"] = env_agent
    assert "authentication failed" in error.value.message
    assert f"t1 (127.0.0.1:{ssh_server.port})" in error.value.message
    assert "passwords are never used" in error.value.message


def test_missing_identity_file_is_named(make_board, orch_home: Path, tmp_path: Path):
    with pytest.raises(RemoteError, match=r"identity file .*nope does not exist"):
        ssh.connect(make_board(port=1, identity_file=tmp_path / "nope"))


def test_command_timeout_ends_the_wait(ssh_server: SshServer, make_board, orch_home: Path):
    with ssh.connect(make_board(port=ssh_server.port)) as session:
        start = time.monotonic()
        with pytest.raises(ssh.CommandTimeout) as timed_out:
            session.run(["sh", "-c", "echo started; sleep 30"], timeout=1)
        assert time.monotonic() - start < 5
        assert timed_out.value.stdout == "started\n"
        assert "timed out after 1s" in timed_out.value.message
        # The session stays usable after a timed-out command.
        assert session.run(["echo", "still here"]).stdout == "still here\n"


def test_files_round_trip_with_progress(ssh_server: SshServer, make_board, orch_home: Path, tmp_path: Path):
    local = tmp_path / "model.onnx"
    local.write_bytes(os.urandom(700_000))
    calls: list[tuple[int, int]] = []
    remote_dir = f"orch-test-{os.getpid()}/store/sha256"
    with ssh.connect(make_board(port=ssh_server.port)) as session:
        try:
            assert session.home() == os.path.expanduser(f"~{getpass.getuser()}")
            session.mkdir_p(remote_dir)
            session.mkdir_p(remote_dir)  # idempotent
            session.put(
                local, f"{remote_dir}/upload.tmp", progress=lambda done, total: calls.append((done, total))
            )
            session.rename(f"{remote_dir}/upload.tmp", f"{remote_dir}/final")
            assert session.stat(f"{remote_dir}/upload.tmp") is None
            assert session.stat(f"{remote_dir}/final") == local.stat().st_size
            assert session.stat(f"~/{remote_dir}/final") == local.stat().st_size
            session.get(f"{remote_dir}/final", tmp_path / "back" / "model.onnx")
            with pytest.raises(RemoteError, match=r"t1 .*download of .*missing failed"):
                session.get(f"{remote_dir}/missing", tmp_path / "never")
        finally:
            session.run(["rm", "-rf", f"orch-test-{os.getpid()}"])
    assert (tmp_path / "back" / "model.onnx").read_bytes() == local.read_bytes()
    assert calls[-1] == (local.stat().st_size, local.stat().st_size)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert len(calls) > 1, "progress must be reported while uploading, not only at the end"


def test_fingerprint_matches_openssh(ssh_server: SshServer, make_board, orch_home: Path, capsys):
    with ssh.connect(make_board(port=ssh_server.port)):
        pass
    said = capsys.readouterr().err
    printed = re.search(r"SHA256:\S+", said)
    assert printed is not None
    assert printed.group(0) == ssh_keygen_fingerprint(Path(f"{ssh_server.host_key}.pub"))


def test_proxy_jump_goes_through_the_jump_host(
    make_server: Callable[..., SshServer], make_board, orch_home: Path
):
    jump = make_server()
    target = make_server()
    board: Board = make_board(port=target.port, proxy_jump=f"{getpass.getuser()}@127.0.0.1:{jump.port}")
    with ssh.connect(board) as session:
        # sshd sets SSH_CONNECTION to "client_ip client_port server_ip server_port".
        assert session.run(["sh", "-c", 'echo "$SSH_CONNECTION"']).stdout.split()[3] == str(target.port)
    jump_log = (jump.root / "sshd.log").read_text()
    assert "Accepted publickey" in jump_log, "the connection must pass through the jump host"
    assert f"[127.0.0.1]:{jump.port}" in (orch_home / "known_hosts").read_text()


def test_orchs_known_hosts_wins_over_a_stale_user_entry(
    ssh_server: SshServer, make_board, orch_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A lab recreated on a port the user once ssh'ed to: orch's fresh record is the one that counts."""
    stale = keygen(tmp_path / "stale_host_key")
    name = f"[127.0.0.1]:{ssh_server.port}"
    users = tmp_path / "user_known_hosts"
    users.write_text(f"{name} {' '.join(Path(f'{stale}.pub').read_text().split()[:2])}\n")
    monkeypatch.setattr(host_keys, "USER_KNOWN_HOSTS", users)
    (orch_home / "known_hosts").write_text(
        f"{name} {' '.join(Path(f'{ssh_server.host_key}.pub').read_text().split()[:2])}\n"
    )
    with ssh.connect(make_board(port=ssh_server.port)) as session:
        assert session.run(["true"]).ok


def test_a_command_killed_by_a_signal_is_reported(ssh_server: SshServer, make_board, orch_home: Path):
    with ssh.connect(make_board(port=ssh_server.port)) as session:
        assert session.run(["sh", "-c", "kill -9 $$"], check=False).exit_code == -1
        with pytest.raises(ssh.CommandFailed, match="was killed or lost its connection"):
            session.run(["sh", "-c", "kill -9 $$"])


def test_a_port_that_never_speaks_ssh_times_out_by_name(make_board, orch_home: Path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)  # accepts TCP (the kernel does), never sends an SSH banner
        port = listener.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(RemoteError) as error:
            ssh.connect(make_board("mute", port=port), connect_timeout=2)
    assert time.monotonic() - start < 10
    assert error.value.message.startswith(f"mute (127.0.0.1:{port}): no SSH handshake within 2s")
