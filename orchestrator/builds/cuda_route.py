"""The CUDA provider cross-compiled on the sysroot route (``orch build --ep cuda --sysroot-from B``),
planned. Pure.

Host code is compiled for aarch64 against the board's sysroot, as for the CPU wheel; device code by
the build image's nvcc (Debian's nvidia-cuda-toolkit 12.4, docker/build-cuda.Dockerfile) for the
board's GPU only (the profile's ``cuda.architectures``: Orin 87, Xavier 72, Nano 53), as SASS plus
PTX of the same architecture for GPUs to come. nvcc hands host code to clang 17, the newest clang
nvcc 12.4 accepts, aimed at aarch64 and the sysroot: Debian's aarch64 cross GCC searches its own
glibc headers before any sysroot (GCC 13's are Debian 13's glibc 2.41, whose math-vector.h and
sinpif declarations nvcc's front end rejects), clang takes them from the sysroot alone. CUDA's
headers and libraries, cuDNN and TensorRT come from the sysroot, so the provider links against what
the board has; the driver (libcuda.so.1) only through the toolkit's stub.

Every check here runs before any build, in the dry run and the real run alike.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from orchestrator.builds.container_paths import SYSROOT
from orchestrator.builds.sysroots.gpu import GpuStack
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.variants import release_tuple
from orchestrator.errors import UsageError
from orchestrator.targets import TargetProfile, load_profiles

GPU_PROVIDERS = ("cuda", "tensorrt")
NVCC_VERSION = "12.4"  # the build image's (Debian 13 non-free nvidia-cuda-toolkit 12.4.131)
# The build image's cross toolkit (docker/build-cuda.Dockerfile), laid out as NVIDIA's
# cuda-cross-aarch64: bin/nvcc is the build machine's with a profile that takes CUDA's headers and
# libraries from the sysroot; include, lib64 and targets/aarch64-linux are the sysroot's.
CROSS_CUDA_HOME = "/opt/orch-cuda"
CUDA_LIBRARIES = "usr/local/cuda/targets/aarch64-linux/lib"  # JetPack's, inside the sysroot
NVCC = f"{CROSS_CUDA_HOME}/bin/nvcc"
# nvcc's host compiler: clang 17 (the newest nvcc 12.4 accepts) aimed at aarch64 and the sysroot by a
# wrapper, so that CMake's links of CUDA objects (which hand the host compiler none of nvcc's
# -Xcompiler options) are for the board too.
NVCC_HOST_COMPILER = f"{CROSS_CUDA_HOME}/bin/aarch64-linux-gnu-clang++"
HOST_COMPILER_NAME = "clang 17"
CUDA_IMAGE_NOTE = (
    "built in the sysroot route's clang image with Debian's nvidia-cuda-toolkit (nvcc 12.4), as a cross"
    f" toolkit at {CROSS_CUDA_HOME} whose headers and libraries are the sysroot's"
)


# The CUDA, cuDNN and TensorRT major versions a release's providers build with, from the release
# that began to (ORT's own requirements: CUDA 12 with cuDNN 9 from 1.19; CUDA 13 also from 1.24).
_SUPPORTED: tuple[tuple[tuple[int, int], dict[str, tuple[int, ...]]], ...] = (
    ((1, 19), {"cuda": (12,), "cudnn": (9,), "tensorrt": (10,)}),
    ((1, 24), {"cuda": (12, 13), "cudnn": (9,), "tensorrt": (10,)}),
)


@dataclass(frozen=True, kw_only=True)
class CudaSetting:
    """What a CUDA build compiles for and against, as the plan (and its --json document) says."""

    architectures: tuple[str, ...]  # "87"
    cuda: str  # the sysroot's CUDA, "12.4.1"
    cudnn: str | None
    tensorrt: str | None
    nvcc: str = NVCC_VERSION
    host_compiler: str = HOST_COMPILER_NAME

    @property
    def gencode(self) -> tuple[str, ...]:
        """nvcc's device-code flags: SASS and PTX of each architecture."""
        return tuple(f"-gencode=arch=compute_{a},code=[sm_{a},compute_{a}]" for a in self.architectures)

    def as_dict(self) -> dict[str, object]:
        return {
            "architectures": [f"sm_{a}" for a in self.architectures],
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "tensorrt": self.tensorrt,
            "nvcc": self.nvcc,
            "host_compiler": self.host_compiler,
        }


def nvcc_host_flags() -> tuple[str, ...]:
    """nvcc's option that makes its host compiler compile for the board against its sysroot."""
    return ("-ccbin", NVCC_HOST_COMPILER)


def gpu_profiles() -> list[str]:
    """The targets with an NVIDIA GPU, for messages: ``jetson-orin (sm_87)``."""
    return [
        f"{name} (sm_{profile.cuda_architectures})"
        for name, profile in sorted(load_profiles().items())
        if profile.cuda_architectures
    ]


