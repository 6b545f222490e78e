"""`orch exec`: run a command on the selected boards in parallel (an ad-hoc command, like Ansible's).

One argument after ``--`` is a command line for the board's login shell (pipes and
globs work, as with ``ssh host 'cmd'``); several arguments are an exact argv, each
one quoted, so nothing in them is interpreted by a shell.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import TypedDict

from rich.markup import escape

from orchestrator.adapters import ssh
from orchestrator.adapters.session import CommandResult
from orchestrator.adapters.ssh import CommandTimeout, connect, stop_note
from orchestrator.board import Board
from orchestrator.commands import options
from orchestrator.commands.options import Selection, add_json_option, add_selection_options, selected_boards
from orchestrator.console import console, emit_json
from orchestrator.errors import PartialFailure, RemoteError, UsageError
from orchestrator.fleet.parallel import FleetResult, Outcome, run_on_boards

NAME = "exec"
HELP = "run a command on the selected boards in parallel"

# The fleet's hard stop comes a little after the command's own timeout, so that a
# hung command is normally ended by the SSH layer (keeping its partial output), which also
# waits for the board to confirm that the command stopped.
_GRACE = ssh.STOP_WAIT_S + 3.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "orch exec [selection] [--parallel N] [--timeout S] [--json] -- COMMAND..."
    parser.epilog = (
        "One COMMAND argument is a command line run by the board's login shell ('uname -a | cut -c1-20'); "
        "several are an exact argv, quoted. Exit code: 0 when every board ran it with exit 0; "
        "1 when every board was reached but the command failed somewhere; 4 when no board succeeded and "
        "some were unreachable or timed out; 8 when some boards succeeded and others did not."
    )
    add_selection_options(parser)
    parser.add_argument(
        "--parallel", type=options.positive_int, default=8, metavar="N", help="boards at once (default 8)"
    )
    parser.add_argument(
        "--timeout",
        type=options.positive_float,
        default=None,
        metavar="S",
        help="seconds per board, connection included (default: none)",
    )
    parser.add_argument(
        "--connect-timeout", type=options.positive_float, default=15.0, metavar="S", help=argparse.SUPPRESS
    )
    add_json_option(parser)
    parser.add_argument("command", nargs="*", metavar="COMMAND", help="the command (after --)")


@dataclass(frozen=True, kw_only=True)
class ExecRequest:
    """`orch exec`'s options as parsed: which boards, the command, how many at once, the timeouts."""

    selection: Selection
    argv: tuple[str, ...]
    parallel: int
    timeout: float | None
    connect_timeout: float
    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ExecRequest:
        argv = tuple(args.command)
        if not argv or not argv[0].strip():
            raise UsageError(
                "`orch exec` needs a command after --",
                hint="e.g. orch exec --group lab -- uname -m",
            )
        return cls(
            selection=Selection.from_args(args),
            argv=argv,
            parallel=args.parallel,
            timeout=args.timeout,
            connect_timeout=args.connect_timeout,
            json=args.json,
        )

    @property
    def display(self) -> str:
        return self.argv[0] if len(self.argv) == 1 else " ".join(self.argv)


def _run_on(board: Board, request: ExecRequest) -> CommandResult:
    start = time.monotonic()
    connect_timeout = request.connect_timeout
    if request.timeout is not None:
        connect_timeout = min(connect_timeout, request.timeout)
    with connect(board, connect_timeout=connect_timeout) as session:
        remaining = (
            None if request.timeout is None else max(0.1, request.timeout - (time.monotonic() - start))
        )
        try:
            if len(request.argv) == 1:
                return session.run_command_line(request.argv[0], timeout=remaining, check=False)
            return session.run(request.argv, timeout=remaining, check=False)
        except CommandTimeout as error:
            # Name the user's --timeout, not what was left of it after connecting.
            raise CommandTimeout(
                f"{session.label}: timed out after {request.timeout:g}s (--timeout) running {request.display};"
                f" {stop_note(session.board.name, error.stopped)}",
                stdout=error.stdout,
                stderr=error.stderr,
                duration=time.monotonic() - start,
                stopped=error.stopped,
            ) from error


def _board_ok(outcome: Outcome[CommandResult]) -> bool:
    return outcome.ok and outcome.value is not None and outcome.value.exit_code == 0


def _exit_text(code: int, *, long: bool = False) -> str:
    # sshd reports a death by signal without an exit status; paramiko then gives -1.
    if code == -1:
        return "killed by a signal or connection lost"
    return f"exit code {code}" if long else f"exit {code}"


def _timed_out(outcome: Outcome[CommandResult]) -> bool:
    return outcome.timed_out or isinstance(outcome.error, CommandTimeout)


