"""The build plan: everything `orch build` will do, computed without Docker.

``make_plan(profile, variant, options)`` returns a frozen ``BuildPlan`` holding the build
image (``image``), the CMake toolchain file, every ``-D`` define (the dependency route's from
``routes``), the exact ORT ``build.py`` argv (``build_args``), the parallelism, the ccache
volume, the mounts and what the wheel must look like. ``--dry-run`` prints it; ``execute``
runs it; unit tests compare it field by field.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from orchestrator.builds.build_args import (
    BuildScope,
    build_args,
    operator_config_path,
    provider_args,
    reduced_args,
    reduced_note,
    variant_args,
)
from orchestrator.builds.container_paths import BUILD, OUT, SCRIPTS, SRC
from orchestrator.builds.cuda_route import (
    ATTENTION_OFF_NOTE,
    GPU_PROVIDERS,
    CudaSetting,
    attention_defines,
    attention_kernels_unused,
    check_target,
    cuda_build_args,
    cuda_defines,
    cuda_notes,
    cuda_package_args,
    plan_cuda,
    require_sysroot,
)
from orchestrator.builds.endpoints import RemoteCache, check_docker_host
from orchestrator.builds.flags import check_without_tree
from orchestrator.builds.image_plan import ImagePlan, plan_image
from orchestrator.builds.native_runner.plan import library_name
from orchestrator.builds.network import (
    ContainerNetwork,
    NetworkNeeds,
    container_network,
    network_needs,
    network_note,
)
from orchestrator.builds.reduced_ops import OperatorConfig
from orchestrator.builds.release_checks import check_release, refuse_old_libstdcxx, refuse_unmet
from orchestrator.builds.routes import (
    DependencyChoice,
    DependencyRoute,
    RouteChoice,
    choose_route,
    image_route,
    route_build_args,
    route_defines,
    route_notes,
)
from orchestrator.builds.sources.ort_spec import SourceSpec
from orchestrator.builds.sysroots.target import SysrootRef, refuse_incomplete
from orchestrator.builds.toolchain import (
    Toolchain,
    python_defines,
    sysroot_libdirs,
    toolchain_defines,
    toolchain_file,
    toolchain_for,
)
from orchestrator.builds.variants import Variant, artifact_variant, release_tuple
from orchestrator.errors import UsageError
from orchestrator.targets import TargetProfile

# Roughly 2 GiB per C++ compile job of ORT (template-heavy sources; LTO links need more).
GIB_PER_JOB = 2
SCOPES: tuple[BuildScope, ...] = ("wheel", "library", "mlas-test")
# MLAS calls KleidiAI itself from 1.22 (int4 MatMulNBits, upstream PR #23627), behind
# onnxruntime_USE_KLEIDIAI; build.py turns it on only when the *host* is arm64, so an x86 host's
# cross build would lose it silently: the plan always sets it.
KLEIDIAI_SINCE = (1, 22)
KleidiAI = Literal["on", "off", "not in this release"]
LTO_OFF_FOR_CUDA = (
    "LTO is off for CUDA builds: nvcc objects do not take part in the host compiler's link-time optimisation"
)


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """What the command line adds to a target profile and a variant."""

    source: SourceSpec
    extra_defines: tuple[tuple[str, str], ...] = ()
    execution_provider: str = "cpu"
    parallel: int | None = None
    cpus: int = 2
    memory_bytes: int = 8 << 30
    scope: BuildScope = "wheel"
    docker_host: str | None = None
    force_flags: bool = False  # build with define names known to be wrong (they are then warnings)
    cache: RemoteCache | None = None  # ccache's shared remote storage (--cache)
    # --sysroot-from: the board OS the profile was adjusted to; the wheel is checked against it.
    sysroot: SysrootRef | None = None
    operator_config: OperatorConfig | None = None  # --model, for a variant with reduce_to_models
    dependencies: DependencyChoice = "auto"  # --dependencies: fetch forces ORT's own downloads


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    target: TargetProfile
    variant: Variant
    source: SourceSpec
    ort_version: str
    execution_provider: str
    scope: BuildScope
    dependencies: DependencyRoute
    toolchain: Toolchain
    image: ImagePlan
    toolchain_file: Path
    defines: tuple[tuple[str, str], ...]
    build_args: tuple[str, ...]
    compiler_flags: tuple[str, ...]
    parallel: int
    ccache_volume: str
    wheel_platform: str
    network: ContainerNetwork  # None: the engine's default network
    notes: tuple[str, ...] = field(default_factory=tuple)
    cache: RemoteCache | None = None
    sysroot: SysrootRef | None = None
    kleidiai: KleidiAI = "not in this release"
    operator_config: OperatorConfig | None = None
    network_needs: NetworkNeeds = field(default_factory=lambda: NetworkNeeds(downloads=(), pending=None))
    dependencies_wanted: DependencyChoice = "auto"  # --dependencies
    linker_flags: tuple[str, ...] = ()
    # A profile-guided build's counters: (directory on the workstation, where the compiler reads them).
    profile_input: tuple[Path, str] | None = None
    cuda: CudaSetting | None = None  # --ep cuda/tensorrt: the GPU and the sysroot's CUDA stack

    @property
    def artifact_variant(self) -> str:
        return artifact_variant(self.variant, self.execution_provider)

    @property
    def operator_config_path(self) -> str | None:
        """Where the build container sees the reduced build's operator config (named by its
        content, so another model set is another configure)."""
        return None if self.operator_config is None else operator_config_path(self.operator_config)

    @property
    def build_argv(self) -> list[str]:
        """The exact command run in the build container."""
        return ["python3", f"{SRC}/tools/ci_build/build.py", *self.build_args]

    @property
    def package_argv(self) -> list[str]:
        """After the compile: the wheel retagged for the board with its system libraries bundled,
        (scope library) ORT's C library with what it needs, or (scope mlas-test) the test executable
        with the libraries it needs on a board."""
        libdirs = sysroot_libdirs() if self.toolchain == "clang-sysroot" else []
        if self.scope == "library":
            return [
                "python3",
                f"{SCRIPTS}/package_wheel.py",
                "--library",
                f"{self.config_build_dir}/{library_name(self.ort_version)}",
                OUT,
                *libdirs,
            ]
        if self.scope == "mlas-test":
            return [
                "python3",
                f"{SCRIPTS}/package_wheel.py",
                "--exe",
                f"{self.config_build_dir}/onnxruntime_mlas_test",
                OUT,
                *libdirs,
            ]
        sysroot_args = [f"--libdir={d}" for d in libdirs]
        if libdirs:
            sysroot_args.append(f"--python-tag={self.target.os.python_tag}")
        return [
            "python3",
            f"{SCRIPTS}/package_wheel.py",
            "--build-dir",
            self.config_build_dir,
            "--source",
            SRC,
            "--out",
            OUT,
            "--plat-name",
            self.wheel_platform,
            "--readelf",
            f"{self.target.cross_prefix}readelf",
            *sysroot_args,
            *(cuda_package_args(self.cuda) if self.cuda else []),
        ]

    @property
    def config_build_dir(self) -> str:
        return f"{BUILD}/{self.variant.config}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target.name,
            "variant": self.variant.name,
            "variant_description": self.variant.description,
            "ort_version": self.ort_version,
            "source": {
                "kind": self.source.kind,
                "location": self.source.location,
                "ref": self.source.ref,
                "description": self.source.describe(),
            },
            "execution_provider": self.execution_provider,
            "scope": self.scope,
            "dependencies": self.dependencies,
            "dependencies_option": self.dependencies_wanted,
            "toolchain": self.toolchain,
            "image": {
                "tag": self.image.tag,
                "base_image": self.image.base_image,
                "base_suite": self.image.base_suite,
                "dockerfile": str(self.image.dockerfile),
                "buildargs": dict(self.image.buildargs),
                "inputs_sha256": self.image.inputs_sha256,
            },
            "toolchain_file": str(self.toolchain_file),
            "defines": [f"{k}={v}" for k, v in self.defines],
            "compiler_flags": list(self.compiler_flags),
            "linker_flags": list(self.linker_flags),
            "build_argv": self.build_argv,
            "package_argv": self.package_argv,
            "command": shlex.join(self.build_argv),
            "parallel": self.parallel,
            "ccache_volume": None if self.cache and self.cache.remote_only else self.ccache_volume,
            "remote_cache": None
            if self.cache is None
            else {
                "url": self.cache.display,
                "remote_only": self.cache.remote_only,
                "ccache_remote_storage": self.cache.ccache_url().replace(self.cache.password or "\0", "***"),
            },
            "network": self.network or "default",
            "needs_network": self.network_needs.as_dict(),
            "wheel": {
                "platform": self.wheel_platform,
                "python_tag": self.target.os.python_tag,
                "max_glibc": self.target.os.glibc,
                "machine": "EM_AARCH64",
            },
            "preflight": {"qemu_cpu": self.target.qemu_cpu},
            "notes": list(self.notes),
            "sysroot": self.sysroot.as_dict() if self.sysroot else None,
            "kleidiai": self.kleidiai,
            "operator_config": self.operator_config.as_dict() if self.operator_config else None,
            "cuda": self.cuda.as_dict() if self.cuda else None,
        }


def choose_parallel(cpus: int, memory_bytes: int) -> int:
    """Jobs for ninja: one per core, but no more than the memory holds (~2 GiB per ORT compile)."""
    by_memory = int(memory_bytes // (GIB_PER_JOB << 30))
    return max(1, min(cpus, by_memory))


def machine_resources() -> tuple[int, int]:
    """(cores usable by this process, physical memory in bytes) of the machine running the engine."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = 8 << 30
    return cpus, memory


