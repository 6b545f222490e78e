"""The build plan: everything `orch build` will do, computed without Docker.

``make_plan(profile, variant, options)`` returns a frozen ``BuildPlan`` holding the build
image (Dockerfile, base image, package lists, tag = hash of all inputs), the CMake toolchain
file, every ``-D`` define, the exact ORT ``build.py`` argv, the parallelism, the ccache
volume, the mounts and what the wheel must look like. ``--dry-run`` prints it; ``build.py``
executes it; unit tests compare it field by field.

Three dependency routes, the first that applies:

* ``system`` (boards whose distribution carries every ORT dependency at ORT's pinned version,
  Debian 13 for ORT 1.21): CMake's ``FETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS`` with the
  board's arm64 ``-dev`` packages, fully disconnected, plus the small shims of
  ``toolchains/cmake-shims``. No network at all; the fastest (nothing to compile but ORT).
* ``source`` (self-contained, when ``toolchains/deps/<version>.yaml`` exists): every dependency
  compiled from Debian source packages of ORT's pinned releases into the wheel, in a container of
  the board's own distribution (its compiler, glibc and libstdc++), fully disconnected.
* ``fetch``: ORT's own FetchContent downloads (``cmake/deps.txt``), the upstream default.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.base_images import base_image_tag, registry_override
from orchestrator.builds.flags import check_without_tree
from orchestrator.builds.reduced_ops import OperatorConfig
from orchestrator.builds.sources.dependencies import DependencyTable, load_table
from orchestrator.builds.sources.ort import SourceSpec
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.variants import Variant, release_tuple
from orchestrator.endpoints import RemoteCache, check_docker_host
from orchestrator.errors import UsageError
from orchestrator.paths import DOCKER_DIR, TOOLCHAINS_DIR
from orchestrator.targets import TargetProfile

# Paths inside the build container.
SRC = "/src"
BUILD = "/build"
OUT = "/out"
CCACHE = "/ccache"
TOOLCHAINS = "/orch/toolchains"
TOOLCHAIN_FILE = f"{TOOLCHAINS}/aarch64-linux-gnu.cmake"
SCRIPTS = "/opt/orch"
SHIMS = f"{TOOLCHAINS}/cmake-shims"
REDUCED = "/orch/reduced"  # the operator config of a reduced build
PROTOC = "/usr/bin/protoc"

DOCKERFILE = DOCKER_DIR / "build.Dockerfile"
PACKAGES_DIR = DOCKER_DIR / "build" / "packages"
# Suites whose packages carry ORT's dependencies (for these ORT versions) at the pinned versions.
SYSTEM_DEPS = {("trixie", "1.21.0")}
# Roughly 2 GiB per C++ compile job of ORT (template-heavy sources; LTO links need more).
GIB_PER_JOB = 2
SCOPES = ("wheel", "mlas-test")
# What `--ep cuda` needs in the image and can't get offline or from a Debian archive.
CUDA_TOOLKIT_NOTE = (
    "a CUDA build needs the NVIDIA L4T CUDA cross toolkit (cuda-cross-aarch64, cuDNN for aarch64) "
    "installed in the build image; the stock build image does not carry it"
)
CUDA_HOME = "/usr/local/cuda"
CUDNN_HOME = "/usr/lib/aarch64-linux-gnu"
# MLAS calls KleidiAI itself from 1.22 (int4 MatMulNBits, upstream PR #23627), behind
# onnxruntime_USE_KLEIDIAI; build.py turns it on only when the *host* is arm64, so an x86 host's
# cross build would lose it silently: the plan always sets it.
KLEIDIAI_SINCE = (1, 22)


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """What the command line adds to a target profile and a variant."""

    source: SourceSpec
    extra_defines: tuple[tuple[str, str], ...] = ()
    execution_provider: str = "cpu"
    parallel: int | None = None
    cpus: int = 2
    memory_bytes: int = 8 << 30
    scope: str = "wheel"
    docker_host: str | None = None
    force_flags: bool = False  # build with define names known to be wrong (they are then warnings)
    cache: RemoteCache | None = None  # ccache's shared remote storage (--cache)
    # --sysroot-from: the board OS the profile was adjusted to; the wheel is checked against it.
    sysroot: SysrootRef | None = None
    operator_config: OperatorConfig | None = None  # --model, for a variant with reduce_to_models


@dataclass(frozen=True, kw_only=True)
class ImagePlan:
    """The build image: base + Dockerfile + package lists, tagged by a hash of them all."""

    tag: str
    base_image: str
    base_suite: str | None
    base_arch: str
    dockerfile: Path
    context: Path
    buildargs: tuple[tuple[str, str], ...]
    inputs_sha256: str


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    target: TargetProfile
    variant: Variant
    source: SourceSpec
    ort_version: str
    execution_provider: str
    scope: str
    dependencies: str  # "system" | "source" | "fetch"
    image: ImagePlan
    toolchain_file: Path
    defines: tuple[tuple[str, str], ...]
    build_args: tuple[str, ...]
    compiler_flags: tuple[str, ...]
    parallel: int
    ccache_volume: str
    wheel_platform: str
    network: str | None
    refused: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    cache: RemoteCache | None = None
    sysroot: SysrootRef | None = None
    kleidiai: str = "not in this release"  # "on" | "off" | "not in this release"
    operator_config: OperatorConfig | None = None

    @property
    def artifact_variant(self) -> str:
        """The variant name the artifact is stored and deployed under: another execution provider
        is another build (``default-xnnpack``), never a silent replacement of the cpu one."""
        return (
            self.variant.name
            if self.execution_provider == "cpu"
            else f"{self.variant.name}-{self.execution_provider}"
        )

    @property
    def operator_config_path(self) -> str | None:
        """Where the build container sees the reduced build's operator config (named by its
        content, so another model set is another configure)."""
        return None if self.operator_config is None else _operator_config_path(self.operator_config)

    @property
    def build_argv(self) -> list[str]:
        """The exact command run in the build container."""
        return ["python3", f"{SRC}/tools/ci_build/build.py", *self.build_args]

    @property
    def package_argv(self) -> list[str]:
        """After the compile: the wheel retagged for the board with its system libraries bundled, or
        (scope mlas-test) the test executable with the libraries it needs on a board."""
        if self.scope == "mlas-test":
            return [
                "python3",
                f"{SCRIPTS}/package_wheel.py",
                "--exe",
                f"{self.config_build_dir}/onnxruntime_mlas_test",
                OUT,
            ]
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
            "wheel": {
                "platform": self.wheel_platform,
                "python_tag": self.target.os.python_tag,
                "max_glibc": self.target.os.glibc,
                "machine": "EM_AARCH64",
            },
            "preflight": {"qemu_cpu": self.target.qemu_cpu},
            "refused": self.refused,
            "notes": list(self.notes),
            "sysroot": self.sysroot.as_dict() if self.sysroot else None,
            "kleidiai": self.kleidiai,
            "operator_config": self.operator_config.as_dict() if self.operator_config else None,
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


@dataclass(frozen=True, kw_only=True)
class ImagePackages:
    """A build image's package lists (docker/build/packages/*.txt)."""

    host: tuple[str, ...]
    target: tuple[str, ...]
    suites: tuple[str, ...]  # further suites of the mirror the packages come from


