"""The record and manifest step: what the plan says about how a wheel is made, then the wheel
check, the pre-flight and the artifact directory (wheel, build log, manifest), written in one
rename so that deploy never sees a half-written one."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.artifacts.store import (
    Artifact,
    BuildRecord,
    BuiltFor,
    Manifest,
    Preflight,
    Source,
    WheelCheck,
    artifact_dir,
    write_manifest,
)
from orchestrator.artifacts.wheel import WheelInfo, compatibility_problems, inspect_wheel
from orchestrator.builds.build_log import Log
from orchestrator.builds.build_report import compiler_version
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.preflight import GpuLibraries, run_preflight
from orchestrator.builds.sources.ort import SourceTree
from orchestrator.builds.sources.ort_spec import SourceSpec
from orchestrator.builds.sysroots.contents import Sysroot, check_wheel_against
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.common.digests import file_sha256
from orchestrator.errors import BuildError
from orchestrator.targets import TargetProfile

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine


@dataclass(frozen=True, kw_only=True)
class MadeWheel:
    """A wheel that a build made or a download fetched, with what is known of how."""

    profile: TargetProfile
    variant: str  # the name the artifact is stored and deployed under
    ort_version: str
    wheel: Path
    record: BuildRecord
    log_path: Path | None = None  # the build log, copied beside the wheel
    # --sysroot-from: the wheel's ELF version needs are also proved against the sysroot's libraries.
    sysroot: SysrootRef | None = None


@dataclass(frozen=True, kw_only=True)
class BoardCheck:
    """The pre-flight of a wheel built on a board: run there, by ``check``."""

    board: str
    check: Callable[[], Preflight]


def built_for(profile: TargetProfile) -> BuiltFor:
    """The board a build is made for, as its record keeps it."""
    return BuiltFor(
        cpu=profile.cpu,
        mcpu=profile.mcpu,
        glibc=profile.os.glibc,
        python=profile.os.python,
        distro=f"{profile.os.distro} {profile.os.release}",
    )


def source_record(spec: SourceSpec, tree: SourceTree | None) -> Source:
    """Where ORT's tree came from, as a record keeps it (its sha256 once it is fetched)."""
    return Source(
        kind=spec.kind,
        location=spec.location,
        ref=spec.ref,
        description=spec.describe(),
        sha256=tree.source_sha256 if tree else None,
    )


def build_record(plan: BuildPlan, tree: SourceTree | None, *, report: Path | None = None) -> BuildRecord:
    """What the plan says about how the wheel is made, and the compiler CMake found (from the build's
    ``report`` directory, when there is one); the build adds what it measured."""
    return BuildRecord(
        compiler=compiler_version(report) if report is not None else None,
        variant_description=plan.variant.description,
        execution_provider=plan.execution_provider,
        source=source_record(plan.source, tree),
        patches=tuple(tree.patches) if tree else (),
        dependencies=plan.dependencies,
        toolchain=plan.toolchain,
        image=plan.image.tag,
        build_argv=tuple(plan.build_argv),
        defines=tuple(f"{k}={v}" for k, v in plan.defines),
        compiler_flags=tuple(plan.compiler_flags),
        linker_flags=tuple(plan.linker_flags),
        parallel=plan.parallel,
        target_profile=built_for(plan.target),
        kleidiai=plan.kleidiai,
        operator_config=plan.operator_config.as_dict() if plan.operator_config else None,
    )


def _gpu_libraries(made: MadeWheel) -> GpuLibraries | None:
    """A CUDA wheel's pre-flight gets the sysroot's GPU libraries the provider links, as the board has them."""
    cuda = made.record.cuda
    libraries = cuda.get("board_libraries") if cuda else None
    if made.sysroot is None or not isinstance(libraries, dict):
        return None
    return GpuLibraries(sysroot=made.sysroot.root, files={str(k): str(v) for k, v in libraries.items()})


