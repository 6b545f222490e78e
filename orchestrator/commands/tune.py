"""`orch tune`: the fastest configuration of a model on each board, searched within a time budget."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass

from rich.markup import escape

from orchestrator.bench import results, stats, tune
from orchestrator.bench.plan import OPT_LEVELS, Setting
from orchestrator.bench.plan_options import make_settings, parse_opt_levels, parse_threads
from orchestrator.bench.report.tables import failures_table, summary_table
from orchestrator.bench.report.tuning import commands, tuning_tables
from orchestrator.bench.tune_execute import TunePlan, run_tune
from orchestrator.bench.tune_space import space_from_options
from orchestrator.commands import bench, options
from orchestrator.console import console, duration_text, emit_json, print_whole
from orchestrator.errors import UsageError

NAME = "tune"
HELP = "search builds x threads x opt level x EP x int8 for a model's fastest configuration, within a time budget"
DEFAULT_BUDGET = "20m"


def budget(text: str) -> float:
    try:
        return tune.parse_budget(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_selection_options(parser)
    what = parser.add_argument_group("what to search")
    bench.add_release_options(
        what,
        variants="the variants whose releases to search (default: every variant deployed with the current"
        " release's ORT version; stock's default settings join as the reference when deployed)",
    )
    what.add_argument(
        "--model",
        required=True,
        type=options.model_name_or_file,
        metavar="NAME",
        help="the deployed model to tune (its name or file)",
    )
    bench.add_setting_options(
        what,
        threads="intra-op thread counts to try (default 1,2,0; 0 = onnxruntime's default, one per physical core)",
        opt_levels=f"graph optimisation levels to try (default disable,basic,all; of {', '.join(OPT_LEVELS)})",
        eps="execution providers to try (default cpu, and xnnpack where the release's onnxruntime offers it)",
    )
    bench.add_quantize_options(what)
    how = parser.add_argument_group("how long (defaults suit a real board)")
    how.add_argument(
        "--budget",
        type=budget,
        default=tune.parse_budget(DEFAULT_BUDGET),
        metavar="DURATION",
        help=f"time for the search on each board, e.g. 90s, 20m, 1h30m (default {DEFAULT_BUDGET});"
        " the first rung always runs in full",
    )
    bench.add_run_options(how)
    options.add_json_option(parser)
    options.add_dry_run_option(parser)


@dataclass(frozen=True, kw_only=True)
class TuneRequest:
    """`orch tune`'s options, as parsed."""

    selection: options.Selection
    model: str
    budget_s: float
    measure: bench.MeasureOptions
    json: bool = False
    dry_run: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TuneRequest:
        return cls(
            selection=options.Selection.from_args(args),
            model=args.model,
            budget_s=args.budget,
            measure=bench.MeasureOptions.from_args(args),
            json=args.json,
            dry_run=args.dry_run,
        )

    def bench_request(self) -> bench.BenchRequest:
        """What bench's plan reads: the one model; the search decides the rounds; the Python agent runs."""
        return bench.BenchRequest(
            selection=self.selection,
            models=(self.model,),
            runner="python",
            rounds=None,
            cold_starts=0,
            measure=self.measure,
        )


def make_tune_plan(request: TuneRequest) -> TunePlan:
    measure = request.measure
    threads = parse_threads(bench.joined(measure.threads))
    opt_levels = parse_opt_levels(bench.joined(measure.opt_levels))
    eps = bench.joined(measure.eps)
    # The same refusals as bench's sweep (unknown EP, a value listed twice), then the search's defaults.
    make_settings(threads=threads, opt_levels=opt_levels, eps=eps, inter_threads=measure.inter_threads)
    space = space_from_options(
        threads=threads,
        opt_levels=opt_levels,
        eps=eps,
        inter_threads=measure.inter_threads,
        quantize=measure.quantize,
    )
    settings = tuple(dict.fromkeys([Setting(), *space.settings(space.eps or ("cpu",))]))
    base = bench.make_bench_plan(request.bench_request(), settings=settings)
    if len(base.models) != 1:
        raise UsageError(f"--model {request.model!r}: orch tune tunes one model at a time")
    guess = tune.run_guess(base, quick=measure.quick)
    per_variant = len(space.for_variant("?", space.eps or ("cpu",)))
    tune.check_budget(request.budget_s, per_variant * max(1, len(base.variants)), guess)
    return TunePlan(bench=base, space=space, budget_s=request.budget_s, run_guess_s=guess)


