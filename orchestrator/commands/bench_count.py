"""`orch bench --metric instructions`: instructions per inference on the lab's emulated boards, their
spread over rounds and the A/B verdict; with --fail-above, a regression guard (exit 7)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from orchestrator.adapters.engine import Engine
from orchestrator.artifacts.mlas_tests import MLAS_TEST_EXE, MlasTestBuild, builds_root, list_mlas_test_builds
from orchestrator.bench.counting.execute import BoardCounts, count_on_boards
from orchestrator.bench.counting.mlas_execute import count_mlas_on_boards
from orchestrator.bench.counting.mlas_plan import (
    BASE_REPEATS,
    GTEST_QUIET,
    MlasCountPlan,
    choose_builds,
)
from orchestrator.bench.counting.plan import (
    COUNT_ENVIRONMENT,
    TARGET_INSTRUCTIONS,
    CountPlan,
)
from orchestrator.bench.counting.store import (
    SCHEMA,
    BoardCountDocument,
    BuildDocument,
    CounterDocument,
    WorkloadDocument,
    write_counts,
)
from orchestrator.bench.counting.verdict import (
    RULE,
    CountComparison,
    CountSeries,
    comparisons,
)
from orchestrator.bench.plan import BenchPlan, Setting
from orchestrator.bench.results import new_run_id, utc_now
from orchestrator.console import console, emit_json, print_whole
from orchestrator.errors import BenchError, PartialFailure, UsageError
from orchestrator.lab.counting_qemu import CountingQemu, ensure_counting_qemu

WHAT_A_COUNT_IS = (
    "instructions retired per inference under qemu's emulated CPU: repeatable, not cycles (memory"
    " stalls, caches and vector width are invisible) and comparable only under the same -cpu"
)
WHAT_AN_MLAS_COUNT_IS = (
    "instructions retired per repetition of the filtered MLAS tests (their kernels and the tests' own"
    " reference code) under qemu's emulated CPU: repeatable, not cycles (memory stalls, caches and"
    " vector width are invisible) and comparable only under the same -cpu"
)
MODELS_WORKLOAD: WorkloadDocument = {"name": "models", "unit": "one inference"}


def refuse_unsupported(plan: BenchPlan, metric: str = "instructions") -> None:
    """What a count cannot do yet, refused by the dry run and the real run alike."""
    if plan.runners != ("python",):
        raise UsageError(f"--metric {metric} counts the Python agent's process: leave --runner out")
    if plan.quantize:
        raise UsageError(f"--metric {metric} does not count int8 copies (--quantize) yet")
    if len(plan.settings) > 1:
        raise UsageError(f"--metric {metric} counts one setting: give at most one --opt-level and --ep")
    if any(setting.intra_threads not in (0, 1) for setting in plan.settings):
        raise UsageError(f"--metric {metric} counts with one intra-op thread: leave --threads out")


def count_plan(
    plan: BenchPlan, *, rounds: int | None, fail_above: float | None, metric: str = "instructions"
) -> CountPlan:
    if rounds == 1:
        raise UsageError(
            f"--metric {metric} needs 2 rounds at least: the verdict compares with the noise between them"
        )
    setting = plan.settings[0]
    return CountPlan(
        rounds=rounds or CountPlan.rounds, opt_level=setting.opt_level, ep=setting.ep, fail_above=fail_above
    )


def run_counting(plan: BenchPlan, count: CountPlan, *, dry_run: bool, as_json: bool) -> int:
    refuse_unsupported(plan)
    if dry_run:
        _show_plan(plan, count, as_json=as_json)
        return 0
    kit = _counting_qemu()
    run_id = new_run_id()
    console.print(
        f"instruction counts [bold]{run_id}[/] on {len(plan.boards)} board(s):"
        f" {escape(', '.join(b.name for b in plan.boards))} ({escape(kit.version)})"
    )
    outcome = count_on_boards(plan, count, kit)
    counted = outcome.values()
    series = [one for board in counted.values() for one in board.series]
    compared = comparisons(series)
    path = store_counts(
        run_id,
        qemu_counter(kit),
        counted,
        compared,
        {n: o.message for n, o in outcome.failed.items()},
        workload=MODELS_WORKLOAD,
        note=WHAT_A_COUNT_IS,
    )
    show_counts(
        series, compared, as_json=as_json, run_id=run_id, path=path, unit="inference", note=WHAT_A_COUNT_IS
    )
    for name, failure in outcome.failed.items():
        console.print(f"[red]{escape(name)} failed[/]: {escape(failure.message)}", soft_wrap=True)
    _check(outcome.failed, outcome.succeeded, compared, count.fail_above, path)
    return 0


def refuse_for_mlas(plan: BenchPlan) -> None:
    """What the MLAS tests' count does not take: the options of a model's inference."""
    for given, option in (
        (plan.runners != ("python",), "--runner"),
        (bool(plan.models), "--model"),
        (plan.quantize is not None, "--quantize"),
        (plan.settings != (Setting(),), "--threads, --opt-level, --ep and --inter-threads"),
        (bool(plan.agent.shapes), "--shape"),
        (plan.allow_version_mismatch, "--allow-version-mismatch"),
    ):
        if given:
            raise UsageError(
                f"--workload mlas-test counts ORT's MLAS tests, one thread, on builds of one release:"
                f" leave {option} out"
            )


def mlas_count_plan(plan: BenchPlan, count: CountPlan) -> MlasCountPlan:
    """The builds to count per target (a UsageError naming what to build when one is missing)."""
    refuse_for_mlas(plan)
    targets = choose_builds(
        [(board.name, board.target) for board in plan.boards],
        plan.variants,
        list_mlas_test_builds,
        ort_versions=plan.ort_versions,
        where=str(builds_root()),
    )
    return MlasCountPlan(targets=targets, rounds=count.rounds, fail_above=count.fail_above)


def run_mlas_counting(plan: BenchPlan, count: CountPlan, *, dry_run: bool, as_json: bool) -> int:
    """``--workload mlas-test``: the MLAS tests of each --variant's newest mlas-test build, counted."""
    mlas = mlas_count_plan(plan, count)
    workload = _mlas_workload(mlas)
    if dry_run:
        document = {
            "metric": "instructions",
            "workload": workload,
            "boards": [board.name for board in plan.boards],
            "rounds": mlas.rounds,
            "fail_above": mlas.fail_above,
            "per_round": f"{BASE_REPEATS} and {BASE_REPEATS}+k repetitions (--gtest_repeat), one process each,"
            f" per build; k chosen from the baseline so that k repetitions retire >= {TARGET_INSTRUCTIONS:,}"
            " instructions",
            "environment": list(COUNT_ENVIRONMENT),
            "note": WHAT_AN_MLAS_COUNT_IS,
        }
        if as_json:
            emit_json(document)
        else:
            console.print_json(data=document)
        return 0
    kit = _counting_qemu()
    run_id = new_run_id()
    console.print(
        f"instruction counts [bold]{run_id}[/] of {MLAS_TEST_EXE} on {len(plan.boards)} board(s):"
        f" {escape(', '.join(b.name for b in plan.boards))} ({escape(kit.version)})"
    )
    outcome = count_mlas_on_boards(plan, mlas, kit)
    counted = outcome.values()
    series = [one for board in counted.values() for one in board.series]
    compared = comparisons(series)
    failed = {n: o.message for n, o in outcome.failed.items()}
    path = store_counts(
        run_id, qemu_counter(kit), counted, compared, failed, workload=workload, note=WHAT_AN_MLAS_COUNT_IS
    )
    show_counts(
        series,
        compared,
        as_json=as_json,
        run_id=run_id,
        path=path,
        unit=f"repetition of the {MLAS_TEST_EXE} filter",
        note=WHAT_AN_MLAS_COUNT_IS,
    )
    for name, failure in outcome.failed.items():
        console.print(f"[red]{escape(name)} failed[/]: {escape(failure.message)}", soft_wrap=True)
    _check(outcome.failed, outcome.succeeded, compared, mlas.fail_above, path)
    return 0


