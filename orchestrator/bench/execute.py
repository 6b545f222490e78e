"""Run a BenchPlan: every board in parallel, each board's agent runs in order, results stored as they finish.

Per board: connect, take the board lock (no deploy changes the releases meanwhile), find the
releases (``orchestrator.deploy.releases``), choose releases and models, quantise if asked, pin
clocks if asked, run the interleaved steps, restore clocks (always, also when a step failed), then
store the board's document, whatever happened. A board that fails
keeps its error and any measurement it finished; the others carry on (``orchestrator.fleet.parallel``).
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape

from orchestrator.adapters import ssh
from orchestrator.adapters.session import BoardSession, CommandResult
from orchestrator.artifacts.identity import describe
from orchestrator.bench import native, reading
from orchestrator.bench.agent_host import AgentRunner
from orchestrator.bench.board_document import BoardDocument, ColdStarts, Measurement
from orchestrator.bench.clocks import ClockState, pin_clocks, restore_clocks
from orchestrator.bench.plan import BenchPlan, ReleaseRef, Step
from orchestrator.bench.quantise import quantized_copy
from orchestrator.bench.records import AgentDocument, BoardOutcome, RunMeta
from orchestrator.bench.results import ResultStore, utc_now
from orchestrator.bench.steps import board_steps, check_runners, pick_models, pick_releases
from orchestrator.board import Board
from orchestrator.console import console
from orchestrator.deploy import board_lock, releases
from orchestrator.errors import BenchError, OrchError
from orchestrator.fleet.parallel import FleetResult, Outcome, run_on_boards

Progress = Callable[[str, str], None]


def parse_agent(board: str, step: Step, result: CommandResult) -> AgentDocument:
    """The agent's document, or a BenchError naming the board, the step and the cause."""
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
    try:
        return reading.agent_document(document, "the document", timed=not step.launches)
    except reading.Malformed as error:
        raise BenchError(f"{where}: the agent's document is malformed: {error}") from None


def parse_launches(board: str, step: Step, result: CommandResult) -> list[AgentDocument]:
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


# What a board runs inside a run: fills the board document (bench: measure_over_ssh; tune: its rungs).
BoardBody = Callable[[Board, BenchPlan, BoardDocument, Progress], None]


def measure_over_ssh(board: Board, plan: BenchPlan, document: BoardDocument, progress: Progress) -> None:
    """`orch bench`'s board body: connect, take the board's lock, then measure the plan."""
    progress(board.name, "connecting")
    with ssh.connect(board) as session, board_locked(session, plan, "bench", progress):
        measure_board(session, plan, document, progress)


@contextlib.contextmanager
def board_locked(session: BoardSession, plan: BenchPlan, command: str, progress: Progress) -> Iterator[None]:
    """The board's lock (``orchestrator.deploy.board_lock``, the one deploy takes), held while the
    board is measured: no deploy, rollback or prune changes its releases meanwhile. A lock another
    orch holds is waited for up to ``plan.lock_timeout_s``, then the board is refused naming it."""
    name = session.board.name
    lock = board_lock.acquire(
        session,
        releases.layout_for(session.board).workdir,
        command=command,
        wait=plan.lock_timeout_s,
        on_wait=lambda message: progress(name, message),
        refused="nothing was measured",
    )
    with lock:
        if lock.broken:
            progress(name, f"warning: {lock.broken}")
        yield


@dataclass(frozen=True, kw_only=True)
class RunKind:
    """What a run does on each board (``body``), what its run.json holds besides (``meta``, which the
    bodies may fill while they run) and how its progress is labelled."""

    label: str = "orch bench"
    body: BoardBody = measure_over_ssh
    meta: RunMeta = field(default_factory=RunMeta)


