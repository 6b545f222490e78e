"""The CUDA provider's cross build, planned (pure): what `orch build --ep cuda --sysroot-from B`
compiles for and against, and every refusal before any build, from sysroot trees made here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.builds.cuda_route import ATTENTION_KERNELS, attention_kernels_unused
from orchestrator.builds.plan import BuildOptions, BuildPlan, make_plan
from orchestrator.builds.reduced_ops import OperatorConfig
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.sysroots.gpu import GpuStack
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.variants import resolve_variant
from orchestrator.errors import UsageError
from orchestrator.targets import resolve_target
from tests.builds.test_sysroot_plan import BOOKWORM, COMPLETE

pytestmark = pytest.mark.unit

STAND_IN = GpuStack(cuda="12.4.1", cudnn="9.28.0")


def _sysroot(root: Path, gpu: GpuStack | None = STAND_IN) -> SysrootRef:
    for name in COMPLETE:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    return SysrootRef(name="orin-cuda", digest="ab" * 32, root=root, board=None, os=BOOKWORM, gpu=gpu)


def _plan(
    ref: SysrootRef | None, provider: str = "cuda", target: str = "jetson-orin", version: str | None = None
) -> BuildPlan:
    profile = resolve_target(target)
    if ref is not None:
        profile = replace(profile, os=ref.os, bootstrap_suite=ref.os.codename)
    source = parse_source(None, version=version, suite="trixie")
    return make_plan(
        profile,
        resolve_variant("tuned"),
        BuildOptions(source=source, sysroot=ref, execution_provider=provider),
    )


def test_a_cuda_plan_compiles_for_the_boards_gpu_against_the_sysroots_cuda(tmp_path: Path) -> None:
    plan = _plan(_sysroot(tmp_path))
    argv = plan.build_argv
    assert "--use_cuda" in argv
    # CUDA from the image's cross toolkit (its headers and libraries are the sysroot's), cuDNN from
    # the sysroot.
    assert argv[argv.index("--cuda_home") + 1] == "/opt/orch-cuda"
    assert argv[argv.index("--cudnn_home") + 1] == "/sysroot/usr"
    assert argv[argv.index("--cuda_version") + 1] == "12.4"
    defines = dict(plan.defines)
    assert defines["CMAKE_CUDA_ARCHITECTURES"] == "87"  # Orin only: SASS + PTX (CMake's "87")
    assert defines["CMAKE_CUDA_COMPILER"] == "/opt/orch-cuda/bin/nvcc"
    assert defines["CMAKE_CUDA_HOST_COMPILER"] == "/opt/orch-cuda/bin/aarch64-linux-gnu-clang++"
    assert defines["CMAKE_CUDA_RUNTIME_LIBRARY"] == "Shared"  # a sysroot keeps no libcudart_static.a
    # The CPU parts as the variant says, nvcc objects without LTO, said in the plan.
    assert "--enable_lto" not in argv and any("LTO is off for CUDA" in n for n in plan.notes)
    assert any("sm_87 (SASS and PTX) by nvcc 12.4" in n and "cuDNN 9.28.0" in n for n in plan.notes)
    # The CUDA toolkit's layer on the route's clang image.
    assert plan.image.tag.startswith("orch/build-clang-sysroot-cuda:")
    assert plan.image.under is not None and plan.image.under.tag == plan.image.base_image
    assert plan.image.under.tag.startswith("orch/build-clang-sysroot:") and plan.image.base_made_offline
    assert plan.cuda is not None and plan.as_dict()["cuda"] == {
        "architectures": ["sm_87"],
        "cuda": "12.4.1",
        "cudnn": "9.28.0",
        "tensorrt": None,
        "nvcc": "12.4",
        "host_compiler": "clang 17",
    }
    # The provider's header-only dependencies at ORT's pins, from NVIDIA's wheels (a CPU plan has none).
    defines_of = dict(plan.defines)
    assert defines_of["FETCHCONTENT_SOURCE_DIR_CUTLASS"] == "/deps/cutlass/cutlass_library/source"
    assert defines_of["FETCHCONTENT_SOURCE_DIR_CUDNN_FRONTEND"] == "/deps/cudnn_frontend"
    assert any("CUTLASS, the cuDNN frontend" in n for n in plan.notes)
    assert "FETCHCONTENT_SOURCE_DIR_CUTLASS" not in dict(_plan(_sysroot(tmp_path), provider="cpu").defines)
    # Packaging checks the board's GPU stack in the sysroot's CUDA and the provider's SASS for sm_87.
    package = plan.package_argv
    assert "--libdir=/sysroot/usr/local/cuda/targets/aarch64-linux/lib" in package
    assert "--gpu-arch=87" in package and "--cuda-version=12.4" in package  # setup.py: onnxruntime-gpu
    # The whole provider: its attention kernels are kept.
    assert not any(name in defines for name in ATTENTION_KERNELS)


def test_a_reduced_cuda_build_leaves_out_the_attention_kernels_only_when_no_operator_uses_them(
    tmp_path: Path,
) -> None:
    conv = "ai.onnx;11;Conv,Relu\ncom.microsoft;1;FusedConv\n"
    attention = conv + "com.microsoft;1;MultiHeadAttention\n"
    assert attention_kernels_unused(conv) and not attention_kernels_unused(attention)
    for text, left_out in ((conv, True), (attention, False)):
        config = OperatorConfig(text=text, models=(), operators=3)
        profile = replace(resolve_target("jetson-orin"), os=BOOKWORM, bootstrap_suite=BOOKWORM.codename)
        plan = make_plan(
            profile,
            resolve_variant("reduced"),
            BuildOptions(
                source=parse_source(None, version=None, suite="trixie"),
                sysroot=_sysroot(tmp_path),
                execution_provider="cuda",
                operator_config=config,
            ),
        )
        defines = dict(plan.defines)
        assert all((defines.get(name) == "OFF") is left_out for name in ATTENTION_KERNELS), defines
        assert any("attention kernels" in note for note in plan.notes) is left_out


def test_a_nano_compiles_for_sm_53_and_another_cuda_12_release_is_noted(tmp_path: Path) -> None:
    ref = _sysroot(tmp_path, GpuStack(cuda="12.2.140", cudnn="9.3.0"))
    plan = _plan(ref, target="jetson-nano")
    assert dict(plan.defines)["CMAKE_CUDA_ARCHITECTURES"] == "53"
    assert any("nvcc 12.4 compiles against the board's CUDA 12.2.140" in n for n in plan.notes)


def test_tensorrt_builds_with_cuda_from_the_sysroot(tmp_path: Path) -> None:
    ref = _sysroot(tmp_path, GpuStack(cuda="12.6.1", cudnn="9.3.0", tensorrt="10.3.0"))
    argv = _plan(ref, provider="tensorrt").build_argv
    assert argv[argv.index("--tensorrt_home") + 1] == "/sysroot/usr" and "--use_cuda" in argv


@pytest.mark.parametrize(
    ("gpu", "provider", "message", "hint"),
    [
        (GpuStack(), "cuda", "has no CUDA", "sudo apt install nvidia-jetpack"),
        (GpuStack(cuda="11.4.315", cudnn="8.6.0"), "cuda", "CUDA 11.4.315, older than", "CUDA 12.x"),
        (GpuStack(cuda="13.0.1", cudnn="9.12.0"), "cuda", "CUDA 13.0.1, newer than", "CUDA 12.x"),
        (GpuStack(cuda="12.4.1"), "cuda", "no cuDNN", "libcudnn9-dev-cuda-12"),
        (GpuStack(cuda="12.2.140", cudnn="8.9.4"), "cuda", "cuDNN 8.9.4, older than", "cuDNN 9.x"),
        (STAND_IN, "tensorrt", "has no TensorRT", "or build --ep cuda"),
        (
            GpuStack(cuda="12.2.140", cudnn="9.3.0", tensorrt="8.6.2"),
            "tensorrt",
            "TensorRT 8.6.2, older",
            "10.x",
        ),
    ],
)
def test_a_sysroot_that_cannot_give_the_provider_is_refused_before_any_build(
    tmp_path: Path, gpu: GpuStack, provider: str, message: str, hint: str
) -> None:
    with pytest.raises(UsageError, match=message) as refused:
        _plan(_sysroot(tmp_path, gpu), provider=provider)
    assert hint in str(refused.value.hint)


def test_without_a_sysroot_cuda_names_the_sysroot_way_the_stand_in_and_the_board() -> None:
    with pytest.raises(UsageError, match="give --sysroot-from NAME") as refused:
        _plan(None)
    hint = str(refused.value.hint)
    assert "orch sysroot pull --host BOARD" in hint and "orch sysroot stand-in" in hint
    assert "--on-board BOARD" in hint


def test_a_raspberry_pi_has_no_gpu_for_cuda_and_is_told_which_targets_do() -> None:
    with pytest.raises(UsageError, match="target 'rpi5' has no NVIDIA GPU") as refused:
        _plan(None, target="rpi5")
    hint = str(refused.value.hint)
    assert "jetson-orin (sm_87)" in hint and "jetson-nano (sm_53)" in hint and "--ep cpu" in hint


def test_a_profile_without_a_gpu_architecture_is_refused(tmp_path: Path) -> None:
    profile = replace(
        resolve_target("jetson-orin"), cuda_architectures=None, os=BOOKWORM, bootstrap_suite="bookworm"
    )
    source = parse_source(None, version=None, suite="trixie")
    with pytest.raises(UsageError, match="names no GPU architecture") as refused:
        make_plan(
            profile,
            resolve_variant("tuned"),
            BuildOptions(source=source, sysroot=_sysroot(tmp_path), execution_provider="cuda"),
        )
    assert "architectures" in str(refused.value.hint)


def test_a_release_before_orch_knows_its_cuda_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"1\.19 and later; this build is 1\.18\.0"):
        _plan(_sysroot(tmp_path), version="1.18.0")
