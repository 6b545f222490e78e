"""Execute a BuildPlan through the container engine, then check and record what came out.

Order matters for the user's time: everything that can fail fast (base image, source, flag
validation) runs before the build image and the 20-minute compile. The build's files live in
volumes on the engine (``build_workspace``), so the engine may be another machine's. After the compile:

1. the wheel is retagged for the board and its system libraries bundled (package_wheel.py);
2. ``compile_commands.json`` is read back to prove the variant's flags (``-mcpu``, ``-flto``)
   reached the MLAS kernels and the session sources;
3. the wheel is checked (aarch64 ELF everywhere, GLIBC <= the board's, the board's Python tag);
4. the pre-flight imports it and runs a model under qemu with the board's CPU model;
5. the manifest is written next to the wheel and the full build log.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TextIO

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
from orchestrator.artifacts.wheel import compatibility_problems, inspect_wheel
from orchestrator.base_images import ensure_base_image, registry_override
from orchestrator.builds import flags as flag_check
from orchestrator.builds import preflight as preflight_module
from orchestrator.builds.cache import CacheRelay
from orchestrator.builds.native_runner import execute as native_runner_build
from orchestrator.builds.plan import BUILD, CCACHE, OUT, REDUCED, SCRIPTS, SRC, TOOLCHAINS, BuildPlan
from orchestrator.builds.sources.dependencies import (
    DEPS,
    PreparedDependencies,
    load_table,
    prepare_dependencies,
)
from orchestrator.builds.sources.ort import SourceTree, prepare_source
from orchestrator.builds.sysroots.contents import Sysroot, check_wheel_against
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.workspace import (
    ensure_build_volume,
    ensure_dependencies_volume,
    ensure_source_volume,
    local_build_dir,
)
from orchestrator.digests import file_sha256
from orchestrator.errors import BuildError, ContainerError
from orchestrator.paths import DOCKER_DIR, TOOLCHAINS_DIR

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

Log = Callable[[str], None]
_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")
# The first line that names the failure, in the order a human would look for it.
_ERROR_PATTERNS = (
    re.compile(r"(?:^|\s)(?:fatal )?error:", re.IGNORECASE),
    re.compile(r"^CMake Error"),
    re.compile(r"^FAILED:"),
    re.compile(r"undefined reference to"),
    re.compile(r"^Traceback"),
)
# What run_build.sh leaves in the build volume for orch to copy out (see docker/build/run_build.sh).
REPORT_NAME = "orch-report"
# Sources whose compile command must show the variant's flags: the MLAS kernels and the session.
READBACK_SOURCES = {
    "mlas": "onnxruntime/core/mlas/lib/sgemm.cpp",
    "session": "onnxruntime/core/session/inference_session.cc",
}


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    plan: BuildPlan
    build_dir: Path
    log_path: Path
    duration_s: float
    ccache: dict[str, Any]
    artifact: Artifact | None
    # What the compile step had to do in the kept build directory: {"configure": "ran" | "reused",
    # "ninja_steps": n} (0 steps: an unchanged rebuild, nothing compiled or linked).
    incremental: dict[str, Any] = field(default_factory=dict)


def configure_stamp(
    plan: BuildPlan, image_id: str, source_volume: str, toolchains: Path = TOOLCHAINS_DIR
) -> str:
    """A digest of what the configure step depends on and ninja does not watch: build.py's
    arguments (every -D and flag), the build image, the source volume (named by its content), and
    the toolchain files copied into the container. Equal digests: CMake need not run again."""
    digest = hashlib.sha256(json.dumps([plan.build_argv, image_id, source_volume]).encode())
    for path in sorted(toolchains.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(toolchains)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def first_error(lines: list[str]) -> str | None:
    """The first line of a failed build's log that names the error (compiler, CMake, ninja, Python)."""
    for pattern in _ERROR_PATTERNS:
        for index, line in enumerate(lines):
            if pattern.search(line):
                # A CMake error's text is on the following lines.
                extra = (
                    [x for x in lines[index + 1 : index + 4] if x.strip()]
                    if line.startswith("CMake Error")
                    else []
                )
                return "\n".join([line.strip(), *(x.strip() for x in extra)])
    return None


