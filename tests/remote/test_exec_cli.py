"""`orch exec` end to end: the real CLI, a real inventory, real sshd servers on 127.0.0.1."""

from __future__ import annotations

import getpass
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sshd_server import SshServer, free_port


def write_inventory(env: dict[str, str], key: Path, boards: dict[str, int]) -> None:
    lines = ["all:", "  hosts:"]
    for name, port in boards.items():
        lines.append(
            f"    {name}: {{hostname: 127.0.0.1, port: {port}, user: {getpass.getuser()}, identity_file: {key}}}"
        )
    Path(env["ORCH_INVENTORY"]).write_text("\n".join(lines) + "\n")


@pytest.fixture
def fleet_env(orch_env: dict[str, str], client_key: Path, ssh_server: SshServer) -> dict[str, str]:
    """An inventory with a healthy board `up` and a board `down` whose port is closed."""
    write_inventory(orch_env, client_key, {"up": ssh_server.port, "down": free_port()})
    return orch_env


def test_unreachable_board_is_named_and_the_other_still_runs(fleet_env, orch_cli):
    result = orch_cli(fleet_env, "exec", "--all-devices", "--", "echo hello from $(hostname -s)")
    assert result.returncode != 0
    assert "hello from" in result.stderr, "the reachable board's output must be shown"
    assert "down (127.0.0.1:" in result.stderr and "connection refused" in result.stderr
    assert "2 boards: 1 ok, 1 unreachable (down)" in result.stderr
    assert "Traceback" not in result.stderr


def test_json_document_per_board(fleet_env, orch_cli):
    result = orch_cli(
        fleet_env, "exec", "--all-devices", "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 3"
    )
    document = json.loads(result.stdout)
    assert set(document) == {"up", "down"}
    assert document["up"]["exit_code"] == 3
    assert document["up"]["stdout"] == "out\n" and document["up"]["stderr"] == "err\n"
    assert document["up"]["duration"] > 0
    assert document["up"]["error"] == "exit code 3"
    assert document["down"]["exit_code"] is None
    assert "connection refused" in document["down"]["error"]
    assert result.returncode == 4, "no board succeeded and one was unreachable"


def test_one_argument_is_a_shell_line_several_are_an_exact_argv(fleet_env, orch_cli, tmp_path: Path):
    shell = orch_cli(fleet_env, "exec", "--host", "up", "--json", "--", "echo $((6*7)) | tr 4 X")
    assert json.loads(shell.stdout)["up"]["stdout"] == "X2\n"
    assert shell.returncode == 0
    marker = tmp_path / "pwned"
    exact = orch_cli(
        fleet_env, "exec", "--host", "up", "--json", "--", "echo", "$((6*7))", f";touch {marker}"
    )
    assert json.loads(exact.stdout)["up"]["stdout"] == f"$((6*7)) ;touch {marker}\n"
    assert not marker.exists()


def test_nonzero_exit_fails_the_run_and_is_named(fleet_env, orch_cli):
    result = orch_cli(fleet_env, "exec", "--host", "up", "--", "sh", "-c", "echo bad >&2; exit 5")
    assert result.returncode == 1
    assert "up  exit 5" in result.stderr and "bad" in result.stderr
    assert "1 board: 0 ok, 1 failed (up: exit 5)" in result.stderr


def test_a_hanging_board_times_out_while_the_other_completes(
    orch_env, orch_cli, client_key: Path, ssh_server: SshServer, make_server: Callable[..., SshServer]
):
    slow = make_server()
    write_inventory(orch_env, client_key, {"quick": ssh_server.port, "stuck": slow.port})
    # Same command everywhere; sshd's SSH_CONNECTION ends with the server port, so only `stuck` hangs.
    line = f'case "$SSH_CONNECTION" in *" {slow.port}") echo waiting; sleep 60;; esac; echo finished'
    start = time.monotonic()
    result = orch_cli(orch_env, "exec", "--all-devices", "--timeout", "3", "--json", "--", line)
    elapsed = time.monotonic() - start
    document = json.loads(result.stdout)
    assert document["quick"] == {**document["quick"], "exit_code": 0, "stdout": "finished\n", "error": None}
    assert document["stuck"]["exit_code"] is None
    assert "timed out after 3s" in document["stuck"]["error"]
    assert document["stuck"]["stdout"] == "waiting\n", "output received before the timeout is kept"
    assert result.returncode == 8
    assert elapsed < 20


def test_no_command_is_a_usage_error(fleet_env, orch_cli):
    result = orch_cli(fleet_env, "exec", "--all-devices")
    assert result.returncode == 2
    assert "needs a command after --" in result.stderr
    assert "Traceback" not in result.stderr


def test_selecting_an_unknown_board_lists_what_exists(fleet_env, orch_cli):
    result = orch_cli(fleet_env, "exec", "--host", "nope", "--", "true")
    assert result.returncode == 2
    # The whole sentence: "up" alone is found in "groups", whatever the message says of the boards.
    assert (
        "--host: no board named 'nope'; the inventory has boards: up, down; groups: (none)" in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_board_output_is_shown_verbatim(fleet_env, orch_cli):
    line = "echo '[bold]out[/] :smile:'; echo '[red]err[/] :thumbs_up:' >&2"
    result = orch_cli(fleet_env, "exec", "--host", "up", "--", line)
    assert result.returncode == 0
    assert "[bold]out[/] :smile:" in result.stderr
    assert "[red]err[/] :thumbs_up:" in result.stderr
