"""`orch report`: write an HTML report with plots for one or several benchmark runs, and the
instruction-count runs beside them."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from orchestrator.bench.counting.store import CountRunDocument, load_counts
from orchestrator.bench.report.html import TimedRun, WrittenReport, write_report
from orchestrator.bench.results import ResultStore
from orchestrator.bench.series import pairings_within
from orchestrator.commands import options
from orchestrator.commands.results import add_allow_partial_option, refuse_partial, report_damaged
from orchestrator.console import console, emit_json
from orchestrator.errors import UsageError

NAME = "report"
HELP = "write an HTML report with plots for benchmark runs (and instruction-count runs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run",
        metavar="RUN",
        nargs="*",
        default=["latest"],
        help="timed runs, each a section in the order given: run id, unique prefix, 'latest' (default)"
        " or 'latest~1'",
    )
    parser.add_argument(
        "--counts",
        nargs="+",
        default=[],
        metavar="REF",
        help="instruction-count runs (orch bench --metric instructions) shown after the timed runs, in"
        " the order given: id, unique prefix, 'latest' or 'latest~1' (give RUN before --counts)",
    )
    parser.add_argument(
        "--html",
        type=options.path_arg,
        default=Path("report.html"),
        metavar="PATH",
        help="where to write the report (plots go to <name>_files/ next to it; with several RUNs each"
        " run's go to <name>_files/<run id>/)",
    )
    parser.add_argument(
        "--threshold",
        type=options.non_negative_float,
        default=0.05,
        help="smallest change called faster/slower",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the written paths as one JSON document: for one RUN {run_id, html, its plots and"
        " data files}; for several {html, runs: [that document per RUN, without html]}; with --counts"
        " both add counts: [{run_id, plot}]",
    )
    add_allow_partial_option(
        parser, "report on runs that are not complete (interrupted, abandoned, running); applies to each RUN"
    )


@dataclass(frozen=True, kw_only=True)
class ReportRequest:
    """`orch report`'s options, as parsed."""

    runs: tuple[str, ...]
    counts: tuple[str, ...] = ()
    html: Path
    threshold: float
    json: bool
    allow_partial: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReportRequest:
        return cls(
            runs=tuple(args.run) or ("latest",),
            counts=tuple(args.counts),
            html=args.html,
            threshold=args.threshold,
            json=args.json,
            allow_partial=args.allow_partial,
        )


def run(args: argparse.Namespace) -> int:
    request = ReportRequest.from_args(args)
    store = ResultStore()
    timed = []
    for ref in request.runs:
        record = store.load(ref)
        refuse_partial(record, allowed=request.allow_partial, what="a report")
        pairings = pairings_within(record.series(), threshold=request.threshold)
        timed.append(TimedRun(record=record, pairings=pairings))
    _refuse_twice("RUN", request.runs, [t.record.run_id for t in timed])
    counted = [load_counts(ref) for ref in request.counts]
    _refuse_twice("--counts", request.counts, [c["run_id"] for c in counted])
    try:
        written = write_report(timed, request.html, counts=counted)
    except OSError as error:
        where = f" ({error.filename})" if error.filename and str(error.filename) != str(request.html) else ""
        raise UsageError(
            f"--html {request.html}: cannot write the report{where}: {error.strerror or error}",
            hint="give a path in an existing, writable directory (plots go to <name>_files/ beside it)",
        ) from error
    if request.json:
        emit_json(_document(written, counted))
    ids = ", ".join(t.record.run_id for t in timed)
    counts = f" and instruction counts {', '.join(c['run_id'] for c in counted)}" if counted else ""
    console.print(
        f"report for run{'s' if len(timed) > 1 else ''} [bold]{ids}[/]{escape(counts)} written to"
        f" [bold]{escape(str(request.html.resolve()))}[/]"
    )
    return report_damaged(store)


def _refuse_twice(option: str, refs: tuple[str, ...], ids: list[str]) -> None:
    """The same run named twice (``latest`` and its id) would be shown twice: a slip, refused."""
    for index, run_id in enumerate(ids):
        if run_id in ids[:index]:
            first = ids.index(run_id)
            raise UsageError(
                f"{option} {refs[first]!r} and {refs[index]!r} are the same run {run_id}",
                hint="name each run once",
            )


def _document(written: WrittenReport, counted: list[CountRunDocument]) -> dict[str, object]:
    """--json: one run's document as it always was; several runs' documents in a list."""
    runs: list[dict[str, str]] = [
        {"run_id": run_id, **{k: str(p) for k, p in files.items()}} for run_id, files in written.runs.items()
    ]
    document: dict[str, object] = (
        {**runs[0], "html": str(written.html)}
        if len(runs) == 1
        else {"html": str(written.html), "runs": runs}
    )
    if counted:
        document["counts"] = [
            {"run_id": run_id, "plot": str(files["plot"]) if "plot" in files else None}
            for run_id, files in written.counts.items()
        ]
    return document
