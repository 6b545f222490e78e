"""`orch build`'s one entry: the route a request takes, and the build (or its dry run) on it.

``run_build(request, view)`` picks the route (the official wheel, one build container, a batch
on several engines, a build on the board itself, the profile-guided loop), connects the engine,
refuses what the real run would refuse (the dry run too) and runs it; what it did comes back as
one of the results below, for the command to print. Nothing here prints: the build's log lines,
its progress and what must be shown before a long step reach the caller through ``BuildView``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.adapters.engine import Engine
from orchestrator.artifacts.store import Artifact
from orchestrator.builds.batch import BatchBuild, run_batch_request
from orchestrator.builds.container_paths import SYSROOT
from orchestrator.builds.execute import BuildResult, ExecuteOptions, execute
from orchestrator.builds.flags import flags_of, validate_or_raise
from orchestrator.builds.image import base_image_refusal, made_offline
from orchestrator.builds.native_runner.plan import runner_plan
from orchestrator.builds.on_board.run import OnBoardBuild, run_on_board
from orchestrator.builds.pgo.loop import (
    ExecuteBuild,
    PgoPlan,
    PgoResult,
    plan_profile_guided,
    refuse_what_cannot_train,
    run_profile_guided,
)
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.queue import LOCAL
from orchestrator.builds.release_checks import check_stock_python
from orchestrator.builds.request import BuildRequest, PlanContext, plan_build, remote_cache
from orchestrator.builds.stock import default_version, fetch_stock, plan_dict
from orchestrator.builds.sysroots.store import find_sysroot
from orchestrator.builds.sysroots.target import profile_for_sysroot
from orchestrator.builds.variants import resolve_variant
from orchestrator.builds.view import BuildView
from orchestrator.errors import UsageError
from orchestrator.targets import TargetProfile, resolve_target


@dataclass(frozen=True, kw_only=True)
class ContainerBuild:
    """One build in a build container; ``result`` is None for the dry run (its plan was shown)."""

    plan: BuildPlan
    engine: str | None = None  # the label of the engine that ran it
    result: BuildResult | None = None

    def as_dict(self) -> dict[str, Any]:
        """``orch build --json``'s document of a finished build."""
        plan, result = self.plan, self.result
        assert result is not None and self.engine is not None
        document: dict[str, Any] = {
            "target": plan.target.name,
            "variant": plan.artifact_variant,
            "ort_version": plan.ort_version,
            "scope": plan.scope,
            "engine": self.engine,
            "duration_s": round(result.duration_s, 1),
            "ccache": result.ccache.as_dict(),
            "incremental": result.incremental.as_dict(),
            "log": str(result.log_path),
            "build_dir": str(result.build_dir),
        }
        if result.artifact and result.artifact.kind == "wheel":
            document.update(
                artifact=str(result.artifact.directory),
                wheel=result.artifact.manifest.wheel,
                manifest=result.artifact.manifest.to_json(),
            )
        elif result.record is not None:
            # No wheel (--scope library or mlas-test): the build's record, written beside its output.
            document.update(
                manifest=result.record.to_json(), manifest_path=str(result.build_dir / "manifest.json")
            )
            if result.library is not None:
                document["library"] = result.library.as_dict()
            if result.artifact is not None:  # a C library build, recorded as an artifact deploy takes
                document.update(
                    artifact=str(result.artifact.directory),
                    artifact_manifest=result.artifact.manifest.to_json(),
                )
        return document


@dataclass(frozen=True, kw_only=True)
class StockWheel:
    """The official wheel (variant stock): fetched and checked, or only planned (``artifact`` None)."""

    profile: TargetProfile
    version: str
    artifact: Artifact | None = None

    def plan_document(self) -> dict[str, Any]:
        """The dry run's document: the download, and the native runner built against the wheel."""
        document = plan_dict(self.profile, self.version)
        document["native_runner"] = runner_plan(self.profile, self.version).as_dict()
        return document

    def as_dict(self) -> dict[str, Any]:
        assert self.artifact is not None
        return {
            "target": self.profile.name,
            "variant": "stock",
            "artifact": str(self.artifact.directory),
            "wheel": self.artifact.manifest.wheel,
            "manifest": self.artifact.manifest.to_json(),
        }


@dataclass(frozen=True, kw_only=True)
class ProfileGuidedBuild:
    """A profile-guided variant's loop (``builds.pgo.loop``): planned (the dry run), or run."""

    plan: PgoPlan | None = None  # the dry run
    result: PgoResult | None = None

    def as_dict(self) -> dict[str, Any]:
        """``orch build --json``'s document of the optimised build, with its profile's record."""
        assert self.result is not None
        optimised = self.result.optimised
        return {
            "target": optimised.plan.target.name,
            "variant": optimised.plan.artifact_variant,
            "scope": optimised.plan.scope,
            "build_dir": str(optimised.build_dir),
            "duration_s": round(optimised.duration_s, 1),  # the optimised build
            "total_s": round(self.result.total_s, 1),  # all three steps
            "manifest": self.result.record,
            "manifest_path": str(optimised.build_dir / "manifest.json"),
        }


BuildRun = ContainerBuild | StockWheel | BatchBuild | OnBoardBuild | ProfileGuidedBuild