def parse_ccache_stats(text: str) -> dict[str, Any]:
    """``ccache --print-stats`` (tab-separated) -> hits, misses, hit rate."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition("\t")
        if value.strip().isdigit():
            values[key.strip()] = int(value)
    hits = values.get("direct_cache_hit", 0) + values.get("preprocessed_cache_hit", 0)
    misses = values.get("cache_miss", 0)
    total = hits + misses
    return {
        "hits": hits,
        "misses": misses,
        "hit_rate": round(hits / total, 4) if total else None,
        "direct_hits": values.get("direct_cache_hit", 0),
        "uncacheable": values.get("uncacheable_call", 0),
        # Where the hits came from: the engine's ccache volume, or the shared remote storage (--cache).
        "local_hits": values.get("local_storage_hit", 0),
        "local_misses": values.get("local_storage_miss", 0),
        "remote_hits": values.get("remote_storage_hit", 0),
        "remote_misses": values.get("remote_storage_miss", 0),
        "remote_writes": values.get("remote_storage_write", 0),
        "remote_errors": values.get("remote_storage_error", 0) + values.get("remote_storage_timeout", 0),
    }


def readback_flags(compile_commands: Path, expected: list[str]) -> dict[str, Any]:
    """Which of the expected flags each key source really got, from compile_commands.json."""
    try:
        entries = json.loads(compile_commands.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise BuildError(f"cannot read {compile_commands}: {error}") from error
    found: dict[str, Any] = {}
    for key, suffix in READBACK_SOURCES.items():
        entry = next((e for e in entries if e.get("file", "").endswith(suffix)), None)
        if entry is None:
            found[key] = {"file": suffix, "found": False}
            continue
        argv = entry.get("arguments") or shlex.split(entry.get("command", ""))
        present = {flag: any(arg == flag or arg.startswith(flag) for arg in argv) for flag in expected}
        found[key] = {
            "file": suffix,
            "found": True,
            "flags": present,
            "march_override": [a for a in argv if a.startswith("-march=")],
        }
    return found


def expected_flags(plan: BuildPlan) -> list[str]:
    flags = [f for f in plan.compiler_flags if f.startswith(("-mcpu", "-march", "-finline-limit", "-O"))]
    if "--enable_lto" in plan.build_args:
        flags.append("-flto")
    return flags


def compiler_version(report_dir: Path) -> str | None:
    """The C++ compiler and version CMake identified (its CMakeCXXCompiler.cmake, copied out of the build)."""
    path = report_dir / "CMakeCXXCompiler.cmake"
    if not path.is_file():
        return None
    text = path.read_text()
    match = re.search(r'set\(CMAKE_CXX_COMPILER_VERSION "([^"]+)"\)', text)
    compiler = re.search(r'set\(CMAKE_CXX_COMPILER "([^"]+)"\)', text)
    if not match:
        return None
    return f"{Path(compiler.group(1)).name if compiler else 'g++'} {match.group(1)}"


class _LogSink:
    """Writes every line to the log file, feeds ninja's [n/N] to a progress callback, keeps a tail."""

    def __init__(self, handle: TextIO, progress: Callable[[int, int], None] | None, echo: Log | None) -> None:
        self.handle = handle
        self.progress = progress
        self.echo = echo
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.handle.write(line + "\n")
        self.handle.flush()
        self.lines.append(line)
        match = _PROGRESS.match(line)
        if match and self.progress:
            self.progress(int(match.group(1)), int(match.group(2)))
        elif self.echo and not match:
            self.echo(line)


def ensure_build_image(engine: Engine, plan: BuildPlan, log: Log, *, local: Engine | None = None) -> str:
    """The build image's id on ``engine``: sent from ``local`` when that has it (same tag = same
    inputs), else built there on the base image (bootstrapped offline when possible)."""
    image = plan.image
    existing = engine.image_id(image.tag) or _sent_from(local, engine, image.tag, log)
    if existing:
        return existing
    ensure_base_image_on(engine, plan, log, local=local)
    log(f"building image {image.tag} from {image.dockerfile.name} on {image.base_image}")
    return engine.build_image(
        context=image.context,
        dockerfile=image.dockerfile,
        tag=image.tag,
        buildargs=dict(image.buildargs),
        labels={"orch.role": "build", "orch.inputs": image.inputs_sha256, "orch.target": plan.target.name},
        on_log=log,
    )


