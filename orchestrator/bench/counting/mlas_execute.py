"""Count the MLAS tests of ``--scope mlas-test`` builds on the boards of a BenchPlan, in parallel:
per board connect, take the board lock, send the counting qemu and each build's bundle once, choose
k from the baseline's first pair, then run the rounds (builds interleaved, A B A B ...)."""

from __future__ import annotations

import posixpath
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from orchestrator.adapters import ssh
from orchestrator.adapters.session import BoardSession
from orchestrator.artifacts.mlas_tests import MLAS_TEST_EXE, MlasTestBuild
from orchestrator.bench.counting.execute import (
    BoardCounts,
    Progress,
    emulated_cpu,
    send_kit,
    send_once,
    total_of,
)
from orchestrator.bench.counting.mlas_plan import (
    BASE_REPEATS,
    CALIBRATION_EXTRA,
    MlasCountPlan,
    bundle_path,
    extra_repeats,
    mlas_count_argv,
)
from orchestrator.bench.counting.verdict import CountSeries
from orchestrator.bench.execute import board_locked
from orchestrator.bench.plan import BenchPlan
from orchestrator.board import Board
from orchestrator.console import console
from orchestrator.deploy import releases
from orchestrator.errors import BenchError
from orchestrator.fleet.parallel import FleetResult, run_on_boards
from orchestrator.lab.counting_qemu import CountingQemu
from orchestrator.paths import orch_home

_COUNT_TIMEOUT_S = 1800.0
# What the bundle's unpacked directory on a board always holds: the test executable.
_MARKER = MLAS_TEST_EXE


def bundle_tarball(build: MlasTestBuild) -> Path:
    """The build's ``out/`` as a .tar.gz in ``$ORCH_HOME/mlas-tests/<digest>.tar.gz``, made once per
    content (written under a temporary name, then renamed)."""
    path = orch_home() / "mlas-tests" / f"{build.digest}.tar.gz"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(path.name + ".partial")
        with tarfile.open(staging, "w:gz") as tar:
            for name, _ in build.files:
                tar.add(build.out / name, arcname=name)
        staging.rename(path)
    return path


def count_mlas_on_boards(
    plan: BenchPlan, count: MlasCountPlan, kit: CountingQemu
) -> FleetResult[BoardCounts]:
    lock = threading.Lock()
    tarballs = {build.digest: bundle_tarball(build) for one in count.targets for build in one.builds}

    def progress(board: str, message: str) -> None:
        with lock:
            console.print(f"[bold]{escape(board)}[/] {message}", soft_wrap=True)

    def body(board: Board) -> BoardCounts:
        progress(board.name, "connecting")
        with ssh.connect(board) as session, board_locked(session, plan, "bench", progress):
            counter = _MlasCounter(
                session=session, count=count, kit=kit, tarballs=tarballs, progress=progress
            )
            return counter.run()

    return run_on_boards(
        plan.boards,
        body,
        parallel=plan.parallel,
        label="orch bench --metric instructions --workload mlas-test",
    )


@dataclass(frozen=True, kw_only=True)
class _MlasCounter:
    session: BoardSession
    count: MlasCountPlan
    kit: CountingQemu
    tarballs: dict[str, Path]
    progress: Progress

    def say(self, message: str) -> None:
        self.progress(self.session.board.name, message)

    def run(self) -> BoardCounts:
        board = self.session.board
        builds = self.count.builds_for(board.target)
        counts = BoardCounts(cpu=emulated_cpu(self.session))
        kit = send_kit(self.session, self.kit, self.say)
        bundles = {build.digest: self._send_bundle(build) for build in builds}
        baseline = builds[0]
        calibration = self._per_repeat(kit, counts.cpu, baseline, bundles[baseline.digest], CALIBRATION_EXTRA)
        k = extra_repeats(calibration)
        counts.calibration[MLAS_TEST_EXE] = calibration
        counts.extra[MLAS_TEST_EXE] = k
        self.say(
            f"{MLAS_TEST_EXE}: ~{calibration:,.0f} instructions per repetition ({baseline.variant}); k = {k}"
        )
        rounds: dict[str, list[float]] = {build.id: [] for build in builds}
        for number in range(1, self.count.rounds + 1):
            for build in builds:
                value = self._per_repeat(kit, counts.cpu, build, bundles[build.digest], k)
                rounds[build.id].append(value)
                self.say(
                    f"round {number}/{self.count.rounds} {escape(build.variant)}:"
                    f" {value:,.0f} instructions per repetition"
                )
        counts.series += [
            CountSeries(
                board=board.name,
                model=MLAS_TEST_EXE,
                release=build.id,
                variant=build.variant,
                ort_version=build.ort_version,
                per_inference=tuple(rounds[build.id]),
            )
            for build in builds
        ]
        return counts

    def _send_bundle(self, build: MlasTestBuild) -> str:
        directory = bundle_path(releases.layout_for(self.session.board).workdir, build.digest)
        send_once(
            self.session,
            self.tarballs[build.digest],
            directory,
            marker=_MARKER,
            what=f"the {escape(build.variant)} build's {MLAS_TEST_EXE}",
            say=self.say,
        )
        return directory

    def _per_repeat(self, kit: str, cpu: str, build: MlasTestBuild, bundle: str, extra: int) -> float:
        base = self._count(kit, cpu, build, bundle, BASE_REPEATS)
        more = self._count(kit, cpu, build, bundle, BASE_REPEATS + extra)
        return (more - base) / extra

    def _count(self, kit: str, cpu: str, build: MlasTestBuild, bundle: str, repeats: int) -> int:
        log_file = posixpath.join(kit, "count.log")
        argv = mlas_count_argv(
            kit=kit,
            cpu=cpu,
            log_file=log_file,
            bundle=bundle,
            repeats=repeats,
            gtest_filter=self.count.gtest_filter,
        )
        self.session.run(["rm", "-f", log_file], timeout=60)  # never a total from an earlier count
        result = self.session.run(argv, timeout=_COUNT_TIMEOUT_S, check=False)
        if not result.ok:
            raise BenchError(
                f"{self.session.board.name}: counting {MLAS_TEST_EXE} of {build.id} failed"
                f" (exit {result.exit_code}): {result.tail()}"
            )
        if "[  PASSED  ]" not in result.stdout:
            raise BenchError(
                f"{self.session.board.name}: {MLAS_TEST_EXE} of {build.id} ran no test of the filter"
                f" {self.count.gtest_filter!r}: {result.tail()}"
            )
        return total_of(self.session, log_file, f"{MLAS_TEST_EXE} of {build.id}")
