"""Large inventories: 10,000 boards read right (values, sources, groups, line numbers in errors),
the fast paths give exactly what PyYAML's own constructor gives, and the fast table draws what
rich draws. Speed itself is measured by benchmarks/inventory_scale.py, not asserted here."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

import orchestrator.console as console_module
from orchestrator.errors import InventoryError
from orchestrator.fleet.inventory import load_inventory

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from inventory_scale import write_inventory  # the benchmark's own generator


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ORCH_SSH_CONFIG", str(tmp_path / "ssh_config"))
    return tmp_path


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "inventory.yaml"
    write_inventory(path, 10_000)
    return path


def _line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def test_ten_thousand_boards_resolve_with_their_groups_and_sources(env: Path, big: Path) -> None:
    inventory = load_inventory(big)
    assert len(inventory.boards) == 10_000
    assert len(inventory.groups) == 100
    board = inventory.boards["h07777"]
    # 10,000 boards over 90 racks: 112 per rack; board 7777 is in rack 69 = region 7, rack 6.
    assert board.groups == ("r7", "rack-7-6")
    assert (board.hostname, board.port) == ("10.0.30.97", 2277)
    assert board.tags == ("camera", "shelf-17", "row-0")
    assert (board.user, board.target, board.workdir) == ("ops6", "rpi4", "orch")
    assert board.sources["port"] == f"host h07777 ({big}:{_line_of(big, '            h07777:') + 2})"
    assert board.sources["user"] == f"group rack-7-6 ({big}:{_line_of(big, '        rack-7-6:') + 1})"
    assert board.sources["target"] == f"group r7 ({big}:{_line_of(big, '    r7:') + 1})"
    assert board.extra["serial"] == "SN0000007777"
    assert board.extra["slot"] == 77
    assert inventory.groups["r7"][0] == "h07056" and len(inventory.groups["r7"]) == 9 * 112
    assert [b.name for b in inventory.select(limit="r3:!h0300*")][:2] == ["h03024", "h03025"]


def test_an_error_deep_in_a_large_inventory_names_its_line_and_key(env: Path, big: Path) -> None:
    lines = big.read_text().splitlines()
    target = lines.index("            h08123:") + 2  # the port line of board h08123 (0-based)
    lines[target] = lines[target].replace("port:", "prot:")
    broken = env / "broken.yaml"
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(InventoryError) as raised:
        load_inventory(broken)
    assert raised.value.message == (
        f"{broken}:{target + 1}: host 'h08123': unknown key 'prot' (did you mean 'port'?)"
    )


VALUES = """\
all:
  hosts:
    pi01:
      hostname: 127.0.0.1
      port: 0x16
      tags: ["007", camera]
      vars:
        octal: 010
        hex: 0x1F
        zero: 0
        big: 12345678901234567890
        under: 1_000
        sexagesimal: 1:30
        neg: -5
        float: 1.5e3
        inf: .inf
        yes_word: yes
        off_word: Off
        tilde: ~
        empty:
        quoted_int: "42"
        single: 'it''s'
        when: 2026-12-01
        stamp: 2026-12-01T10:00:00Z
        block: |
          two
          lines
        nested: {list: [1, [2, "3"], {deep: null}], text: plain words}
        unicode: Grüße
"""


def test_values_are_what_pyyaml_makes_of_them(env: Path) -> None:
    """The direct construction of anchor-free documents equals PyYAML's SafeConstructor, value
    for value and type for type (octal, hex, sexagesimal, bools, timestamps, nesting)."""
    path = env / "inventory.yaml"
    path.write_text(VALUES)
    board = load_inventory(path).boards["pi01"]
    expected = yaml.safe_load(VALUES)["all"]["hosts"]["pi01"]
    assert board.extra == expected["vars"]
    assert {key: type(value) for key, value in board.extra.items()} == {
        key: type(value) for key, value in expected["vars"].items()
    }
    assert board.port == 22 and board.tags == ("007", "camera")


def test_anchored_and_plain_documents_resolve_alike(env: Path) -> None:
    """With anchors the document goes through PyYAML's constructor (shared nodes, merges are
    refused), without them through the direct path: the boards are the same."""
    plain = env / "plain.yaml"
    anchored = env / "anchored.yaml"
    plain.write_text(VALUES)
    anchored.write_text(VALUES.replace("      vars:\n", "      vars: &v\n") + "    pi02: {vars: *v}\n")
    one = load_inventory(plain).boards["pi01"]
    other = load_inventory(anchored).boards
    assert other["pi01"].extra == one.extra and other["pi02"].extra == one.extra


def test_deep_but_small_values_are_not_taken_for_an_alias_bomb(env: Path) -> None:
    """40,000 values nested 60 levels deep are 40,000 values, far below the 2,000,000 limit
    (counting each value once per enclosing level would make them 2.4 million)."""
    nested = "[" * 55 + ", ".join(["x"] * 40_000) + "]" * 55
    path = env / "inventory.yaml"
    path.write_text(f"all:\n  hosts:\n    pi01:\n      vars:\n        deep: {nested}\n")
    value = load_inventory(path).boards["pi01"].extra["deep"]
    for _ in range(54):
        value = value[0]
    assert len(value) == 40_000


def _rich(console: Console, title: str, columns: list[str], rows: list[tuple[str, ...]]) -> None:
    table = Table(title=escape(title), title_justify="left")
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console.print(table)


@pytest.mark.parametrize("terminal", [False, True], ids=["plain", "terminal"])
@pytest.mark.parametrize(
    "rows",
    [
        [],
        [("pi01", "127.0.0.1:22")],
        [("h00001", "10.0.0.1:2201"), ("Grüße-日本", ""), ("x", "[red]not markup[/]")],
        [("a" * 70, "b" * 70)],  # wider than the console: rich folds it
        [("tab\there", "x")],  # not printable as one line: rich's way
    ],
    ids=["empty", "one", "wide-chars-and-brackets", "too-wide", "control-character"],
)
def test_the_fast_table_draws_what_rich_draws(
    terminal: bool, rows: list[tuple[str, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    title = "inventory.yaml: [3] board(s)"
    drawn = []
    for draw in ("rich", "orch"):
        console = Console(file=io.StringIO(), width=100, force_terminal=terminal, highlight=False)
        if draw == "rich":
            _rich(console, title, ["name", "address"], rows)
        else:
            monkeypatch.setattr(console_module, "console", console)
            console_module.print_table(title, ["name", "address"], rows)
        drawn.append(console.file.getvalue())  # type: ignore[attr-defined]
    assert drawn[1] == drawn[0]
