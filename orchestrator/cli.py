"""Entry point of the ``orch`` command: parses arguments, dispatches, turns errors into exit codes."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import traceback
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
        return _main(argv)
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
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]")
        return 130
    except Exception as error:  # noqa: BLE001 -- the last line of defence: one sentence, no traceback
        if args.debug:
            traceback.print_exc()
        return _report_unexpected(error)


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