def run_build(request: BuildRequest, view: BuildView) -> BuildRun:
    """The route of ``request`` and its build (or dry run), refused in the order a user fixes it."""
    if request.on_board:
        if request.is_batch:
            raise UsageError("--on-board builds one target and one variant on one board at a time")
        return run_on_board(
            request, resolve_target(request.targets[0]), resolve_variant(request.variants[0]), view
        )
    for name in request.variants:
        refuse_what_cannot_train(request, resolve_variant(name), request.train)
    if request.is_batch:
        if request.sysroot_from:
            raise UsageError(
                "--sysroot-from builds for one board's OS: one --target, one --variant, one engine at a time",
                hint=f"orch build --target {request.targets[0]} --variant {request.variants[0]}"
                f" --sysroot-from {request.sysroot_from}",
            )
        return run_batch_request(request, remote_cache(request), view)
    return _build_one(request, view)


def _build_one(request: BuildRequest, view: BuildView) -> BuildRun:
    profile = resolve_target(request.targets[0])
    sysroot = None
    if request.sysroot_from:
        profile, sysroot = profile_for_sysroot(profile, find_sysroot(request.sysroot_from))
    variant = resolve_variant(request.variants[0])
    if not variant.build:
        return _stock(request, profile, view)
    # One engine at most here: the one given or configured, unless it is this machine's.
    engine_url = request.engines[0] if request.engines else LOCAL
    docker_host = None if engine_url == LOCAL else engine_url
    context = PlanContext(docker_host=docker_host, cache=remote_cache(request), sysroot=sysroot)

    # The engine that compiles: the local one, or another machine's (--docker-host), asked for its
    # cores and memory so the job count fits the machine that does the work.
    engine = Engine(docker_host) if docker_host and not request.dry_run else None
    if variant.profile_guided:
        if request.dry_run:
            return ProfileGuidedBuild(plan=plan_profile_guided(request, profile, variant, context))
        planned = plan_profile_guided(request, profile, variant, context)
        result = run_profile_guided(planned, execute_build=executor(view), note=view.note)
        return ProfileGuidedBuild(result=result)
    plan = plan_build(request, profile, variant, context, engine)
    if request.dry_run:
        view.dry_run_plan(plan)
        _refuse_as_the_real_run(plan, docker_host)
        return ContainerBuild(plan=plan)
    return _execute(request, plan, engine or Engine(), remote=bool(docker_host), view=view)


def _refuse_as_the_real_run(plan: BuildPlan, docker_host: str | None) -> None:
    """The dry run ends with the refusal the real run would meet before any download or compile:
    a base image no engine has and orch cannot make offline (asked of the engine only then: Debian
    images are made offline)."""
    if made_offline(plan):
        return
    engine = Engine(docker_host)
    engine.ping()
    refusal = base_image_refusal(engine, plan, local=Engine() if docker_host else None)
    if refusal is not None:
        raise refusal


def _execute(
    request: BuildRequest, plan: BuildPlan, engine: Engine, *, remote: bool, view: BuildView
) -> ContainerBuild:
    # With --docker-host the workstation's own engine still fetches the source, lends its images
    # and runs the pre-flight (its qemu emulation is the one `orch doctor` checked).
    options = ExecuteOptions(
        local_engine=Engine() if remote else None,
        force_flags=request.force_flags,
        preflight=request.preflight,
    )
    result = executor(view)(plan, engine, options)
    return ContainerBuild(plan=plan, engine=engine.label, result=result)


def executor(view: BuildView) -> ExecuteBuild:
    """One build with its log and ninja's progress reaching ``view`` (what the profile-guided
    loop runs for each of its builds)."""

    def execute_with_progress(plan: BuildPlan, engine: Engine, options: ExecuteOptions) -> BuildResult:
        with view.compile_progress() as on_progress:
            return execute(plan, engine, log=view.log, options=replace(options, progress=on_progress))

    return execute_with_progress


def _stock(request: BuildRequest, profile: TargetProfile, view: BuildView) -> StockWheel:
    if (
        request.cmake_defines
        or request.ort_source
        or request.docker_hosts_given
        or request.cache_url is not None
        or request.dependencies != "auto"
    ):
        raise UsageError(
            "the stock variant is not built: --cmake-define, --ort-source, --docker-host, --cache and"
            " --dependencies do not apply"
        )
    # The same release as the builds it will be compared with, unless asked otherwise.
    version = request.ort_version or default_version(profile)
    check_stock_python(profile, version)  # before pip, in the dry run as in the real one
    if not request.ort_version:
        view.note(
            f"stock baseline: ONNX Runtime {version}, the release orch builds for {profile.name}"
            " (--ort-version to choose another)"
        )
    if request.dry_run:
        return StockWheel(profile=profile, version=version)
    artifact = fetch_stock(Engine(), profile, version, log=view.log, preflight=request.preflight)
    return StockWheel(profile=profile, version=version, artifact=artifact)


def plan_document(plan: BuildPlan, *, force_flags: bool) -> dict[str, Any]:
    """The plan's document, with the toolchain file, the flag validation (a local tree is checked
    now) and, for a wheel or a C library, the native runner's plan."""
    document = plan.as_dict()
    document["toolchain_file_text"] = plan.toolchain_file.read_text()
    validation: dict[str, Any] = {"checked": False}
    if plan.source.kind == "dir":
        # Refused here exactly as the real build would refuse it (--force-flags lists them instead).
        problems = validate_or_raise(
            Path(plan.source.location),
            [k for k, _ in plan.defines],
            flags_of(plan.build_args),
            force=force_flags,
        )
        validation = {"checked": True, "problems": problems}
    document["flag_validation"] = validation
    if plan.scope in ("wheel", "library"):
        sysroot = SYSROOT if plan.toolchain == "clang-sysroot" else None
        runner = runner_plan(plan.target, plan.ort_version, sysroot=sysroot)
        document["native_runner"] = runner.as_dict(beside_library=plan.scope == "library")
    return document