def ensure_base_image_on(engine: Engine, plan: BuildPlan, log: Log, *, local: Engine | None = None) -> str:
    """The base image of the build image on ``engine``: bootstrapped offline, sent from ``local``, or
    (registry images) already there; a clear error when it cannot be had."""

    image = plan.image
    if engine.image_id(image.base_image) or _sent_from(local, engine, image.base_image, log):
        return image.base_image
    if image.base_suite and not registry_override(image.base_suite):
        base = ensure_base_image(engine, image.base_suite, image.base_arch, on_log=log)
        if base != image.base_image:
            raise BuildError(f"base image tag changed while planning ({image.base_image} vs {base})")
        return base
    codename = plan.target.os.codename.upper()
    raise BuildError(
        f"the build image for target '{plan.target.name}' needs the base image '{image.base_image}', "
        f"which {engine.label} does not have and cannot pull without a registry",
        hint=f"three ways: (1) pull it where a registry is reachable (docker pull {image.base_image}) or point"
        f" ORCH_BASE_IMAGE_{codename} at an image you have; (2) load a saved one (docker load -i"
        f" {image.base_image.replace(':', '_').replace('/', '_')}.tar); (3) build for the OS of a board you"
        f" reach: `orch sysroot pull --host BOARD`, then `orch build --target {plan.target.name}"
        " --sysroot-from BOARD` (Debian-based boards build offline). `--dry-run` shows the plan meanwhile",
    )


def _sent_from(local: Engine | None, engine: Engine, tag: str, log: Log) -> str | None:
    """``tag`` sent to ``engine`` from the workstation's engine when only that one has it (same tag,
    same inputs); its id there, or None."""
    if local is None or local is engine or not local.image_id(tag):
        return None
    return local.ship_image(tag, engine, on_log=log)


def validate_plan_flags(plan: BuildPlan, tree: Path, *, force: bool) -> list[str]:
    names = [name for name, _ in plan.defines]
    return flag_check.validate_or_raise(tree, names, flag_check.flags_of(plan.build_args), force=force)


