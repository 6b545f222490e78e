"""Execute a BuildPlan through the container engine, then check and record what came out.

Order matters for the user's time: everything that can fail fast (base image, source, flag
validation) runs before the build image and the 20-minute compile. The build's files live in
volumes on the engine (``workspace``), so the engine may be another machine's. After the compile:

1. the wheel is retagged for the board and its system libraries bundled (package_wheel.py);
2. ``compile_commands.json`` is read back to prove the variant's flags (``-mcpu``, ``-flto``)
   reached the MLAS kernels and the session sources (``build_report``);
3. the wheel is checked (aarch64 ELF everywhere, GLIBC <= the board's, the board's Python tag);
4. the pre-flight imports it and runs a model under qemu with the board's CPU model;
5. the manifest is written next to the wheel and the full build log (``record``).

A C library build (``--scope library``) has no wheel: the runner is compiled beside the library, both
are proved and the runner pre-flighted (``native_runner.library``), and ``out/`` is published as an
artifact of kind ``library`` (``library_record``).
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Final

from orchestrator.artifacts.store import Artifact, BuildRecord
from orchestrator.builds.build_log import Log, LogSink, Progress, first_error, lto_dropped
from orchestrator.builds.build_report import (
    REPORT_NAME,
    CompilerCacheUse,
    IncrementalBuild,
    configure_stamp,
    expected_flags,
    read_ccache_stats,
    read_incremental,
    read_package_report,
    readback_flags,
    require_flags,
)
from orchestrator.builds.cache import CacheRelay
from orchestrator.builds.container_paths import BUILD, CCACHE, OUT, REDUCED, SCRIPTS, SRC, SYSROOT, TOOLCHAINS
from orchestrator.builds.flags import flags_of, validate_or_raise
from orchestrator.builds.image import ensure_base_image_on, ensure_build_image
from orchestrator.builds.library_record import publish_library
from orchestrator.builds.native_runner.execute import CompileIn, header_from_tree
from orchestrator.builds.native_runner.library import LibraryOutput, finish_library, proved_runner
from orchestrator.builds.network import FetchedNeeds, fetch_failure, needs_after_fetch, planned_needs
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.record import MadeWheel, build_record, finish_artifact
from orchestrator.builds.sources.dependencies import PreparedDependencies, prepare_dependencies
from orchestrator.builds.sources.dependency_table import DEPS, load_table
from orchestrator.builds.sources.ort import SourceTree, fetch_entries, prepare_source
from orchestrator.builds.toolchain import toolchain_environment
from orchestrator.builds.workspace import (
    ensure_build_volume,
    ensure_dependencies_volume,
    ensure_source_volume,
    ensure_sysroot_volume,
    local_build_dir,
)
from orchestrator.errors import BuildError, ContainerError
from orchestrator.paths import DOCKER_DIR, TOOLCHAINS_DIR

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

Volumes = dict[str, dict[str, str]]


@dataclass(frozen=True, kw_only=True)
class ExecuteOptions:
    """How a plan is run, besides the plan, the engine and the log."""

    # The workstation's engine, when the build's is another machine's: it fetches the Debian
    # source, lends the images it already has and runs the pre-flight (it has the emulation set up).
    local_engine: Engine | None = None
    force_flags: bool = False  # build even with unknown CMake/build.py names (then warnings)
    artifacts_root: Path | None = None  # None: the home's artifacts/
    progress: Progress | None = None  # ninja's [n/N]
    echo: Log | None = None  # every other line of the build log
    preflight: bool = True


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    plan: BuildPlan
    network: FetchedNeeds  # what the build container downloaded, on which network (see fetched_needs)
    build_dir: Path
    log_path: Path
    duration_s: float
    ccache: CompilerCacheUse
    artifact: Artifact | None  # the wheel's, or a C library build's (kind "library")
    incremental: IncrementalBuild
    record: BuildRecord | None = None  # how it was made (the artifact's manifest, or beside the build)
    library: LibraryOutput | None = None  # --scope library: ORT's C library and the runner, in out/


def validate_plan_flags(plan: BuildPlan, tree: Path, *, force: bool) -> list[str]:
    names = [name for name, _ in plan.defines]
    return validate_or_raise(tree, names, flags_of(plan.build_args), force=force)


def execute(
    plan: BuildPlan, engine: Engine, *, log: Log, options: ExecuteOptions | None = None
) -> BuildResult:
    """Run the whole build on ``engine``; raises BuildError (with the log path) when any step fails."""
    return _BuildRun(plan, engine, log, options or ExecuteOptions()).run()


@dataclass(frozen=True, kw_only=True)
class _Inputs:
    """What the build compiles: the ORT tree, the self-contained route's dependency sources, and
    the warnings of a forced flag validation."""

    tree: SourceTree
    deps: PreparedDependencies | None
    warnings: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class _Container:
    """How the build container runs: image, mounts, files copied in, environment, labels."""

    image_id: str
    network: FetchedNeeds
    volumes: Volumes
    copy_in: tuple[tuple[Path, str], ...]
    environment: dict[str, str]
    labels: dict[str, str]
    build_dir: Path
    log_path: Path

    @property
    def report(self) -> Path:
        return self.build_dir / REPORT_NAME


@dataclass(frozen=True, kw_only=True)
class _Compiled:
    ccache: CompilerCacheUse
    incremental: IncrementalBuild


class _BuildRun:
    """One build's steps, in the order that lets it fail fast."""

    def __init__(self, plan: BuildPlan, engine: Engine, log: Log, options: ExecuteOptions) -> None:
        # The plan is what --dry-run showed, from the first step to the result; what the build learns
        # on the way (the fetch route's downloads) is a value of its own.
        self.plan: Final = plan
        self.engine = engine
        self.log = log
        self.options = options
        self.started = time.monotonic()
        self.local = options.local_engine or engine

    def run(self) -> BuildResult:
        self.engine.ping()
        inputs = self._prepare_inputs()
        network = fetched_needs(self.plan, inputs.tree)
        for line in network.lines():
            self.log(line)
        container = self._container(inputs, network)
        compiled = self._compile_and_package(container)
        if self.plan.scope != "wheel":
            # No wheel: the record of how it was made goes beside the build's output; a C library
            # build is also published as an artifact (kind "library") that orch deploy takes.
            record = self._record(inputs, container, compiled)
            document = record.to_json()
            library = self._library(inputs, container) if self.plan.scope == "library" else None
            if library is not None:
                document["library"] = library.as_dict()
            (container.build_dir / "manifest.json").write_text(json.dumps(document, indent=2) + "\n")
            published = None
            if library is not None:
                published = publish_library(
                    library,
                    self.plan,
                    record,
                    log_path=container.log_path,
                    root=self.options.artifacts_root,
                )
            return replace(self._result(container, compiled, published, record), library=library)
        artifact = self._artifact(inputs, container, compiled)
        return self._result(container, compiled, artifact, artifact.manifest.build)

    def _result(
        self, container: _Container, compiled: _Compiled, artifact: Artifact | None, record: BuildRecord
    ) -> BuildResult:
        return BuildResult(
            plan=self.plan,
            network=container.network,
            build_dir=container.build_dir,
            log_path=artifact.directory / "build.log" if artifact else container.log_path,
            duration_s=time.monotonic() - self.started,
            ccache=compiled.ccache,
            artifact=artifact,
            incremental=compiled.incremental,
            record=record,
        )

    def _prepare_inputs(self) -> _Inputs:
        """The source tree and dependencies, fetched and patched, and the flags validated against them."""
        plan, force = self.plan, self.options.force_flags
        if plan.source.kind == "dir":
            # A local tree can be checked before it is copied and patched.
            validate_plan_flags(plan, Path(plan.source.location), force=force)
        fetch_image = self._base_images()
        tree = prepare_source(plan.source, engine=self.local, base_image=fetch_image, log=self.log)
        deps = _prepare_dependencies(plan, self.local, fetch_image, tree, self.log)
        warnings = validate_plan_flags(plan, tree.path, force=force)
        for warning in warnings:
            self.log(f"warning (forced): {warning}")
        return _Inputs(tree=tree, deps=deps, warnings=tuple(warnings))

    def _base_images(self) -> str | None:
        """Fail fast (before any download): the build image must be there or be makeable. The base
        image the workstation fetches sources in, when the source or the dependencies need one."""
        plan, engine, local = self.plan, self.engine, self.local
        try:
            if not (engine.image_id(plan.image.tag) or local.image_id(plan.image.tag)):
                ensure_base_image_on(engine, plan, self.log, local=local)
            if plan.source.kind == "debian" or plan.dependencies == "source":
                return ensure_base_image_on(local, plan, self.log)
        except ContainerError as error:
            raise BuildError(
                f"base image for {plan.target.name}: {error.message}", hint=error.hint
            ) from error
        return None

    def _container(self, inputs: _Inputs, network: FetchedNeeds) -> _Container:
        plan = self.plan
        image_id = ensure_build_image(self.engine, plan, self.log, local=self.local)
        source_volume = ensure_source_volume(self.engine, image_id, inputs.tree, self.log)
        volumes = self._volumes(image_id, source_volume, inputs.deps)
        build_dir = local_build_dir(plan)
        for stale in (build_dir / "out", build_dir / REPORT_NAME):
            shutil.rmtree(stale, ignore_errors=True)
        return _Container(
            image_id=image_id,
            network=network,
            volumes=volumes,
            copy_in=_copy_in(plan, build_dir),
            environment=_environment(plan, image_id, source_volume),
            labels={
                "orch.role": "build",
                "orch.target": plan.target.name,
                "orch.variant": plan.artifact_variant,
            },
            build_dir=build_dir,
            log_path=build_dir / "build.log",
        )

    def _volumes(self, image_id: str, source_volume: str, deps: PreparedDependencies | None) -> Volumes:
        """The source, the kept build directory, the compiler cache and the dependency sources."""
        plan, engine = self.plan, self.engine
        volumes = {
            source_volume: {"bind": SRC, "mode": "rw"},
            ensure_build_volume(engine, plan): {"bind": BUILD, "mode": "rw"},
        }
        if not _remote_only(plan):
            engine.ensure_volume(
                plan.ccache_volume, labels={"orch.role": "ccache", "orch.target": plan.target.name}
            )
            volumes[plan.ccache_volume] = {"bind": CCACHE, "mode": "rw"}
        if deps is not None:
            volumes[ensure_dependencies_volume(engine, image_id, deps, plan.ort_version, self.log)] = {
                "bind": DEPS,
                "mode": "rw",
            }
        if plan.toolchain == "clang-sysroot" and plan.sysroot is not None:
            volumes[ensure_sysroot_volume(engine, image_id, plan.sysroot, self.log)] = {
                "bind": SYSROOT,
                "mode": "ro",
            }
        return volumes

    def _compile_and_package(self, container: _Container) -> _Compiled:
        plan = self.plan
        with container.log_path.open("w") as handle:
            handle.write(
                f"# orch build {plan.target.name}/{plan.artifact_variant} ORT {plan.ort_version}"
                f" on {self.engine.label}\n"
            )
            handle.write(
                f"# image {plan.image.tag} ({container.image_id})\n# {shlex.join(plan.build_argv)}\n"
            )
            stop_at = lto_dropped if "--enable_lto" in plan.build_args else None
            sink = LogSink(handle, self.options.progress, self.options.echo, stop_at)
            relay_up = self._compile(container, sink)
            ccache = CompilerCacheUse(
                stats=read_ccache_stats(container.report),
                remote_storage=plan.cache.display if plan.cache is not None else None,
                remote_reachable=relay_up,
            )
            incremental = read_incremental(container.report, sink.lines)
            self._package(container, sink)
        return _Compiled(ccache=ccache, incremental=incremental)

    def _compile(self, container: _Container, sink: LogSink) -> bool:
        """build.py in the build container; whether the shared compiler cache's relay was up."""
        plan, engine = self.plan, self.engine
        # The shared compiler cache's relay lives as long as the compile (packaging compiles nothing).
        relay = CacheRelay(engine, container.image_id, plan.cache, container.labels) if plan.cache else None
        relay_up = False
        try:
            volumes, environment = dict(container.volumes), dict(container.environment)
            relay_up = relay is not None and relay.start(self.log)
            if relay is not None and relay_up:
                volumes.update(relay.volumes)
                environment.update(relay.cache.environment())
            code = engine.run(
                container.image_id,
                ["sh", f"{SCRIPTS}/run_build.sh", *plan.build_argv],
                environment=environment,
                volumes=volumes,
                network=container.network.network,
                labels=container.labels,
                working_dir=BUILD,
                on_log=sink,
                copy_in=container.copy_in,
                copy_out=[(f"{BUILD}/{REPORT_NAME}", container.build_dir)],
            )
        finally:
            if relay is not None:
                relay.stop()
        if code != 0:
            fetch = fetch_failure(sink.lines) if plan.dependencies == "fetch" else None
            reason = fetch or first_error(sink.lines) or f"build.py exited with status {code}"
            raise BuildError(f"the ORT build failed:\n{reason}", hint=f"full log: {container.log_path}")
        return relay_up

    def _package(self, container: _Container, sink: LogSink) -> None:
        plan = self.plan
        what = {
            "wheel": "the wheel for the board (platform tag, bundled system libraries)",
            "library": "ORT's C library with the libraries it needs",
            "mlas-test": "onnxruntime_mlas_test with the libraries it needs",
        }[plan.scope]
        self.log(f"packaging {what}")
        sink.progress = None
        code = self.engine.run(
            container.image_id,
            plan.package_argv,
            volumes=container.volumes,
            network=container.network.network,
            labels=container.labels,
            working_dir=plan.config_build_dir,
            on_log=sink,
            copy_in=container.copy_in,
            copy_out=[(OUT, container.build_dir)],
        )
        if code != 0:
            raise BuildError(
                f"packaging failed:\n{first_error(sink.lines[-200:]) or code}",
                hint=f"full log: {container.log_path}",
            )

    def _record(self, inputs: _Inputs, container: _Container, compiled: _Compiled) -> BuildRecord:
        """What the plan says about the build and what the build measured; where each dependency
        came from (the self-contained route's Debian packages, the fetch route's deps.txt)."""
        plan = self.plan
        sources = inputs.deps.records if inputs.deps else None
        if plan.dependencies == "fetch":
            sources = fetch_entries(inputs.tree.path) or None
        return replace(
            build_record(plan, inputs.tree, report=container.report),
            dependency_sources=sources,
            image_id=container.image_id,
            engine=self.engine.label,
            ccache=compiled.ccache.as_dict(),
            incremental=compiled.incremental.as_dict(),
            build_duration_s=round(time.monotonic() - self.started, 1),
            flag_warnings=inputs.warnings,
        )

    def _artifact(self, inputs: _Inputs, container: _Container, compiled: _Compiled) -> Artifact:
        """The wheel's flags proved, checked, pre-flighted and recorded, with its native runner."""
        plan, log_path, report = self.plan, container.log_path, container.report
        package = read_package_report(log_path)
        readback = readback_flags(report / "compile_commands.json", expected_flags(plan))
        require_flags(readback, log_path)
        record = replace(
            self._record(inputs, container, compiled),
            compile_commands_readback=readback,
            bundled_libraries=package.bundled,
            cuda=(
                {
                    **plan.cuda.as_dict(),
                    "board_libraries": package.board_libraries,
                    "gpu_code": package.gpu_code,
                }
                if plan.cuda
                else None
            ),
        )
        made = MadeWheel(
            profile=plan.target,
            variant=plan.artifact_variant,
            ort_version=plan.ort_version,
            wheel=container.build_dir / "out" / package.wheel,
            record=record,
            log_path=log_path,
            sysroot=plan.sysroot,
        )
        # The native runner of this release, for the wheel's C library (--build_shared_lib), added
        # before the artifact is published: on the sysroot route proved against the board's
        # libraries as the wheel was, so a runner that does not fit leaves nothing to deploy.
        runner = proved_runner(
            plan.target,
            self._runner_compile(container),
            header=header_from_tree(inputs.tree.path),
            sysroot=plan.sysroot,
            log=self.log,
        )
        return finish_artifact(
            made,
            root=self.options.artifacts_root,
            engine=self.local,
            log=self.log,
            preflight=self.options.preflight,
            before_publish=runner,
        )

    def _runner_compile(self, container: _Container) -> CompileIn:
        """Where the runner is compiled: on the sysroot route against the board's sysroot, as the build."""
        sysroot = next((name for name, mount in container.volumes.items() if mount["bind"] == SYSROOT), None)
        return CompileIn(
            engine=self.engine,
            image_id=container.image_id,
            image_tag=self.plan.image.tag,
            sysroot_volume=sysroot,
        )

    def _library(self, inputs: _Inputs, container: _Container) -> LibraryOutput:
        """ORT's C library alone: the runner beside it, both proved against the board's sysroot."""
        plan = self.plan
        return finish_library(
            container.build_dir / "out",
            plan,
            where=self._runner_compile(container),
            header=header_from_tree(inputs.tree.path),
            log=self.log,
        )


