"""HTML sections beside the latency tables: what `orch tune` found, fp32 vs int8 (speed and agreement)
of the run, its cold starts and footprint (native runner and Python agent), and the newest `orch verify`
result of each board of the run (stored as ``results/verify-<id>.json``)."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

from orchestrator.bench import reading
from orchestrator.bench.native import cold_starts, pair_runners
from orchestrator.bench.report import native_tables, quantisation, tuning
from orchestrator.bench.results import RunRecord
from orchestrator.bench.series import Series
from orchestrator.paths import results_dir

Table = Callable[[Sequence[str], Sequence[Sequence[Any]]], str]


def tuning_section(record: RunRecord, table: Table) -> list[str]:
    """The rungs of an `orch tune` run (candidates, runs each, who was dropped and why) and the best
    configuration per board with its comparisons and the command that repeats them."""
    tuned = tuning.tuned_boards(record)
    if not tuned:
        return []
    parts = [
        "<h2>Tuning</h2>",
        (
            "<p>Successive halving: every rung runs each candidate left, interleaved, each run its own agent"
            " process; a candidate whose ratio to the best has a 95% interval wholly above 1 + threshold is"
            " dropped, the close ones get twice the runs in the next rung, until one is left or the budget is"
            " spent.</p>"
        ),
        table(tuning.RUNG_HEADERS, tuning.rung_rows(tuned)),
        table(tuning.RESULT_HEADERS, tuning.result_rows(tuned)),
        f"<p>{html.escape(tuning.caption(record))}.</p>",
    ]
    for board, command in tuning.commands(record).items():
        parts.append(
            f"<p>{html.escape(board)}, the comparison again: <code>{html.escape(command)}</code></p>"
        )
    return parts


def quantisation_section(record: RunRecord, series: Sequence[Series], table: Table) -> list[str]:
    rows = quantisation.rows(record.boards, series)
    if not rows:
        return []
    body = []
    for row in rows:
        diff, top1 = quantisation.agreement_cells(row.made)
        body.append(
            [
                row.board,
                row.release,
                row.model,
                row.made["mode"],
                ", ".join(f"{k} {v}" for k, v in row.ops().items()),
                f"{row.fp32.p50_ms:.3g} (n={row.fp32.n})" if row.fp32 else "-",
                f"{row.int8.p50_ms:.3g} (n={row.int8.n})" if row.int8 else "-",
                row.ratio(),
                diff,
                top1,
            ]
        )
    headers = [
        "board",
        "release",
        "model",
        "int8",
        "int8 operators",
        "fp32 p50 ms",
        "int8 p50 ms",
        "int8/fp32",
    ]
    return [
        "<h2>fp32 vs int8: speed and agreement</h2>",
        table([*headers, "max |diff|", "top-1 agreement"], body),
        (
            "<p>Agreement: both models on the board's CPU over the calibration samples. Timings on "
            "emulated boards are relative only.</p>"
        ),
    ]


def cold_start_section(record: RunRecord, table: Table) -> list[str]:
    """The terminal's cold-start and ratio tables, cell for cell, with their captions."""
    found = cold_starts(record.boards.values())
    if not found:
        return []
    parts = [
        f"<h2>{html.escape(native_tables.COLD_START_TITLE)}</h2>",
        table(native_tables.COLD_START_HEADERS, [native_tables.cold_start_cells(c) for c in found]),
        f"<p>{html.escape(native_tables.COLD_START_CAPTION)}</p>",
    ]
    pairs = pair_runners(found)
    if pairs:
        parts += [
            f"<h3>{html.escape(native_tables.RATIO_TITLE)}</h3>",
            table(native_tables.RATIO_HEADERS, [native_tables.ratio_cells(*pair) for pair in pairs]),
            f"<p>{html.escape(native_tables.RATIO_CAPTION)}</p>",
        ]
    return parts


