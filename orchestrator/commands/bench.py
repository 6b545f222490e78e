"""`orch bench`: run on-device benchmarks on boards in parallel and compare."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from rich.markup import escape

from orchestrator.bench import results
from orchestrator.bench.calibration import parse_specs
from orchestrator.bench.counting.mlas_plan import WORKLOADS
from orchestrator.bench.execute import BenchRun, run_bench
from orchestrator.bench.plan import (
    OPT_LEVELS,
    QUANTIZE_MODES,
    RUNNER_CHOICES,
    AgentOptions,
    BenchPlan,
    QuantizeMode,
    Setting,
)
from orchestrator.bench.plan_options import (
    make_plan,
    make_settings,
    parse_opt_levels,
    parse_ort_versions,
    parse_pin_cores,
    parse_threads,
    split_list,
)
from orchestrator.bench.report.native_tables import after_run_tables, cold_start_rows
from orchestrator.bench.report.tables import comparison_warnings, run_tables
from orchestrator.bench.series import pairings_within
from orchestrator.commands import options
from orchestrator.commands.bench_count import count_plan, run_counting, run_mlas_counting
from orchestrator.commands.bench_cycles import run_cycle_counting
from orchestrator.console import console, emit_json, print_whole
from orchestrator.deploy.lock_settings import DEFAULT_LOCK_TIMEOUT
from orchestrator.errors import BenchError, PartialFailure, UsageError

# Explicit options always win; --quick only changes the defaults.
# Runs (agent processes) are the statistics' unit: a board's defaults give 10 per side, short ones
# (a verdict needs 4 at least; see stats.runs_needed). On a Pi 4 class board one agent run of a
# small model is ~3 s of start-up + 3 s measured + 2 s cooldown: an A/B of two builds is ~20 runs,
# under 3 minutes per model. --quick is for emulated boards, where start-up alone takes ~15 s.
BOARD_DEFAULTS: dict[str, float] = {
    "rounds": 10,
    "cooldown": 2.0,
    "warmup": 5,
    "min_runs": 30,
    "min_duration": 3.0,
}
# --quick: 5 rounds, one more than a verdict needs, so that one run disturbed by a busy machine
# (under emulation a run's median can move tenfold) does not make the verdict impossible.
QUICK_DEFAULTS: dict[str, float] = {
    "rounds": 5,
    "cooldown": 0.0,
    "warmup": 1,
    "min_runs": 5,
    "min_duration": 0.0,
}

NAME = "bench"
HELP = "run on-device benchmarks on boards in parallel and compare"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_selection_options(parser)
    what = parser.add_argument_group("what to measure")
    add_release_options(what)
    what.add_argument(
        "--model",
        action="append",
        type=options.model_name_or_file,
        default=[],
        metavar="NAME",
        help="deployed model name(s), comma-separated or repeated; default: every deployed model",
    )
    add_setting_options(
        what,
        threads="intra-op thread counts to sweep (0 = onnxruntime's default)",
        opt_levels=f"graph optimisation levels to sweep: {', '.join(OPT_LEVELS)}",
        eps="execution providers to sweep: cpu, xnnpack, cuda, tensorrt (default cpu)",
    )
    what.add_argument(
        "--runner",
        choices=RUNNER_CHOICES,
        default="python",
        help="what runs the model: the Python agent, the native runner (ORT's C API), or both side by side",
    )
    add_quantize_options(what)
    what.add_argument(
        "--metric",
        choices=("time", "instructions", "cycles"),
        default="time",
        help="time: wall time per inference (default); instructions: instructions retired per inference,"
        " counted on the lab's emulated boards (repeatable where emulated time is not; not cycles);"
        " cycles: CPU cycles per inference from a real board's PMU (perf), where the board can count",
    )
    what.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="models",
        help="--metric instructions: what is counted: models (default), the deployed releases' inferences;"
        " mlas-test, ORT's MLAS kernel tests in the newest `orch build --scope mlas-test` build of each"
        " --variant for the board's target (a compiler flag's verdict in minutes, no wheel)",
    )
    what.add_argument(
        "--fail-above",
        type=options.percentage,
        metavar="PCT",
        help="--metric instructions: exit 7 when a candidate counts significantly more than the baseline"
        " (the first --variant), by more than PCT percent",
    )
    how = parser.add_argument_group("how long (defaults suit a real board)")
    how.add_argument(
        "--rounds",
        type=options.positive_int,
        help="interleaved rounds (A B A B ...), each agent run its own process, default 10 (--quick 5)",
    )
    add_run_options(how)
    how.add_argument(
        "--cold-starts",
        type=options.non_negative_int,
        metavar="N",
        help="process launches per combination and round, each one cold-start sample"
        " (default 5 with --runner native|both, else 0; --quick: 3)",
    )
    options.add_json_option(parser)
    options.add_dry_run_option(parser)


# The option groups below are shared with `orch tune`, which measures through the same plan.
Group = argparse._ActionsContainer


def add_release_options(
    what: Group,
    variants: str = "A/B a release of each variant (first = baseline); default: the current release",
) -> None:
    what.add_argument("--variant", action="append", default=[], metavar="A,B", help=variants)
    what.add_argument(
        "--ort-version",
        action="append",
        default=[],
        metavar="X.Y.Z",
        help="measure the releases of this ONNX Runtime version (VARIANT=X.Y.Z for one variant); needed"
        " when a variant has releases of several versions deployed",
    )
    what.add_argument(
        "--allow-version-mismatch",
        action="store_true",
        help="allow an A/B of releases of different ORT versions (every table then says so)",
    )


def add_setting_options(what: Group, *, threads: str, opt_levels: str, eps: str) -> None:
    what.add_argument("--threads", action="append", default=[], metavar="N,M", help=threads)
    what.add_argument(
        "--pin-cores",
        metavar="LIST",
        help="pin each intra-op thread to one of these CPUs (e.g. 1-3: the calling thread on the first);"
        " --threads defaults to their number; both runners",
    )
    what.add_argument(
        "--inter-threads",
        type=options.non_negative_int,
        default=0,
        metavar="N",
        help="inter-op threads (0 = default)",
    )
    what.add_argument("--opt-level", action="append", default=[], metavar="L,M", help=opt_levels)
    what.add_argument("--ep", action="append", default=[], metavar="EP", help=eps)


def add_quantize_options(what: Group) -> None:
    what.add_argument(
        "--quantize",
        choices=QUANTIZE_MODES,
        help="also measure an int8 copy of each model (quantised on the workstation)",
    )
    what.add_argument(
        "--calibration",
        action="append",
        default=[],
        metavar="[INPUT=]FILE.npy",
        help="--quantize static: calibration samples, [samples, *input shape] per input "
        "(default: generated from the input metadata, with a warning)",
    )
    what.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=DxD",
        help="shape for a model input with free dimensions, e.g. input=1x3x224x224",
    )


def add_run_options(how: Group) -> None:
    """How long each agent run measures, and how runs are spread over the boards."""
    how.add_argument(
        "--cooldown",
        type=options.non_negative_float,
        metavar="S",
        help="seconds between agent runs, default 2",
    )
    how.add_argument(
        "--warmup", type=options.non_negative_int, help="warm-up inferences after the first one, default 5"
    )
    how.add_argument(
        "--min-runs", type=options.positive_int, help="minimum timed inferences per agent run, default 30"
    )
    how.add_argument(
        "--min-duration",
        type=options.non_negative_float,
        metavar="S",
        help="minimum timed seconds per agent run, default 3",
    )
    how.add_argument(
        "--max-runs",
        type=options.positive_int,
        default=100000,
        help="stop an agent run after this many inferences",
    )
    how.add_argument(
        "--quick",
        dest="quick",
        action="store_true",
        help="defaults for emulated boards: 5 rounds, no cooldown, 1 warm-up, 5 runs, no minimum time",
    )
    how.add_argument(
        "--step-timeout",
        type=options.positive_float,
        default=1800.0,
        metavar="S",
        help="limit for one agent run",
    )
    how.add_argument(
        "--parallel", type=options.positive_int, default=8, help="boards benchmarked at the same time"
    )
    how.add_argument(
        "--lock-timeout",
        type=options.non_negative_float,
        default=DEFAULT_LOCK_TIMEOUT,
        metavar="S",
        help="how long to wait for a board another orch is deploying to (its lock) before refusing it"
        f" (default {DEFAULT_LOCK_TIMEOUT:g})",
    )
    how.add_argument(
        "--pin-clocks",
        action="store_true",
        help="set the cpufreq governor to performance (and jetson_clocks) for the run, then restore it",
    )
    how.add_argument(
        "--sysfs-root",
        default=None,
        metavar="PATH",
        help="where the agent and --pin-clocks find sysfs on the board (default /sys)",
    )
    how.add_argument(
        "--threshold",
        type=options.non_negative_float,
        default=0.05,
        help="smallest change called faster/slower, as a fraction (default 0.05 = 5%%)",
    )


class BoardEnd(TypedDict):
    status: str | None
    error: str | None


class RunSummary(TypedDict):
    """The head of a run's ``--json`` document."""

    run_id: str
    path: str
    wall_s: float
    boards: dict[str, BoardEnd]