def execute(
    plan: BuildPlan,
    engine: Engine,
    *,
    local_engine: Engine | None = None,
    force_flags: bool = False,
    artifacts_root: Path | None = None,
    log: Log,
    progress: Callable[[int, int], None] | None = None,
    echo: Log | None = None,
    preflight: bool = True,
) -> BuildResult:
    """Run the whole build on ``engine``; raises BuildError (with the log path) when any step fails.

    ``local_engine`` (the workstation's, when ``engine`` is another machine's) fetches the Debian
    source, lends the images it already has and runs the pre-flight (it has the emulation set up).
    """
    if plan.refused:
        raise BuildError(
            f"cannot build {plan.target.name} with --ep {plan.execution_provider} here: {plan.refused}",
            hint="`--dry-run` shows the exact build.py arguments for an image that has the toolkit",
        )
    started = time.monotonic()
    local = local_engine or engine
    engine.ping()
    if plan.source.kind == "dir":
        # A local tree can be checked before it is copied and patched.
        validate_plan_flags(plan, Path(plan.source.location), force=force_flags)
    fetch_image = None
    try:
        # Fail fast (before any download): the build image must be there or be makeable.
        if not (engine.image_id(plan.image.tag) or local.image_id(plan.image.tag)):
            ensure_base_image_on(engine, plan, log, local=local)
        if plan.source.kind == "debian" or plan.dependencies == "source":
            fetch_image = ensure_base_image_on(local, plan, log)
    except ContainerError as error:
        raise BuildError(f"base image for {plan.target.name}: {error.message}", hint=error.hint) from error
    tree = prepare_source(plan.source, engine=local, base_image=fetch_image, log=log)
    deps = _prepare_dependencies(plan, local, fetch_image, tree, log)
    warnings = validate_plan_flags(plan, tree.path, force=force_flags)
    for warning in warnings:
        log(f"warning (forced): {warning}")
    image_id = ensure_build_image(engine, plan, log, local=local)
    source_volume = ensure_source_volume(engine, image_id, tree, log)
    volumes = {
        source_volume: {"bind": SRC, "mode": "rw"},
        ensure_build_volume(engine, plan): {"bind": BUILD, "mode": "rw"},
    }
    remote_only = plan.cache is not None and plan.cache.remote_only
    if not remote_only:
        engine.ensure_volume(
            plan.ccache_volume, labels={"orch.role": "ccache", "orch.target": plan.target.name}
        )
        volumes[plan.ccache_volume] = {"bind": CCACHE, "mode": "rw"}
    if deps is not None:
        volumes[ensure_dependencies_volume(engine, image_id, deps, plan.ort_version, log)] = {
            "bind": DEPS,
            "mode": "rw",
        }
    build_dir = local_build_dir(plan)
    for stale in (build_dir / "out", build_dir / REPORT_NAME):
        shutil.rmtree(stale, ignore_errors=True)
    log_path = build_dir / "build.log"
    # The scripts and toolchain files as they are now (not as when the image was built).
    copy_in = [(TOOLCHAINS_DIR, TOOLCHAINS), (DOCKER_DIR / "build", SCRIPTS)]
    if plan.operator_config is not None and (config_path := plan.operator_config_path):
        reduced = build_dir / "reduced"
        shutil.rmtree(reduced, ignore_errors=True)
        reduced.mkdir()
        (reduced / PurePosixPath(config_path).name).write_text(plan.operator_config.text)
        copy_in.append((reduced, REDUCED))
    labels = {"orch.role": "build", "orch.target": plan.target.name, "orch.variant": plan.artifact_variant}
    # Every build sees the same in-container paths (/src, /build), so cache entries are shared
    # across variants and rebuilds without path rewriting.
    environment = {
        # Remote only: the container's own directory holds just this build's statistics.
        "CCACHE_DIR": "/tmp/orch-ccache" if remote_only else CCACHE,
        "CCACHE_COMPILERCHECK": "content",
        "CCACHE_MAXSIZE": "8G",
        "ORCH_CONFIG_DIR": plan.config_build_dir,
        # run_build.sh skips CMake's configure step when the kept build directory has this stamp.
        "ORCH_CONFIGURE_STAMP": configure_stamp(plan, image_id, source_volume),
    }
    with log_path.open("w") as handle:
        handle.write(
            f"# orch build {plan.target.name}/{plan.artifact_variant} ORT {plan.ort_version} on {engine.label}\n"
        )
        handle.write(f"# image {plan.image.tag} ({image_id})\n# {shlex.join(plan.build_argv)}\n")
        sink = _LogSink(handle, progress, echo)
        # The shared compiler cache's relay lives as long as the compile (packaging compiles nothing).
        relay = CacheRelay(engine, image_id, plan.cache, labels) if plan.cache else None
        relay_up = False
        try:
            compile_volumes, compile_environment = dict(volumes), dict(environment)
            relay_up = relay is not None and relay.start(log)
            if relay is not None and relay_up:
                compile_volumes.update(relay.volumes)
                compile_environment.update(relay.cache.environment())
            code = engine.run(
                image_id,
                ["sh", f"{SCRIPTS}/run_build.sh", *plan.build_argv],
                environment=compile_environment,
                volumes=compile_volumes,
                network=plan.network,
                labels=labels,
                working_dir=BUILD,
                on_log=sink,
                copy_in=copy_in,
                copy_out=[(f"{BUILD}/{REPORT_NAME}", build_dir)],
            )
        finally:
            if relay is not None:
                relay.stop()
        if code != 0:
            reason = first_error(sink.lines) or f"build.py exited with status {code}"
            raise BuildError(f"the ORT build failed:\n{reason}", hint=f"full log: {log_path}")
        report = build_dir / REPORT_NAME
        stats_file = report / "ccache-stats.tsv"
        ccache = parse_ccache_stats(stats_file.read_text()) if stats_file.is_file() else {}
        incremental = _incremental(report, sink.lines)
        if plan.cache is not None:
            ccache.update(remote_storage=plan.cache.display, remote_reachable=relay_up)
        what = (
            "the wheel for the board (platform tag, bundled system libraries)"
            if plan.scope == "wheel"
            else "onnxruntime_mlas_test with the libraries it needs"
        )
        log(f"packaging {what}")
        sink.progress = None
        code = engine.run(
            image_id,
            plan.package_argv,
            volumes=volumes,
            network=plan.network,
            labels=labels,
            working_dir=plan.config_build_dir,
            on_log=sink,
            copy_in=copy_in,
            copy_out=[(OUT, build_dir)],
        )
        if code != 0:
            raise BuildError(
                f"packaging failed:\n{first_error(sink.lines[-200:]) or code}", hint=f"full log: {log_path}"
            )
    if plan.scope != "wheel":
        return BuildResult(
            plan=plan,
            build_dir=build_dir,
            log_path=log_path,
            duration_s=time.monotonic() - started,
            ccache=ccache,
            artifact=None,
            incremental=incremental,
        )
    package = _package_report(log_path)
    wheel = build_dir / "out" / package.wheel
    readback = readback_flags(report / "compile_commands.json", expected_flags(plan))
    _require_flags(readback, log_path)
    record = replace(
        build_record(plan, tree),
        dependency_sources=deps.records if deps else None,
        image_id=image_id,
        engine=engine.label,
        compiler=compiler_version(report),
        compile_commands_readback=readback,
        bundled_libraries=package.bundled,
        ccache=ccache,
        incremental=incremental,
        build_duration_s=round(time.monotonic() - started, 1),
        flag_warnings=tuple(warnings),
    )
    artifact = finish_artifact(
        plan.target,
        plan.artifact_variant,
        plan.ort_version,
        wheel,
        record,
        log_path=log_path,
        root=artifacts_root,
        engine=local,
        log=log,
        preflight=preflight,
        sysroot=plan.sysroot,
    )
    # The native runner of this release, for the wheel's C library (--build_shared_lib).
    artifact = native_runner_build.add_runner(
        artifact,
        plan.target,
        engine,
        header=native_runner_build.header_from_tree(tree.path),
        image_id=image_id,
        image_tag=plan.image.tag,
        log=log,
    )
    return BuildResult(
        plan=plan,
        build_dir=build_dir,
        log_path=artifact.directory / "build.log",
        duration_s=time.monotonic() - started,
        ccache=ccache,
        artifact=artifact,
        incremental=incremental,
    )