def dry_run(plan: TunePlan, *, as_json: bool) -> None:
    base = plan.bench
    variants = list(base.variants) or ["<each variant deployed with the current release's ORT version>"]
    eps = plan.space.eps or ("cpu",)
    per_variant = [c.label().split(" ", 1)[1] for c in plan.space.for_variant("?", eps)]
    count = len(per_variant) * max(1, len(base.variants))
    schedule = tune.expected_schedule(count, plan.budget_s, plan.run_guess_s)
    confirm = (
        f"then the best, its default settings and stock's topped up to {stats.runs_needed()} runs each,"
        " if the budget allows"
    )
    document = {
        "plan": base.as_dict(),
        "tune": {
            **plan.as_dict(),
            "variants": variants,
            "candidates_per_variant": per_variant,
            "references": "each variant's default settings and stock's, when a stock release of that ORT version"
            " is deployed, are candidates too",
            "schedule_if_half_dropped_each_rung": schedule,
            "confirm": confirm,
        },
    }
    if as_json:
        emit_json(document)
        return
    console.print(
        f"orch tune {escape(base.models[0])} on {escape(', '.join(b.name for b in base.boards))}:"
        f" budget {duration_text(plan.budget_s)} per board"
    )
    console.print(f"variants: {escape(', '.join(variants))} (+ stock's default settings when deployed)")
    more = "" if plan.space.eps else " (+ the same with xnnpack where a release offers it)"
    console.print(f"{len(per_variant)} candidates per variant{more}:")
    for label in per_variant:
        console.print(f"  {escape(label)}")
    console.print(
        f"schedule for {count} candidates, if each rung dropped half (the real cut keeps every close"
        f" contender), a run ~{plan.run_guess_s:.0f} s until measured:"
    )
    for rung in schedule:
        console.print(
            f"  rung {rung['rung']}: {rung['candidates']} candidates x {rung['runs_each']} runs"
            f" (~{duration_text(rung['estimated_s'])})"
        )
    console.print(escape(confirm))


def run(args: argparse.Namespace) -> int:
    request = TuneRequest.from_args(args)
    plan = make_tune_plan(request)
    if request.dry_run:
        dry_run(plan, as_json=request.json)
        return 0
    store = results.ResultStore()
    run_id = results.new_run_id()
    command = shlex.join(["orch", *sys.argv[1:]]) if sys.argv and sys.argv[0] else "orch tune"
    boards = plan.bench.boards
    console.print(
        f"tune run [bold]{run_id}[/] on {len(boards)} board(s): {escape(', '.join(b.name for b in boards))}"
    )
    done, found = run_tune(plan, run_id=run_id, command=command, store=store)
    record = store.load(run_id)
    if request.json:
        emit_json(
            {
                **bench.run_summary(done, record),
                "tune": found,
                "series": results.flatten_series([record]),
            }
        )
    series = record.series()
    if series:
        print_whole(summary_table(series))
    for table in tuning_tables(record):
        print_whole(table)
    for board, line in commands(record).items():
        console.print(f"{escape(board)}: the comparison again: [bold]{escape(line)}[/]", soft_wrap=True)
    if record.failed:
        print_whole(failures_table(record.failed))
    console.print(f"results stored in [bold]{escape(str(done.path))}[/] ({done.outcome.summary()})")
    console.print(f"report: orch report {run_id} --html report.html")
    bench.check_outcome(done, "tune")
    return 0