def run_summary(done: BenchRun, record: results.RunRecord) -> RunSummary:
    """The head of a run's ``--json`` document (bench and tune): where it is stored, how each board ended."""
    return {
        "run_id": record.run_id,
        "path": str(done.path),
        "wall_s": done.wall_s,
        "boards": {
            name: {"status": doc["status"], "error": doc["error"]} for name, doc in record.boards.items()
        },
    }


def joined(values: Sequence[str]) -> list[str]:
    return [item for value in values for item in split_list(value)]


@dataclass(frozen=True, kw_only=True)
class MeasureOptions:
    """The option groups bench and tune share (releases, settings, quantisation, run lengths), as parsed."""

    variants: tuple[str, ...]  # as given: comma-separated, repeated
    ort_versions: tuple[str, ...]
    allow_version_mismatch: bool
    threads: tuple[str, ...]
    pin_cores: str | None
    inter_threads: int
    opt_levels: tuple[str, ...]
    eps: tuple[str, ...]
    quantize: QuantizeMode | None
    calibration: tuple[str, ...]
    shapes: tuple[str, ...]
    cooldown: float | None  # None: the default (BOARD_DEFAULTS or QUICK_DEFAULTS)
    warmup: int | None
    min_runs: int | None
    min_duration: float | None
    max_runs: int
    quick: bool
    step_timeout: float
    lock_timeout: float
    parallel: int
    pin_clocks: bool
    sysfs_root: str | None
    threshold: float

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MeasureOptions:
        """The options of add_release_options, add_setting_options, add_quantize_options and add_run_options."""
        return cls(
            variants=tuple(args.variant),
            ort_versions=tuple(args.ort_version),
            allow_version_mismatch=args.allow_version_mismatch,
            threads=tuple(args.threads),
            pin_cores=args.pin_cores,
            inter_threads=args.inter_threads,
            opt_levels=tuple(args.opt_level),
            eps=tuple(args.ep),
            quantize=args.quantize,  # argparse's choices: None or a QuantizeMode
            calibration=tuple(args.calibration),
            shapes=tuple(args.shape),
            cooldown=args.cooldown,
            warmup=args.warmup,
            min_runs=args.min_runs,
            min_duration=args.min_duration,
            max_runs=args.max_runs,
            quick=args.quick,
            step_timeout=args.step_timeout,
            lock_timeout=args.lock_timeout,
            parallel=args.parallel,
            pin_clocks=args.pin_clocks,
            sysfs_root=args.sysfs_root,
            threshold=args.threshold,
        )


