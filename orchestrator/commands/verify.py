"""`orch verify`: ONNX's node conformance cases and the deployed models on each board's own CPU,
judged against the x86-64 stock onnxruntime of the same release."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from rich.markup import escape
from rich.table import Table

from orchestrator.bench.plan_options import split_list
from orchestrator.bench.results import new_run_id, utc_now
from orchestrator.commands import options
from orchestrator.console import console, emit_json, print_whole
from orchestrator.errors import PartialFailure, VerifyError
from orchestrator.fleet.parallel import print_failures
from orchestrator.paths import results_dir
from orchestrator.verify.execute import VERIFY_PREFIX, BoardVerify, BoardVerifyDocument, VerifyRun, run_verify
from orchestrator.verify.plan import EXECUTION_PROVIDERS, VerifyPlan, VerifyPlanDocument, make_plan

NAME = "verify"
HELP = "run ONNX's conformance cases and your deployed models on the boards, against stock onnxruntime"
# Exit code when a build fails a case the stock wheel of its release passes.
REGRESSION_EXIT = 1
SHOWN_DETAIL = 160
# Builds of different releases differ in hundreds of cases (opsets one release lacks): the first
# ones are shown, the JSON document and the stored result have them all.
SHOWN_CASES = 25


class VerifiedBoard(BoardVerifyDocument):
    status: Literal["ok"]


class FailedBoard(TypedDict):
    status: Literal["failed"]
    error: str


class VerifyDocument(TypedDict):
    """A verify run as ``--json`` prints it and ``results/verify-<run id>.json`` keeps it."""

    schema: str  # orch-verify/1
    run_id: str
    created: str
    plan: VerifyPlanDocument
    onnx: str  # the onnx release whose node cases ran
    node_cases: int
    node_cases_left_out: dict[str, int]  # reason -> cases
    wall_s: float
    boards: dict[str, VerifiedBoard | FailedBoard]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_selection_options(parser)
    what = parser.add_argument_group("what to verify")
    what.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="A,B",
        help="the newest deployed release of each variant (default: the current release)",
    )
    what.add_argument(
        "--ort-version",
        metavar="X.Y.Z",
        help="only releases of this onnxruntime version",
    )
    what.add_argument(
        "--subset",
        type=options.positive_int,
        metavar="N",
        help="N node cases spread evenly over the operators (a fast pre-flight); default: all",
    )
    what.add_argument(
        "--ep",
        choices=EXECUTION_PROVIDERS,
        default="cpu",
        help="the execution provider each case runs with (default cpu); a board where onnxruntime"
        " cannot create it (no NVIDIA driver for cuda) is named and not verified",
    )
    what.add_argument(
        "--no-models", action="store_true", help="node cases only, not the models deployed in the release"
    )
    parser.add_argument(
        "--parallel", type=options.positive_int, default=4, help="boards verified at the same time"
    )
    parser.add_argument(
        "--timeout",
        type=options.positive_float,
        default=3600.0,
        metavar="S",
        help="limit for one build's runner process (default 3600)",
    )
    options.add_json_option(parser)
    options.add_dry_run_option(parser)


@dataclass(frozen=True, kw_only=True)
class VerifyRequest:
    """`orch verify`'s options, as parsed."""

    selection: options.Selection
    variants: tuple[str, ...]  # as given: comma-separated, repeated
    ort_version: str | None
    subset: int | None
    no_models: bool
    execution_provider: str
    parallel: int
    timeout: float
    json: bool = False
    dry_run: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> VerifyRequest:
        return cls(
            selection=options.Selection.from_args(args),
            variants=tuple(args.variant),
            ort_version=args.ort_version,
            subset=args.subset,
            no_models=args.no_models,
            execution_provider=args.ep,
            parallel=args.parallel,
            timeout=args.timeout,
            json=args.json,
            dry_run=args.dry_run,
        )


def make_verify_plan(request: VerifyRequest) -> VerifyPlan:
    return make_plan(
        options.selected_boards(request.selection),
        variants=[item for value in request.variants for item in split_list(value)],
        ort_version=request.ort_version,
        subset=request.subset,
        models=not request.no_models,
        parallel=request.parallel,
        timeout_s=request.timeout,
        execution_provider=request.execution_provider,
    )


def _progress(board: str, message: str) -> None:
    console.print(f"[bold]{escape(board)}[/] {escape(message)}", soft_wrap=True)


def document(done: VerifyRun, plan: VerifyPlan, run_id: str) -> VerifyDocument:
    boards: dict[str, VerifiedBoard | FailedBoard] = {}
    for name, board_outcome in done.outcome.outcomes.items():
        if board_outcome.ok and isinstance(board_outcome.value, BoardVerify):
            boards[name] = VerifiedBoard(status="ok", **board_outcome.value.as_dict())
        else:
            boards[name] = FailedBoard(status="failed", error=board_outcome.message)
    return VerifyDocument(
        schema="orch-verify/1",
        run_id=run_id,
        created=utc_now(),
        plan=plan.as_dict(),
        onnx=done.onnx_version,
        node_cases=done.node_cases,
        node_cases_left_out=done.skipped,
        wall_s=round(done.wall_s, 2),
        boards=boards,
    )