def measure_board(
    session: BoardSession,
    plan: BenchPlan,
    document: BoardDocument,
    progress: Progress,
    *,
    round_offset: int = 0,
) -> None:
    """Choose releases and models, quantise, pin clocks, run the plan's steps and append what they
    measured to the board document. Called again on the same document (tune's rungs), it adds to it:
    releases and int8 copies already there are kept, rounds are numbered on from ``round_offset``."""
    board = _OnBoard(session=session, plan=plan, document=document, progress=progress)
    chosen = board.choose_releases()
    models = pick_models(plan, chosen, session.board.name)
    check_runners(plan, chosen, session.board.name)
    board.add_releases(chosen)
    if plan.quantize:
        board.quantise(chosen, models)
    steps = board_steps(plan, chosen, models)
    document.planned_rounds += [step.round + round_offset for step in steps]
    runner = AgentRunner(session, lambda message: board.say(f"[yellow]warning:[/] {escape(message)}"))
    clocks: ClockState | None = None
    try:
        runner.start(steps)  # the agent hosts, all ready before the first run
        if plan.pin_clocks:
            clocks = board.pin_clocks()
        for step in steps:
            board.run_step(runner, step, len(steps), round_offset)
    finally:
        runner.close()
        if runner.fallbacks:
            document.agent_host_fallbacks = runner.fallbacks
        if clocks is not None and clocks.previous:
            with ssh.cleanup():  # also once orch is stopping: the clocks are put back
                board.restore_clocks(clocks)


@dataclass(frozen=True, kw_only=True)
class _OnBoard:
    """The steps of ``measure_board`` on one board, each adding to the board document."""

    session: BoardSession
    plan: BenchPlan
    document: BoardDocument
    progress: Progress

    def say(self, message: str) -> None:
        self.progress(self.session.board.name, message)

    def warn(self, message: str) -> None:
        self.say(f"[yellow]warning:[/] {escape(message)}")

    def choose_releases(self) -> tuple[ReleaseRef, ...]:
        board = self.session.board
        found = [ReleaseRef.from_info(info) for info in releases.list_releases(self.session, board)]
        return pick_releases(self.plan, found, board.name)

    def add_releases(self, chosen: Sequence[ReleaseRef]) -> None:
        """The chosen releases not yet in the document, each named as the build it is before anything
        is measured."""
        known = self.document.release_ids()
        new = [release for release in chosen if release.id not in known]
        self.document.releases += new
        for release in new:
            self.say(
                escape(
                    f"measures {release.id}: {describe(release.variant, release.ort_version, release.route)}"
                )
            )

    def quantise(self, chosen: Sequence[ReleaseRef], models: Sequence[str]) -> None:
        """The int8 copy of every model in every chosen release (those made earlier on this document kept)."""
        mode = self.plan.quantize
        assert mode is not None  # only called for --quantize
        if self.document.quantization is None:
            self.document.quantization = {}
        quantised = self.document.quantization
        for release in chosen:
            for model in models:
                if model in quantised.get(release.id, {}):
                    continue  # made earlier on this document
                self.say(f"quantising {model} for {release.id} ({mode})")
                made = quantized_copy(self.session, release, model, mode, self.plan.calibration)
                for warning in made.warnings:
                    self.warn(warning)
                quantised.setdefault(release.id, {})[model] = made

    def pin_clocks(self) -> ClockState:
        clocks = pin_clocks(self.session, self.plan.agent.sysfs_root or "/sys")
        self.document.clocks = clocks
        for message in clocks.messages:
            self.warn(message)
        return clocks

    def restore_clocks(self, clocks: ClockState) -> None:
        """Put the clocks back (also after a failed step); a failure to is recorded, not raised."""
        try:
            restore_clocks(self.session, clocks)
        except OrchError as error:
            clocks.restored = False
            clocks.messages.append(f"restoring the clocks failed: {error.message}")
        self.document.clocks = clocks
        if clocks.restored is False:
            self.say("[red]clocks NOT restored[/]: " + escape("; ".join(clocks.messages)))
        else:
            self.say("clocks restored")

    def run_step(self, runner: AgentRunner, step: Step, count: int, round_offset: int) -> None:
        """One agent run (or cold-start step), after its cooldown, recorded in the document."""
        if step.cooldown_s:
            time.sleep(step.cooldown_s)
        self.say(f"{step.index + 1}/{count} round {step.round}/{self.plan.rounds} {escape(_describe(step))}")
        result, started_as = runner.run(step, timeout=self.plan.step_timeout_s)
        board = self.session.board.name
        if step.launches:
            launches = parse_launches(board, step, result)
            self.document.cold_starts.append(
                ColdStarts(
                    key=step.key(), round=step.round + round_offset, step=step.index, launches=launches
                )
            )
            firsts = [s.launch_to_first_result_ms for d in launches if (s := native.cold_sample(d))]
            if firsts:
                self.say(
                    f"  cold start (exec -> first result) median {statistics.median(firsts):.4g} ms"
                    f" (n={len(firsts)})"
                )
            return
        agent = parse_agent(board, step, result)
        self.document.measurements.append(
            Measurement(
                key=step.key(),
                round=step.round + round_offset,
                step=step.index,
                remote_duration_s=result.duration,
                started_as=started_as,
                agent=agent,
            )
        )
        stats = agent.get("stats", {})
        p50, p99 = stats.get("p50_ms", math.nan), stats.get("p99_ms", math.nan)
        self.say(f"  p50 {p50:.3g} ms, p99 {p99:.3g} ms (n={stats.get('n', '?')})")


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
    outcome: FleetResult[BoardDocument]
    wall_s: float


