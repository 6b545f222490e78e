"""`orch tune`: the fastest configuration of a model on each board, searched within a time budget."""

from __future__ import annotations

import argparse
import shlex
import sys

from rich.markup import escape

from orchestrator.bench import plan as bench_plan
from orchestrator.bench import results, stats, tune
from orchestrator.bench.plan import Setting
from orchestrator.bench.report.tables import failures_table, summary_table
from orchestrator.bench.report.tuning import commands, tuning_tables
from orchestrator.bench.tune_execute import TunePlan, run_tune
from orchestrator.commands import bench, options
from orchestrator.console import console, emit_json, print_whole
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
        "--model", required=True, metavar="NAME", help="the deployed model to tune (its name or file)"
    )
    bench.add_setting_options(
        what,
        threads="intra-op thread counts to try (default 1,2,0; 0 = onnxruntime's default, one per physical core)",
        opt_levels=f"graph optimisation levels to try (default disable,basic,all; of {', '.join(bench_plan.OPT_LEVELS)})",
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
    # What bench's plan reads and tune does not offer: the search decides the rounds; the Python agent runs.
    parser.set_defaults(rounds=None, runner="python", cold_starts=0)
    options.add_json_option(parser)
    options.add_dry_run_option(parser)


def plan_from_args(args: argparse.Namespace) -> TunePlan:
    threads = bench_plan.parse_threads(bench.joined(args.threads))
    opt_levels = bench_plan.parse_opt_levels(bench.joined(args.opt_level))
    eps = bench.joined(args.ep)
    # The same refusals as bench's sweep (unknown EP, a value listed twice), then the search's defaults.
    bench_plan.make_settings(
        threads=threads, opt_levels=opt_levels, eps=eps, inter_threads=args.inter_threads
    )
    space = tune.space_from_options(
        threads=threads,
        opt_levels=opt_levels,
        eps=eps,
        inter_threads=args.inter_threads,
        quantize=args.quantize,
    )
    settings = tuple(dict.fromkeys([Setting(), *space.settings(space.eps or ("cpu",))]))
    base = bench.plan_from_args(
        argparse.Namespace(**{**vars(args), "model": [args.model]}), settings=settings
    )
    if len(base.models) != 1:
        raise UsageError(f"--model {args.model!r}: orch tune tunes one model at a time")
    guess = tune.run_guess(base, quick=args.quick)
    per_variant = len(space.for_variant("?", space.eps or ("cpu",)))
    tune.check_budget(args.budget, per_variant * max(1, len(base.variants)), guess)
    return TunePlan(bench=base, space=space, budget_s=args.budget, run_guess_s=guess)


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
        f" budget {tune.fmt_duration(plan.budget_s)} per board"
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
            f" (~{tune.fmt_duration(rung['estimated_s'])})"
        )
    console.print(escape(confirm))


def run(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    if args.dry_run:
        dry_run(plan, as_json=args.json)
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
    if args.json:
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
