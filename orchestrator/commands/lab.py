"""`orch lab`: start, inspect and stop the lab of emulated aarch64 boards."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Literal, TypedDict

from rich.markup import escape
from rich.table import Table

from orchestrator import lab_state
from orchestrator.adapters.engine import Engine
from orchestrator.commands import options
from orchestrator.console import console, emit_json
from orchestrator.errors import UsageError
from orchestrator.lab.boards import (
    DEFAULT_BOARDS,
    BoardStatus,
    LabUpRequest,
    banner_timeout,
    lab_down,
    lab_id,
    lab_status,
    lab_up,
    parse_board_option,
    remaining_containers,
    wanted_board_count,
)

NAME = "lab"
HELP = "start, inspect and stop the lab of emulated aarch64 boards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="lab_command", metavar="ACTION")
    up = sub.add_parser("up", help="start the lab's boards (idempotent; running boards are kept)")
    up.add_argument(
        "--boards",
        type=int,
        default=None,
        metavar="N",
        help=f"run at least N boards lab1..labN (default: the running ones, or {DEFAULT_BOARDS})",
    )
    up.add_argument(
        "--board",
        action="append",
        default=[],
        metavar="PROFILE[:N]",
        help="also run N boards (default 1) emulating a target profile's CPU and OS, named PROFILE-1.."
        " and grouped as PROFILE, e.g. --board rpi5:1 --board rpi4-bookworm:1 (repeatable)",
    )
    up.add_argument(
        "--build-tools",
        action="store_true",
        help="the boards this call makes also carry a native C++ build toolchain (cmake, ninja, g++, ccache,"
        " Python headers, numpy) for building ONNX Runtime on the board; boards already running are not"
        " changed (`orch lab down` first to remake them)",
    )
    up.add_argument(
        "--timeout",
        type=options.positive_float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for every board's sshd (default: 180, plus 5 per board beyond 4)",
    )
    up.add_argument(
        "--json", action="store_true", help="print the lab's boards as one JSON document on stdout"
    )
    status = sub.add_parser("status", help="boards, ports, container state and SSH health")
    status.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    down = sub.add_parser("down", help="remove the lab's containers and state (keys and images stay cached)")
    down.add_argument("--json", action="store_true", help="print one JSON document on stdout")


LabAction = Literal["up", "status", "down"]


@dataclass(frozen=True, kw_only=True)
class LabRequest:
    """`orch lab ACTION` as parsed: the action, --json, and what `up` is asked for."""

    action: LabAction
    json: bool
    up: LabUpRequest | None = None  # the action "up" only

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LabRequest:
        """The options as given; a bad --boards or --board is refused here, before the engine is asked."""
        action: LabAction | None = getattr(args, "lab_command", None)
        if not action:
            raise UsageError(
                "say what to do with the lab: `orch lab up [--boards N]`, `orch lab status`, `orch lab down`"
            )
        if action != "up":
            return cls(action=action, json=args.json)
        wanted_board_count(args.boards, 0)
        profile_boards = tuple(parse_board_option(text) for text in args.board)
        extra = sum(item.count for item in profile_boards)
        timeout = args.timeout or banner_timeout((args.boards or DEFAULT_BOARDS) + extra)
        up = LabUpRequest(
            boards=args.boards, profile_boards=profile_boards, timeout=timeout, build_tools=args.build_tools
        )
        return cls(action=action, json=args.json, up=up)


def run(args: argparse.Namespace) -> int:
    request = LabRequest.from_args(args)
    engine = Engine()
    if request.action == "up" and request.up is not None:
        return _up(engine, request.up, as_json=request.json)
    if request.action == "status":
        return _status(engine, as_json=request.json)
    return _down(engine, as_json=request.json)


def _up(engine: Engine, request: LabUpRequest, *, as_json: bool) -> int:
    started = time.monotonic()
    with console.status("[bold]orch lab up[/]: checking the lab", spinner="dots") as status:

        def on_log(line: str) -> None:
            status.update(f"[bold]orch lab up[/]: {escape(line[-120:])}")
            if (
                line.startswith(("building", "importing", "$ ", "lab", "Step "))
                or "starting container" in line
            ):
                console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

        def on_progress(board: str, banner: str) -> None:
            console.print(
                f"[green]✓[/] {board}: sshd answers ({escape(banner)}) after {time.monotonic() - started:.1f} s"
            )

        state = lab_up(engine, request, on_log=on_log, on_progress=on_progress)
    statuses = lab_status(engine)
    _print_table(statuses)
    if request.boards is not None and len(state.boards) > request.boards:
        console.print(
            f"{len(state.boards)} boards kept running (more than --boards {request.boards}): "
            "`orch lab up` never removes boards; `orch lab down` removes them all"
        )
    console.print(
        f"lab {lab_id()}: {len(state.boards)} board(s) up in {time.monotonic() - started:.1f} s; "
        f"user {state.user}, key {state.identity_file}; they are the inventory's group '{lab_state.LAB_GROUP}'"
    )
    if as_json:
        emit_json(_document(statuses))
    return 0 if all(item.healthy for item in statuses) else 1


def _status(engine: Engine, *, as_json: bool) -> int:
    statuses = lab_status(engine)
    if as_json:
        emit_json(_document(statuses))
    if not statuses:
        console.print("no lab is up (start one with `orch lab up`)")
        return 0
    if not as_json:
        _print_table(statuses)
    return 0 if all(item.healthy for item in statuses) else 1


def _down(engine: Engine, *, as_json: bool) -> int:
    removed = lab_down(engine)
    left = remaining_containers(engine)
    if as_json:
        emit_json(DownDocument(lab=lab_id(), removed=removed, remaining=[item.name for item in left]))
    if removed:
        console.print(f"removed {len(removed)} container(s): {', '.join(removed)}")
    else:
        console.print("no lab containers were running")
    if left:
        console.print(f"[red]still there:[/] {', '.join(item.name for item in left)}")
        return 1
    return 0


class LabDocument(TypedDict):
    """``orch lab up --json`` and ``orch lab status --json``."""

    lab: str
    user: str | None  # None: no lab state recorded (no lab was ever up)
    identity_file: str | None
    boards: list[dict[str, object]]  # lab.boards.BoardStatus.as_dict()
    healthy: bool


class DownDocument(TypedDict):
    """``orch lab down --json``."""

    lab: str
    removed: list[str]  # container names
    remaining: list[str]


def _document(statuses: list[BoardStatus]) -> LabDocument:
    state = lab_state.read_state()
    return LabDocument(
        lab=lab_id(),
        user=state.user if state else None,
        identity_file=str(state.identity_file) if state else None,
        boards=[item.as_dict() for item in statuses],
        healthy=bool(statuses) and all(item.healthy for item in statuses),
    )


def _print_table(statuses: list[BoardStatus]) -> None:
    table = Table(title=f"lab {lab_id()}")
    for column in ("board", "address", "container", "state", "ssh"):
        table.add_column(column)
    for item in statuses:
        address = f"{item.bound_ip or '?'}:{item.port}" if item.port else "-"
        ssh = f"[green]{escape(item.banner)}[/]" if item.banner else "[red]no answer[/]"
        state = item.state if item.state == "running" else f"[red]{item.state}[/]"
        table.add_row(item.name, address, item.container, state, ssh)
    console.print(table)