def _incremental(report: Path, lines: list[str]) -> dict[str, Any]:
    """Whether CMake configured again (run_build.sh's configure.txt) and how many steps ninja ran
    (its last ``[n/N]``; 0 when it printed none: "no work to do")."""
    marker = report / "configure.txt"
    configure = marker.read_text().strip() if marker.is_file() else None
    steps = 0
    for line in reversed(lines):
        match = _PROGRESS.match(line)
        if match:
            steps = int(match.group(2))
            break
    return {"configure": configure, "ninja_steps": steps}


@dataclass(frozen=True, kw_only=True)
class PackageReport:
    """What package_wheel.py reported: the wheel's file name and the system libraries it bundled."""

    wheel: str
    bundled: tuple[str, ...]


def _package_report(log_path: Path) -> PackageReport:
    """The packaging step's (last) ``ORCH-PACKAGE {json}`` line of the build log."""
    hint = f"full log: {log_path}"
    lines = reversed(log_path.read_text().splitlines())
    line = next((x for x in lines if x.startswith("ORCH-PACKAGE ")), None)
    if line is None:
        raise BuildError("the packaging step reported no wheel", hint=hint)
    try:
        document = json.loads(line.removeprefix("ORCH-PACKAGE "))
    except json.JSONDecodeError as error:
        raise BuildError(f"the packaging step's report is not JSON: {error}", hint=hint) from error
    wheel = document.get("wheel") if isinstance(document, dict) else None
    bundled = document.get("bundled", []) if isinstance(document, dict) else None
    if (
        not isinstance(wheel, str)
        or not isinstance(bundled, list)
        or not all(isinstance(b, str) for b in bundled)
    ):
        raise BuildError(f"the packaging step's report is malformed: {line}", hint=hint)
    return PackageReport(wheel=wheel, bundled=tuple(bundled))


def _require_flags(readback: dict[str, Any], log_path: Path) -> None:
    missing = [
        f"{key} ({info['file']}): {', '.join(f for f, ok in info.get('flags', {}).items() if not ok)}"
        for key, info in readback.items()
        if not info.get("found") or not all(info.get("flags", {}).values())
    ]
    if missing:
        raise BuildError(
            "the compiler did not get the variant's flags: " + "; ".join(missing),
            hint=f"see {log_path.parent / REPORT_NAME / 'compile_commands.json'}; log: {log_path}",
        )


