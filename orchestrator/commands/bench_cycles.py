"""`orch bench --metric cycles`: CPU cycles per inference from each real board's own PMU (perf), their
spread over rounds and the A/B verdict by the counts' rule. A board that cannot count (an emulated
one, a kernel without the PMU node, perf_event_paranoid above 2 without root, no perf) is named in
one line with the reason and left out; the others are counted."""

from __future__ import annotations

from rich.markup import escape

from orchestrator.bench.counting.execute import measure_on_boards
from orchestrator.bench.counting.perf_counters import CYCLES, EVENTS, SEPARATOR
from orchestrator.bench.counting.perf_execute import NoCounters, PerfMeter
from orchestrator.bench.counting.plan import BASE_INFERENCES, CountPlan
from orchestrator.bench.counting.verdict import comparisons
from orchestrator.bench.plan import BenchPlan
from orchestrator.bench.results import new_run_id
from orchestrator.commands.bench_count import (
    MODELS_WORKLOAD,
    raise_for_failures,
    refuse_unsupported,
    show_count_plan,
    show_counts,
    store_counts,
)
from orchestrator.console import console
from orchestrator.errors import BenchError

WHAT_CYCLES_ARE = (
    "user-space CPU cycles per inference from the board's own PMU (perf stat -e cycles:u): they include"
    " memory stalls and the clock's speed, so they vary from run to run more than instruction counts;"
    " compare them only on one board model, at one clock setting"
)


def run_cycle_counting(plan: BenchPlan, count: CountPlan, *, dry_run: bool, as_json: bool) -> int:
    refuse_unsupported(plan, metric="cycles")
    if dry_run:
        _show_plan(plan, count, as_json=as_json)
        return 0
    run_id = new_run_id()
    console.print(
        f"cycle counts [bold]{run_id}[/] on {len(plan.boards)} board(s):"
        f" {escape(', '.join(b.name for b in plan.boards))} (perf, each board's PMU)"
    )
    outcome = measure_on_boards(
        plan, count, lambda: PerfMeter(count=count), label="orch bench --metric cycles"
    )
    without = {name: o.message for name, o in outcome.failed.items() if isinstance(o.error, NoCounters)}
    failed = {name: o.message for name, o in outcome.failed.items() if name not in without}
    for message in without.values():
        console.print(f"[yellow]{escape(message)}[/]", soft_wrap=True)
    counted = outcome.values()
    if not counted and not failed:
        raise BenchError(
            "no board could count its cycles (each named above, with why)",
            hint="on the lab's emulated boards, count instructions: --metric instructions",
        )
    series = [one for board in counted.values() for one in board.series]
    compared = comparisons(series, metric="cycles")
    path = store_counts(
        run_id,
        {"perf": f"perf stat -e {','.join(EVENTS)} (read: {CYCLES})"},
        counted,
        compared,
        failed,
        workload=MODELS_WORKLOAD,
        note=WHAT_CYCLES_ARE,
        metric="cycles",
        without_counters=without,
    )
    show_counts(
        series, compared, as_json=as_json, run_id=run_id, path=path, unit="inference", note=WHAT_CYCLES_ARE,
        metric="cycles",
    )  # fmt: skip
    for name, message in failed.items():
        console.print(f"[red]{escape(name)} failed[/]: {escape(message)}", soft_wrap=True)
    raise_for_failures(failed, outcome.succeeded, path)
    return 0


def _show_plan(plan: BenchPlan, count: CountPlan, *, as_json: bool) -> None:
    show_count_plan(
        plan,
        count,
        as_json=as_json,
        metric="cycles",
        per_round=f"{BASE_INFERENCES} and {BASE_INFERENCES}+k inferences, one process each, per release"
        f" and model; each under perf stat -x {SEPARATOR} -e {','.join(EVENTS)}",
        note=WHAT_CYCLES_ARE,
        boards_without_counters="named in one line each and left out; the board's facts say why"
        " (orch inventory show NAME --probe)",
    )
