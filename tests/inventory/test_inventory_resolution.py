"""Variable precedence, where each value came from, ssh_config defaults, and the lab's boards."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from orchestrator.errors import InventoryError
from orchestrator.fleet.inventory import load_inventory
from orchestrator.paths import PROJECT_ROOT

PRECEDENCE = """\
all:
  vars: {user: alluser, port: 2200, workdir: w-all, python: py-all}
  hosts:
    nano01: {hostname: 127.0.0.1, target: jetson}
  children:
    rpis:
      vars: {target: pi4, port: 2201, python: py-rpis}
      hosts:
        pi01: {hostname: 127.0.0.2, tags: [camera], identity_file: keys/pi01, vars: {camera: csi}}
      children:
        pi5s:
          vars: {target: rpi5}
          hosts: {pi02: {port: 2202}}
    fast: {children: {pi5s: {}}}
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ORCH_HOME and ssh_config path (absent until a test writes it)."""
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ORCH_SSH_CONFIG", str(tmp_path / "ssh_config"))
    return tmp_path


def write(directory: Path, text: str, name: str = "inventory.yaml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_host_beats_nearest_group_beats_parent_beats_all(env: Path) -> None:
    path = write(env, PRECEDENCE)
    boards = load_inventory(path).boards
    pi02, pi01, nano01 = boards["pi02"], boards["pi01"], boards["nano01"]

    assert (pi02.port, pi02.sources["port"]) == (2202, f"host pi02 ({path}:13)")
    assert (pi02.target, pi02.sources["target"]) == ("rpi5", f"group pi5s ({path}:12)")
    assert (pi02.python, pi02.sources["python"]) == ("py-rpis", f"group rpis ({path}:7)")
    assert (pi02.user, pi02.sources["user"]) == ("alluser", f"all ({path}:2)")
    assert (pi02.hostname, pi02.sources["hostname"]) == ("pi02", "default (the board name)")
    assert (pi02.proxy_jump, pi02.sources["proxy_jump"]) == (None, "default")

    # Aliases are stored by their canonical profile name.
    assert (pi01.target, pi01.sources["target"]) == ("rpi4", f"group rpis ({path}:7)")
    assert (nano01.target, nano01.sources["target"]) == ("jetson-orin", f"host nano01 ({path}:4)")
    assert (pi01.port, nano01.port) == (2201, 2200)
    assert pi01.tags == ("camera",) and pi02.tags == ()
    assert pi01.extra == {"camera": "csi"}
    # A relative key path is relative to the inventory file, not to wherever orch runs.
    assert pi01.identity_file == env / "keys" / "pi01"
    assert nano01.groups == () and pi01.groups == ("rpis",)


SSH_CONFIG = """\
Host pi02
  HostName 127.0.0.5
  User sshuser
  Port 2022
  IdentityFile ~/.ssh/id_pi02
  ProxyJump jump@127.0.0.1:2200

Host 127.0.0.2
  User byaddress
  IdentityFile /keys/by-address

Host pi03
  User sshpi03

Host *
  User everyone
"""

SSH_INVENTORY = """\
all:
  hosts:
    pi02: {port: 2222}
    pi01: {hostname: 127.0.0.2}
    nano01: {}
  children:
    staff:
      vars: {user: staffer}
      hosts: {pi03: {}}
