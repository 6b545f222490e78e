"""`orch doctor`: check Docker, aarch64 emulation, SSH keys and disk space."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rich.markup import escape
from rich.table import Table

from orchestrator.console import console, emit_json
from orchestrator.lab.doctor import run_checks

NAME = "doctor"
HELP = "check Docker, aarch64 emulation, SSH keys and disk space"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")


@dataclass(frozen=True, kw_only=True)
class DoctorRequest:
    """`orch doctor`'s options as parsed."""

    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DoctorRequest:
        return cls(json=args.json)


def run(args: argparse.Namespace) -> int:
    request = DoctorRequest.from_args(args)
    checks = run_checks()
    ok = all(check.ok for check in checks)
    if request.json:
        emit_json({"ok": ok, "checks": [check.as_dict() for check in checks]})
    table = Table(title="orch doctor")
    for column in ("check", "", "detail", "fix"):
        table.add_column(column)
    for check in checks:
        mark = "[green]ok[/]" if check.ok else "[bold red]FAIL[/]"
        table.add_row(check.name, mark, escape(check.detail), escape(check.fix or ""))
    console.print(table)
    failed = [check for check in checks if not check.ok]
    if failed:
        console.print(f"[bold red]{len(failed)} check(s) failed.[/] Run the fix shown for each.")
        return 1
    console.print("[green]everything orch needs is in place[/]")
    return 0
