"""Board selection: --host/--group/--all-devices/--limit (Ansible patterns) over a real inventory file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestrator.errors import UsageError
from orchestrator.fleet.inventory import Inventory, load_inventory

EXAMPLE = """\
all:
  vars: {user: orch, workdir: orch}
  hosts:
    nano01: {hostname: 127.0.0.1, target: jetson-nano}
  children:
    rpis:
      vars: {target: rpi4}
      hosts:
        pi01: {hostname: 127.0.0.2, tags: [camera]}
      children:
        pi5s: {hosts: {pi02: {target: rpi5}}}
    fast: {children: {pi5s: {}}}
    empty: {}
"""


@pytest.fixture
def inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Inventory:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ORCH_SSH_CONFIG", str(tmp_path / "no-ssh-config"))
    path = tmp_path / "inventory.yaml"
    path.write_text(EXAMPLE)
    return load_inventory(path)


def names(boards: list) -> list[str]:
    return [board.name for board in boards]


def test_groups_are_flattened_and_merged_by_name(inventory: Inventory) -> None:
    assert list(inventory.boards) == ["nano01", "pi01", "pi02"]
    assert inventory.groups == {"rpis": ["pi01", "pi02"], "pi5s": ["pi02"], "fast": ["pi02"], "empty": []}
    assert inventory.board("pi02").groups == ("rpis", "pi5s", "fast")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"hosts": ["pi02", "nano01"]}, ["nano01", "pi02"]),  # inventory order, not argument order
        ({"groups": ["rpis"]}, ["pi01", "pi02"]),
        ({"groups": ["fast"]}, ["pi02"]),
        ({"hosts": ["pi02"], "groups": ["pi5s", "fast"]}, ["pi02"]),  # a union has no duplicates
        ({"all_devices": True}, ["nano01", "pi01", "pi02"]),
        ({"limit": "all"}, ["nano01", "pi01", "pi02"]),
        ({"limit": "*"}, ["nano01", "pi01", "pi02"]),
        ({"limit": "rpis:!pi01"}, ["pi02"]),
        ({"limit": "rpis:&fast"}, ["pi02"]),
        ({"limit": "!pi01"}, ["nano01", "pi02"]),  # only exclusions: start from everything
        ({"limit": "nano01:pi01"}, ["nano01", "pi01"]),
        ({"limit": "nano01,pi01"}, ["nano01", "pi01"]),
        ({"limit": "pi0[12]"}, ["pi01", "pi02"]),
        ({"limit": "p?5s"}, ["pi02"]),  # a glob over group names selects their members
        ({"limit": "*:!rpis"}, ["nano01"]),
        ({"limit": "!pi01:rpis"}, ["pi02"]),  # exclusions apply last, whatever their place
        ({"all_devices": True, "limit": "fast:nano01"}, ["nano01", "pi02"]),
        ({"groups": ["rpis"], "limit": "!pi02"}, ["pi01"]),  # --limit restricts the others
    ],
)
def test_selection(inventory: Inventory, options: dict, expected: list[str]) -> None:
    assert names(inventory.select(**options)) == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "no boards selected"),
        ({"hosts": ["pi1"]}, "--host: no board named 'pi1' (did you mean 'pi01'?)"),
        ({"groups": ["rpi"]}, "--group: no group named 'rpi' (did you mean 'rpis'?)"),
        ({"groups": ["empty"]}, "--group empty selects no board"),
        ({"limit": "fsat"}, "--limit: 'fsat' is neither a board nor a group (did you mean 'fast'?)"),
        ({"groups": ["rpis"], "limit": "nano01"}, "--group rpis --limit 'nano01' selects no board"),
        ({"limit": "jetson*"}, "--limit 'jetson*' selects no board"),
    ],
)
def test_selecting_nothing_says_what_exists(inventory: Inventory, options: dict, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        inventory.select(**options)
    assert message in caught.value.message
    assert "boards: nano01, pi01, pi02" in caught.value.message
    assert "groups: rpis (2), pi5s (1), fast (1), empty (0)" in caught.value.message


def test_unknown_board_by_name(inventory: Inventory) -> None:
    with pytest.raises(UsageError, match="no board named 'nano1' \\(did you mean 'nano01'\\?\\)"):
        inventory.board("nano1")


def test_an_empty_inventory_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    for text in ("", "all: {}\n", "all:\n"):
        path = tmp_path / "inventory.yaml"
        path.write_text(textwrap.dedent(text))
        inventory = load_inventory(path)
        assert inventory.boards == {}
        with pytest.raises(
            UsageError, match="--all-devices selects no board; the inventory has boards: \\(none\\)"
        ):
            inventory.select(all_devices=True)