def _mlas_workload(mlas: MlasCountPlan) -> WorkloadDocument:
    builds = [build for one in mlas.targets for build in one.builds]
    return {
        "name": "mlas-test",
        "unit": "one repetition of the filtered tests (--gtest_repeat)",
        "executable": MLAS_TEST_EXE,
        "filter": mlas.gtest_filter,
        "arguments": list(GTEST_QUIET),
        "builds": [_build_document(build) for build in builds],
    }


def _build_document(build: MlasTestBuild) -> BuildDocument:
    return {
        "id": build.id,
        "target": build.target,
        "variant": build.variant,
        "ort_version": build.ort_version,
        "config": build.config,
        "lto": build.lto,
        "compiler_flags": list(build.compiler_flags),
        "linker_flags": list(build.linker_flags),
        "compiler": build.compiler,
        "created": build.created,
        "directory": str(build.directory),
    }


def _counting_qemu() -> CountingQemu:
    engine = Engine()
    try:
        # The bundle runs where the engine runs: the workstation, whose architecture qemu emulates from.
        arch = str(engine.info().get("Architecture", "x86_64"))
        return ensure_counting_qemu(engine, arch, lambda line: console.print(escape(line), soft_wrap=True))
    finally:
        engine.close()


def _show_plan(plan: BenchPlan, count: CountPlan, *, as_json: bool) -> None:
    show_count_plan(
        plan,
        count,
        as_json=as_json,
        metric="instructions",
        per_round="one process per release and model: start-up and the first inference, then children"
        " forked from it running 0, k and 0 inferences (k's count: the k-child's less the 0-children's"
        f" mean); k chosen per model so that k inferences retire >= {TARGET_INSTRUCTIONS:,} instructions",
        note=WHAT_A_COUNT_IS,
        fail_above=count.fail_above,
    )