# How long an interrupted run waits for its boards' threads to store what they measured (their
# commands are stopped first; putting the clocks back may take a few commands).
_SETTLE_S = 30.0
INTERRUPTED_ERROR = "orch was interrupted; what was measured before is kept"


class _Boards:
    """The run's board documents as they are built, each stored exactly once: by its thread when it
    ends, or by an interrupted run for a thread that did not end in time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.documents: dict[str, BoardDocument] = {}
        self.ended: dict[str, threading.Event] = {}
        self.stored: set[str] = set()
        self.interrupted = False

    def begin(self, name: str, document: BoardDocument) -> None:
        with self.lock:
            self.documents[name] = document
            self.ended[name] = threading.Event()

    def store_once(self, name: str, store: Callable[[], object]) -> None:
        with self.lock:
            if name in self.stored:
                return
            self.stored.add(name)
        try:
            store()
        finally:
            self.ended[name].set()

    def settle(self, wait: float) -> None:
        """Until every board's thread has stored its document, ``wait`` seconds at most."""
        deadline = time.monotonic() + wait
        for event in list(self.ended.values()):
            event.wait(max(0.0, deadline - time.monotonic()))


@dataclass(frozen=True, kw_only=True)
class _Run:
    """One run's boards: each one's body, its document stored whatever happens."""

    plan: BenchPlan
    run_id: str
    store: ResultStore
    kind: RunKind
    progress: Progress
    boards: _Boards = field(default_factory=_Boards)

    def board(self, board: Board) -> BoardDocument:
        """Everything the run does on one board; the board document is stored even when this raises."""
        document = BoardDocument.begin(self.run_id, board, self.plan)
        self.boards.begin(board.name, document)
        try:
            self.kind.body(board, self.plan, document, self.progress)
            document.status = "ok"
            return document
        except BaseException as error:
            if self.boards.interrupted:
                document.status = "interrupted"
                document.error = INTERRUPTED_ERROR
            else:
                document.status = "failed"
                if isinstance(error, OrchError):
                    document.error = error.message + (f" (fix: {error.hint})" if error.hint else "")
                else:
                    document.error = f"{type(error).__name__}: {error}"
            raise
        finally:
            document.finished = utc_now()
            self.boards.store_once(
                board.name, lambda: self.store.write_board(self.run_id, document.as_dict())
            )

    def interrupt(self) -> ssh.Stopped:
        """orch was interrupted: stop every board's commands, and store each board's document with
        what it measured (threads that do not end in time: as their document stands)."""
        self.boards.interrupted = True
        stopped = ssh.stop_running()
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: store what is there now
            self.boards.settle(_SETTLE_S)
        for name, document in list(self.boards.documents.items()):

            def store(document: BoardDocument = document) -> None:
                document.status = "interrupted"
                document.error = INTERRUPTED_ERROR
                document.finished = utc_now()
                self.store.write_board(self.run_id, document.as_dict())

            self.boards.store_once(name, store)
        return stopped

    def abandoned(self, outcome: Outcome[BoardDocument]) -> None:
        """A board whose thread timed out and was abandoned: what is known is stored, so the run is
        complete on disk."""
        document = BoardDocument.begin(self.run_id, outcome.board, self.plan)
        document.status = "failed"
        document.error = outcome.message
        with contextlib.suppress(OrchError):
            self.store.write_board(self.run_id, document.as_dict())