def check_target(profile: TargetProfile, provider: str) -> None:
    """A GPU provider on a target without an NVIDIA GPU, or whose profile names no GPU architecture."""
    if provider not in GPU_PROVIDERS:
        return
    if provider not in profile.execution_providers:
        raise UsageError(
            f"target '{profile.name}' has no NVIDIA GPU: --ep {provider} is for a Jetson",
            hint=f"targets with one: {', '.join(gpu_profiles())}; for {profile.name}:"
            f" --ep {' or --ep '.join(p for p in profile.execution_providers if p not in GPU_PROVIDERS)}",
        )
    if not profile.cuda_architectures:
        raise UsageError(
            f"target profile '{profile.name}' names no GPU architecture, so --ep {provider} would not"
            " know which GPU to compile its kernels for",
            hint='add `cuda: {architectures: "87"}` to its target file (Orin 87, Xavier 72, Nano 53)',
        )


def require_sysroot(provider: str, sysroot: SysrootRef | None) -> SysrootRef:
    """A GPU provider is cross-compiled only against a sysroot: said before the release's checks."""
    if sysroot is None:
        raise UsageError(
            f"--ep {provider} is cross-compiled against the board's own CUDA: give --sysroot-from NAME",
            hint="orch sysroot pull --host BOARD (a Jetson with JetPack), or without a board the offline"
            " stand-in: orch sysroot stand-in --target jetson-orin --name orin-cuda; or build on the"
            " board itself: --on-board BOARD",
        )
    return sysroot


def plan_cuda(profile: TargetProfile, provider: str, version: str, sysroot: SysrootRef | None) -> CudaSetting:
    """The CUDA build's setting, or UsageError saying what to do when the sysroot cannot give it."""
    check_target(profile, provider)
    sysroot = require_sysroot(provider, sysroot)
    gpu = sysroot.gpu or GpuStack()
    supported = supported_versions(version)
    where = f"board {sysroot.board}" if sysroot.board else f"the root file system of sysroot {sysroot.name!r}"
    if gpu.cuda is None:
        raise UsageError(
            f"sysroot {sysroot.name!r} has no CUDA (no usr/local/cuda with a version.json or"
            " cuda_runtime_api.h)",
            hint=f"install JetPack's CUDA on {where} (sudo apt install nvidia-jetpack) and take the"
            " sysroot again, or use the offline stand-in (orch sysroot stand-in)",
        )
    _check_major("CUDA", gpu.cuda, supported["cuda"], version, sysroot.name)
    if gpu.cudnn is None:
        raise UsageError(
            f"sysroot {sysroot.name!r} has CUDA {gpu.cuda} but no cuDNN (cudnn_version.h), which ORT's"
            " CUDA provider links",
            hint=f"install cuDNN on {where} (JetPack's libcudnn9-dev-cuda-12) and take the sysroot again",
        )
    _check_major("cuDNN", gpu.cudnn, supported["cudnn"], version, sysroot.name)
    if provider == "tensorrt":
        if gpu.tensorrt is None:
            raise UsageError(
                f"sysroot {sysroot.name!r} has no TensorRT (NvInferVersion.h), which --ep tensorrt builds"
                " against",
                hint=f"install TensorRT on {where} (JetPack's tensorrt-dev) and take the sysroot again,"
                " or build --ep cuda",
            )
        _check_major("TensorRT", gpu.tensorrt, supported["tensorrt"], version, sysroot.name)
    return CudaSetting(
        architectures=tuple(str(profile.cuda_architectures).replace(",", ";").split(";")),
        cuda=gpu.cuda,
        cudnn=gpu.cudnn,
        tensorrt=gpu.tensorrt if provider == "tensorrt" else None,
    )


def supported_versions(version: str) -> dict[str, tuple[int, ...]]:
    """The majors ``version``'s providers build with; UsageError for a release before orch knows them."""
    release = release_tuple(version)[:2]
    known = [majors for since, majors in _SUPPORTED if release >= since]
    if not known:
        first = ".".join(map(str, _SUPPORTED[0][0]))
        raise UsageError(
            f"orch cross-compiles the CUDA provider of ONNX Runtime {first} and later; this build is {version}",
            hint=f"--ort-version {first} or later, or build on the board (--on-board BOARD)",
        )
    return known[-1]


def _check_major(what: str, found: str, majors: tuple[int, ...], version: str, name: str) -> None:
    major = int(found.split(".")[0])
    if major in majors:
        return
    wanted = " or ".join(f"{m}.x" for m in majors)
    relation = "older" if major < min(majors) else "newer"
    raise UsageError(
        f"sysroot {name!r} has {what} {found}, {relation} than ONNX Runtime {version}'s provider"
        f" builds with ({what} {wanted})",
        hint=f"a board with {what} {wanted} (another JetPack), or an ONNX Runtime release that supports"
        f" {what} {found}",
    )