def _remote_only(plan: BuildPlan) -> bool:
    return plan.cache is not None and plan.cache.remote_only


def _copy_in(plan: BuildPlan, build_dir: Path) -> tuple[tuple[Path, str], ...]:
    """The scripts and toolchain files as they are now (not as when the image was built), a
    reduced build's operator config and a profile-guided build's counters."""
    copy_in = [(TOOLCHAINS_DIR, TOOLCHAINS), (DOCKER_DIR / "build", SCRIPTS)]
    if plan.operator_config is not None and (config_path := plan.operator_config_path):
        reduced = build_dir / "reduced"
        shutil.rmtree(reduced, ignore_errors=True)
        reduced.mkdir()
        (reduced / PurePosixPath(config_path).name).write_text(plan.operator_config.text)
        copy_in.append((reduced, REDUCED))
    if plan.profile_input is not None:
        copy_in.append(plan.profile_input)
    return tuple(copy_in)


def _environment(plan: BuildPlan, image_id: str, source_volume: str) -> dict[str, str]:
    # Every build sees the same in-container paths (/src, /build), so cache entries are shared
    # across variants and rebuilds without path rewriting.
    return {
        # Remote only: the container's own directory holds just this build's statistics.
        "CCACHE_DIR": "/tmp/orch-ccache" if _remote_only(plan) else CCACHE,
        "CCACHE_COMPILERCHECK": "content",
        "CCACHE_MAXSIZE": "8G",
        "ORCH_CONFIG_DIR": plan.config_build_dir,
        # run_build.sh skips CMake's configure step when the kept build directory has this stamp.
        "ORCH_CONFIGURE_STAMP": configure_stamp(plan, image_id, source_volume),
        **toolchain_environment(plan.toolchain, plan.target),
    }


def fetched_needs(plan: BuildPlan, tree: SourceTree) -> FetchedNeeds:
    """The step after the fetch: what the build container downloads and its network. The plan's own,
    unless it is the fetch route of a source whose cmake/deps.txt could be read only once fetched (a
    git clone): then listed from the fetched tree's file, and the network chosen from them."""
    if plan.dependencies != "fetch" or plan.network_needs.pending is None:
        return planned_needs(plan.network_needs, plan.network)
    urls = tuple(entry["url"] for entry in fetch_entries(tree.path))
    return needs_after_fetch(plan.source, plan.dependencies, urls)


def _prepare_dependencies(
    plan: BuildPlan, local: Engine, fetch_image: str | None, tree: SourceTree, log: Log
) -> PreparedDependencies | None:
    """The self-contained route's dependency sources, downloaded and patched once (None: other routes)."""
    if plan.dependencies != "source":
        return None
    table = load_table(plan.ort_version, gpu=plan.cuda is not None)
    if table is None or fetch_image is None:
        raise BuildError(f"no dependency table for ORT {plan.ort_version} (toolchains/deps/)")
    return prepare_dependencies(table, engine=local, base_image=fetch_image, ort_tree=tree.path, log=log)
