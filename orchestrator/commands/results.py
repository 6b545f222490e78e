"""`orch results`: list, show, compare and export stored benchmark results."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich.markup import escape
from rich.table import Table

from orchestrator.bench.report import tuning
from orchestrator.bench.report.export import export_rows, to_csv
from orchestrator.bench.report.native_tables import after_run_tables, cold_start_rows
from orchestrator.bench.report.tables import (
    board_state_table,
    comparison_table,
    comparison_warnings,
    run_tables,
)
from orchestrator.bench.results import ResultStore, RunRecord, flatten_series
from orchestrator.bench.series import Pairing, pairings_between, pairings_within
from orchestrator.commands import options
from orchestrator.console import console, emit_json, print_whole, quiet_stdout
from orchestrator.errors import PartialFailure, UsageError

NAME = "results"
HELP = "list, show, compare and export stored benchmark results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="every stored run, newest last")
    options.add_json_option(listing)
    show = sub.add_parser("show", help="one run's tables (RUN: id, unique prefix, 'latest' or 'latest~1')")
    show.add_argument("run", metavar="RUN")
    show.add_argument(
        "--threshold",
        type=options.non_negative_float,
        default=0.05,
        help="smallest change called faster/slower",
    )
    add_allow_partial_option(show, "show the comparisons within a run that is not complete")
    options.add_json_option(show)
    compare = sub.add_parser("compare", help="RUN_B against baseline RUN_A, per board and measurement")
    compare.add_argument("run_a", metavar="RUN_A")
    compare.add_argument("run_b", metavar="RUN_B")
    compare.add_argument(
        "--threshold",
        type=options.non_negative_float,
        default=0.05,
        help="smallest change called faster/slower",
    )
    add_allow_partial_option(compare, "compare a run that is not complete (interrupted, abandoned, running)")
    options.add_json_option(compare)
    export = sub.add_parser("export", help="series summaries (or every sample) as CSV or JSON")
    export.add_argument("runs", nargs="*", metavar="RUN", help="runs to export (default: every run)")
    fmt = export.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--csv", action="store_true", help="CSV")
    fmt.add_argument("--json", action="store_true", help="JSON")
    export.add_argument(
        "--samples", action="store_true", help="one row per timed inference instead of per series"
    )
    export.add_argument("-o", "--output", type=options.path_arg, help="write to this file instead of stdout")


def add_allow_partial_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--allow-partial", action="store_true", help=help_text)


def refuse_partial(record: RunRecord, *, allowed: bool, what: str) -> None:
    """A run that is not complete is used for ``what`` only with --allow-partial (then with a warning)."""
    if record.complete:
        return
    if not allowed:
        raise UsageError(
            f"{record.partial_note()}: {what} of it is refused",
            hint=f"add --allow-partial to use its partial data (`orch results show {record.run_id}` shows it)",
        )
    console.print(f"[yellow]warning:[/] {escape(record.partial_note())} (--allow-partial)", soft_wrap=True)


def report_damaged(store: ResultStore) -> int:
    """Name every damaged file met (on stderr, after the output); 0, or PartialFailure's exit code
    when one was skipped: what is shown is then not the whole store."""
    for damaged in store.damaged:
        console.print(f"[yellow]warning:[/] {escape(damaged.sentence())}", soft_wrap=True)
    skipped = [d for d in store.damaged if d.skipped]
    if skipped:
        console.print(
            f"[bold red]error:[/] {len(skipped)} damaged file(s) in {escape(str(store.root))} were skipped;"
            " the rest is shown",
            soft_wrap=True,
        )
        return PartialFailure.exit_code
    return 0


def print_warnings(pairings: Sequence[Pairing]) -> None:
    for warning in comparison_warnings(pairings):
        console.print(f"[yellow]warning:[/] {escape(warning)}")


def write_output(path: Path, text: str) -> None:
    """Write an export file; a directory that does not exist or is read-only is a usage error."""
    try:
        path.write_text(text)
    except OSError as error:
        raise UsageError(
            f"-o {path}: cannot write the file: {error.strerror or error}",
            hint="give a path in an existing, writable directory",
        ) from error


Action = Literal["list", "show", "compare", "export"]


@dataclass(frozen=True, kw_only=True)
class ResultsRequest:
    """`orch results`' options, as parsed: the action and what its sub-parser defined."""

    action: Action
    json: bool = False
    run: str = ""  # show
    run_a: str = ""  # compare
    run_b: str = ""
    threshold: float = 0.05  # show, compare
    allow_partial: bool = False  # show, compare
    runs: tuple[str, ...] = ()  # export (empty: every run)
    csv: bool = False
    samples: bool = False
    output: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ResultsRequest:
        # Each action's sub-parser defines its own options; the others keep their defaults.
        return cls(
            action=args.action,  # the sub-parser's name: one of Action
            json=args.json,
            run=getattr(args, "run", ""),
            run_a=getattr(args, "run_a", ""),
            run_b=getattr(args, "run_b", ""),
            threshold=getattr(args, "threshold", 0.05),
            allow_partial=getattr(args, "allow_partial", False),
            runs=tuple(getattr(args, "runs", ())),
            csv=getattr(args, "csv", False),
            samples=getattr(args, "samples", False),
            output=getattr(args, "output", None),
        )


