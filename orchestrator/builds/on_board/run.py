"""`orch build --on-board BOARD`: the board chosen, read, planned, and its build run over SSH.

The board is read first (its tools, cores, memory, free space): what it lacks is refused in one
message with the lines that install it, by ``--dry-run`` as by the real run, before anything is
sent. Then ORT's tree and its dependency sources are prepared here and sent once, the board builds
with its own compiler and persistent compiler cache, and what it made comes back with a manifest.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any

from orchestrator.adapters.engine import Engine
from orchestrator.adapters.session import BoardSession
from orchestrator.adapters.ssh import check_local_files, connect
from orchestrator.board import Board
from orchestrator.builds.on_board.execute import (
    Inputs,
    OnBoardResult,
    execute_on_board,
    read_board_facts,
    work_root,
)
from orchestrator.builds.on_board.plan import OnBoardPlan, OnBoardRequest, make_on_board_plan
from orchestrator.builds.on_board.requirements import refuse_unmet, unmet_requirements
from orchestrator.builds.plan import parse_define
from orchestrator.builds.request import BuildRequest
from orchestrator.builds.sources.dependencies import prepare_dependencies
from orchestrator.builds.sources.dependency_table import load_table
from orchestrator.builds.sources.ort import prepare_source
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.sources.release_packaging import release_variant
from orchestrator.builds.variants import Variant
from orchestrator.builds.view import BuildView
from orchestrator.errors import UsageError
from orchestrator.fleet.inventory import load_inventory
from orchestrator.lab.base_images import ensure_base_image
from orchestrator.paths import default_inventory_path
from orchestrator.targets import TargetProfile, resolve_target

# What the on-board route does not combine with (it has no container, no engine, no sysroot).
_CONTAINER_ONLY = {
    "sysroot_from": "--sysroot-from",
    "docker_host": "--docker-host",
    "cache_url": "--cache",
    "train_boards": "--train-on",
}


@dataclass(frozen=True, kw_only=True)
class OnBoardBuild:
    """A build on the board itself; ``result`` is None for the dry run."""

    plan: OnBoardPlan
    result: OnBoardResult | None = None

    def as_dict(self) -> dict[str, Any]:
        """``orch build --on-board --json``'s document of a finished build."""
        result = self.result
        assert result is not None
        return {"manifest": result.manifest, "build_dir": str(result.build_dir), "log": str(result.log_path)}


def run_on_board(
    request: BuildRequest, profile: TargetProfile, variant: Variant, view: BuildView
) -> OnBoardBuild:
    _refuse_combinations(request)
    board = _the_board(request, profile)
    source = parse_source(request.ort_source, version=request.ort_version, suite=profile.bootstrap_suite)
    # upstream's options are its release's packaging's (a real build fetches the source first).
    variant = release_variant(variant, source, fetch=None if request.dry_run else view.log)
    with connect(board) as session:
        plan = _plan(request, profile, variant, session, source.version)
        if request.dry_run:
            return OnBoardBuild(plan=plan)
        view.on_board_plan(plan)
        local = Engine()
        fetch_image = ensure_base_image(local, "trixie", platform.machine(), on_log=view.log)
        tree = prepare_source(source, engine=local, base_image=fetch_image, log=view.log)
        deps = prepare_dependencies(
            plan.dependencies, engine=local, base_image=fetch_image, ort_tree=tree.path, log=view.log
        )
        with view.compile_progress() as on_progress:
            result = execute_on_board(
                plan, session, Inputs(tree=tree, deps=deps), log=view.log, progress=on_progress
            )
    return OnBoardBuild(plan=plan, result=result)


def _refuse_combinations(request: BuildRequest) -> None:
    given = {
        "sysroot_from": request.sysroot_from,
        "docker_host": request.docker_host,
        "cache_url": request.cache_url,
        "train_boards": request.train.boards,
    }
    for key, value in given.items():
        if value:
            raise UsageError(
                f"--on-board and {_CONTAINER_ONLY[key]} do not go together: the board builds with its own"
                " compiler, libraries and compiler cache",
                hint=f"leave out {_CONTAINER_ONLY[key]}",
            )
    if request.dependencies == "fetch":
        raise UsageError(
            "--on-board sends ORT's dependency sources to the board; it does not download them there",
            hint="leave out --dependencies fetch",
        )


def _the_board(request: BuildRequest, profile: TargetProfile) -> Board:
    """The inventory's board, of the target's CPU (the build's -mcpu is the target's)."""
    assert request.on_board is not None
    try:
        inventory = load_inventory(request.train.inventory or default_inventory_path())
        boards = inventory.select(hosts=[request.on_board], groups=[], all_devices=False, limit=None)
        check_local_files(boards)
        (board,) = boards
    except UsageError as error:  # said of --on-board, the option the user gave
        reason = error.message.split(": ", 1)[-1]
        raise UsageError(
            f"--on-board {request.on_board}: {reason}",
            hint="name one board of the inventory (`orch inventory list`)",
        ) from error
    its_profile = resolve_target(board.target)
    if its_profile.mcpu != profile.mcpu:
        raise UsageError(
            f"board {board.name} is a {its_profile.cpu} ({its_profile.name}); --target {profile.name} is"
            f" for a {profile.cpu}: a build on the board is for that board's CPU",
            hint=f"--target {its_profile.name}, or build on a {profile.name} board",
        )
    return board


def _plan(
    request: BuildRequest,
    profile: TargetProfile,
    variant: Variant,
    session: BoardSession,
    version: str,
) -> OnBoardPlan:
    root = work_root(session)
    facts = read_board_facts(session, root)
    asked = OnBoardRequest(
        board=session.board.name,
        profile=profile,
        variant=variant,
        version=version,
        scope=request.scope,
        provider=request.execution_provider,
        extra_defines=tuple(parse_define(d) for d in request.cmake_defines),
        parallel=request.parallel,
    )
    plan = make_on_board_plan(asked, load_table(version), facts, root)
    unmet = unmet_requirements(
        facts, version=version, scope=request.scope, provider=request.execution_provider
    )
    refuse_unmet(session.board.name, unmet, version=version, scope=request.scope)
    return plan
