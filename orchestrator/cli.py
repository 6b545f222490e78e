"""Entry point of the ``orch`` command: parses arguments, dispatches, turns errors into exit codes."""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from rich.markup import escape

from orchestrator import __version__
from orchestrator.commands import COMMANDS
from orchestrator.console import console
from orchestrator.errors import OrchError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orch",
        description="Cross-compile ONNX Runtime for ARM boards, deploy it over SSH, benchmark it on the boards.",
    )
    parser.add_argument("--version", action="version", version=f"orch {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"orchestrator.commands.{name.replace('-', '_')}")
        sub_parser = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        # --debug is accepted after the sub-command too; SUPPRESS keeps the top-level value.
        sub_parser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(handler=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except OrchError as error:
        if args.debug:
            traceback.print_exc()
        console.print(f"[bold red]error:[/] {escape(error.message)}", soft_wrap=True)
        if error.hint:
            console.print(f"[yellow]hint:[/] {escape(error.hint)}", soft_wrap=True)
        return error.exit_code
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
