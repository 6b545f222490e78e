"""Count instructions on the boards of a BenchPlan, in parallel: per board connect, take the board
lock, choose releases and models as ``orch bench`` does, send the counting qemu once, then per
model choose k and run the rounds (releases interleaved, A B A B ...)."""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rich.markup import escape

from orchestrator.adapters import ssh
from orchestrator.adapters.session import BoardSession
from orchestrator.bench.counting.plan import (
    CALIBRATION_EXTRA,
    CountPlan,
    count_argv,
    extra_from_children,
    extra_inferences,
    kit_path,
    parse_total,
    parse_totals,
)
from orchestrator.bench.counting.verdict import CountSeries
from orchestrator.bench.execute import board_locked
from orchestrator.bench.plan import BenchPlan, ReleaseRef
from orchestrator.bench.steps import pick_models, pick_releases
from orchestrator.board import Board
from orchestrator.board_side import read_text
from orchestrator.console import console
from orchestrator.deploy import releases
from orchestrator.errors import BenchError
from orchestrator.fleet.parallel import FleetResult, run_on_boards
from orchestrator.lab.counting_qemu import CountingQemu

Progress = Callable[[str, str], None]
_EMULATED_CPU = 'printf "%s" "${QEMU_CPU:-}"'  # the lab's boards are told their CPU model by sshd
_COUNT_TIMEOUT_S = 1800.0


class Meter(Protocol):
    """What a count reads on one board: the emulated CPU's retired instructions (the counting qemu)
    or the board's own PMU (perf). Made per board; ``prepare`` runs once before any count."""

    unit: str  # what one value counts: "instructions", "cycles"

    def prepare(self, session: BoardSession, say: Callable[[str], None]) -> str:
        """The CPU the counts are tied to (said in the results); raises when this board cannot count."""
        ...

    def extra_count(self, session: BoardSession, release: ReleaseRef, model: str, extra: int) -> float:
        """The count of ``extra`` inferences of ``model`` (after the first), start-up cancelled."""
        ...


@dataclass(kw_only=True)
class BoardCounts:
    """What one board counted: the emulated CPU, k per model, and one series per release and model."""

    cpu: str = ""
    extra: dict[str, int] = field(default_factory=dict)
    calibration: dict[str, float] = field(default_factory=dict)  # per model: the first pair's estimate
    series: list[CountSeries] = field(default_factory=list)


def count_on_boards(plan: BenchPlan, count: CountPlan, kit: CountingQemu) -> FleetResult[BoardCounts]:
    """Instructions under the counting qemu, on the lab's emulated boards."""
    return measure_on_boards(
        plan, count, lambda: QemuMeter(kit=kit, count=count), label="orch bench --metric instructions"
    )


def measure_on_boards(
    plan: BenchPlan, count: CountPlan, meter_for: Callable[[], Meter], *, label: str
) -> FleetResult[BoardCounts]:
    """Per board (in parallel): connect, take the board lock, then count with a meter of its own."""
    lock = threading.Lock()

    def progress(board: str, message: str) -> None:
        with lock:
            console.print(f"[bold]{escape(board)}[/] {message}", soft_wrap=True)

    def body(board: Board) -> BoardCounts:
        progress(board.name, "connecting")
        with ssh.connect(board) as session, board_locked(session, plan, "bench", progress):
            return _Counter(
                session=session, plan=plan, count=count, meter=meter_for(), progress=progress
            ).run()

    return run_on_boards(plan.boards, body, parallel=plan.parallel, label=label)


def send_kit(session: BoardSession, kit: CountingQemu, say: Callable[[str], None]) -> str:
    """The counting qemu's directory on the board, sent once."""
    directory = kit_path(releases.layout_for(session.board).workdir, kit.digest)
    send_once(session, kit.tarball, directory, marker="run", what="the counting qemu", say=say)
    return directory


def send_once(  # noqa: PLR0913 -- the bundle, where it goes, how it is known and said, keyword-only
    session: BoardSession,
    tarball: Path,
    directory: str,
    *,
    marker: str,
    what: str,
    say: Callable[[str], None],
) -> None:
    """``tarball`` unpacked into ``directory`` on the board, unless ``directory/marker`` is there
    already: sent and unpacked beside it, then renamed into place when whole (a count never runs
    from half a bundle). ``directory`` names the content (its digest), so what is there is it."""
    if session.stat(posixpath.join(directory, marker)) is not None:
        return
    say(f"sending {what} ({tarball.stat().st_size / 1e6:.0f} MB, once)")
    staging = directory + ".partial"
    packed = staging + ".tar.gz"
    session.run(["rm", "-rf", staging], timeout=120)
    session.mkdir_p(staging)
    session.put(tarball, packed)
    session.run(["tar", "-xzf", packed, "-C", staging], timeout=600)
    session.run(["rm", "-f", packed], timeout=60)
    session.rename(staging, directory)


