"""ssh_config's `Match exec "COMMAND"` as OpenSSH runs it: when orch connects to a board it applies
to, never while the inventory is read, listed or shown.

The command of each test is `touch MARK`: whether the file exists says whether it ran.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import pytest
from sshd_server import SshServer

from orchestrator.adapters.ssh_config import resolve_on_connect
from orchestrator.fleet.inventory import load_inventory


@pytest.fixture
def env(orch_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """orch's private environment with an ssh_config of its own (written by each test)."""
    return {**orch_env, "ORCH_SSH_CONFIG": str(tmp_path / "ssh_config")}


def _write(env: dict[str, str], inventory: str, ssh_config: str) -> None:
    Path(env["ORCH_INVENTORY"]).write_text(inventory)
    Path(env["ORCH_SSH_CONFIG"]).write_text(ssh_config)


def test_listing_and_showing_never_run_a_match_exec_command(
    env: dict[str, str], tmp_path: Path, orch_cli
) -> None:
    mark, negated = tmp_path / "MARK", tmp_path / "NEGATED"
    _write(
        env,
        "all:\n  hosts:\n    pi01: {hostname: 127.0.0.1}\n    pi02: {}\n",
        f'Match exec "touch {mark}"\n  Port 2200\n'
        f'Match host pi02 !exec "touch {negated}"\n  User bob\n'
        "Host pi02\n  HostName 127.0.0.2\n  User carol\n",
    )
    for argv in (
        ("inventory", "list"),
        ("inventory", "list", "--json"),
        ("inventory", "show", "pi01"),
        ("inventory", "show", "pi02", "--json"),
        ("inventory", "list", "--limit", "pi*"),
        ("exec", "--host", "nope", "--", "true"),  # a selection error, after the inventory is read
    ):
        result = orch_cli(env, *argv, timeout=60)
        assert "Traceback" not in result.stderr, result.stderr
        assert not mark.exists() and not negated.exists(), f"`orch {' '.join(argv)}` ran a Match exec command"
    shown = json.loads(orch_cli(env, "inventory", "show", "pi02", "--json", check=True).stdout)["variables"]
    # Values outside the `Match exec` blocks are shown; what those blocks may set is said to be open.
    assert (shown["hostname"]["value"], shown["user"]["value"]) == ("127.0.0.2", "carol")
    assert shown["port"]["value"] == 22
    assert "`Match exec`" in shown["port"]["source"] and "decides on connection" in shown["port"]["source"]
    assert "ssh_config:1, 3" in shown["port"]["source"]


def test_the_connection_looks_the_board_up_with_match_exec(env: dict[str, str], tmp_path: Path) -> None:
    """In-process: the board the inventory made carries what the connection looks up; resolving it
    runs the command and applies the block, as `ssh` would."""
    mark = tmp_path / "MARK"
    _write(
        env, "all:\n  hosts:\n    pi01: {hostname: 127.0.0.1}\n", f'Match exec "touch {mark}"\n  Port 2200\n'
    )
    with pytest.MonkeyPatch.context() as patch:
        for key in ("ORCH_HOME", "ORCH_SSH_CONFIG"):
            patch.setenv(key, env[key])
        board = load_inventory(Path(env["ORCH_INVENTORY"])).boards["pi01"]
        assert not mark.exists() and board.port == 22
        resolved = resolve_on_connect(board)
    assert mark.exists()
    assert resolved.port == 2200 and resolved.hostname == "127.0.0.1"
    assert resolved.sources["port"].endswith("on connection")


def test_a_match_exec_command_runs_only_for_boards_its_line_applies_to(
    env: dict[str, str], tmp_path: Path
) -> None:
    """As in OpenSSH, the criteria of a Match line are tried in turn: the command runs only once
    those before it matched, and its exit code decides (`!exec` inverts it)."""
    _write(
        env,
        "all:\n  hosts:\n    pi01: {}\n    pi02: {}\n",
        f'Match host pi01 exec "echo run >> {tmp_path}/ran-%h"\n  Port 2201\n'
        f'Match host pi02 !exec "touch {tmp_path}/negated-%h; false"\n  Port 2202\n',
    )
    with pytest.MonkeyPatch.context() as patch:
        for key in ("ORCH_HOME", "ORCH_SSH_CONFIG"):
            patch.setenv(key, env[key])
        boards = load_inventory(Path(env["ORCH_INVENTORY"])).boards
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("ran", "negated"))) == []
        pi01 = resolve_on_connect(boards["pi01"])
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("ran", "negated"))) == [
            "ran-pi01"
        ]
        pi02 = resolve_on_connect(boards["pi02"])
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("ran", "negated"))) == [
        "negated-pi02",
        "ran-pi01",
    ]
    assert (pi01.port, pi02.port) == (2201, 2202)
    assert (tmp_path / "ran-pi01").read_text() == "run\n", "the command runs once per connection"


def test_a_match_exec_line_runs_on_connection_to_a_board_it_applies_to(
    env: dict[str, str], tmp_path: Path, ssh_server: tuple[SshServer, Path], orch_cli
) -> None:
    """A real sshd: the board's port, user and key come only from a `Match exec` block, so `orch exec`
    reaches the board only if the block is applied when it connects; listing never runs it."""
    server, key = ssh_server
    mark = tmp_path / "MARK"
    _write(
        env,
        "all:\n  hosts:\n    b1: {hostname: 127.0.0.1}\n",
        f'Match exec "touch {mark}"\n  Port {server.port}\n  User {getpass.getuser()}\n  IdentityFile {key}\n',
    )
    listed = orch_cli(env, "inventory", "list", timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert "127.0.0.1:22" in listed.stdout + listed.stderr
    assert not mark.exists(), "`orch inventory list` ran the Match exec command"

    result = orch_cli(env, "exec", "--host", "b1", "--json", "--", "echo", "reached", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["b1"]["stdout"] == "reached\n"
    assert mark.exists(), "connecting to the board did not run its Match exec command"
