"""The on-board route: ORT's build.py run by the board itself over SSH (``orch build --on-board``).

For what cannot be cross-compiled here: CUDA and TensorRT need NVIDIA's toolkit, which JetPack
installs on the Jetson and no Debian archive carries, so the build runs where the toolkit is (as
NVIDIA's own containers build ORT on a Jetson). Everything else is the container route's plan,
relocated to the board's work directory:

* the variant's flags, defines and build.py arguments, the scope's target, KleidiAI's define;
* the self-contained route's dependencies (orch's Debian source table, compiled from source with
  the board's own compiler), sent once with ORT's tree and reused while they stay the same;
* no cross toolchain file, no protoc from an image: the board's compiler builds for itself;
* a CUDA build gets ``--use_cuda`` with JetPack's paths and the GPU's compute capability only.

Layout on the board, under ``<workdir>/build`` (``root``): ``inputs/src-<version>``,
``inputs/deps-<version>``, ``inputs/shims`` (each with an ``.orch-input`` identity), ``ccache``
(kept), ``scripts``, and one build tree per variant, release and scope (kept: ninja rebuilds only
what changed). Pure: ``make_on_board_plan`` computes it, ``execute`` runs it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from orchestrator.builds.build_args import BuildScope, build_args, provider_args, variant_args
from orchestrator.builds.container_paths import BUILD, PROTOC, SHIMS, SRC
from orchestrator.builds.on_board.requirements import BoardBuildFacts
from orchestrator.builds.plan import choose_parallel, common_defines, flag_defines, kleidiai_setting
from orchestrator.builds.routes import source_route_defines
from orchestrator.builds.sources.dependency_table import DEPS, DependencyTable
from orchestrator.builds.variants import Variant, artifact_variant
from orchestrator.errors import UsageError
from orchestrator.targets import TargetProfile

ON_BOARD_SCOPES: tuple[BuildScope, ...] = ("wheel", "mlas-test")
MLAS_TEST = "onnxruntime_mlas_test"


@dataclass(frozen=True, kw_only=True)
class BoardPaths:
    """Where each part of an on-board build lives on the board (absolute)."""

    root: str
    version: str
    build_name: str  # <variant>-<version>-<scope>

    @property
    def src(self) -> str:
        return f"{self.root}/inputs/src-{self.version}"

    @property
    def deps(self) -> str:
        return f"{self.root}/inputs/deps-{self.version}"

    @property
    def shims(self) -> str:
        return f"{self.root}/inputs/shims"

    @property
    def scripts(self) -> str:
        return f"{self.root}/scripts"

    @property
    def ccache(self) -> str:
        return f"{self.root}/ccache"

    @property
    def build(self) -> str:
        return f"{self.root}/{self.build_name}"

    def relocate(self, value: str) -> str:
        """A build container's path (``/src``, ``/build``, ``/deps``, the shims) as the board's."""
        for container, board in (
            (SHIMS, self.shims),
            (SRC, self.src),
            (BUILD, self.build),
            (DEPS, self.deps),
        ):
            if value == container or value.startswith(container + "/"):
                return board + value[len(container) :]
        return value


@dataclass(frozen=True, kw_only=True)
class OnBoardPlan:
    board: str
    target: TargetProfile
    variant: Variant
    ort_version: str
    scope: BuildScope
    execution_provider: str
    paths: BoardPaths
    dependencies: DependencyTable  # the sources sent and compiled with ORT
    defines: tuple[tuple[str, str], ...]
    build_args: tuple[str, ...]
    compiler_flags: tuple[str, ...]
    parallel: int
    notes: tuple[str, ...]

    @property
    def artifact_variant(self) -> str:
        return artifact_variant(self.variant, self.execution_provider)

    @property
    def config_dir(self) -> str:
        return f"{self.paths.build}/{self.variant.config}"

    @property
    def build_argv(self) -> list[str]:
        return ["python3", f"{self.paths.src}/tools/ci_build/build.py", *self.build_args]

    @property
    def outputs(self) -> tuple[tuple[str, str], ...]:
        """What is brought back: (directory, file name or pattern: a wheel's name is known once built)."""
        if self.scope == "mlas-test":
            return ((self.config_dir, MLAS_TEST),)
        return ((f"{self.config_dir}/dist", "*.whl"),)

    def as_dict(self) -> dict[str, Any]:
        return {
            "route": "on-board",
            "board": self.board,
            "target": self.target.name,
            "variant": self.variant.name,
            "artifact_variant": self.artifact_variant,
            "ort_version": self.ort_version,
            "scope": self.scope,
            "execution_provider": self.execution_provider,
            "work_directory": self.paths.root,
            "build_directory": self.paths.build,
            "compiler_cache": self.paths.ccache,
            "inputs": {
                "source": self.paths.src,
                "dependencies": self.paths.deps,
                "cmake_shims": self.paths.shims,
            },
            "defines": [f"{k}={v}" for k, v in self.defines],
            "compiler_flags": list(self.compiler_flags),
            "build_argv": self.build_argv,
            "command": shlex.join(self.build_argv),
            "parallel": self.parallel,
            "outputs": [f"{directory}/{name}" for directory, name in self.outputs],
            "notes": list(self.notes),
        }


@dataclass(frozen=True, kw_only=True)
class OnBoardRequest:
    """What the command line asks the board to build."""

    board: str
    profile: TargetProfile
    variant: Variant
    version: str
    scope: BuildScope
    provider: str
    extra_defines: tuple[tuple[str, str], ...] = ()
    parallel: int | None = None  # None: from the board's cores and memory


def make_on_board_plan(
    request: OnBoardRequest, table: DependencyTable | None, facts: BoardBuildFacts, root: str
) -> OnBoardPlan:
    """The build the board runs; refused (UsageError) where the on-board route does not go."""
    table = _refuse(request, table)
    board, profile, variant, version = request.board, request.profile, request.variant, request.version
    scope, provider = request.scope, request.provider
    paths = BoardPaths(
        root=root, version=version, build_name=f"{artifact_variant(variant, provider)}-{version}-{scope}"
    )
    flags = variant.compiler_flags(mcpu=profile.mcpu, march=profile.march)
    kleidiai = kleidiai_setting(profile, variant, version)
    cuda = provider in ("cuda", "tensorrt")
    defines = [
        *common_defines(scope),
        *((name, paths.relocate(value)) for name, value in source_route_defines(table)),
        *flag_defines(flags, variant.ldflags),
        *variant.defines,
        *([kleidiai.define] if kleidiai.define else []),
        *(
            [("CMAKE_CUDA_ARCHITECTURES", profile.cuda_architectures)]
            if cuda and profile.cuda_architectures
            else []
        ),
        *request.extra_defines,
    ]
    parallel = request.parallel or choose_parallel(max(facts.cores, 1), facts.memory_kib << 10)
    args = [paths.relocate(arg) for arg in build_args(variant, parallel, scope)]
    args = _without_image_protoc(args)
    # nvcc objects do not take part in the host compiler's link-time optimisation.
    if variant.lto and not cuda:
        args.append("--enable_lto")
    args += variant_args(variant, flags)
    # On the board JetPack has the toolkit, at its own paths.
    args += provider_args(provider, profile, args)
    args += ["--cmake_extra_defines", *(f"{k}={v}" for k, v in defines)]
    notes = [
        (
            f"built on {board} by its own compiler ({facts.cxx or 'c++'}), CMake {facts.cmake or '?'},"
            f" {parallel} job(s) for {facts.cores} core(s) and {facts.memory_kib / (1 << 20):.1f} GiB"
        ),
        (
            f"ORT {version}'s dependencies compiled from orch's Debian source table ({table.path.name}) on"
            " the board, sent once with ORT's tree; nothing is downloaded by the board"
        ),
        f"the board's compiler cache is {paths.ccache}, kept between builds",
        kleidiai.note,
        *(_cuda_notes(profile, variant) if cuda else []),
    ]
    return OnBoardPlan(
        board=board,
        target=profile,
        variant=variant,
        ort_version=version,
        scope=scope,
        execution_provider=provider,
        paths=paths,
        dependencies=table,
        defines=tuple(defines),
        build_args=tuple(args),
        compiler_flags=flags,
        parallel=parallel,
        notes=tuple(notes),
    )


def _without_image_protoc(args: list[str]) -> list[str]:
    """The container route hands build.py the image's protoc; on the board ORT builds its own."""
    if "--path_to_protoc_exe" in args:
        at = args.index("--path_to_protoc_exe")
        if args[at + 1] == PROTOC:
            return args[:at] + args[at + 2 :]
    return args


def _cuda_notes(profile: TargetProfile, variant: Variant) -> list[str]:
    capability = profile.cuda_architectures or "ORT's default list"
    version = profile.cuda_version or "(the board's)"
    notes = [
        f"CUDA {version} from JetPack: kernels for compute capability {capability} only",
        (
            "its pre-flight runs a real inference on the board's GPU (CUDAExecutionProvider first in the"
            " session's providers, output compared with the CPU's), not just the provider list"
        ),
    ]
    if variant.lto:
        notes.append("LTO is off for CUDA builds: nvcc objects do not take part in link-time optimisation")
    return notes


def _refuse(request: OnBoardRequest, table: DependencyTable | None) -> DependencyTable:
    """The release's dependency table, unless the on-board route does not go where it is asked."""
    profile, variant, scope, provider = request.profile, request.variant, request.scope, request.provider
    if scope not in ON_BOARD_SCOPES:
        raise UsageError(
            f"--on-board builds a wheel or MLAS's tests (--scope {' or '.join(ON_BOARD_SCOPES)}), not --scope {scope}",
            hint="the C library of a board whose Python the release cannot target is cross-built against its"
            " sysroot: orch build --sysroot-from BOARD --scope library",
        )
    if not variant.build or variant.profile_guided or variant.reduce_to_models:
        raise UsageError(
            f"--on-board does not build variant '{variant.name}'"
            f" ({'it is the official wheel' if not variant.build else 'it needs a training or models'})",
            hint="a compiled variant such as default, upstream or tuned",
        )
    if provider not in profile.execution_providers:
        raise UsageError(
            f"target '{profile.name}' has no execution provider '{provider}'",
            hint=f"{profile.name} supports: {', '.join(profile.execution_providers)}",
        )
    if table is None:
        raise UsageError(
            f"--on-board compiles ORT {request.version}'s dependencies from orch's Debian source table, and there is"
            " none for this release (toolchains/deps/)",
            hint="a release with a table, e.g. --ort-version 1.21.0",
        )
    return table