@dataclass(frozen=True, kw_only=True)
class BenchRequest:
    """`orch bench`'s options, as parsed."""

    selection: options.Selection
    models: tuple[str, ...]  # as given: comma-separated, repeated
    runner: str
    rounds: int | None  # None: the default (10, --quick 5)
    cold_starts: int | None  # None: the runner's default
    measure: MeasureOptions
    json: bool = False
    dry_run: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BenchRequest:
        return cls(
            selection=options.Selection.from_args(args),
            models=tuple(args.model),
            runner=args.runner,
            rounds=args.rounds,
            cold_starts=args.cold_starts,
            measure=MeasureOptions.from_args(args),
            json=args.json,
            dry_run=args.dry_run,
        )


def make_bench_plan(request: BenchRequest, *, settings: tuple[Setting, ...] | None = None) -> BenchPlan:
    """The BenchPlan of the command line (``settings`` given: those instead of the options' sweep)."""
    measure = request.measure
    boards = options.selected_boards(request.selection)
    pin_cores = parse_pin_cores(measure.pin_cores) if measure.pin_cores else ()
    if settings is None:
        threads = parse_threads(joined(measure.threads))
        settings = make_settings(
            threads=threads or ([len(pin_cores)] if pin_cores else []),
            opt_levels=parse_opt_levels(joined(measure.opt_levels)),
            eps=joined(measure.eps),
            inter_threads=measure.inter_threads,
        )
    defaults = QUICK_DEFAULTS if measure.quick else BOARD_DEFAULTS

    def pick(name: str, value: float | None) -> float:
        return defaults[name] if value is None else value

    agent = AgentOptions(
        warmup=int(pick("warmup", measure.warmup)),
        min_runs=int(pick("min_runs", measure.min_runs)),
        min_duration=float(pick("min_duration", measure.min_duration)),
        max_runs=measure.max_runs,
        shapes=measure.shapes,
        sysfs_root=measure.sysfs_root,
        pin_cores=pin_cores,
    )
    variants = joined(measure.variants)
    cold_starts = request.cold_starts
    if cold_starts is None:
        cold_starts = 0 if request.runner == "python" else (3 if measure.quick else 5)
    return make_plan(
        boards,
        variants=variants,
        ort_versions=parse_ort_versions(joined(measure.ort_versions), variants),
        allow_version_mismatch=measure.allow_version_mismatch,
        models=joined(request.models),
        settings=settings,
        quantize=measure.quantize,
        calibration=parse_specs(measure.calibration),
        rounds=int(pick("rounds", request.rounds)),
        cooldown_s=float(pick("cooldown", measure.cooldown)),
        agent=agent,
        pin_clocks=measure.pin_clocks,
        parallel=measure.parallel,
        step_timeout_s=measure.step_timeout,
        lock_timeout_s=measure.lock_timeout,
        threshold=measure.threshold,
        runner=request.runner,
        cold_starts=cold_starts,
    )