def finish_artifact(  # noqa: PLR0913 -- the wheel; where it goes, where it pre-flights, the log; two options
    made: MadeWheel,
    *,
    root: Path | None,
    engine: Engine | BoardCheck,
    log: Log,
    preflight: bool = True,
    before_publish: Callable[[Artifact], Artifact] | None = None,
) -> Artifact:
    """Wheel check + pre-flight, then the wheel, log and manifest (the record + what the checks
    found) into the artifact directory. The pre-flight runs under qemu on ``engine``, or, for a
    wheel a board built itself, on that board (a ``BoardCheck``). ``before_publish`` adds to a
    wheel that passed (the native runner, proved): it gets the staged artifact, and when it fails
    nothing is published."""
    profile = made.profile
    info = inspect_wheel(made.wheel)
    problems, record = _check_wheel(made, info)
    directory = artifact_dir(profile.name, made.variant, made.ort_version, root)
    staging = _stage(made, directory)
    manifest = Manifest(
        target=profile.name,
        variant=made.variant,
        ort_version=made.ort_version,
        wheel=made.wheel.name,
        kind="wheel",
        wheel_sha256=file_sha256(made.wheel),
        wheel_size=made.wheel.stat().st_size,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        wheel_check=WheelCheck(ok=not problems, problems=tuple(problems), details=info.as_dict()),
        build=record,
    )
    if problems:
        manifest = replace(manifest, preflight=Preflight(ok=False, skipped="wheel check failed"))
        publish(staging, directory, manifest)
        raise BuildError(
            f"the wheel does not fit target {profile.name}: " + "; ".join(problems),
            hint=f"manifest: {directory / 'manifest.json'}",
        )
    where = f"an emulated {profile.qemu_cpu}"
    if not preflight:
        verdict = Preflight(ok=False, skipped="disabled")
    elif isinstance(engine, BoardCheck):
        where = engine.board
        log(f"pre-flight: one inference on {where} itself")
        verdict = engine.check()
    else:
        log(f"pre-flight: import + one inference under qemu ({profile.qemu_cpu})")
        verdict = run_preflight(engine, profile, staging / made.wheel.name, log=log, gpu=_gpu_libraries(made))
    manifest = replace(manifest, preflight=verdict)
    if before_publish is not None and (verdict.ok or not preflight):
        try:
            manifest = before_publish(Artifact(directory=staging, manifest=manifest)).manifest
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    publish(staging, directory, manifest)
    if preflight and not verdict.ok:
        raise BuildError(
            f"pre-flight failed on {where}: {verdict.error}",
            hint=f"the artifact is kept but not marked good: {directory}",
        )
    return Artifact(directory=directory, manifest=manifest)


def _check_wheel(made: MadeWheel, info: WheelInfo) -> tuple[list[str], BuildRecord]:
    """What keeps the wheel off the board (architecture, glibc, Python tag, and with a sysroot
    its real libraries), and the record with the sysroot check added."""
    profile = made.profile
    problems = compatibility_problems(
        info,
        arch=profile.arch,
        glibc=profile.os.glibc,
        python_tag=profile.os.python_tag,
        board=f"target {profile.name}",
    )
    sysroot = made.sysroot
    if sysroot is None:
        return problems, made.record
    check = check_wheel_against(info, Sysroot(root=sysroot.root, name=sysroot.name))
    problems += [f"sysroot {sysroot.name}: {message}" for message in check.messages]
    return problems, replace(made.record, sysroot={**sysroot.as_dict(), "check": check.as_dict()})


def _stage(made: MadeWheel, directory: Path) -> Path:
    """The wheel and its build log copied into a fresh staging directory beside ``directory``."""
    staging = directory.with_name(directory.name + ".incoming")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    shutil.copy2(made.wheel, staging / made.wheel.name)
    if made.log_path and made.log_path.exists():
        shutil.copy2(made.log_path, staging / "build.log")
    return staging


def publish(staging: Path, directory: Path, manifest: Manifest) -> None:
    """Replace the artifact directory in one rename, so deploy never sees a half-written one."""
    write_manifest(staging, manifest)
    if directory.exists():
        old = directory.with_name(directory.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        directory.rename(old)
        staging.rename(directory)
        shutil.rmtree(old)
    else:
        staging.rename(directory)