def parse_define(text: str) -> tuple[str, str]:
    """``K=V`` from ``--cmake-define``; a leading ``-D`` is tolerated."""
    text = text.removeprefix("-D")
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise UsageError(
            f"--cmake-define '{text}' is not NAME=VALUE",
            hint="e.g. --cmake-define onnxruntime_USE_XNNPACK=ON",
        )
    return name, value


def make_plan(profile: TargetProfile, variant: Variant, options: BuildOptions) -> BuildPlan:
    """The whole build, refused here (UsageError) when the options do not fit the target or variant."""
    _check_options(profile, variant, options)
    toolchain = toolchain_for(has_sysroot=options.sysroot is not None)
    route = _plan_route(profile, options, toolchain)
    choice = route.choice
    provider = options.execution_provider
    flags, toolchain_notes = _for_toolchain(
        variant.compiler_flags(mcpu=profile.mcpu, march=profile.march), toolchain
    )
    gpu = provider in GPU_PROVIDERS
    # nvcc objects do not take part in the host compiler's link-time optimisation.
    lto = variant.lto and not gpu
    parallel = options.parallel or choose_parallel(options.cpus, options.memory_bytes)
    defines = [
        *toolchain_defines(toolchain, profile),
        *common_defines(options.scope),
        *(python_defines(toolchain, profile) if options.scope == "wheel" else []),
        *route_defines(choice, options.scope),
        *flag_defines(flags, variant.ldflags),
        *variant.defines,
        *options.extra_defines,
    ]
    args = [
        *build_args(variant, parallel, options.scope),
        *route_build_args(choice),
        *(["--enable_lto"] if lto else []),
        *variant_args(variant, flags, newer_compiler=toolchain == "clang-sysroot"),
    ]
    gpu_part = _gpu_part(profile, options) if gpu else _GpuPart()
    cuda = gpu_part.cuda
    args += gpu_part.args if cuda else provider_args(provider, profile, args)
    defines += gpu_part.defines
    config = options.operator_config
    if config is not None:
        args += reduced_args(config)
    kleidiai = kleidiai_setting(profile, variant, options.source.version)
    if kleidiai.define is not None:
        defines.append(kleidiai.define)
    args += ["--cmake_extra_defines", *(f"{k}={v}" for k, v in defines)]
    notes = [
        *([LTO_OFF_FOR_CUDA] if variant.lto and not lto else []),
        *_forced_names(variant, options),
        *toolchain_notes,
        *gpu_part.notes,
        *([reduced_note(config)] if config is not None else []),
        *([ATTENTION_OFF_NOTE] if gpu_part.attention_off else []),
        kleidiai.note,
        *_sysroot_notes(profile, options.sysroot),
        *route.notes,
        *_version_notes(options.source),
    ]
    return BuildPlan(
        target=profile,
        variant=variant,
        source=options.source,
        ort_version=options.source.version,
        execution_provider=provider,
        scope=options.scope,
        dependencies=choice.route,
        toolchain=toolchain,
        image=plan_image(profile, route.image_of, toolchain=toolchain, cuda=cuda is not None),
        toolchain_file=toolchain_file(toolchain),
        defines=tuple(defines),
        build_args=tuple(args),
        compiler_flags=flags,
        linker_flags=variant.ldflags,
        parallel=parallel,
        ccache_volume=f"orch-ccache-{profile.name}",
        wheel_platform=f"linux_{profile.arch}",
        network=container_network(choice.route, route.needs),
        cuda=cuda,
        notes=tuple(notes),
        cache=options.cache,
        sysroot=options.sysroot,
        kleidiai=kleidiai.state,
        operator_config=config,
        network_needs=route.needs,
        dependencies_wanted=options.dependencies,
    )


