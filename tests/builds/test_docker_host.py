"""``--docker-host ssh://...`` address handling (pure; the real remote build is test_remote_engine.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.adapters.engine_ssh import build_host_board
from orchestrator.errors import UsageError


@pytest.fixture
def ssh_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(
        "Host bigbox\n  HostName 10.1.2.3\n  User builder\n  Port 2200\n  IdentityFile ~/.ssh/bigbox\n"
    )
    monkeypatch.setenv("ORCH_SSH_CONFIG", str(path))
    return path


def test_ssh_config_supplies_what_the_url_leaves_out(ssh_config: Path) -> None:
    board = build_host_board("ssh://bigbox")
    assert (board.name, board.hostname, board.user, board.port) == ("bigbox", "10.1.2.3", "builder", 2200)
    assert board.identity_file == Path("~/.ssh/bigbox").expanduser()


def test_user_and_port_in_the_url_win_over_ssh_config(ssh_config: Path) -> None:
    board = build_host_board("ssh://me@bigbox:2222")
    assert (board.hostname, board.user, board.port) == ("10.1.2.3", "me", 2222)


def test_a_host_ssh_config_does_not_name_is_used_as_given(ssh_config: Path) -> None:
    board = build_host_board("ssh://root@127.0.0.1:2022")
    assert (board.hostname, board.user, board.port) == ("127.0.0.1", "root", 2022)


@pytest.mark.parametrize(
    "url", ["ssh://", "ssh://host/var/run/docker.sock", "tcp://host:2375", "ssh://host:notaport"]
)
def test_malformed_docker_hosts_are_refused_with_the_address(url: str, ssh_config: Path) -> None:
    with pytest.raises(UsageError, match="--docker-host"):
        build_host_board(url)


def test_stock_variant_refuses_docker_host(orch_env: dict[str, str], orch_cli) -> None:
    result = orch_cli(
        orch_env, "build", "--target", "lab", "--variant", "stock", "--docker-host", "ssh://bigbox"
    )
    assert result.returncode == 2
    assert "--docker-host" in result.stderr and "not built" in result.stderr