def run(args: argparse.Namespace) -> int:
    request = ResultsRequest.from_args(args)
    store = ResultStore()
    action = {"list": _list, "show": _show, "compare": _compare, "export": _export}[request.action]
    code = action(request, store)
    return code or report_damaged(store)


def _list(request: ResultsRequest, store: ResultStore) -> int:
    runs = store.list_runs()
    if request.json:
        emit_json(runs)
        return 0
    if not runs:
        console.print(f"no benchmark runs in {escape(str(store.root))} yet: run `orch bench`")
        return 0
    table = Table(title=f"Benchmark runs in {store.root}", title_justify="left")
    table.add_column("run", no_wrap=True)
    table.add_column("created (UTC)", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("boards", no_wrap=True)
    table.add_column("series", justify="right")
    table.add_column("command (orch bench ...)")
    for run_ in runs:
        boards = f"{run_['boards_ok']} ok"
        if run_["boards_failed"]:
            boards += f", [red]{run_['boards_failed']} failed[/]"
        status = run_["status"] or "?"
        if status not in ("ok", "failed"):
            status = f"[yellow]{escape(status)}[/] (partial)" if status != "running" else status
        created = (run_["created"] or "").replace("T", " ").removesuffix("Z")[:16]
        command = (run_["command"] or "").removeprefix("orch bench").strip()
        table.add_row(run_["run_id"], created, status, boards, str(run_["series"]), escape(command))
    console.print(table)
    return 0


def _show(request: ResultsRequest, store: ResultStore) -> int:
    record = store.load(request.run)
    series = record.series()
    # The comparisons within a run that is not complete are partial: shown only when asked for.
    compared = record.complete or request.allow_partial
    pairings = pairings_within(series, threshold=request.threshold) if compared else []
    if request.json:
        emit_json(
            {
                "run_id": record.run_id,
                "status": record.status,
                "complete": record.complete,
                "meta": record.meta,
                "series": flatten_series([record]),
                "comparisons": [p.as_dict() for p in pairings],
                "failed": record.failed,
                "cold_starts": cold_start_rows(record.boards),
            }
        )
        return 0
    console.print(f"run [bold]{record.run_id}[/]: {escape(str(record.meta.get('command', '')))}")
    if not record.complete:
        hidden = "" if compared else "; its comparisons are shown only with --allow-partial"
        console.print(f"[yellow]{escape(record.partial_note())}[/]{hidden}", soft_wrap=True)
    print_whole(board_state_table(record))
    for table in run_tables(series, pairings, record.failed):
        print_whole(table)
    for table in tuning.tuning_tables(record):
        print_whole(table)
    for board, line in tuning.commands(record).items():
        console.print(f"{escape(board)}: the comparison again: {escape(line)}", soft_wrap=True)
    print_warnings(pairings)
    for table in after_run_tables(record.boards, series):
        print_whole(table)
    return 0


def _compare(request: ResultsRequest, store: ResultStore) -> int:
    a, b = store.load(request.run_a), store.load(request.run_b)
    partial = list(dict.fromkeys(record.run_id for record in (a, b) if not record.complete))
    for record in {record.run_id: record for record in (a, b)}.values():
        refuse_partial(record, allowed=request.allow_partial, what="a comparison")
    pairings = pairings_between(a.series(), b.series(), threshold=request.threshold)
    if request.json:
        emit_json(
            {
                "run_a": a.run_id,
                "run_b": b.run_id,
                "partial": partial,
                "comparisons": [p.as_dict() for p in pairings],
            }
        )
        return 0
    if not pairings:
        raise UsageError(f"{a.run_id} and {b.run_id} have no board and measurement in common")
    print_whole(comparison_table(pairings, title=f"{b.run_id} (B) vs {a.run_id} (A)"))
    print_warnings(pairings)
    return 0


def _export(request: ResultsRequest, store: ResultStore) -> int:
    refs = request.runs or [run_["run_id"] for run_ in store.list_runs()]
    records = [store.load(ref) for ref in refs]
    rows = export_rows(records, samples=request.samples)
    text = to_csv(rows) if request.csv else json.dumps(rows, indent=1, default=str) + "\n"
    if request.output:
        write_output(request.output, text)
        console.print(f"{len(rows)} rows written to {escape(str(request.output))}")
        return 0
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
        raise
    return 0