@dataclass(frozen=True, kw_only=True)
class _GpuPart:
    """What the CUDA route adds to a plan (nothing for a CPU provider)."""

    cuda: CudaSetting | None = None
    args: tuple[str, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    attention_off: bool = False  # a reduced build's attention kernels left out (said after the reduction)


def _gpu_part(profile: TargetProfile, options: BuildOptions) -> _GpuPart:
    """--ep cuda/tensorrt: the board's GPU and the sysroot's CUDA stack (refused here when they cannot
    give the provider), and a reduced build's attention kernels left out when its operators do not
    use them."""
    provider = options.execution_provider
    cuda = plan_cuda(profile, provider, options.source.version, options.sysroot)
    config = options.operator_config
    attention_off = config is not None and attention_kernels_unused(config.text)
    return _GpuPart(
        cuda=cuda,
        args=tuple(cuda_build_args(cuda, provider)),
        defines=(*cuda_defines(cuda), *(attention_defines() if attention_off else [])),
        notes=tuple(cuda_notes(cuda)),
        attention_off=attention_off,
    )


@dataclass(frozen=True, kw_only=True)
class _Route:
    """The dependency route of a plan, the route whose package list makes the build image, what the
    route downloads, and what the plan says about them."""

    choice: RouteChoice
    image_of: DependencyRoute
    needs: NetworkNeeds
    notes: tuple[str, ...]


def _plan_route(profile: TargetProfile, options: BuildOptions, toolchain: Toolchain) -> _Route:
    """The route; a release the build container's own CMake, GCC or Python cannot build, or a
    sysroot that lacks what the build needs, is refused now, not minutes into the configure step."""
    version = options.source.version
    gpu = options.execution_provider in GPU_PROVIDERS
    choice = choose_route(profile, version, toolchain, options.dependencies, gpu=gpu)
    image_of = image_route(choice.route, profile.os.codename)
    release_check = check_release(profile, image_of, version, options.scope, toolchain)
    # The release's minimums first: a board whose Python the release cannot target is told to build
    # the C library, not to install Python headers that would not help.
    refuse_unmet(profile, version, release_check)
    if options.sysroot is not None:
        refuse_incomplete(options.sysroot, wheel=options.scope == "wheel")
        refuse_old_libstdcxx(options.sysroot, version)
    needs = network_needs(options.source, choice.route)
    network_said = network_note(choice.route, needs)
    notes = [
        *route_notes(choice, profile, version, toolchain),
        *release_check.notes,
        *([network_said] if network_said else []),
    ]
    return _Route(choice=choice, image_of=image_of, needs=needs, notes=tuple(notes))


def _for_toolchain(flags: tuple[str, ...], toolchain: Toolchain) -> tuple[tuple[str, ...], list[str]]:
    """The variant's flags the toolchain's compiler honours, and a note for each one it does not."""
    if toolchain != "clang-sysroot":
        return flags, []
    # clang accepts GCC's -finline-limit and ignores it (-Wignored-optimization-argument; clang 19 of
    # the build image): passing it would make the record claim an inline limit the build never had.
    dropped = [flag for flag in flags if flag.startswith("-finline-limit")]
    notes = [
        f"{flag} is GCC's; clang ignores it, so the sysroot route builds without it (clang's own"
        " inlining thresholds apply)"
        for flag in dropped
    ]
    return tuple(flag for flag in flags if flag not in dropped), notes


def _check_options(profile: TargetProfile, variant: Variant, options: BuildOptions) -> None:
    """Refuse what cannot be built before anything is planned."""
    check_docker_host(options.docker_host)
    if not variant.build:
        raise UsageError(f"variant '{variant.name}' is not built (it fetches the official wheel)")
    if options.scope not in SCOPES:
        raise UsageError(f"unknown build scope '{options.scope}' (known: {', '.join(SCOPES)})")
    provider = options.execution_provider
    check_target(profile, provider)
    if provider in GPU_PROVIDERS:
        require_sysroot(provider, options.sysroot)
    if provider not in profile.execution_providers:
        raise UsageError(
            f"target '{profile.name}' has no execution provider '{provider}'",
            hint=f"{profile.name} supports: {', '.join(profile.execution_providers)}",
        )
    _check_variant_release(variant, options.source.version)
    if options.dependencies == "fetch" and options.source.kind == "debian":
        raise UsageError(
            "--dependencies fetch downloads ORT's dependencies (cmake/deps.txt), but the source is"
            f" Debian's onnxruntime {options.source.version} package (--ort-source debian, the offline route's)",
            hint="give --ort-source a git URL[@ref], a checkout or a source tarball, or drop --dependencies fetch",
        )
    if variant.reduce_to_models and options.operator_config is None:
        raise UsageError(
            f"variant '{variant.name}' keeps only the kernels of your models: name them with --model",
            hint=f"e.g. orch build --target {profile.name} --variant {variant.name} --model model.onnx",
        )
    if options.operator_config is not None and not variant.reduce_to_models:
        raise UsageError(
            f"--model is for a reduced build; variant '{variant.name}' keeps every kernel",
            hint="use --variant reduced (or a variant of yours with reduce_to_models: true)",
        )


def _check_variant_release(variant: Variant, version: str) -> None:
    """A variant that asks for something its release does not have is refused before any build."""
    if variant.min_ort is not None and release_tuple(version) < variant.min_ort:
        wanted = ".".join(map(str, variant.min_ort))
        raise UsageError(
            f"variant '{variant.name}' needs ONNX Runtime >= {wanted}; this build is {version}",
            hint=f"--ort-version {wanted} or later (with its source), or another variant",
        )
    if variant.kleidiai is not None and release_tuple(version) < KLEIDIAI_SINCE:
        raise UsageError(
            f"variant '{variant.name}' sets KleidiAI, which ORT {version}'s MLAS does not use"
            f" (from {'.'.join(map(str, KLEIDIAI_SINCE))}; before, only XNNPACK's kernels do)",
            hint="leave 'kleidiai' out of the variant for this release",
        )


def common_defines(scope: BuildScope) -> list[tuple[str, str]]:
    return [
        ("CMAKE_C_COMPILER_LAUNCHER", "ccache"),
        ("CMAKE_CXX_COMPILER_LAUNCHER", "ccache"),
        # The manifest reads the flags each source really got back from this file.
        ("CMAKE_EXPORT_COMPILE_COMMANDS", "ON"),
        ("onnxruntime_BUILD_UNIT_TESTS", "ON" if scope == "mlas-test" else "OFF"),
    ]


def flag_defines(flags: tuple[str, ...], ldflags: tuple[str, ...]) -> list[tuple[str, str]]:
    """A variant's compiler flags for C and C++, and its linker flags for every kind of binary ORT
    links (as build.py's own presets set them)."""
    defines = []
    if flags:
        defines += [(f"CMAKE_{lang}_FLAGS", " ".join(flags)) for lang in ("C", "CXX")]
    if ldflags:
        defines += [(f"CMAKE_{kind}_LINKER_FLAGS", " ".join(ldflags)) for kind in ("EXE", "SHARED", "MODULE")]
    return defines


def _forced_names(variant: Variant, options: BuildOptions) -> list[str]:
    """Define names known to be wrong refuse the plan; with --force-flags they become notes."""
    wrong = check_without_tree([name for name, _ in [*variant.defines, *options.extra_defines]])
    if wrong and not options.force_flags:
        raise UsageError(
            "unknown build options:\n  " + "\n  ".join(problem.sentence() for problem in wrong),
            hint="fix the names, or pass --force-flags to build anyway",
        )
    return [f"--force-flags: {problem.sentence()}" for problem in wrong]


@dataclass(frozen=True, kw_only=True)
class KleidiAISetting:
    state: KleidiAI
    define: tuple[str, str] | None
    note: str


def kleidiai_setting(profile: TargetProfile, variant: Variant, version: str) -> KleidiAISetting:
    """KleidiAI in MLAS, set explicitly from the release where MLAS uses it."""
    if profile.arch != "aarch64" or release_tuple(version) < KLEIDIAI_SINCE:
        return KleidiAISetting(
            state="not in this release",
            define=None,
            note=f"KleidiAI: ORT {version}'s MLAS does not use it (only XNNPACK's own kernels do)",
        )
    on = variant.kleidiai if variant.kleidiai is not None else True
    state: KleidiAI = "on" if on else "off"
    return KleidiAISetting(
        state=state,
        define=("onnxruntime_USE_KLEIDIAI", "ON" if on else "OFF"),
        note=f"KleidiAI {state} in MLAS (set explicitly: build.py decides it from the build machine,"
        f" not the board){'' if variant.kleidiai is not None else '; on, as in upstream aarch64 wheels'}",
    )


def _version_notes(source: SourceSpec) -> list[str]:
    """Where the release comes from when the source cannot be read before it is fetched."""
    if not source.version_checked_after_fetch:
        return []
    note = (
        f"ORT {source.version} is taken from {source.version_origin} ({source.ref}); the clone's"
        " VERSION_NUMBER is checked after cloning, and a different release stops the build there"
    )
    return [note]


def _sysroot_notes(profile: TargetProfile, ref: SysrootRef | None) -> list[str]:
    if ref is None:
        return []
    return [
        f"OS from sysroot {ref.name!r}"
        + (f" (pulled from board {ref.board})" if ref.board else "")
        + f": {ref.os.distro} {ref.os.release}, glibc {ref.os.glibc}, Python {ref.os.python}; the profile"
        f" gives the CPU ({profile.mcpu}); the wheel is checked against the sysroot's own libraries"
    ]