class VerifiedBuild(TypedDict):
    """A build of a board in a stored `orch verify` result, as far as the report shows it (verify, a
    stage above bench, owns the format: ``commands/verify.py``'s VerifyDocument)."""

    release: str
    ort_version: str
    cases: int
    counts: dict[str, int]  # status -> cases
    reference_counts: dict[str, int]
    regressions: list[dict[str, str]]  # {"case": name, ...}
    gaps: list[dict[str, str]]


class LatestVerify(TypedDict):
    """A board's newest verify result: which run, which onnx release's cases, its builds."""

    run_id: str
    onnx: str
    builds: list[VerifiedBuild]


_BUILD = (
    ("release", "text"),
    ("ort_version", "text"),
    ("cases", "integer"),
    ("counts.pass", "integer"),
    ("counts.fail", "integer"),
    ("counts.unsupported", "integer"),
    ("reference_counts.pass", "integer"),
    ("regressions", "objects"),
    ("gaps", "list"),
)


def _verified(document: object, board: str) -> LatestVerify | None:
    """``board``'s result in a stored verify document, or None: not there, not ok, or not of the format."""
    try:
        stored = reading.check(
            document, "verify", (("run_id", "text"), ("onnx", "text?"), ("boards", "object"))
        )
        entry = reading.check(stored["boards"], "boards", ()).get(board)
        if not isinstance(entry, dict) or entry.get("status") != "ok":
            return None
        builds = reading.check(entry, board, (("builds", "objects"),))["builds"]
        for index, build in enumerate(cast(list[object], builds)):
            regressions = reading.check(build, f"builds[{index}]", _BUILD)["regressions"]
            for item in cast(list[object], regressions):
                reading.check(item, "regressions", (("case", "text"),))
    except reading.Malformed:
        return None
    return {
        "run_id": cast(str, stored["run_id"]),
        "onnx": cast(str, stored.get("onnx") or ""),
        "builds": cast(list[VerifiedBuild], builds),
    }


def latest_verify(boards: Sequence[str], directory: Path | None = None) -> dict[str, LatestVerify]:
    """Per board, the newest stored verify document that has it (damaged files are skipped)."""
    directory = directory or results_dir()
    found: dict[str, LatestVerify] = {}
    for path in sorted(directory.glob("verify-*.json"), reverse=True) if directory.is_dir() else []:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(document, dict) or document.get("schema") != "orch-verify/1":
            continue
        for board in boards:
            if board not in found and (verified := _verified(document, board)) is not None:
                found[board] = verified
    return found


def verify_section(record: RunRecord, table: Table, directory: Path | None = None) -> list[str]:
    return boards_verify_section(sorted(record.boards), table, directory)


def boards_verify_section(boards: Sequence[str], table: Table, directory: Path | None = None) -> list[str]:
    """The newest verify result of each of ``boards`` (for a page of several runs: once, for all)."""
    found = latest_verify(boards, directory)
    if not found:
        return []
    rows, listed = [], []
    for board, entry in found.items():
        for build in entry["builds"]:
            counted, ref = build["counts"], build["reference_counts"]
            rows.append(
                [
                    board,
                    build["release"],
                    build["ort_version"],
                    build["cases"],
                    counted["pass"],
                    counted["fail"],
                    counted["unsupported"],
                    ref["pass"],
                    len(build["regressions"]),
                    len(build["gaps"]),
                    entry["run_id"],
                ]
            )
            for item in build["regressions"]:
                listed.append(f"{board} {build['release']}: {item['case']} fails, stock passes")
    parts = [
        "<h2>Conformance (orch verify)</h2>",
        table(
            [
                "board",
                "build",
                "ort",
                "cases",
                "pass",
                "fail",
                "not supported",
                "stock pass",
                "regressions",
                "gaps",
                "verify run",
            ],
            rows,
        ),
        (
            "<p>ONNX's node cases and the deployed models on the board's CPU, against x86-64 stock "
            "onnxruntime of the same release (newest verify run per board).</p>"
        ),
    ]
    if listed:
        parts.append("<ul class='failed'>" + "".join(f"<li>{html.escape(x)}</li>" for x in listed) + "</ul>")
    return parts
