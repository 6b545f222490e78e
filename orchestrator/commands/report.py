"""`orch report`: write an HTML report with plots for a benchmark run."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from orchestrator.bench.report.html import write_html
from orchestrator.bench.results import ResultStore
from orchestrator.bench.series import pairings_within
from orchestrator.commands import options
from orchestrator.commands.results import add_allow_partial_option, refuse_partial, report_damaged
from orchestrator.console import console, emit_json
from orchestrator.errors import UsageError

NAME = "report"
HELP = "write an HTML report with plots for a benchmark run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run",
        metavar="RUN",
        nargs="?",
        default="latest",
        help="run id, unique prefix, 'latest' (default) or 'latest~1'",
    )
    parser.add_argument(
        "--html",
        type=options.path_arg,
        default=Path("report.html"),
        metavar="PATH",
        help="where to write the report (plots go to <name>_files/ next to it)",
    )
    parser.add_argument(
        "--threshold",
        type=options.non_negative_float,
        default=0.05,
        help="smallest change called faster/slower",
    )
    parser.add_argument("--json", action="store_true", help="print the written paths as one JSON document")
    add_allow_partial_option(parser, "report on a run that is not complete (interrupted, abandoned, running)")


@dataclass(frozen=True, kw_only=True)
class ReportRequest:
    """`orch report`'s options, as parsed."""

    run: str
    html: Path
    threshold: float
    json: bool
    allow_partial: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReportRequest:
        return cls(
            run=args.run,
            html=args.html,
            threshold=args.threshold,
            json=args.json,
            allow_partial=args.allow_partial,
        )


def run(args: argparse.Namespace) -> int:
    request = ReportRequest.from_args(args)
    store = ResultStore()
    record = store.load(request.run)
    refuse_partial(record, allowed=request.allow_partial, what="a report")
    pairings = pairings_within(record.series(), threshold=request.threshold)
    try:
        written = write_html(record, pairings, request.html)
    except OSError as error:
        where = f" ({error.filename})" if error.filename and str(error.filename) != str(request.html) else ""
        raise UsageError(
            f"--html {request.html}: cannot write the report{where}: {error.strerror or error}",
            hint="give a path in an existing, writable directory (plots go to <name>_files/ beside it)",
        ) from error
    if request.json:
        emit_json({"run_id": record.run_id, **{key: str(path) for key, path in written.items()}})
    console.print(
        f"report for run [bold]{record.run_id}[/] written to [bold]{escape(str(request.html.resolve()))}[/]"
    )
    return report_damaged(store)