def packages_file(codename: str, route: str) -> Path:
    """``<codename>.txt`` (system route), ``<codename>-source.txt`` (self-contained), else default.txt."""
    name = {"system": f"{codename}.txt", "source": f"{codename}-source.txt"}.get(route, "default.txt")
    path = PACKAGES_DIR / name
    return path if path.is_file() else PACKAGES_DIR / "default.txt"


def read_packages(codename: str, route: str) -> ImagePackages:
    """The build image's packages for a distribution release and dependency route."""
    lists: dict[str, list[str]] = {"host": [], "target": [], "suites": []}
    for line in packages_file(codename, route).read_text().splitlines():
        key, sep, value = line.split("#", 1)[0].strip().partition(":")
        if sep and key in lists:
            lists[key] += value.split()
    return ImagePackages(
        host=tuple(lists["host"]), target=tuple(lists["target"]), suites=tuple(lists["suites"])
    )


def _image_plan(profile: TargetProfile, route: str, build_arch: str = "amd64") -> ImagePlan:

    suite = profile.bootstrap_suite
    if suite:
        base = registry_override(suite) or base_image_tag(suite, build_arch)
    else:
        base = os.environ.get(f"ORCH_BASE_IMAGE_{profile.os.codename.upper()}") or profile.base_image
    packages = read_packages(profile.os.codename, route)
    buildargs = (
        ("BASE_IMAGE", base),
        ("TARGET_ARCH", "arm64" if profile.arch == "aarch64" else profile.arch),
        ("CROSS_TRIPLET", profile.cross_prefix.rstrip("-")),
        ("HOST_PACKAGES", " ".join(packages.host)),
        ("TARGET_PACKAGES", " ".join(packages.target)),
        *((("EXTRA_SUITES", " ".join(packages.suites)),) if packages.suites else ()),
    )
    digest = hashlib.sha256()
    digest.update(json.dumps(buildargs).encode())
    # The scripts under docker/build are mounted at run time (always current); the image is
    # named by what its layers hold: Dockerfile, package lists, build arguments.
    for path in [DOCKERFILE, *sorted(PACKAGES_DIR.glob("*.txt"))]:
        if path.is_file():
            digest.update(str(path.relative_to(DOCKER_DIR)).encode())
            digest.update(path.read_bytes())
    inputs = digest.hexdigest()
    return ImagePlan(
        tag=f"orch/build-{profile.os.codename}{'-source' if route == 'source' else ''}:{inputs[:12]}",
        base_image=base,
        base_suite=suite,
        base_arch=build_arch,
        dockerfile=DOCKERFILE,
        context=DOCKER_DIR,
        buildargs=buildargs,
        inputs_sha256=inputs,
    )


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


