"""Run a BenchPlan: every board in parallel, each board's agent runs in order, results stored as they finish.

Per board: connect, find the releases (``orchestrator.deploy.releases``), choose releases and models,
quantise if asked, pin clocks if asked, run the interleaved steps, restore clocks (always, also
when a step failed), then store the board's document, whatever happened. A board that fails
keeps its error and any measurement it finished; the others carry on (``orchestrator.fleet.parallel``).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape

from orchestrator.adapters import ssh as remote
from orchestrator.adapters.session import BoardSession, CommandResult
from orchestrator.artifacts.identity import describe
from orchestrator.bench import native
from orchestrator.bench import plan as bench_plan
from orchestrator.bench.agent_host import AgentRunner
from orchestrator.bench.clocks import ClockState, pin_clocks, restore_clocks
from orchestrator.bench.plan import BenchPlan, ReleaseRef, Step
from orchestrator.bench.quantise import quantized_copy
from orchestrator.bench.results import BOARD_SCHEMA, ResultStore, utc_now
from orchestrator.board import Board
from orchestrator.console import console
from orchestrator.deploy import releases
from orchestrator.errors import BenchError, OrchError
from orchestrator.fleet import parallel as fleet

Progress = Callable[[str, str], None]


def parse_agent(board: str, step: Step, result: CommandResult) -> dict[str, Any]:
    """The agent's JSON document, or a BenchError naming the board, the step and the cause."""
    where = (
        f"{board}: {step.release.id} {step.model_file} ({step.setting.opt_level},"
        f" threads {step.setting.intra_threads}, {step.runner} runner)"
    )
    try:
        document = json.loads(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else None
    except json.JSONDecodeError:
        document = None
    if not isinstance(document, dict):
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        raise BenchError(
            f"{where}: the agent exited {result.exit_code} without a result" + (f": {tail}" if tail else "")
        )
    if not document.get("ok"):
        raise BenchError(f"{where}: {document.get('stage', 'agent')} failed: {document.get('error')}")
    if step.runner == "native":
        problems = native.runner_problems(document)
        if problems:
            raise BenchError(f"{where}: the native runner's document is malformed: " + "; ".join(problems))
    return document


def parse_launches(board: str, step: Step, result: CommandResult) -> list[dict[str, Any]]:
    """The documents of a cold-start step: one JSON line per launched process, every one ok."""
    documents = []
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            single = CommandResult(exit_code=0, stdout=line, stderr="", duration=result.duration)
            documents.append(parse_agent(board, step, single))
    if len(documents) != step.launches:
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        raise BenchError(
            f"{board}: cold start of {step.release.id} {step.model_file} ({step.runner}): {len(documents)} of"
            f" {step.launches} launches reported (exit {result.exit_code})" + (f": {tail}" if tail else "")
        )
    return documents


def _board_document(run_id: str, board: Board, plan: BenchPlan) -> dict[str, Any]:
    return {
        "schema": BOARD_SCHEMA,
        "run_id": run_id,
        "board": board.name,
        "status": "running",
        "error": None,
        "started": utc_now(),
        "finished": None,
        "board_info": {
            "hostname": board.hostname,
            "port": board.port,
            "target": board.target,
            "tags": list(board.tags),
            "groups": list(board.groups),
        },
        "plan": plan.as_dict(),
        "releases": [],
        "clocks": None,
        "measurements": [],
        "cold_starts": [],
    }


# What a board runs inside bench_board: fills the board document (bench: _run_board; tune: its rungs).
BoardBody = Callable[[Board, BenchPlan, dict[str, Any], Progress], None]


def bench_board(
    board: Board,
    plan: BenchPlan,
    *,
    run_id: str,
    store: ResultStore,
    progress: Progress,
    body: BoardBody | None = None,
) -> dict[str, Any]:
    """Everything bench does on one board; the board document is stored even when this raises."""
    document = _board_document(run_id, board, plan)
    try:
        (body or _run_board)(board, plan, document, progress)
        document["status"] = "ok"
        return document
    except BaseException as error:
        document["status"] = "failed"
        if isinstance(error, OrchError):
            document["error"] = error.message + (f" (fix: {error.hint})" if error.hint else "")
        else:
            document["error"] = f"{type(error).__name__}: {error}"
        raise
    finally:
        document["finished"] = utc_now()
        store.write_board(run_id, document)


def _run_board(board: Board, plan: BenchPlan, document: dict[str, Any], progress: Progress) -> None:
    progress(board.name, "connecting")
    with remote.connect(board) as session:
        measure_board(session, board, plan, document, progress)


def measure_board(
    session: BoardSession,
    board: Board,
    plan: BenchPlan,
    document: dict[str, Any],
    progress: Progress,
    *,
    round_offset: int = 0,
) -> None:
    """Choose releases and models, quantise, pin clocks, run the plan's steps and append what they
    measured to the board document. Called again on the same document (tune's rungs), it adds to it:
    releases and int8 copies already there are kept, rounds are numbered on from ``round_offset``."""
    found = [ReleaseRef.from_info(info) for info in releases.list_releases(session, board)]
    chosen = bench_plan.pick_releases(plan, found, board.name)
    models = bench_plan.pick_models(plan, chosen, board.name)
    bench_plan.check_runners(plan, chosen, board.name)
    known = [item.get("id") for item in document["releases"]]
    document["releases"] += [vars(release) for release in chosen if release.id not in known]
    for release in chosen:  # which build each variant is, before anything is measured
        if release.id not in known:
            progress(
                board.name,
                escape(
                    f"measures {release.id}: {describe(release.variant, release.ort_version, release.route)}"
                ),
            )
    if plan.quantize:
        quantised = document.setdefault("quantization", {})
        for release in chosen:
            for model in models:
                if model in quantised.get(release.id, {}):
                    continue  # made earlier on this document
                progress(board.name, f"quantising {model} for {release.id} ({plan.quantize})")
                made = quantized_copy(session, release, model, plan.quantize, plan.calibration)
                for warning in made.warnings:
                    progress(board.name, f"[yellow]warning:[/] {escape(warning)}")
                quantised.setdefault(release.id, {})[model] = made.as_dict()
    steps = bench_plan.board_steps(plan, chosen, models)
    runner = AgentRunner(
        session, lambda message: progress(board.name, f"[yellow]warning:[/] {escape(message)}")
    )
    clocks: ClockState | None = None
    try:
        runner.start(steps)  # the agent hosts, all ready before the first run
        if plan.pin_clocks:
            clocks = pin_clocks(session, plan.agent.sysfs_root or "/sys")
            document["clocks"] = clocks.as_dict()
            for message in clocks.messages:
                progress(board.name, f"[yellow]warning:[/] {escape(message)}")
        for step in steps:
            if step.cooldown_s:
                time.sleep(step.cooldown_s)
            progress(
                board.name,
                f"{step.index + 1}/{len(steps)} round {step.round}/{plan.rounds} {escape(_describe(step))}",
            )
            result, started_as = runner.run(step, timeout=plan.step_timeout_s)
            if step.launches:
                launches = parse_launches(board.name, step, result)
                document["cold_starts"].append(
                    {
                        "key": step.key(),
                        "round": step.round + round_offset,
                        "step": step.index,
                        "launches": launches,
                    }
                )
                firsts = [s.launch_to_first_result_ms for d in launches if (s := native.cold_sample(d))]
                if firsts:
                    progress(
                        board.name,
                        f"  cold start (exec -> first result) median {statistics.median(firsts):.4g} ms"
                        f" (n={len(firsts)})",
                    )
                continue
            agent = parse_agent(board.name, step, result)
            # The run's duration seen from the workstation: agent_wall_s plus the fork and the reply,
            # or for a command (the native runner, a fallback) plus its start and SSH.
            document["measurements"].append(
                {
                    "key": step.key(),
                    "round": step.round + round_offset,
                    "step": step.index,
                    "remote_duration_s": result.duration,
                    "started_as": started_as,
                    "agent": agent,
                }
            )
            stats = agent["stats"]
            progress(
                board.name,
                f"  p50 {stats['p50_ms']:.3g} ms, p99 {stats['p99_ms']:.3g} ms (n={stats['n']})",
            )
    finally:
        runner.close()
        if runner.fallbacks:
            document["agent_host_fallbacks"] = runner.fallbacks
        if clocks is not None and clocks.previous:
            try:
                restore_clocks(session, clocks)
            except OrchError as error:
                clocks.restored = False
                clocks.messages.append(f"restoring the clocks failed: {error.message}")
            document["clocks"] = clocks.as_dict()
            if clocks.restored is False:
                progress(board.name, "[red]clocks NOT restored[/]: " + escape("; ".join(clocks.messages)))
            else:
                progress(board.name, "clocks restored")


def _describe(step: Step) -> str:
    threads = step.setting.intra_threads or "default"
    kind = f" cold x{step.launches}" if step.launches else ""
    return (
        f"{step.release.variant} {step.model_file} opt={step.setting.opt_level} threads={threads}"
        f" ep={step.setting.ep} {step.runner}{kind}"
    )


@dataclass(frozen=True, kw_only=True)
class BenchRun:
    run_id: str
    path: Path
    outcome: fleet.FleetResult[dict[str, Any]]
    wall_s: float


def run_bench(
    plan: BenchPlan,
    *,
    run_id: str,
    command: str,
    store: ResultStore | None = None,
    body: BoardBody | None = None,
    meta: dict[str, Any] | None = None,
    label: str = "orch bench",
) -> BenchRun:
    """Run ``plan`` on its boards and store the run. ``body`` replaces what each board runs (see
    BoardBody); ``meta`` is added to run.json when every board has finished (the bodies may fill it)."""
    store = store or ResultStore()
    path = store.begin_run(run_id, command=command)
    lock = threading.Lock()

    def progress(board: str, message: str) -> None:
        with lock:
            console.print(f"[bold]{escape(board)}[/] {message}", soft_wrap=True)

    started = time.monotonic()
    outcome = fleet.run_on_boards(
        plan.boards,
        lambda board: bench_board(board, plan, run_id=run_id, store=store, progress=progress, body=body),
        parallel=plan.parallel,
        label=f"{label} {run_id}",
    )
    wall = time.monotonic() - started
    boards_meta = {}
    for name, board_outcome in outcome.outcomes.items():
        boards_meta[name] = {
            "status": "ok" if board_outcome.ok else "failed",
            "error": board_outcome.message or None,
            "duration_s": board_outcome.duration,
            "timed_out": board_outcome.timed_out,
        }
        if not board_outcome.ok and board_outcome.timed_out:
            # The board's thread was abandoned: store what is known so the run is complete on disk.
            with contextlib.suppress(OrchError):
                store.write_board(
                    run_id,
                    {
                        **_board_document(run_id, board_outcome.board, plan),
                        "status": "failed",
                        "error": board_outcome.message,
                    },
                )
    store.finish_run(
        run_id,
        {
            "run_id": run_id,
            "created": utc_now(),
            "command": command,
            "plan": plan.as_dict(),
            "boards": boards_meta,
            "wall_s": wall,
            "status": "ok" if outcome.exit_code == 0 else "failed",
            **(meta or {}),
        },
    )
    return BenchRun(run_id=run_id, path=path, outcome=outcome, wall_s=wall)