def _verified(doc: VerifyDocument) -> list[tuple[str, VerifiedBoard]]:
    """The boards that were verified (a failed board has no builds), by name as in the document."""
    return [(name, board) for name, board in doc["boards"].items() if board["status"] == "ok"]


def _summary_table(doc: VerifyDocument) -> Table:
    table = Table(title="conformance per build (reference: x86-64 stock onnxruntime, same release)")
    for column in (
        "board",
        "build",
        "ort",
        "cases",
        "pass",
        "fail",
        "not supp.",
        "stock pass",
        "regress.",
        "gaps",
        "time",
    ):
        table.add_column(
            column, overflow="fold", justify="right" if column in {"cases", "pass", "fail"} else "left"
        )
    for name, board in _verified(doc):
        for build in board["builds"]:
            counted, ref = build["counts"], build["reference_counts"]
            table.add_row(
                name,
                build["release"],
                build["ort_version"],
                str(build["cases"]),
                str(counted["pass"]),
                str(counted["fail"]),
                str(counted["unsupported"]),
                str(ref["pass"]),
                str(len(build["regressions"])),
                str(len(build["gaps"])),
                f"{build['wall_s']:.0f} s",
            )
    return table


def _print_differences(doc: VerifyDocument) -> None:
    for name, board in _verified(doc):
        for build in board["builds"]:
            where = f"{name} {build['release']}"
            for items, title, colour in (
                (build["regressions"], "FAILS where stock passes", "red"),
                (build["gaps"], "not supported, stock passes", "yellow"),
            ):
                for item in items:
                    detail = item["build"].get("detail", "")
                    shown = detail if len(detail) <= SHOWN_DETAIL else detail[: SHOWN_DETAIL - 3] + "..."
                    console.print(
                        f"[{colour}]{escape(where)}: {title}:[/] {escape(item['case'])}"
                        f" ({escape(item['build'].get('stage', ''))}: {escape(shown)})",
                        soft_wrap=True,
                    )
        differing = board["pass_set_differences"]
        if len(board["builds"]) > 1:
            versions = sorted({build["ort_version"] for build in board["builds"]})
            if differing:
                across = (
                    f" (onnxruntime {' vs '.join(versions)}: a release lacks the other's newer opsets)"
                    if len(versions) > 1
                    else ""
                )
                console.print(f"{escape(name)}: {len(differing)} case(s) differ between the builds{across}:")
                for case, statuses in list(differing.items())[:SHOWN_CASES]:
                    shown = ", ".join(f"{release} {status}" for release, status in statuses.items())
                    console.print(f"  {escape(case)}: {escape(shown)}", soft_wrap=True)
                if len(differing) > SHOWN_CASES:
                    console.print(f"  ... and {len(differing) - SHOWN_CASES} more (all of them: --json)")
            else:
                console.print(f"{escape(name)}: every build has the same pass set")
        for note in board["notes"]:
            console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)


def _store(doc: VerifyDocument) -> Path:
    # A file beside the bench runs' directories (the bench store reads directories only).
    directory = results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{VERIFY_PREFIX}{doc['run_id']}.json"
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def run(args: argparse.Namespace) -> int:
    request = VerifyRequest.from_args(args)
    plan = make_verify_plan(request)
    if request.dry_run:
        if request.json:
            emit_json(plan.as_dict())
        else:
            console.print_json(data=plan.as_dict())
        return 0
    run_id = new_run_id()
    done = run_verify(plan, _progress)
    doc = document(done, plan, run_id)
    path = _store(doc)
    if request.json:
        emit_json(doc)
    print_whole(_summary_table(doc))
    _print_differences(doc)
    left_out = sum(done.skipped.values())
    console.print(
        f"{done.node_cases} node cases from onnx {done.onnx_version}"
        + (
            f" ({left_out} left out: {', '.join(f'{k}: {v}' for k, v in done.skipped.items())})"
            if left_out
            else ""
        )
        + f"; stored in {escape(str(path))}",
        soft_wrap=True,
    )
    print_failures(done.outcome)
    regressions = sum(len(b["regressions"]) for _, board in _verified(doc) for b in board["builds"])
    if done.outcome.failed:
        names = ", ".join(done.outcome.failed)
        if done.outcome.succeeded:
            raise PartialFailure(f"verify failed on {names}; the other boards' results are in {path}")
        raise VerifyError(f"verify failed on every board ({names})", hint="see the errors above")
    if regressions:
        console.print(
            f"[red]{regressions} case(s) fail on a build where stock onnxruntime of its release passes[/]"
        )
        return REGRESSION_EXIT
    return 0