def _exit_code(result: FleetResult[CommandResult]) -> int:
    outcomes = list(result.outcomes.values())
    if all(_board_ok(o) for o in outcomes):
        return 0
    if any(_board_ok(o) for o in outcomes):
        return PartialFailure.exit_code
    if any(not o.ok for o in outcomes):
        return RemoteError.exit_code
    return 1


class ExecEntry(TypedDict):
    """One board's command in ``orch exec --json``."""

    exit_code: int | None  # None: it did not end (a timeout, no connection)
    stdout: str
    stderr: str
    duration: float
    error: str | None


def _document(result: FleetResult[CommandResult]) -> dict[str, ExecEntry]:
    document: dict[str, ExecEntry] = {}
    for name, outcome in result.outcomes.items():
        entry = ExecEntry(
            exit_code=None,
            stdout="",
            stderr="",
            duration=round(outcome.duration, 3),
            error=outcome.message or None,
        )
        if outcome.value is not None:
            entry["exit_code"] = outcome.value.exit_code
            entry["stdout"], entry["stderr"] = outcome.value.stdout, outcome.value.stderr
        elif isinstance(outcome.error, CommandTimeout):
            entry["stdout"], entry["stderr"] = outcome.error.stdout, outcome.error.stderr
        if outcome.value is not None and outcome.value.exit_code != 0:
            entry["error"] = _exit_text(outcome.value.exit_code, long=True)
        document[name] = entry
    return document


def _print_block(name: str, outcome: Outcome[CommandResult]) -> None:
    value = outcome.value
    if value is not None:
        mark = "[green]✓[/]" if value.exit_code == 0 else "[red]✗[/]"
        status = _exit_text(value.exit_code)
        stdout, stderr = value.stdout, value.stderr
    else:
        mark = "[red]✗[/]"
        status = (
            "timed out" if outcome.timed_out or isinstance(outcome.error, CommandTimeout) else "unreachable"
        )
        if isinstance(outcome.error, CommandTimeout):
            stdout, stderr = outcome.error.stdout, outcome.error.stderr
        else:
            stdout, stderr = "", ""
    console.rule(f"{mark} [bold]{escape(name)}[/]  {status}  {outcome.duration:.1f}s", align="left")
    if stdout:
        console.out(stdout.rstrip("\n"), highlight=False)
    if stderr:
        # Board output is shown as is: no markup, no emoji codes.
        console.print(
            stderr.rstrip("\n"), style="dim", soft_wrap=True, markup=False, emoji=False, highlight=False
        )
    if value is None:
        console.print(f"[red]{escape(outcome.message)}[/]", soft_wrap=True)
        hint = getattr(outcome.error, "hint", None)
        if hint:
            console.print(f"[yellow]hint:[/] {escape(hint)}", soft_wrap=True)


def _summary(result: FleetResult[CommandResult]) -> str:
    ok = [n for n, o in result.outcomes.items() if _board_ok(o)]
    nonzero = [
        f"{n}: {_exit_text(o.value.exit_code)}"
        for n, o in result.outcomes.items()
        if o.value and o.value.exit_code
    ]
    timed_out = [n for n, o in result.outcomes.items() if _timed_out(o)]
    unreachable = [n for n, o in result.outcomes.items() if not o.ok and not _timed_out(o)]
    total = len(result.outcomes)
    parts = [f"{len(ok)} ok"]
    if nonzero:
        parts.append(f"{len(nonzero)} failed ({', '.join(nonzero)})")
    if unreachable:
        parts.append(f"{len(unreachable)} unreachable ({', '.join(unreachable)})")
    if timed_out:
        parts.append(f"{len(timed_out)} timed out ({', '.join(timed_out)})")
    return f"{total} board{'s' if total != 1 else ''}: " + ", ".join(parts)


def run(args: argparse.Namespace) -> int:
    request = ExecRequest.from_args(args)
    boards = selected_boards(request.selection)
    try:
        result = run_on_boards(
            boards,
            lambda board: _run_on(board, request),
            parallel=request.parallel,
            timeout=None if request.timeout is None else request.timeout + _GRACE,
            label=f"exec: {request.display}",
            progress=None if not request.json else False,
        )
    except KeyboardInterrupt:
        # The boards' commands end with orch: each one's guard ends it once its channel's input ends.
        for line in ssh.stop_running().lines():
            console.print(f"[yellow]{escape(line)}[/]", soft_wrap=True)
        raise
    if request.json:
        emit_json(_document(result))
    else:
        for name, outcome in result.outcomes.items():
            _print_block(name, outcome)
        code = _exit_code(result)
        style = "green" if code == 0 else "red"
        console.print(f"[{style}]{escape(_summary(result))}[/]", soft_wrap=True)
    return _exit_code(result)