def nvcc_version_note(setting: CudaSetting) -> str | None:
    """The build image's nvcc against another CUDA 12 release of the board, said in the plan."""
    board = cuda_release(setting)
    if board == setting.nvcc:
        return None
    return (
        f"nvcc {setting.nvcc} compiles against the board's CUDA {setting.cuda}: its SASS runs under"
        " CUDA's minor-version compatibility; its PTX needs a driver of CUDA"
        f" {setting.nvcc} or newer"
    )


def cuda_release(setting: CudaSetting) -> str:
    """The sysroot's CUDA as build.py and setup.py take it: ``12.4``."""
    return ".".join(setting.cuda.split(".")[:2])


def cuda_build_args(setting: CudaSetting, provider: str, sysroot: str = SYSROOT) -> list[str]:
    """build.py's provider arguments: CUDA from the image's cross toolkit (the sysroot's headers and
    libraries behind the build machine's nvcc), cuDNN and TensorRT from the sysroot."""
    args = [
        "--use_cuda",
        "--cuda_home",
        CROSS_CUDA_HOME,
        "--cudnn_home",
        posixpath.join(sysroot, "usr"),
        "--cuda_version",
        cuda_release(setting),
    ]
    if provider == "tensorrt":
        args = ["--use_tensorrt", "--tensorrt_home", posixpath.join(sysroot, "usr"), *args]
    return args


def cuda_package_args(setting: CudaSetting, sysroot: str = SYSROOT) -> list[str]:
    """package_wheel.py's: the sysroot's CUDA libraries, where the board's GPU stack is checked
    (never bundled), and the architectures the provider's SASS must be for (cuobjdump)."""
    return [
        f"--libdir={posixpath.join(sysroot, CUDA_LIBRARIES)}",
        *(f"--gpu-arch={a}" for a in setting.architectures),
        f"--cuda-version={cuda_release(setting)}",
    ]


def cuda_defines(setting: CudaSetting) -> list[tuple[str, str]]:
    """CMake's CUDA language for the board: its GPU's architectures (CMake's "87" is SASS and PTX),
    the cross toolkit's nvcc and host compiler, and the runtime as a shared library (the board's
    libcudart.so.12, not CMake's default static one)."""
    return [
        ("CMAKE_CUDA_ARCHITECTURES", ";".join(setting.architectures)),
        ("CMAKE_CUDA_COMPILER", NVCC),
        ("CMAKE_CUDA_HOST_COMPILER", NVCC_HOST_COMPILER),
        ("CMAKE_CUDA_RUNTIME_LIBRARY", "Shared"),
        # ccache knows nvcc: a build cut short, or configured again, compiles only what changed.
        ("CMAKE_CUDA_COMPILER_LAUNCHER", "ccache"),
    ]


# CUDA's attention kernels (flash, lean, memory-efficient: a quarter of the provider's nvcc work,
# its slowest compiles) serve only the com.microsoft attention operators.
ATTENTION_KERNELS = (
    "onnxruntime_USE_FLASH_ATTENTION",
    "onnxruntime_USE_LEAN_ATTENTION",
    "onnxruntime_USE_MEMORY_EFFICIENT_ATTENTION",
)


def attention_kernels_unused(operator_config_text: str) -> bool:
    """Whether a reduced build's operators (ORT's config: ``domain;opset;Op1,Op2`` lines) leave
    CUDA's attention kernels without a user."""
    for line in operator_config_text.splitlines():
        domain, _, rest = line.partition(";")
        if domain.strip() == "com.microsoft" and any(
            op.strip().endswith("Attention") for op in rest.partition(";")[2].split(",")
        ):
            return False
    return True


def attention_defines() -> list[tuple[str, str]]:
    return [(name, "OFF") for name in ATTENTION_KERNELS]


ATTENTION_OFF_NOTE = "CUDA's attention kernels (flash, lean, memory-efficient) are left out: none of the models' operators uses them"


def cuda_notes(setting: CudaSetting) -> list[str]:
    notes = [
        f"CUDA: device code for {', '.join(f'sm_{a}' for a in setting.architectures)} (SASS and PTX) by"
        f" nvcc {setting.nvcc}, host code by {setting.host_compiler} for aarch64 against the sysroot's CUDA"
        f" {setting.cuda}, cuDNN {setting.cudnn}"
        + (f", TensorRT {setting.tensorrt}" if setting.tensorrt else "")
        + "; the driver (libcuda.so.1) only through the toolkit's stub; nvcc objects without LTO",
        CUDA_IMAGE_NOTE,
    ]
    said = nvcc_version_note(setting)
    return [*notes, *([said] if said else [])]