def run(args: argparse.Namespace) -> int:
    request = BenchRequest.from_args(args)
    plan = make_bench_plan(request)
    if args.fail_above is not None and args.metric != "instructions":
        raise UsageError("--fail-above guards instruction counts: add --metric instructions")
    if args.workload != "models" and args.metric != "instructions":
        raise UsageError(f"--workload {args.workload} is counted: add --metric instructions")
    if args.metric == "cycles":
        count = count_plan(plan, rounds=request.rounds, fail_above=args.fail_above, metric="cycles")
        return run_cycle_counting(plan, count, dry_run=request.dry_run, as_json=request.json)
    if args.metric == "instructions":
        count = count_plan(plan, rounds=request.rounds, fail_above=args.fail_above)
        if args.workload == "mlas-test":
            return run_mlas_counting(plan, count, dry_run=request.dry_run, as_json=request.json)
        return run_counting(plan, count, dry_run=request.dry_run, as_json=request.json)
    if request.dry_run:
        _dry_run(plan, as_json=request.json)
        return 0
    store = results.ResultStore()
    run_id = results.new_run_id()
    command = shlex.join(["orch", *sys.argv[1:]]) if sys.argv and sys.argv[0] else "orch bench"
    console.print(
        f"bench run [bold]{run_id}[/] on {len(plan.boards)} board(s): "
        f"{escape(', '.join(b.name for b in plan.boards))}"
    )
    done = run_bench(plan, run_id=run_id, command=command, store=store)
    record = store.load(run_id)
    _show(done, record, plan, as_json=request.json)
    check_outcome(done)
    return 0


def _dry_run(plan: BenchPlan, *, as_json: bool) -> None:
    steps = (
        plan.rounds
        * len(plan.settings)
        * max(1, len(plan.variants))
        * (2 if plan.quantize else 1)
        * len(plan.runners)
        * (2 if plan.cold_starts else 1)
    )
    document = {
        **plan.as_dict(),
        "steps_per_board": steps,
        "steps_per_board_note": "per model deployed (or per --model)",
    }
    if as_json:
        emit_json(document)
    else:
        console.print_json(data=document)


def _show(done: BenchRun, record: results.RunRecord, plan: BenchPlan, *, as_json: bool) -> None:
    """The run's --json document, its tables and where it is stored."""
    series = record.series()
    pairings = pairings_within(series, threshold=plan.threshold)
    if as_json:
        emit_json(
            {
                **run_summary(done, record),
                "series": results.flatten_series([record]),
                "comparisons": [p.as_dict() for p in pairings],
                "quantization": {
                    name: doc["quantization"]
                    for name, doc in record.boards.items()
                    if doc.get("quantization")
                },
                "cold_starts": cold_start_rows(record.boards),
            }
        )
    for table in run_tables(series, pairings, record.failed):
        print_whole(table)
    for warning in comparison_warnings(pairings):
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    for table in after_run_tables(record.boards, series):
        print_whole(table)
    console.print(f"results stored in [bold]{escape(str(done.path))}[/] ({done.outcome.summary()})")
    console.print(f"report: orch report {done.run_id} --html report.html")


def check_outcome(done: BenchRun, what: str = "bench") -> None:
    """Exit as the fleet ended: PartialFailure (8) when some boards failed, BenchError when all did."""
    failed = done.outcome.failed
    if failed:
        names = ", ".join(failed)
        if done.outcome.succeeded:
            raise PartialFailure(
                f"{what} failed on {names}; the other boards' results are stored in {done.path}"
            )
        raise BenchError(f"{what} failed on every board ({names})", hint="see the errors above")
