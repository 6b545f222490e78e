"""Entry point of the ``orch`` command: parses arguments, dispatches, turns errors into exit codes."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path

from rich.markup import escape

from orchestrator import __version__
from orchestrator.commands import COMMANDS
from orchestrator.console import console, quiet_stdout
from orchestrator.errors import OrchError, UsageError


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given the command line, only the sub-command it names is imported.

    Importing every command module (Docker, SSH, numpy, ONNX) costs half a second; a command
    such as `orch inventory list` needs none of that. `orch --help`, and a line naming no known
    command, get every sub-command."""
    parser = argparse.ArgumentParser(
        prog="orch",
        description="Cross-compile ONNX Runtime for ARM boards, deploy it over SSH, benchmark it on the boards.",
    )
    parser.add_argument("--version", action="version", version=f"orch {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _commands_for(argv):
        module = importlib.import_module(f"orchestrator.commands.{name.replace('-', '_')}")
        sub_parser = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        # --debug is accepted after the sub-command too; SUPPRESS keeps the top-level value.
        sub_parser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(handler=module.run)
    return parser


def _commands_for(argv: list[str] | None) -> tuple[str, ...]:
    """The sub-command the line names (its first word not starting with '-', before any --help),
    or every sub-command."""
    for word in argv or ():
        if word in ("-h", "--help") or not word.startswith("-"):
            return (word,) if word in COMMANDS else COMMANDS
    return COMMANDS


# A write to a closed pipe (`orch inventory list --json | head -c 100`) ends the command the way
# a process killed by SIGPIPE does for the shell: quietly, with status 128 + 13.
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE
# An exception orch did not turn into its own error: a bug. Said in one line; --debug shows it.
INTERNAL_ERROR_EXIT = 1
# An OSError naming a file that escaped the command: a path it was given is unusable.
PATH_ERROR_EXIT = 2
# Stopped by a signal: the shell's status for a process the signal ended (130 Ctrl-C, 143 SIGTERM).
INTERRUPTED_EXIT = 128 + signal.SIGINT
TERMINATED_EXIT = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """orch received SIGTERM (``kill``, ``timeout``, a service manager): an interruption like
    Ctrl-C, so the same paths stop the boards' commands and keep what was measured."""


class _SigtermHandler:
    """Raises ``Terminated`` at the first SIGTERM only: the clean-up that starts (bounded waits) is
    let finish, where a service manager's follow-up SIGTERM would cut it short. (A handler, not
    SIG_IGN: an ignored signal would stay ignored in the processes orch starts.)"""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, _signum: int, _frame: object) -> None:
        if not self.received:
            self.received = True
            raise Terminated


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` in the main thread while the command runs (signal handlers
    run there only: the boards' threads are ended by the clean-up the interruption runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _SigtermHandler())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _refuse_nul_bytes(args: argparse.Namespace) -> None:
    """No option value may hold a NUL byte: no file name, board command or remote path can."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, (str, Path)) and "\x00" in str(item):
                option = "the command" if name == "command" else f"--{name.replace('_', '-')}"
                raise UsageError(f"{option}: the value {str(item)!r} holds a NUL byte")


def _report(error: OrchError) -> None:
    console.print(f"[bold red]error:[/] {escape(error.message)}", soft_wrap=True)
    if error.hint:
        console.print(f"[yellow]hint:[/] {escape(error.hint)}", soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    try:
        with _sigterm_interrupts():
            return _main(argv)
    except KeyboardInterrupt as stop:  # outside the command: while parsing, or reporting its error
        return _stopped(stop)
    except BrokenPipeError:  # also while an error is being reported
        quiet_stdout()
        return BROKEN_PIPE_EXIT


def _main(argv: list[str] | None) -> int:
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)  # `orch build --help | head -1`: main() handles the closed pipe
    try:
        _refuse_nul_bytes(args)
        return int(args.handler(args) or 0)
    except OrchError as error:
        if args.debug:
            traceback.print_exc()
        _report(error)
        return error.exit_code
    except BrokenPipeError:  # before OSError below: a reader that went away is no path error
        quiet_stdout()
        return BROKEN_PIPE_EXIT
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM (Terminated)
        return _stopped(stop)
    except Exception as error:  # noqa: BLE001 -- the last line of defence: one sentence, no traceback
        if args.debug:
            traceback.print_exc()
        return _report_unexpected(error)


def _stopped(stop: KeyboardInterrupt) -> int:
    """orch was stopped by a signal: said in a word; the signal's exit status."""
    if isinstance(stop, Terminated):
        console.print("[red]terminated[/] (SIGTERM)")
        return TERMINATED_EXIT
    console.print("[red]interrupted[/]")
    return INTERRUPTED_EXIT


def _report_unexpected(error: Exception) -> int:
    """An exception orch did not turn into its own error, said in one line; its exit code."""
    if isinstance(error, OSError) and error.filename:
        # A path orch was given (or made from one) that the system refuses: say which, and why.
        path = str(error.filename)
        shown = path if len(path) <= 120 else path[:117] + "..."
        _report(OrchError(f"{shown}: {error.strerror or error}", hint="check the paths given to the command"))
        return PATH_ERROR_EXIT
    _report(
        OrchError(
            f"internal error: {type(error).__name__}: {error}",
            hint="this is a bug in orch; run the command again with --debug and report the traceback",
        )
    )
    return INTERNAL_ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main())
