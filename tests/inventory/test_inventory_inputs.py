"""Inputs a careless user gives the inventory commands: a named pipe as the inventory (read when a
command writes to it, `-i <(cmd)`; refused when nothing does) or ssh_config, an ORCH_HOME that is a
file, a mistyped --limit over 10,000 boards, a file full of typos. Each ends at once with one clear
message and exit code 2, through the real CLI."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.errors import InventoryError
from orchestrator.fleet import inventory_yaml
from orchestrator.fleet.inventory import load_inventory


@pytest.fixture
def env(orch_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return {**orch_env, "ORCH_SSH_CONFIG": str(tmp_path / "no-ssh-config")}


def _ten_thousand(path: Path, board: str = "{{hostname: 10.0.{0}.{1}}}") -> Path:
    lines = ["all:", "  children:", "    rpis:", "      hosts:"]
    lines += [f"        b{i:05d}: " + board.format(i // 250, i % 250 + 1) for i in range(10_000)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _in_process(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    """``orch ARGV`` run by the CLI's own entry point in this process, with ``env``'s locations."""
    for key in ("ORCH_HOME", "ORCH_INVENTORY", "ORCH_SSH_CONFIG", "COLUMNS"):
        monkeypatch.setenv(key, env[key])
    return cli.main(list(argv))


def _write_later(fifo: Path, text: str, delay: float) -> threading.Thread:
    """A writer that opens ``fifo`` (waiting for its reader), writes ``text`` after ``delay`` s, closes it."""

    def write() -> None:
        with fifo.open("w") as pipe:
            time.sleep(delay)
            pipe.write(text)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_named_pipe_a_command_writes_to_is_read_as_the_inventory(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "inventory.fifo"
    os.mkfifo(fifo)  # as `-i <(cmd)` gives one: its writer comes, then writes, then closes it
    writer = _write_later(fifo, "all:\n  hosts:\n    pi01: {hostname: 192.0.2.1}\n    pi02: {}\n", 0.5)
    assert _in_process(env, monkeypatch, "inventory", "list", "-i", str(fifo), "--json") == 0
    writer.join(10)
    listed = json.loads(capsys.readouterr().out)
    assert [board["name"] for board in listed["boards"]] == ["pi01", "pi02"], listed


def test_the_inventory_on_stdin_through_a_pipe_is_read(env: dict[str, str], orch_cli) -> None:
    # A real process whose stdin is a pipe: /dev/stdin is that pipe.
    text = "all:\n  hosts:\n    pi01: {hostname: 192.0.2.1}\n"
    result = orch_cli(env, "inventory", "list", "-i", "/dev/stdin", "--json", input=text, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [board["name"] for board in json.loads(result.stdout)["boards"]] == ["pi01"]


def test_a_named_pipe_nothing_writes_to_is_refused_within_the_wait(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "inventory.fifo"
    os.mkfifo(fifo)  # no writer: opening it for reading the usual way would wait for ever
    monkeypatch.setattr(inventory_yaml, "PIPE_WAIT_S", 1.0)
    unblocked = threading.Event()

    def unblock() -> None:  # a reader stuck in open() would keep the test waiting: a writer frees it
        if not done.wait(30):
            unblocked.set()
            os.close(os.open(fifo, os.O_WRONLY))

    done = threading.Event()
    threading.Thread(target=unblock, daemon=True).start()
    started = time.monotonic()
    code = _in_process(env, monkeypatch, "inventory", "list", "-i", str(fifo))
    took = time.monotonic() - started
    done.set()
    assert not unblocked.is_set(), "orch waited for a writer that never came"
    assert code == 2 and 1.0 <= took < 10, (code, took)
    err = " ".join(capsys.readouterr().err.split())
    assert f"{fifo}: is a named pipe (FIFO) that nothing wrote to within 1s: not an inventory" in err, err
    assert "Traceback" not in err


def test_a_named_pipe_as_ssh_config_is_refused_not_waited_for(
    env: dict[str, str], tmp_path: Path, orch_cli
) -> None:
    fifo = tmp_path / "ssh_config.fifo"
    os.mkfifo(fifo)  # no writer: opening it for reading would wait for ever
    Path(env["ORCH_INVENTORY"]).write_text("all:\n  hosts:\n    pi01: {}\n")  # a board: ssh_config is read
    result = orch_cli({**env, "ORCH_SSH_CONFIG": str(fifo)}, "inventory", "list", timeout=30)
    assert result.returncode == 2, result.stderr
    assert "is a named pipe (FIFO), not a regular file: not an ssh_config" in result.stderr


def test_orch_home_naming_a_file_says_what_is_wrong(env: dict[str, str], tmp_path: Path, orch_cli) -> None:
    home = tmp_path / "home-file"
    home.write_text("not a directory\n")
    for argv in (("inventory", "list"), ("lab", "status"), ("exec", "--all-devices", "--", "true")):
        result = orch_cli({**env, "ORCH_HOME": str(home)}, *argv, timeout=60)
        assert result.returncode == 2, result.stderr
        assert f"{home}: ORCH_HOME is a file, not a directory" in " ".join(result.stderr.split())
        assert "Traceback" not in result.stderr
    assert home.read_text() == "not a directory\n"
    nested = orch_cli({**env, "ORCH_HOME": str(home / "sub")}, "inventory", "list", timeout=60)
    assert nested.returncode == 2
    assert "a part of this path is a file, not a directory" in " ".join(nested.stderr.split())


def test_a_mistyped_limit_over_ten_thousand_boards_says_it_in_a_few_lines(
    env: dict[str, str], tmp_path: Path, orch_cli
) -> None:
    path = _ten_thousand(tmp_path / "big.yaml")
    result = orch_cli(env, "inventory", "list", "-i", str(path), "--limit", "rpiz", timeout=120)
    assert result.returncode == 2
    assert "'rpiz' is neither a board nor a group (did you mean 'rpis'?)" in result.stderr
    assert "b00019 ... and 9,980 more" in " ".join(result.stderr.split())
    assert "b00020" not in result.stderr
    assert len(result.stderr) < 3000, f"{len(result.stderr)} characters of error"


def test_every_bad_key_is_named_with_its_line_in_one_run(
    env: dict[str, str], tmp_path: Path, orch_cli
) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(
        "all:\n"
        "  vars: {usr: orch}\n"  # 2
        "  hosts:\n"
        "    pi01: {hostname: 127.0.0.1, prot: 22}\n"  # 4
        "    pi02: {hostname: 'pi02;reboot', port: 99999}\n"  # 5
        "  children:\n"
        "    rpis:\n"
        "      hosts:\n"
        "        pi03: {proxy_jump: 'j:abc', password: hunter2}\n"  # 9
        "      vars: {target: rpi9}\n"  # 10
    )
    result = orch_cli(env, "inventory", "list", "-i", str(path), timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    output = " ".join(result.stderr.split())
    assert len(re.findall(r"^error:", result.stderr, re.MULTILINE)) == 1
    assert f"7 problems in {path}" in output
    for line, key in [
        (2, "usr"),
        (4, "prot"),
        (5, "hostname"),
        (5, "port"),
        (9, "proxy_jump"),
        (9, "password"),
        (10, "target"),
    ]:
        assert re.search(rf"{re.escape(str(path))}:{line}: [^:]*: (unknown )?key '{key}'", output), (
            line,
            key,
            output,
        )
    assert "hunter2" not in output


def test_a_typo_on_every_board_names_the_first_fifty_and_counts_the_rest(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _ten_thousand(tmp_path / "big.yaml", board="{{hostname: 10.0.{0}.{1}, prot: 22}}")
    monkeypatch.setenv("ORCH_HOME", env["ORCH_HOME"])
    monkeypatch.setenv("ORCH_SSH_CONFIG", env["ORCH_SSH_CONFIG"])
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    lines = caught.value.message.splitlines()
    assert lines[0] == f"10000 problems in {path}:"
    assert lines[1].startswith(f"  {path}:5: host 'b00000': unknown key 'prot'")
    assert len(lines) == 52
    assert lines[-1] == "  ... and 9950 more (fix these and run again)"
