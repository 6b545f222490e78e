"""`orch inventory`: list the boards of the inventory or show one board's resolved variables."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from rich.markup import escape

from orchestrator.adapters import ssh
from orchestrator.board import Board
from orchestrator.commands.options import (
    Selection,
    add_inventory_option,
    add_json_option,
    add_selection_options,
)
from orchestrator.console import console, emit_json, print_table
from orchestrator.deploy.release_listing import layout_for
from orchestrator.fleet.board_facts import BoardFacts
from orchestrator.fleet.board_probe import read_facts
from orchestrator.fleet.inventory import load_inventory

NAME = "inventory"
HELP = "list the boards of the inventory or show one board's resolved variables"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="inventory_action", metavar="ACTION")
    list_parser = actions.add_parser(
        "list", help="a table of the boards (all of them unless a selection is given)"
    )
    add_selection_options(list_parser)
    add_json_option(list_parser)
    show_parser = actions.add_parser(
        "show", help="every resolved variable of one board and where it came from"
    )
    show_parser.add_argument("name", metavar="NAME", help="the board's name")
    show_parser.add_argument(
        "--probe",
        action="store_true",
        help="also connect and show what the board reports: architecture, kernel, glibc, Python, OS, CPU"
        " features, and whether it can count its own instructions and cycles (hardware counters)",
    )
    add_inventory_option(show_parser)
    add_json_option(show_parser)
    for sub in (list_parser, show_parser):
        # --debug after the action too; SUPPRESS keeps the value given earlier on the line.
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def board_document(board: Board) -> dict[str, object]:
    """A board as JSON: every field, paths as strings.

    Field by field rather than ``dataclasses.asdict``, whose deep copies of ``extra`` and
    ``sources`` took a third of a second for 10,000 boards; the JSON text is the same."""
    document = {item.name: getattr(board, item.name) for item in dataclasses.fields(board)}
    document["extra"] = dict(board.extra)
    document["sources"] = dict(board.sources)
    document["identity_file"] = str(board.identity_file) if board.identity_file else None
    document["tags"] = list(board.tags)
    document["groups"] = list(board.groups)
    document["address"] = board.address
    # Internal: what the connection looks up again (`sources` says it to users).
    del document["ssh_config_on_connect"]
    return document


InventoryAction = Literal["list", "show"]


@dataclass(frozen=True, kw_only=True)
class InventoryRequest:
    """`orch inventory ACTION` as parsed. `orch inventory` alone lists every board of the default
    inventory."""

    action: InventoryAction
    selection: Selection  # the inventory file, and for `list` the boards asked for
    name: str | None = None  # `show`'s board
    json: bool = False
    probe: bool = False  # `show --probe`: the board's own facts too, read over SSH

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> InventoryRequest:
        action: InventoryAction | None = getattr(args, "inventory_action", None)
        if action == "show":
            return cls(
                action="show",
                selection=Selection(inventory=args.inventory),
                name=args.name,
                json=args.json,
                probe=args.probe,
            )
        if action is None:
            return cls(action="list", selection=Selection())
        return cls(action="list", selection=Selection.from_args(args), json=args.json)

    @property
    def inventory_path(self) -> Path:
        return self.selection.inventory_path


def _list(request: InventoryRequest) -> int:
    inventory = load_inventory(request.inventory_path)
    selection = request.selection
    if selection.hosts or selection.groups or selection.all_devices or selection.limit is not None:
        boards = inventory.select(
            hosts=selection.hosts,
            groups=selection.groups,
            all_devices=selection.all_devices,
            limit=selection.limit,
        )
    else:
        boards = list(inventory.boards.values())
    if request.json:
        emit_json(
            {
                "inventory": str(inventory.path),
                "boards": [board_document(board) for board in boards],
                "groups": inventory.groups,
            }
        )
        return 0
    if not boards:
        console.print(
            f"{escape(str(inventory.path))}: no boards (start the lab with `orch lab up`, or add boards)"
        )
        return 0
    rows = [
        (
            board.name,
            board.address,
            board.user or "-",
            board.target,
            ", ".join(board.groups) or "-",
            ", ".join(board.tags) or "-",
        )
        for board in boards
    ]
    print_table(
        f"{inventory.path}: {len(boards)} board(s)",
        ("name", "address", "user", "target", "groups", "tags"),
        rows,
    )
    return 0


class _Variable(TypedDict):
    """A board's variable in ``orch inventory show``: its value and where it came from."""

    value: object
    source: str  # "inventory", "ssh_config", "default"...


def _show(request: InventoryRequest, name: str) -> int:
    board = load_inventory(request.inventory_path).board(name)
    document = board_document(board)
    variables = {
        key: _Variable(value=document[key], source=board.sources.get(key, "default"))
        for key in (
            "hostname",
            "port",
            "user",
            "identity_file",
            "proxy_jump",
            "target",
            "python",
            "workdir",
            "tags",
        )
    }
    for key, value in board.extra.items():
        variables[f"vars.{key}"] = _Variable(
            value=value, source=board.sources.get(f"vars.{key}", "inventory")
        )
    facts = _probe(board) if request.probe else None
    if request.json:
        emit_json(
            {
                "name": board.name,
                "groups": list(board.groups),
                "variables": variables,
                **({"facts": facts.as_dict()} if facts else {}),
            }
        )
        return 0
    rows = []
    for key, entry in variables.items():
        value = entry["value"]
        shown = (
            "-"
            if value is None
            else (", ".join(map(str, value)) or "-")
            if isinstance(value, list)
            else str(value)
        )
        rows.append((key, shown, entry["source"]))
    print_table(
        f"board {board.name} (groups: {', '.join(board.groups) or '-'})",
        ("variable", "value", "source"),
        rows,
    )
    if facts:
        print_table(
            f"what {board.name} reports",
            ("fact", "value"),
            [
                (key, ", ".join(map(str, value)) if isinstance(value, list) else str(value))
                for key, value in facts.as_dict().items()
            ],
        )
    return 0


def _probe(board: Board) -> BoardFacts:
    """The board's facts, read over SSH (board_facts.sh), hardware counters included."""
    with ssh.connect(board) as session:
        return read_facts(session, board, layout_for(board).workdir)


def run(args: argparse.Namespace) -> int:
    request = InventoryRequest.from_args(args)
    if request.action == "show" and request.name is not None:
        return _show(request, request.name)
    return _list(request)
