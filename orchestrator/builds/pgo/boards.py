"""Step 2 of the loop: the instrumented build trained on each board over SSH, the boards' counters
added up in the instrumented build's image, the profile stored with the build's key.

One profile is measured for one CPU: a board that reports another CPU than the build's trains
nothing unless ``--force-profile`` (``builds.pgo.cpu``); each training records the CPU its board
reported.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.adapters.engine import Engine
from orchestrator.adapters.ssh import check_local_files, connect
from orchestrator.board import Board
from orchestrator.builds.execute import BuildResult
from orchestrator.builds.pgo import clang
from orchestrator.builds.pgo.cpu import read_cpu, refuse_other_cpus
from orchestrator.builds.pgo.flavour import Flavour
from orchestrator.builds.pgo.merge import gcov_tool, merge_counters, merge_raw_profiles
from orchestrator.builds.pgo.profile import Coverage, ProfileKey, Training, coverage_of
from orchestrator.builds.pgo.stored import (
    BOARD_COUNTERS,
    COUNTERS,
    PROFILE_ROOT_NAME,
    ReadyProfile,
    stored_coverage,
    write_profile,
)
from orchestrator.builds.pgo.training import CountersInto, train_mlas_test, train_wheel
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.request import BuildRequest, TrainRequest
from orchestrator.errors import BuildError
from orchestrator.fleet.board_probe import read_facts
from orchestrator.fleet.inventory import load_inventory
from orchestrator.paths import default_inventory_path
from orchestrator.targets import TargetProfile


def training_boards(train: TrainRequest) -> list[Board]:
    """The training boards named by ``--train-on``, from the inventory."""
    inventory = load_inventory(train.inventory or default_inventory_path())
    boards = inventory.select(hosts=list(train.boards), groups=[], all_devices=False, limit=None)
    check_local_files(boards)
    return boards


def check_training_cpus(boards: Sequence[Board], profile: TargetProfile, *, force: bool) -> None:
    """Each board asked for its CPU before anything is compiled: one of another CPU than the
    build's is refused, naming it, unless ``force``."""
    cores = {}
    for board in boards:
        with connect(board) as session:
            cores[board.name] = read_cpu(session).core
    refuse_other_cpus(cores, profile, force=force, what="a training board")


@dataclass(frozen=True, kw_only=True)
class NewProfile:
    """Where a new profile is stored, the key of the build that measures it, and whose loop it is."""

    where: Path
    key: ProfileKey
    flavour: Flavour


def train(
    request: BuildRequest, boards: Sequence[Board], first: BuildResult, stored: NewProfile
) -> ReadyProfile:
    """The instrumented build run on each board; with several boards (clang: any) their counters are
    added up by the compiler's own tool; the profile is stored with the build's key."""
    where, flavour = stored.where, stored.flavour
    shutil.rmtree(where, ignore_errors=True)
    merges = flavour.merges(len(boards))
    trainings = []
    for board in boards:
        into = where / BOARD_COUNTERS / board.name if merges else where / COUNTERS
        trainings.append(_train_on(request, board, first, into, flavour))
        if merges and flavour.compiler == "gcc":  # one board's counters are the profile's, checked below
            _require_counters(coverage_of(into), board.name)
        elif merges and not clang.raw_profiles(into):
            raise _no_counters(board.name, 0)
    merged = (
        _merge(first.plan, [where / BOARD_COUNTERS / board.name for board in boards], stored)
        if merges
        else None
    )
    coverage = stored_coverage(where, flavour)
    _require_counters(coverage, ", ".join(board.name for board in boards))
    ready = ReadyProfile(
        where=where,
        key=stored.key,
        flavour=flavour,
        trainings=tuple(trainings),
        coverage=coverage,
        merged=merged,
    )
    write_profile(ready)
    return ready


def _merge(plan: BuildPlan, boards: list[Path], stored: NewProfile) -> dict[str, Any]:
    """The boards' counters added up in the instrumented build's image: GCC's counter trees with
    gcov-tool, clang's raw profiles into one indexed profile with llvm-profdata."""
    if stored.flavour.compiler == "clang":
        return merge_raw_profiles(Engine(), plan.image.tag, boards, stored.where / COUNTERS).as_dict()
    files = merge_counters(
        Engine(),
        plan.image.tag,
        [tree / PROFILE_ROOT_NAME for tree in boards],
        stored.where / COUNTERS / PROFILE_ROOT_NAME,
        cross_prefix=plan.target.cross_prefix,
    )
    return {"tool": gcov_tool(plan.target.cross_prefix), "image": plan.image.tag, "counter_files": files}


def _train_on(
    request: BuildRequest, board: Board, first: BuildResult, into: Path, flavour: Flavour
) -> Training:
    """One board's training: the instrumented build run there, its counters brought into ``into``."""
    with connect(board) as session:
        facts = read_facts(session, board, board.workdir)
        reported = read_cpu(session)
        features = " ".join(facts.cpu_features) or "not reported"
        cpu = f"{reported.core}; features: {features}"
        counters = CountersInto(into, flavour.compiler)
        if first.artifact is None:
            training = train_mlas_test(
                session, first.build_dir / "out", workload=request.train.mlas, cpu=cpu, into=counters
            )
        else:
            training = train_wheel(
                session, first.artifact.wheel_path, workload=request.train.models, cpu=cpu, into=counters
            )
    return replace(training, cpu_part=reported.part)


def _require_counters(coverage: Coverage, where: str) -> None:
    if not coverage.files or not coverage.functions_run:
        raise _no_counters(where, coverage.files)


def _no_counters(where: str, files: int) -> BuildError:
    return BuildError(
        f"the training on {where} wrote no counters that ran ({files} counter files)",
        hint="the instrumented program must exit normally on the board; see its output above",
    )
