"""The lab, for real: containers, loopback-only ports, pre-recorded host keys, status, idempotent up, down."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from orchestrator.adapters.engine import Engine
from orchestrator.adapters.engine_containers import ContainerSummary
from orchestrator.lab.boards import LABEL_LAB, lab_id


def lab_boards_of(home: Path) -> list[tuple[str, int]]:
    """(name, port) of each board the lab's state file lists."""
    path = home / "lab" / "state.json"
    return [(b["name"], b["port"]) for b in json.loads(path.read_text())["boards"]] if path.exists() else []


def _lab_containers(home: Path) -> list[ContainerSummary]:
    return Engine().containers({LABEL_LAB: lab_id(home)})


def test_lab_up_runs_two_boards_published_on_loopback_only(lab) -> None:
    containers = {item.labels["orch.board"]: item for item in _lab_containers(lab.home)}
    assert sorted(containers) == ["lab1", "lab2"]
    engine = Engine()
    for board in lab.boards:
        item = containers[board.name]
        assert item.status == "running"
        assert item.name == f"orch-lab-{lab_id(lab.home)}-{board.name}"
        bindings = engine.port_bindings(item.name)["22/tcp"]
        # Every binding of sshd's port is on 127.0.0.1, and it is the port the inventory uses.
        assert [binding["HostIp"] for binding in bindings] == ["127.0.0.1"]
        assert int(bindings[0]["HostPort"]) == board.port
        assert board.hostname == "127.0.0.1" and board.user == "root" and board.target == "lab"
        assert board.identity_file == lab.home / "lab" / "id_ed25519"
        assert board.identity_file.stat().st_mode & 0o077 == 0, "the lab's private key must be private"


def test_known_hosts_holds_each_boards_key_and_the_board_presents_it(lab) -> None:
    lines = (lab.home / "known_hosts").read_text().splitlines()
    keyscan = shutil.which("ssh-keyscan")
    assert keyscan, "ssh-keyscan is missing: apt-get install openssh-client (or sudo scripts/setup)"
    for board in lab.boards:
        public = (
            (lab.home / "lab" / "hostkeys" / board.name / "ssh_host_ed25519_key.pub").read_text().split()[:2]
        )
        expected = f"[127.0.0.1]:{board.port} {' '.join(public)}"
        assert [line for line in lines if line.startswith(f"[127.0.0.1]:{board.port} ")] == [
            f"{expected} orch-lab-{lab_id(lab.home)}"
        ]
        scanned = subprocess.run(
            [keyscan, "-T", "30", "-t", "ed25519", "-p", str(board.port), "127.0.0.1"],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
        assert scanned[1:3] == public, f"{board.name} presents a host key orch did not record"


def test_lab_status_json_shows_healthy_boards(lab) -> None:
    result = lab.orch("lab", "status", "--json", check=True)
    document = json.loads(result.stdout)
    assert document["healthy"] is True
    assert {board["name"]: board["port"] for board in document["boards"]} == {
        b.name: b.port for b in lab.boards
    }
    for board in document["boards"]:
        assert board["state"] == "running"
        assert board["host"] == "127.0.0.1"
        assert board["ssh_banner"].startswith("SSH-2.0-OpenSSH")


def test_lab_up_again_keeps_running_boards(lab) -> None:
    before = {item.name: item.id for item in _lab_containers(lab.home)}
    result = lab.orch("lab", "up", "--boards", "2", check=True)
    # The lab's own count (every `lab up` prints its boards' table, so a board's name is always there).
    assert f": {len(lab.boards)} board(s) up in " in result.stderr, result.stderr
    assert {item.name: item.id for item in _lab_containers(lab.home)} == before
    assert lab_boards_of(lab.home) == [(b.name, b.port) for b in lab.boards]


def test_lab_rejects_bad_board_counts(orch_env: dict[str, str], orch_cli) -> None:
    for count in ("0", "99"):
        result = orch_cli(orch_env, "lab", "up", "--boards", count)
        assert result.returncode == 2
        assert "--boards must be between 1 and 64" in result.stderr
        assert "Traceback" not in result.stderr
    result = orch_cli(orch_env, "lab")
    assert result.returncode == 2 and "orch lab up" in result.stderr


def test_a_second_lab_grows_heals_and_goes_down_without_touching_the_first(lab, orch_env, orch_cli) -> None:
    env = orch_env
    home = Path(env["ORCH_HOME"])
    assert lab_id(home) != lab_id(lab.home)
    first_lab = {item.id for item in _lab_containers(lab.home)}
    try:
        # Two `lab up` at once in one ORCH_HOME: both succeed, one board exists, not two or a name clash.
        command = [sys.executable, "-m", "orchestrator", "lab", "up", "--boards", "1"]
        racers = [
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        outputs = [racer.communicate(timeout=600) for racer in racers]
        assert [racer.returncode for racer in racers] == [0, 0], outputs
        assert [name for name, _ in lab_boards_of(home)] == ["lab1"]
        assert len(_lab_containers(home)) == 1
        orch_cli(env, "lab", "up", "--boards", "2", check=True)
        assert [name for name, _ in lab_boards_of(home)] == ["lab1", "lab2"]

        # A board whose container died shows as unhealthy, and `lab up` brings it back with its key recorded.
        Engine().kill(f"orch-lab-{lab_id(home)}-lab2")
        status = orch_cli(env, "lab", "status", "--json")
        assert status.returncode == 1
        document = json.loads(status.stdout)
        assert [b["healthy"] for b in document["boards"]] == [True, False]
        orch_cli(env, "lab", "up", check=True)
        healed = json.loads(orch_cli(env, "lab", "status", "--json", check=True).stdout)
        assert healed["healthy"] is True and len(healed["boards"]) == 2
        port2 = lab_boards_of(home)[1][1]
        assert any(
            line.startswith(f"[127.0.0.1]:{port2} ssh-ed25519 ")
            for line in (home / "known_hosts").read_text().splitlines()
        )
    finally:
        down = orch_cli(env, "lab", "down", "--json")
    assert down.returncode == 0, down.stderr
    assert sorted(json.loads(down.stdout)["removed"]) == [
        f"orch-lab-{lab_id(home)}-lab1",
        f"orch-lab-{lab_id(home)}-lab2",
    ]
    assert _lab_containers(home) == []
    assert not (home / "lab" / "state.json").exists()
    assert "orch-lab-" not in (home / "known_hosts").read_text()
    # Keys stay as a cache; the session's lab is untouched.
    assert (home / "lab" / "id_ed25519").exists()
    assert {item.id for item in _lab_containers(lab.home)} == first_lab
    assert json.loads(orch_cli(env, "lab", "status", "--json").stdout)["boards"] == []
