"""Instruction-count runs on the workstation: one JSON file each, ``<results>/instructions/<run-id>.json``,
written once (never overwritten) and read back in one place, typed.

A count run is found as a timed run is: by its id, a unique prefix, ``latest`` or ``latest~N``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TypedDict, cast

from orchestrator.bench.counting.verdict import ComparisonDocument, SeriesDocument
from orchestrator.bench.results import COUNTS_DIR
from orchestrator.errors import UsageError
from orchestrator.paths import results_dir

SCHEMA = "orch-instruction-counts/1"


class CounterDocument(TypedDict, total=False):
    """What counted: the counting qemu (instructions on the lab) or each board's perf (cycles)."""

    qemu: str  # qemu's version line
    plugin: str
    bundle: str  # the counting qemu's image tag
    perf: str  # "perf stat" with its events, on each board (its PMU)


def counter_text(counter: CounterDocument) -> str:
    """``qemu-aarch64 version 10.0.13 (insn (inline))`` or ``perf stat -e cycles:u (each board's PMU)``."""
    if "qemu" in counter:
        return f"{counter['qemu']} ({counter.get('plugin', '')})"
    return f"{counter.get('perf', '?')} (each board's PMU)"


class BoardCountDocument(TypedDict, total=False):
    status: str  # "ok", "failed", or "no counters" (--metric cycles: the board cannot count; why in error)
    cpu: str  # the CPU the board emulates (qemu's -cpu): counts compare only under the same one
    extra_inferences: dict[str, int]  # k per model
    calibration: dict[str, float]  # per model: instructions per inference of the first pair, which chose k
    error: str


class BuildDocument(TypedDict):
    """One ``--scope mlas-test`` build counted (``--workload mlas-test``), as its manifest says."""

    id: str  # target/variant/<release>-mlas-test@<digest of its out/>: what the series' "release" names
    target: str
    variant: str
    ort_version: str
    config: str  # build.py --config
    lto: bool
    compiler_flags: list[str]
    linker_flags: list[str]
    compiler: str
    created: str
    directory: str


class _WorkloadName(TypedDict):
    name: str
    unit: str  # what one value of a series is: one inference, one repetition of the filtered tests


class WorkloadDocument(_WorkloadName, total=False):
    """What was counted: ``models`` (the deployed releases' inferences) or ``mlas-test``, for which
    the rest is said."""

    executable: str  # onnxruntime_mlas_test
    filter: str  # the gtest filter
    arguments: list[str]  # gtest's other arguments
    builds: list[BuildDocument]  # baseline first


class _CountRunRequired(TypedDict):
    schema: str
    run_id: str
    created: str
    command: str
    metric: str
    note: str
    counter: CounterDocument
    boards: dict[str, BoardCountDocument]
    series: list[SeriesDocument]
    comparisons: list[ComparisonDocument]


class CountRunDocument(_CountRunRequired, total=False):
    workload: WorkloadDocument  # absent in the runs of an orch before workloads (models)


_REQUIRED = tuple(
    key for key in CountRunDocument.__annotations__ if key in CountRunDocument.__required_keys__
)


def counts_dir(root: Path | None = None) -> Path:
    return (root or results_dir()) / COUNTS_DIR


def write_counts(document: CountRunDocument, root: Path | None = None) -> Path:
    directory = counts_dir(root)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{document['run_id']}.json"
    try:
        with path.open("x") as handle:
            json.dump(document, handle, indent=1)
            handle.write("\n")
    except FileExistsError:
        raise UsageError(f"{path} exists already; results are never overwritten") from None
    return path


def resolve_counts(ref: str, root: Path | None = None) -> Path:
    """The file of a count run named by id, unique prefix, ``latest`` or ``latest~N``."""
    directory = counts_dir(root)
    runs = sorted(p.stem for p in directory.glob("*.json")) if directory.is_dir() else []
    if not runs:
        raise UsageError(
            f"no instruction-count runs in {directory}", hint="count first: orch bench --metric instructions"
        )
    latest = re.fullmatch(r"latest(?:~(\d+))?", ref)
    if latest:
        back = int(latest.group(1) or 0)
        if back >= len(runs):
            raise UsageError(f"{ref}: there are only {len(runs)} instruction-count runs")
        return directory / f"{runs[-1 - back]}.json"
    matches = [run for run in runs if run == ref] or [run for run in runs if run.startswith(ref)]
    if len(matches) != 1:
        found = "matches several" if matches else "matches no"
        raise UsageError(
            f"{ref!r} {found} instruction-count run in {directory}", hint=f"recent: {', '.join(runs[-5:])}"
        )
    return directory / f"{matches[0]}.json"


def load_counts(ref: str, root: Path | None = None) -> CountRunDocument:
    """A count run, checked: a file that is not JSON or lacks a key is named with what is wrong."""
    path = resolve_counts(ref, root)
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: not a readable instruction-count run ({error})") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path}: not an instruction-count run (a JSON {type(document).__name__})")
    missing = [key for key in _REQUIRED if key not in document]
    if missing or document.get("schema") != SCHEMA:
        what = (
            f"key '{missing[0]}' is missing"
            if missing
            else f"schema is {document.get('schema')!r}, not {SCHEMA}"
        )
        raise UsageError(f"{path}: not an instruction-count run: {what}")
    return cast(CountRunDocument, document)