def _prepare_dependencies(
    plan: BuildPlan, local: Engine, fetch_image: str | None, tree: SourceTree, log: Log
) -> PreparedDependencies | None:
    """The self-contained route's dependency sources, downloaded and patched once (None: other routes)."""
    if plan.dependencies != "source":
        return None
    table = load_table(plan.ort_version)
    if table is None or fetch_image is None:
        raise BuildError(f"no dependency table for ORT {plan.ort_version} (toolchains/deps/)")
    return prepare_dependencies(table, engine=local, base_image=fetch_image, ort_tree=tree.path, log=log)


def build_record(plan: BuildPlan, tree: SourceTree | None) -> BuildRecord:
    """What the plan says about how the wheel is made (the build adds what it measured)."""
    return BuildRecord(
        variant_description=plan.variant.description,
        execution_provider=plan.execution_provider,
        source=Source(
            kind=plan.source.kind,
            location=plan.source.location,
            ref=plan.source.ref,
            description=plan.source.describe(),
            sha256=tree.source_sha256 if tree else None,
        ),
        patches=tuple(tree.patches) if tree else (),
        dependencies=plan.dependencies,
        image=plan.image.tag,
        build_argv=tuple(plan.build_argv),
        defines=tuple(f"{k}={v}" for k, v in plan.defines),
        compiler_flags=tuple(plan.compiler_flags),
        parallel=plan.parallel,
        target_profile=BuiltFor(
            cpu=plan.target.cpu,
            mcpu=plan.target.mcpu,
            glibc=plan.target.os.glibc,
            python=plan.target.os.python,
            distro=f"{plan.target.os.distro} {plan.target.os.release}",
        ),
        kleidiai=plan.kleidiai,
        operator_config=plan.operator_config.as_dict() if plan.operator_config else None,
    )


def finish_artifact(
    profile: Any,
    variant: str,
    ort_version: str,
    wheel: Path,
    record: BuildRecord,
    *,
    log_path: Path | None,
    root: Path | None,
    engine: Engine,
    log: Log,
    preflight: bool = True,
    sysroot: SysrootRef | None = None,
) -> Artifact:
    """Wheel check + pre-flight, then the wheel, log and manifest (``record`` + what the checks
    found) into the artifact directory. With a sysroot, the wheel's ELF version needs are also
    proved against the sysroot's own libc, libstdc++ and libgcc."""

    info = inspect_wheel(wheel)
    problems = compatibility_problems(
        info,
        arch=profile.arch,
        glibc=profile.os.glibc,
        python_tag=profile.os.python_tag,
        board=f"target {profile.name}",
    )
    if sysroot is not None:
        check = check_wheel_against(info, Sysroot(root=sysroot.root, name=sysroot.name))
        problems += [f"sysroot {sysroot.name}: {message}" for message in check.messages]
        record = replace(record, sysroot={**sysroot.as_dict(), "check": check.as_dict()})
    directory = artifact_dir(profile.name, variant, ort_version, root)
    staging = directory.with_name(directory.name + ".incoming")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    shutil.copy2(wheel, staging / wheel.name)
    if log_path and log_path.exists():
        shutil.copy2(log_path, staging / "build.log")
    manifest = Manifest(
        target=profile.name,
        variant=variant,
        ort_version=ort_version,
        wheel=wheel.name,
        wheel_sha256=file_sha256(wheel),
        wheel_size=wheel.stat().st_size,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        wheel_check=WheelCheck(ok=not problems, problems=tuple(problems), details=info.as_dict()),
        build=record,
    )
    if problems:
        manifest = replace(manifest, preflight=Preflight(ok=False, skipped="wheel check failed"))
        _publish(staging, directory, manifest)
        raise BuildError(
            f"the wheel does not fit target {profile.name}: " + "; ".join(problems),
            hint=f"manifest: {directory / 'manifest.json'}",
        )
    if preflight:
        log(f"pre-flight: import + one inference under qemu ({profile.qemu_cpu})")
        verdict = preflight_module.run_preflight(engine, profile, staging / wheel.name, log=log)
    else:
        verdict = Preflight(ok=False, skipped="disabled")
    manifest = replace(manifest, preflight=verdict)
    _publish(staging, directory, manifest)
    if preflight and not verdict.ok:
        raise BuildError(
            f"pre-flight failed on an emulated {profile.qemu_cpu}: {verdict.error}",
            hint=f"the artifact is kept but not marked good: {directory}",
        )
    return Artifact(directory=directory, manifest=manifest)


def _publish(staging: Path, directory: Path, manifest: Manifest) -> None:
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