def run_bench(
    plan: BenchPlan,
    *,
    run_id: str,
    command: str,
    store: ResultStore | None = None,
    kind: RunKind | None = None,
) -> BenchRun:
    """Run ``plan`` on its boards and store the run. ``kind`` says what each board runs (default:
    bench's measurement); its ``meta`` is added to run.json when every board has finished."""
    store = store or ResultStore()
    kind = kind or RunKind()
    path = store.begin_run(run_id, command=command)
    lock = threading.Lock()

    def progress(board: str, message: str) -> None:
        with lock:
            console.print(f"[bold]{escape(board)}[/] {message}", soft_wrap=True)

    run = _Run(plan=plan, run_id=run_id, store=store, kind=kind, progress=progress)
    started = time.monotonic()
    try:
        outcome = run_on_boards(
            plan.boards, run.board, parallel=plan.parallel, label=f"{kind.label} {run_id}"
        )
    except KeyboardInterrupt:
        _store_interrupted(run, command=command, wall=time.monotonic() - started)
        raise
    wall = time.monotonic() - started
    for board_outcome in outcome.outcomes.values():
        if not board_outcome.ok and board_outcome.timed_out:
            run.abandoned(board_outcome)
    store.finish_run(
        run_id,
        {
            "run_id": run_id,
            "created": utc_now(),
            "command": command,
            "plan": plan.as_dict(),
            "boards": _boards_meta(outcome),
            "wall_s": wall,
            "status": "ok" if outcome.exit_code == 0 else "failed",
            **kind.meta,
        },
    )
    return BenchRun(run_id=run_id, path=path, outcome=outcome, wall_s=wall)


def _store_interrupted(run: _Run, *, command: str, wall: float) -> None:
    """orch was interrupted (Ctrl-C, SIGTERM): the boards' commands stopped, what they measured
    stored, the run marked interrupted; said on the console."""
    stopped = run.interrupt()
    for line in stopped.lines():
        console.print(f"[yellow]{escape(line)}[/]", soft_wrap=True)
    documents = run.boards.documents
    rounds = min((document.rounds_complete() for document in documents.values()), default=0)
    steps = sum(document.progress()["steps_done"] for document in documents.values())
    run.store.finish_run(
        run.run_id,
        {
            "run_id": run.run_id,
            "created": utc_now(),
            "command": command,
            "plan": run.plan.as_dict(),
            "boards": {
                name: {"status": document.status, "error": document.error, "progress": document.progress()}
                for name, document in documents.items()
            },
            "wall_s": wall,
            "status": "interrupted",
            "rounds_complete": rounds,
            **run.kind.meta,
        },
    )
    console.print(
        f"[red]run {run.run_id} interrupted[/]: {steps} measured step(s) stored, {rounds} of"
        f" {run.plan.rounds} rounds complete on every board; the run is marked interrupted (partial data:"
        f" `orch results show {run.run_id}`, comparisons only with --allow-partial)",
        soft_wrap=True,
    )


def _boards_meta(outcome: FleetResult[BoardDocument]) -> dict[str, BoardOutcome]:
    """run.json's ``boards``: how each board ended."""
    return {
        name: {
            "status": "ok" if board_outcome.ok else "failed",
            "error": board_outcome.message or None,
            "duration_s": board_outcome.duration,
            "timed_out": board_outcome.timed_out,
        }
        for name, board_outcome in outcome.outcomes.items()
    }