"""


def test_ssh_config_fills_what_the_inventory_leaves_out(env: Path) -> None:
    ssh_config = write(env, SSH_CONFIG, "ssh_config")
    boards = load_inventory(write(env, SSH_INVENTORY)).boards
    source = f"ssh_config ({ssh_config})"
    pi02 = boards["pi02"]
    assert (pi02.hostname, pi02.sources["hostname"]) == ("127.0.0.5", source)
    assert (pi02.user, pi02.identity_file) == ("sshuser", Path.home() / ".ssh" / "id_pi02")
    assert pi02.proxy_jump == "jump@127.0.0.1:2200"
    assert pi02.sources["proxy_jump"] == source
    assert (pi02.port, pi02.sources["port"].startswith("host pi02")) == (2222, True)  # the inventory wins
    # No Host block names pi01: ssh_config is consulted by its address, like `ssh 127.0.0.2`.
    pi01 = boards["pi01"]
    assert (pi01.user, pi01.identity_file, pi01.port) == ("byaddress", Path("/keys/by-address"), 22)
    assert pi01.sources["hostname"].startswith("host pi01")
    assert (boards["nano01"].user, boards["nano01"].hostname) == ("everyone", "nano01")
    # Group and all vars beat ssh_config too.
    assert (boards["pi03"].user, boards["pi03"].sources["user"]) == (
        "staffer",
        f"group staff ({env / 'inventory.yaml'}:8)",
    )


def test_a_bad_port_in_ssh_config_names_that_file(env: Path) -> None:
    write(env, "Host pi01\n  Port twenty-two\n", "ssh_config")
    with pytest.raises(InventoryError, match=r"ssh_config: Port for 'pi01' must be an integer"):
        load_inventory(write(env, "all:\n  hosts:\n    pi01: {}\n"))


def _write_lab_state(env: Path) -> None:
    lab = env / "home" / "lab"
    lab.mkdir(parents=True)
    (lab / "state.json").write_text(
        json.dumps(
            {
                "user": "root",
                "identity_file": str(lab / "id_ed25519"),
                "boards": [
                    {
                        "name": f"lab{i}",
                        "port": 22000 + i,
                        "container": f"orch-lab-x-lab{i}",
                        "target": "lab",
                        "workdir": "orch",
                    }
                    for i in (1, 2)
                ],
            }
        )
    )


def test_lab_boards_join_every_inventory_in_group_lab(env: Path) -> None:
    _write_lab_state(env)
    inventory = load_inventory(
        write(
            env,
            "all:\n  hosts: {pi01: {hostname: 127.0.0.2}}\n"
            "  children:\n    everything:\n      children: {lab: {}}\n",
        )
    )
    assert list(inventory.boards) == ["pi01", "lab1", "lab2"]
    assert inventory.groups["lab"] == ["lab1", "lab2"]
    assert inventory.groups["everything"] == ["lab1", "lab2"]  # a user group may contain the lab
    lab1 = inventory.board("lab1")
    assert (lab1.hostname, lab1.port, lab1.user, lab1.target) == ("127.0.0.1", 22001, "root", "lab")
    assert lab1.groups == ("lab", "everything")
    assert lab1.sources["port"].startswith("lab (")
    assert [board.name for board in inventory.select(groups=["lab"], limit="!lab1")] == ["lab2"]


def test_a_user_board_may_not_take_a_lab_boards_name(env: Path) -> None:
    _write_lab_state(env)
    path = write(env, "all:\n  hosts:\n    lab2: {hostname: 127.0.0.2}\n")
    with pytest.raises(
        InventoryError, match=re.escape(f"{path}:3: host 'lab2': the name 'lab2' belongs to a running lab")
    ):
        load_inventory(path)


def _cli_env(env: Path) -> dict[str, str]:
    # A wide terminal: table cells stay on one line.
    return {
        **os.environ,
        "ORCH_HOME": str(env / "home"),
        "ORCH_SSH_CONFIG": str(env / "ssh_config"),
        "COLUMNS": "250",
    }


def test_cli_list_and_show(env: Path, orch_cli) -> None:
    path = write(env, PRECEDENCE)
    listed = orch_cli(
        _cli_env(env), "inventory", "list", "-i", str(path), "--group", "rpis", "--json", timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert [board["name"] for board in document["boards"]] == ["pi01", "pi02"]
    assert document["boards"][0]["address"] == "127.0.0.2:2201"

    table = orch_cli(_cli_env(env), "inventory", "list", "-i", str(path), timeout=60)
    assert table.returncode == 0 and table.stdout == ""
    assert all(
        text in table.stderr
        for text in ("nano01", "127.0.0.1:2200", "jetson-orin", "rpis, pi5s, fast", "camera")
    )

    shown = orch_cli(_cli_env(env), "inventory", "show", "pi02", "-i", str(path), "--json", timeout=60)
    variables = json.loads(shown.stdout)["variables"]
    assert variables["target"] == {"value": "rpi5", "source": f"group pi5s ({path}:12)"}
    assert variables["hostname"] == {"value": "pi02", "source": "default (the board name)"}

    human = orch_cli(_cli_env(env), "inventory", "show", "pi01", "-i", str(path), timeout=60)
    assert "vars.camera" in human.stderr and "csi" in human.stderr and f"host pi01 ({path}:9)" in human.stderr

    nothing = orch_cli(_cli_env(env), "inventory", "list", "-i", str(path), "--limit", "jetson*", timeout=60)
    assert nothing.returncode == 2
    assert "selects no board; the inventory has boards: nano01, pi01, pi02" in nothing.stderr


def test_shipped_inventory_has_no_boards_and_a_working_example(env: Path) -> None:
    shipped = PROJECT_ROOT / "inventory.yaml"
    text = shipped.read_text()
    assert load_inventory(shipped).boards == {}
    # Every address the file mentions is a documentation address (RFC 5737), never a reachable board.
    addresses = re.findall(r"\b\d+\.\d+\.\d+\.\d+\b", text)
    assert addresses and all(address.startswith("192.0.2.") for address in addresses)
    # The commented example is valid: uncommented, it loads with the documented groups.
    example = re.sub(r"^#(  )", r"\1", text, flags=re.MULTILINE)
    boards = load_inventory(write(env, example)).boards
    assert list(boards) == ["nano01", "pi01", "pi02"]
    assert boards["pi02"].groups == ("rpis", "pi5s", "fast")


def test_a_board_listed_in_several_groups_is_one_board(env: Path) -> None:
    path = write(
        env,
        "all:\n"
        "  children:\n"
        "    rpis:\n"
        "      vars: {target: rpi4}\n"
        "      hosts:\n"
        "        pi01:\n"  # a bare reference first ...
        "    cameras:\n"
        "      hosts:\n"
        "        pi01: {hostname: 127.0.0.2, tags: [camera]}\n"  # ... described here
        "        pi02: {hostname: 127.0.0.3}\n"
        "    rpis:\n"
        "      hosts: {pi02: {hostname: 127.0.0.3}}\n",  # same settings again: fine
    )
    # Duplicate YAML keys are refused even when equal; a group repeated at one level is a duplicate key.
    with pytest.raises(InventoryError, match=re.escape(f"{path}:11: duplicate key 'rpis' (first at line 3)")):
        load_inventory(path)
    path = write(
        env,
        "all:\n"
        "  children:\n"
        "    rpis:\n"
        "      vars: {target: rpi4}\n"
        "      hosts:\n"
        "        pi01:\n"
        "    cameras:\n"
        "      hosts:\n"
        "        pi01: {hostname: 127.0.0.2, tags: [camera]}\n"
        "        pi02: {hostname: 127.0.0.3}\n"
        "      children:\n"
        "        rpis:\n"  # the same group by name, merged: its hosts add to the first definition
        "          hosts: {pi02: {hostname: 127.0.0.3}}\n",
    )
    inventory = load_inventory(path)
    assert list(inventory.boards) == ["pi01", "pi02"]
    pi01 = inventory.board("pi01")
    assert (pi01.hostname, pi01.target, pi01.tags) == ("127.0.0.2", "rpi4", ("camera",))
    assert pi01.sources["hostname"] == f"host pi01 ({path}:9)"
    assert inventory.groups == {"rpis": ["pi01", "pi02"], "cameras": ["pi01", "pi02"]}
    assert inventory.board("pi02").target == "rpi4"