def _source_route_defines(table: DependencyTable) -> list[tuple[str, str]]:
    """FetchContent pointed at the unpacked dependency sources (mounted at /deps), nothing downloaded;
    find_package is still tried first so header-only packages of the image (Boost's mp11) are used."""
    return [
        ("FETCHCONTENT_TRY_FIND_PACKAGE_MODE", "ALWAYS"),
        ("FETCHCONTENT_FULLY_DISCONNECTED", "ON"),
        *table.defines(),
        # Debian's Eigen 3.4.0 source is older than the commit ORT pins: the same compat header as the system route.
        ("CMAKE_PROJECT_INCLUDE", f"{SHIMS}/eigen-compat.cmake"),
    ]


def make_plan(profile: TargetProfile, variant: Variant, options: BuildOptions) -> BuildPlan:
    check_docker_host(options.docker_host)
    if not variant.build:
        raise UsageError(f"variant '{variant.name}' is not built (it fetches the official wheel)")
    if options.scope not in SCOPES:
        raise UsageError(f"unknown build scope '{options.scope}' (known: {', '.join(SCOPES)})")
    ep = options.execution_provider
    if ep not in profile.execution_providers:
        raise UsageError(
            f"target '{profile.name}' has no execution provider '{ep}'",
            hint=f"{profile.name} supports: {', '.join(profile.execution_providers)}",
        )
    version = options.source.version
    _check_variant_release(variant, version)
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
    system_deps = (profile.os.codename, version) in SYSTEM_DEPS
    # The self-contained route needs a table for the release and a build image orch knows how to
    # make for the board's distribution (CMake >= 3.28, a cross GCC against the board's glibc).
    table = (
        None
        if system_deps or packages_file(profile.os.codename, "source") == PACKAGES_DIR / "default.txt"
        else load_table(version)
    )
    route = "system" if system_deps else "source" if table else "fetch"
    notes: list[str] = []
    refused: str | None = None

    flags = variant.compiler_flags(mcpu=profile.mcpu, march=profile.march)
    lto = variant.lto
    if ep == "cuda" and lto:
        lto = False
        notes.append(
            "LTO is off for CUDA builds: nvcc objects do not take part in GCC's link-time optimisation"
        )
    parallel = options.parallel or choose_parallel(options.cpus, options.memory_bytes)

    defines: list[tuple[str, str]] = [
        ("CMAKE_TOOLCHAIN_FILE", TOOLCHAIN_FILE),
        ("ORCH_CROSS_PREFIX", profile.cross_prefix),
        ("CMAKE_C_COMPILER_LAUNCHER", "ccache"),
        ("CMAKE_CXX_COMPILER_LAUNCHER", "ccache"),
        # The manifest reads the flags each source really got back from this file.
        ("CMAKE_EXPORT_COMPILE_COMMANDS", "ON"),
        ("onnxruntime_BUILD_UNIT_TESTS", "ON" if options.scope == "mlas-test" else "OFF"),
    ]
    if system_deps:
        defines += [
            ("FETCHCONTENT_TRY_FIND_PACKAGE_MODE", "ALWAYS"),
            ("FETCHCONTENT_FULLY_DISCONNECTED", "ON"),
            ("CMAKE_PREFIX_PATH", SHIMS),
            ("safeint_SOURCE_DIR", "/usr/include/safeint"),
            # --use_full_protobuf selects the static library; Debian's libonnx needs the shared one.
            ("Protobuf_USE_STATIC_LIBS", "OFF"),
            ("CMAKE_PROJECT_INCLUDE", f"{SHIMS}/eigen-compat.cmake"),
        ]
        if options.scope == "mlas-test":
            defines.append(("onnx_SOURCE_DIR", "/opt/orch/onnx-proto"))  # made by build.Dockerfile
    elif table is not None:
        defines += _source_route_defines(table)
    if flags:
        joined = " ".join(flags)
        defines += [("CMAKE_C_FLAGS", joined), ("CMAKE_CXX_FLAGS", joined)]
    defines += list(variant.defines)
    defines += list(options.extra_defines)
    wrong = check_without_tree([name for name, _ in [*variant.defines, *options.extra_defines]])
    if wrong and not options.force_flags:
        raise UsageError(
            "unknown build options:\n  " + "\n  ".join(problem.sentence() for problem in wrong),
            hint="fix the names, or pass --force-flags to build anyway",
        )
    notes.extend(f"--force-flags: {problem.sentence()}" for problem in wrong)

    args = [
        "--build_dir",
        BUILD,
        "--config",
        variant.config,
        "--cmake_generator",
        "Ninja",
        "--update",
        "--build",
        "--skip_tests",
        "--parallel",
        str(parallel),
        "--allow_running_as_root",
        "--skip_submodule_sync",
        "--path_to_protoc_exe",
        PROTOC,
    ]
    if options.scope == "wheel":
        # --build_shared_lib: the wheel then also carries ORT's C library (capi/libonnxruntime.so.<v>,
        # as the official wheel does), which the native runner and users' own programs link against.
        args += ["--build_wheel", "--build_shared_lib"]
    else:
        args += ["--target", "onnxruntime_mlas_test"]
    if system_deps:
        # Debian's libonnx links the full protobuf; the lite one would give duplicate symbols.
        args.append("--use_full_protobuf")
    if lto:
        args.append("--enable_lto")
    variant_args = list(variant.build_args)
    if (
        any(flag.startswith(("-mcpu", "-march")) for flag in flags)
        and "--compile_no_warning_as_error" not in variant_args
    ):
        # MLAS compiles some kernels with its own -march; GCC warns about the mix, -Werror would make it fatal.
        variant_args.append("--compile_no_warning_as_error")
    args += variant_args
    if ep == "cuda":
        args += ["--use_cuda", "--cuda_home", CUDA_HOME, "--cudnn_home", CUDNN_HOME]
        if profile.cuda_version:
            args += ["--cuda_version", profile.cuda_version]
        refused = CUDA_TOOLKIT_NOTE
        notes.append(CUDA_TOOLKIT_NOTE)
    elif ep == "tensorrt":
        args += [
            "--use_tensorrt",
            "--tensorrt_home",
            "/usr/lib/aarch64-linux-gnu",
            "--use_cuda",
            "--cuda_home",
            CUDA_HOME,
            "--cudnn_home",
            CUDNN_HOME,
        ]
        refused = CUDA_TOOLKIT_NOTE + " (and TensorRT)"
        notes.append(refused)
    elif ep == "xnnpack" and "--use_xnnpack" not in args:
        args.append("--use_xnnpack")
    if options.operator_config is not None:
        args += ["--include_ops_by_config", _operator_config_path(options.operator_config)]
        notes.append(
            f"reduced: {options.operator_config.operators} operators kept, from"
            f" {', '.join(Path(m.path).name for m in options.operator_config.models)} (as given and as"
            " ORT's optimiser rewrites them) and the pre-flight model; another model may not run on it"
        )
    kleidiai = "not in this release"
    if profile.arch == "aarch64" and release_tuple(version) >= KLEIDIAI_SINCE:
        on = variant.kleidiai if variant.kleidiai is not None else True
        kleidiai = "on" if on else "off"
        defines.append(("onnxruntime_USE_KLEIDIAI", "ON" if on else "OFF"))
        notes.append(
            f"KleidiAI {kleidiai} in MLAS (set explicitly: build.py decides it from the build machine,"
            f" not the board){'' if variant.kleidiai is not None else '; on, as in upstream aarch64 wheels'}"
        )
    else:
        notes.append(f"KleidiAI: ORT {version}'s MLAS does not use it (only XNNPACK's own kernels do)")
    args.append("--cmake_extra_defines")
    args += [f"{k}={v}" for k, v in defines]
    if options.sysroot is not None:
        ref = options.sysroot
        notes.append(
            f"OS from sysroot {ref.name!r}"
            + (f" (pulled from board {ref.board})" if ref.board else "")
            + f": {ref.os.distro} {ref.os.release}, glibc {ref.os.glibc}, Python {ref.os.python}; the profile"
            f" gives the CPU ({profile.mcpu}); the wheel is checked against the sysroot's own libraries"
        )
    if table is not None:
        notes.append(
            f"self-contained: {profile.os.distro} {profile.os.codename} does not carry ORT {version}'s"
            f" dependencies at its pinned versions, so each is compiled from a Debian source package of"
            f" that release ({table.path.relative_to(TOOLCHAINS_DIR.parent)}) into the wheel, with"
            f" {profile.os.codename}'s own compiler, glibc and libstdc++; no network"
        )
    elif not system_deps:
        notes.append(
            f"dependencies come from ORT's FetchContent downloads (cmake/deps.txt): {profile.os.distro} "
            f"{profile.os.codename} does not carry them at ORT {version}'s versions; offline, put the archives "
            "listed in cmake/deps.txt under <source>/mirror/ (ORT's local mirror folder)"
        )
    return BuildPlan(
        target=profile,
        variant=variant,
        source=options.source,
        ort_version=version,
        execution_provider=ep,
        scope=options.scope,
        dependencies=route,
        image=_image_plan(profile, route),
        toolchain_file=TOOLCHAINS_DIR / "aarch64-linux-gnu.cmake",
        defines=tuple(defines),
        build_args=tuple(args),
        compiler_flags=flags,
        parallel=parallel,
        ccache_volume=f"orch-ccache-{profile.name}",
        wheel_platform=f"linux_{profile.arch}",
        # Fully offline when no dependency is downloaded by ORT: proves nothing is.
        network="none" if route != "fetch" else None,
        refused=refused,
        notes=tuple(notes),
        cache=options.cache,
        sysroot=options.sysroot,
        kleidiai=kleidiai,
        operator_config=options.operator_config,
    )


def _operator_config_path(config: OperatorConfig) -> str:
    return f"{REDUCED}/{config.sha256[:12]}.config"


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