def show_count_plan(  # noqa: PLR0913 -- the plan, then what its document says, keyword-only
    plan: BenchPlan,
    count: CountPlan,
    *,
    as_json: bool,
    metric: str,
    per_round: str,
    note: str,
    **more: object,
) -> None:
    """A count's dry run: its boards, releases, models and settings, and how each round counts."""
    document = {
        "metric": metric,
        "boards": [board.name for board in plan.boards],
        "variants": list(plan.variants),
        "models": list(plan.models),
        "rounds": count.rounds,
        "opt_level": count.opt_level,
        "ep": count.ep,
        **more,
        "per_round": per_round,
        "environment": list(COUNT_ENVIRONMENT),
        "note": note,
    }
    if as_json:
        emit_json(document)
    else:
        console.print_json(data=document)


def qemu_counter(kit: CountingQemu) -> CounterDocument:
    return {"qemu": kit.version, "plugin": "insn (inline)", "bundle": kit.tag}


def store_counts(  # noqa: PLR0913 -- the run's parts; what was counted and what a count is, keyword-only
    run_id: str,
    counter: CounterDocument,
    counted: dict[str, BoardCounts],
    compared: list[CountComparison],
    failed: dict[str, str],
    *,
    workload: WorkloadDocument,
    note: str,
    metric: str = "instructions",
    without_counters: dict[str, str] | None = None,
) -> Path:
    boards: dict[str, BoardCountDocument] = {
        name: {"status": "ok", "cpu": b.cpu, "extra_inferences": b.extra, "calibration": b.calibration}
        for name, b in counted.items()
    }
    boards.update({name: {"status": "failed", "error": error} for name, error in failed.items()})
    boards.update(
        {name: {"status": "no counters", "error": why} for name, why in (without_counters or {}).items()}
    )
    return write_counts(
        {
            "schema": SCHEMA,
            "run_id": run_id,
            "created": utc_now(),
            "command": shlex.join(["orch", *sys.argv[1:]]),
            "metric": metric,
            "note": note,
            "counter": counter,
            "boards": boards,
            "series": [one.as_json() for board in counted.values() for one in board.series],
            "comparisons": [c.as_json() for c in compared],
            "workload": workload,
        }
    )


def show_counts(  # noqa: PLR0913 -- the counts, then how they are shown, keyword-only
    series: list[CountSeries],
    compared: list[CountComparison],
    *,
    as_json: bool,
    run_id: str,
    path: Path,
    unit: str,
    note: str,
    metric: str = "instructions",
) -> None:
    if as_json:
        emit_json(json.loads(path.read_text()))
        return
    table = Table(title=f"{metric} per {unit} ({run_id})")
    for column in ("board", "model", "release", "median", "rounds", "spread"):
        table.add_column(column)
    for one in series:
        table.add_row(
            one.board,
            one.model,
            one.release,
            f"{one.median:,.0f}",
            str(len(one.per_inference)),
            f"{one.spread:.3%}",
        )
    print_whole(table)
    if compared:
        verdicts = Table(title=f"A/B by {metric}")
        for column in ("board", "model", "baseline -> candidate", "ratio", "noise", "threshold", "verdict"):
            verdicts.add_column(column)
        for c in compared:
            verdicts.add_row(
                c.baseline.board,
                c.baseline.model,
                f"{c.baseline.variant} -> {c.candidate.variant}",
                f"{c.ratio:.4f}",
                f"{c.noise:.3%}",
                f"{c.threshold:.3%}",
                c.verdict,
            )
        print_whole(verdicts)
    console.print(RULE)
    console.print(f"note: {note}")
    console.print(f"counts stored in [bold]{escape(str(path))}[/]")


def _check(
    failed: Mapping[str, object],
    succeeded: Mapping[str, object],
    compared: list[CountComparison],
    fail_above: float | None,
    path: Path,
) -> None:
    if fail_above is not None:
        over = [c for c in compared if c.regression_above(fail_above)]
        if over:
            listed = "; ".join(
                f"{c.baseline.board} {c.baseline.model}: {c.candidate.variant} {c.ratio - 1:+.2%} vs"
                f" {c.baseline.variant}"
                for c in over
            )
            raise BenchError(
                f"instruction count regression above {fail_above:.1%}: {listed}",
                hint=f"the counts are stored in {path}",
            )
    raise_for_failures(failed, succeeded, path)


def raise_for_failures(failed: Mapping[str, object], succeeded: Mapping[str, object], path: Path) -> None:
    """Exit 8 when some boards failed and the others' counts are stored; 7 when every board failed."""
    if failed:
        names = ", ".join(failed)
        if succeeded:
            raise PartialFailure(f"counting failed on {names}; the other boards' counts are stored in {path}")
        raise BenchError(f"counting failed on every board ({names})", hint="see the errors above")
