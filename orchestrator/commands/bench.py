"""`orch bench`: run on-device benchmarks on boards in parallel and compare."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from rich.markup import escape

from orchestrator.bench import plan as bench_plan
from orchestrator.bench import results
from orchestrator.bench.calibration import parse_specs
from orchestrator.bench.execute import BenchRun, run_bench
from orchestrator.bench.plan import AgentOptions
from orchestrator.bench.report.native_tables import after_run_tables, cold_start_rows
from orchestrator.bench.report.tables import comparison_warnings, run_tables
from orchestrator.bench.series import pairings_within
from orchestrator.commands import options
from orchestrator.console import console, emit_json, print_whole
from orchestrator.errors import BenchError, PartialFailure

# Explicit options always win; --quick only changes the defaults.
# Runs (agent processes) are the statistics' unit: a board's defaults give 10 per side, short ones
# (a verdict needs 4 at least; see stats.runs_needed). On a Pi 4 class board one agent run of a
# small model is ~3 s of start-up + 3 s measured + 2 s cooldown: an A/B of two builds is ~20 runs,
# under 3 minutes per model. --quick is for emulated boards, where start-up alone takes ~15 s.
BOARD_DEFAULTS = {"rounds": 10, "cooldown": 2.0, "warmup": 5, "min_runs": 30, "min_duration": 3.0}
# --quick: 5 rounds, one more than a verdict needs, so that one run disturbed by a busy machine
# (under emulation a run's median can move tenfold) does not make the verdict impossible.
QUICK_DEFAULTS = {"rounds": 5, "cooldown": 0.0, "warmup": 1, "min_runs": 5, "min_duration": 0.0}

NAME = "bench"
HELP = "run on-device benchmarks on boards in parallel and compare"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_selection_options(parser)
    what = parser.add_argument_group("what to measure")
    add_release_options(what)
    what.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="deployed model name(s), comma-separated or repeated; default: every deployed model",
    )
    add_setting_options(
        what,
        threads="intra-op thread counts to sweep (0 = onnxruntime's default)",
        opt_levels=f"graph optimisation levels to sweep: {', '.join(bench_plan.OPT_LEVELS)}",
        eps="execution providers to sweep: cpu, xnnpack, cuda, tensorrt (default cpu)",
    )
    what.add_argument(
        "--runner",
        choices=bench_plan.RUNNER_CHOICES,
        default="python",
        help="what runs the model: the Python agent, the native runner (ORT's C API), or both side by side",
    )
    add_quantize_options(what)
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
        choices=bench_plan.QUANTIZE_MODES,
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


def run_summary(done: BenchRun, record: results.RunRecord) -> dict[str, Any]:
    """The head of a run's ``--json`` document (bench and tune): where it is stored, how each board ended."""
    return {
        "run_id": record.run_id,
        "path": str(done.path),
        "wall_s": done.wall_s,
        "boards": {
            name: {"status": doc["status"], "error": doc.get("error")} for name, doc in record.boards.items()
        },
    }


def joined(values: list[str]) -> list[str]:
    return [item for value in values for item in bench_plan.split_list(value)]


def plan_from_args(
    args: argparse.Namespace, *, settings: tuple[bench_plan.Setting, ...] | None = None
) -> bench_plan.BenchPlan:
    """The BenchPlan of the command line (``settings`` given: those instead of the options' sweep)."""
    boards = options.selected_boards(options.Selection.from_args(args))
    pin_cores = bench_plan.parse_pin_cores(args.pin_cores) if args.pin_cores else ()
    if settings is None:
        threads = bench_plan.parse_threads(joined(args.threads))
        settings = bench_plan.make_settings(
            threads=threads or ([len(pin_cores)] if pin_cores else []),
            opt_levels=bench_plan.parse_opt_levels(joined(args.opt_level)),
            eps=joined(args.ep),
            inter_threads=args.inter_threads,
        )
    defaults = QUICK_DEFAULTS if args.quick else BOARD_DEFAULTS

    def pick(name: str) -> float:
        value = getattr(args, name)
        return defaults[name] if value is None else value

    agent = AgentOptions(
        warmup=int(pick("warmup")),
        min_runs=int(pick("min_runs")),
        min_duration=float(pick("min_duration")),
        max_runs=args.max_runs,
        shapes=tuple(args.shape),
        sysfs_root=args.sysfs_root,
        pin_cores=pin_cores,
    )
    rounds, cooldown = int(pick("rounds")), float(pick("cooldown"))
    variants = joined(args.variant)
    cold_starts = args.cold_starts
    if cold_starts is None:
        cold_starts = 0 if args.runner == "python" else (3 if args.quick else 5)
    return bench_plan.make_plan(
        boards,
        variants=variants,
        ort_versions=bench_plan.parse_ort_versions(joined(args.ort_version), variants),
        allow_version_mismatch=args.allow_version_mismatch,
        models=joined(args.model),
        settings=settings,
        quantize=args.quantize,
        calibration=parse_specs(args.calibration),
        rounds=rounds,
        cooldown_s=cooldown,
        agent=agent,
        pin_clocks=args.pin_clocks,
        parallel=args.parallel,
        step_timeout_s=args.step_timeout,
        threshold=args.threshold,
        runner=args.runner,
        cold_starts=cold_starts,
    )


def run(args: argparse.Namespace) -> int:

    plan = plan_from_args(args)
    if args.dry_run:
        document = plan.as_dict()
        document["steps_per_board"] = (
            plan.rounds
            * len(plan.settings)
            * max(1, len(plan.variants))
            * (2 if plan.quantize else 1)
            * len(plan.runners)
            * (2 if plan.cold_starts else 1)
        )
        document["steps_per_board_note"] = "per model deployed (or per --model)"
        if args.json:
            emit_json(document)
        else:
            console.print_json(data=document)
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
    series = record.series()
    pairings = pairings_within(series, threshold=plan.threshold)
    if args.json:
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
    console.print(f"report: orch report {run_id} --html report.html")
    check_outcome(done)
    return 0


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
