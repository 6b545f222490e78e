"""`orch lab`: start, inspect and stop the lab of emulated aarch64 boards."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from orchestrator import lab_state
from orchestrator.commands import options
from orchestrator.console import console, emit_json
from orchestrator.errors import UsageError
from orchestrator.lab import boards as lab

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

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
        help=f"run at least N boards lab1..labN (default: the running ones, or {lab.DEFAULT_BOARDS})",
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


def run(args: argparse.Namespace) -> int:
    if not getattr(args, "lab_command", None):
        raise UsageError(
            "say what to do with the lab: `orch lab up [--boards N]`, `orch lab status`, `orch lab down`"
        )
    if args.lab_command == "up":
        # A bad --boards or --board is refused before the engine is asked.
        lab.wanted_board_count(args.boards, 0)
        args.profile_boards = [lab.parse_board_option(text) for text in args.board]
    from orchestrator.adapters.engine import Engine  # the docker SDK costs start-up time: loaded when used

    engine = Engine()
    return {"up": _up, "status": _status, "down": _down}[args.lab_command](engine, args)


def _up(engine: Engine, args: argparse.Namespace) -> int:
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

        extra = sum(item.count for item in args.profile_boards)
        timeout = args.timeout or lab.banner_timeout((args.boards or lab.DEFAULT_BOARDS) + extra)
        state = lab.lab_up(
            engine,
            args.boards,
            profile_boards=args.profile_boards,
            timeout=timeout,
            on_log=on_log,
            on_progress=on_progress,
        )
    statuses = lab.lab_status(engine)
    _print_table(statuses)
    if args.boards is not None and len(state.boards) > args.boards:
        console.print(
            f"{len(state.boards)} boards kept running (more than --boards {args.boards}): "
            "`orch lab up` never removes boards; `orch lab down` removes them all"
        )
    console.print(
        f"lab {lab.lab_id()}: {len(state.boards)} board(s) up in {time.monotonic() - started:.1f} s; "
        f"user {state.user}, key {state.identity_file}; they are the inventory's group '{lab_state.LAB_GROUP}'"
    )
    if args.json:
        emit_json(_document(statuses))
    return 0 if all(item.healthy for item in statuses) else 1


def _status(engine: Engine, args: argparse.Namespace) -> int:
    statuses = lab.lab_status(engine)
    if args.json:
        emit_json(_document(statuses))
    if not statuses:
        console.print("no lab is up (start one with `orch lab up`)")
        return 0
    if not args.json:
        _print_table(statuses)
    return 0 if all(item.healthy for item in statuses) else 1


def _down(engine: Engine, args: argparse.Namespace) -> int:
    removed = lab.lab_down(engine)
    left = lab.remaining_containers(engine)
    if args.json:
        emit_json({"lab": lab.lab_id(), "removed": removed, "remaining": [item["name"] for item in left]})
    if removed:
        console.print(f"removed {len(removed)} container(s): {', '.join(removed)}")
    else:
        console.print("no lab containers were running")
    if left:
        console.print(f"[red]still there:[/] {', '.join(str(item['name']) for item in left)}")
        return 1
    return 0


def _document(statuses: list[lab.BoardStatus]) -> dict[str, object]:
    state = lab_state.read_state()
    return {
        "lab": lab.lab_id(),
        "user": state.user if state else None,
        "identity_file": str(state.identity_file) if state else None,
        "boards": [item.as_dict() for item in statuses],
        "healthy": bool(statuses) and all(item.healthy for item in statuses),
    }


def _print_table(statuses: list[lab.BoardStatus]) -> None:
    table = Table(title=f"lab {lab.lab_id()}")
    for column in ("board", "address", "container", "state", "ssh"):
        table.add_column(column)
    for item in statuses:
        address = f"{item.bound_ip or '?'}:{item.port}" if item.port else "-"
        ssh = f"[green]{escape(item.banner)}[/]" if item.banner else "[red]no answer[/]"
        state = item.state if item.state == "running" else f"[red]{item.state}[/]"
        table.add_row(item.name, address, item.container, state, ssh)
    console.print(table)