def emulated_cpu(session: BoardSession) -> str:
    """The CPU the board's qemu emulates (its QEMU_CPU): what every count is tied to."""
    cpu = session.run_script(_EMULATED_CPU, timeout=60).stdout.strip()
    if not cpu:
        raise BenchError(
            f"{session.board.name}: not an emulated board (no QEMU_CPU in its environment):"
            " instructions are counted by the lab's counting qemu",
            hint="count on the lab's boards (orch lab up); on a real board, time it (--metric time)",
        )
    return cpu


def total_of(session: BoardSession, log_file: str, what: str) -> int:
    """The plugin's total in ``log_file`` on the board."""
    total = parse_total(session.run(["cat", log_file], timeout=60).stdout)
    if total is None:
        raise BenchError(f"{session.board.name}: the counting qemu printed no total for {what}")
    return total


@dataclass(kw_only=True)
class QemuMeter:
    """Instructions the emulated CPU retires, counted by the counting qemu sent to the board."""

    kit: CountingQemu
    count: CountPlan
    unit: str = "instructions"
    _directory: str = ""
    _cpu: str = ""

    def prepare(self, session: BoardSession, say: Callable[[str], None]) -> str:
        self._cpu = emulated_cpu(session)
        self._directory = send_kit(session, self.kit, say)
        return self._cpu

    def extra_count(self, session: BoardSession, release: ReleaseRef, model: str, extra: int) -> float:
        log_file = posixpath.join(self._directory, "count.log")
        argv = count_argv(
            kit=self._directory,
            cpu=self._cpu,
            log_file=log_file,
            release=release,
            model=model,
            extra=extra,
            agent_text=read_text("count_agent.py"),
            plan=self.count,
        )
        session.run(["rm", "-f", log_file], timeout=60)  # never a total from an earlier count
        run_counted(session, argv, f"{model} in {release.id}")
        totals = parse_totals(session.run(["cat", log_file], timeout=60).stdout)
        counted = extra_from_children(totals)
        if counted is None:
            raise BenchError(
                f"{session.board.name}: the counting qemu printed {len(totals)} totals counting {model}"
                f" in {release.id}, not one per forked child and one for their parent"
            )
        return counted


def run_counted(session: BoardSession, argv: list[str], what: str) -> None:
    """One counted process; its failure named with the end of its output."""
    result = session.run(argv, timeout=_COUNT_TIMEOUT_S, check=False)
    if not result.ok:
        raise BenchError(
            f"{session.board.name}: counting {what} failed (exit {result.exit_code}): {result.tail()}"
        )


@dataclass(frozen=True, kw_only=True)
class _Counter:
    session: BoardSession
    plan: BenchPlan
    count: CountPlan
    meter: Meter
    progress: Progress

    def say(self, message: str) -> None:
        self.progress(self.session.board.name, message)

    def run(self) -> BoardCounts:
        board, unit = self.session.board, self.meter.unit
        # Whether the board can count at all comes first: it is the more basic fact.
        counts = BoardCounts(cpu=self.meter.prepare(self.session, self.say))
        found = [ReleaseRef.from_info(info) for info in releases.list_releases(self.session, board)]
        chosen = pick_releases(self.plan, found, board.name)
        models = pick_models(self.plan, chosen, board.name)
        for model in models:
            calibration = self._per_inference(chosen[0], model, CALIBRATION_EXTRA)
            counts.calibration[model] = calibration
            k = counts.extra[model] = extra_inferences(calibration)
            self.say(f"{escape(model)}: ~{calibration:,.0f} {unit} per inference; k = {k}")
            rounds: dict[str, list[float]] = {release.id: [] for release in chosen}
            for number in range(1, self.count.rounds + 1):
                for release in chosen:
                    value = self._per_inference(release, model, k)
                    rounds[release.id].append(value)
                    self.say(
                        f"round {number}/{self.count.rounds} {escape(release.variant)} {escape(model)}:"
                        f" {value:,.0f} {unit} per inference"
                    )
            counts.series += [
                CountSeries(
                    board=board.name,
                    model=model,
                    release=release.id,
                    variant=release.variant,
                    ort_version=release.ort_version,
                    per_inference=tuple(rounds[release.id]),
                )
                for release in chosen
            ]
        return counts

    def _per_inference(self, release: ReleaseRef, model: str, extra: int) -> float:
        return self.meter.extra_count(self.session, release, model, extra) / extra
