"""ORT's ``build.py`` arguments of a plan: the build itself, the scope, the variant's own, the
execution provider's, and a reduced build's operator config."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from orchestrator.builds.container_paths import BUILD, PROTOC, REDUCED
from orchestrator.builds.reduced_ops import OperatorConfig
from orchestrator.builds.variants import Variant
from orchestrator.targets import TargetProfile

# wheel: the Python package (with ORT's C library inside); library: ORT's C library alone, with orch's
# native runner, for a board whose Python the release's package cannot target; mlas-test: MLAS and
# its test executable.
BuildScope = Literal["wheel", "library", "mlas-test"]
# The shared library's CMake target (cmake/onnxruntime.cmake: add_library(onnxruntime SHARED ...)).
LIBRARY_TARGET = "onnxruntime"
# JetPack's paths on a Jetson (the on-board route builds there, with JetPack's own toolkit).
CUDA_HOME = "/usr/local/cuda"
CUDNN_HOME = "/usr/lib/aarch64-linux-gnu"


def build_args(variant: Variant, parallel: int, scope: BuildScope) -> list[str]:
    """The arguments every build has, and those of its scope."""
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
    if scope == "wheel":
        # --build_shared_lib: the wheel then also carries ORT's C library (capi/libonnxruntime.so.<v>,
        # as the official wheel does), which the native runner and users' own programs link against.
        return [*args, "--build_wheel", "--build_shared_lib"]
    if scope == "library":
        return [*args, "--build_shared_lib", "--target", LIBRARY_TARGET]
    return [*args, "--target", "onnxruntime_mlas_test"]


def variant_args(variant: Variant, flags: tuple[str, ...], *, newer_compiler: bool = False) -> list[str]:
    """The variant's own build.py arguments, with what its CPU flags and compiler need."""
    args = list(variant.build_args)
    if (
        newer_compiler or any(flag.startswith(("-mcpu", "-march")) for flag in flags)
    ) and "--compile_no_warning_as_error" not in args:
        # MLAS compiles some kernels with its own -march; GCC warns about the mix, -Werror would make it
        # fatal. A compiler newer than ORT's own CI's (clang 19) warns where that one did not.
        args.append("--compile_no_warning_as_error")
    return args


def provider_args(provider: str, profile: TargetProfile, args: list[str]) -> tuple[str, ...]:
    """The execution provider's arguments on a board with JetPack (the on-board route), given the
    ``args`` the build has so far. The sysroot route's CUDA is ``cuda_route``'s."""
    cuda: tuple[str, ...] = ("--use_cuda", "--cuda_home", CUDA_HOME, "--cudnn_home", CUDNN_HOME)
    if profile.cuda_version:
        cuda += ("--cuda_version", profile.cuda_version)
    if provider == "cuda":
        return cuda
    if provider == "tensorrt":
        # TensorRT's provider is built with CUDA's, from JetPack's libraries.
        return ("--use_tensorrt", "--tensorrt_home", "/usr/lib/aarch64-linux-gnu", *cuda)
    if provider == "xnnpack" and "--use_xnnpack" not in args:
        return ("--use_xnnpack",)
    return ()


def operator_config_path(config: OperatorConfig) -> str:
    """Where the build container sees a reduced build's operator config (named by its content, so
    another model set is another configure)."""
    return f"{REDUCED}/{config.sha256[:12]}.config"


def reduced_args(config: OperatorConfig) -> list[str]:
    return ["--include_ops_by_config", operator_config_path(config)]


def reduced_note(config: OperatorConfig) -> str:
    return (
        f"reduced: {config.operators} operators kept, from"
        f" {', '.join(Path(m.path).name for m in config.models)} (as given and as"
        " ORT's optimiser rewrites them) and the pre-flight model; another model may not run on it"
    )
