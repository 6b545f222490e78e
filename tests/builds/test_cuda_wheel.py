"""The onnxruntime-gpu wheel cross-compiled for real (full: the CUDA provider is hundreds of nvcc
and clang compiles): `orch build --target jetson-orin --sysroot-from <stand-in> --ep cuda --variant
reduced --model demo_conv.onnx`, from a fresh ORCH_HOME with the offline Jetson stand-in.

What a user notices: the wheel is onnxruntime_gpu for the board's Python; its CUDA provider holds
SASS for the Orin's sm_87 only (and PTX), links the board's CUDA, cuBLAS and cuDNN as the sysroot has
them (none of them in the wheel); the pre-flight on the emulated board gives the CPU result of x86
and, apart, "GPU path not run" in the CUDA runtime's own words (no NVIDIA driver there).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from orchestrator.lab.sample_models import write_tiny_convnet
from tests.conftest import orch_cli

pytestmark = [pytest.mark.integration, pytest.mark.full]

BUILD_TIMEOUT = 6 * 3600


@pytest.mark.timeout(BUILD_TIMEOUT + 3600)
def test_the_reduced_cuda_wheel_for_the_orin_stand_in_is_checked_and_its_gpu_path_reported_not_run(
    build_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = orch_cli(
        build_env, "sysroot", "stand-in", "--target", "jetson-orin", "--name", "orin-cuda", timeout=3600
    )
    assert made.returncode == 0, made.stderr[-3000:]
    model = tmp_path / "demo_conv.onnx"
    write_tiny_convnet(model)
    args = ("build", "--target", "jetson-orin", "--sysroot-from", "orin-cuda", "--ep", "cuda")
    args += ("--variant", "reduced", "--model", str(model))
    result = orch_cli(build_env, *args, "--json", timeout=BUILD_TIMEOUT)
    assert result.returncode == 0, result.stderr[-5000:]
    manifest = json.loads(result.stdout)["manifest"]
    assert manifest["wheel"].startswith("onnxruntime_gpu-1.21.0-cp311-cp311-linux_aarch64")
    cuda = manifest["cuda"]
    assert cuda["architectures"] == ["sm_87"] and cuda["cuda"] == "12.4.1" and cuda["nvcc"] == "12.4"
    assert cuda["cudnn"] == "9.28.0"
    # cuobjdump: SASS for the Orin only, PTX for GPUs to come.
    assert cuda["gpu_code"]["sass"] == ["sm_87"] and cuda["gpu_code"]["sass_files"] > 0
    assert cuda["gpu_code"]["ptx"] == ["sm_87"]
    # Every GPU library the provider needs resolves in the sysroot, with its version; none is bundled.
    board = cuda["board_libraries"]
    for soname, release in (
        ("libcudart.so.12", "libcudart.so.12.4."),
        ("libcublas.so.12", "libcublas.so.12.4."),
        ("libcublasLt.so.12", "libcublasLt.so.12.4."),
        ("libcudnn.so.9", "libcudnn.so.9"),  # NVIDIA's cuDNN wheel names no minor release: 9.28.0, read above
    ):
        assert board[soname].startswith("/sysroot/") and board[soname].rsplit("/", 1)[-1].startswith(release)
    wheel = Path(build_env["ORCH_ARTIFACTS"]) / "jetson-orin" / "reduced-cuda" / "1.21.0" / manifest["wheel"]
    names = zipfile.ZipFile(wheel).namelist()
    assert "onnxruntime/capi/libonnxruntime_providers_cuda.so" in names
    assert not [n for n in names if "libcudart" in n or "libcublas" in n or "libcudnn" in n]
    assert manifest["wheel_check"]["ok"] and manifest["sysroot"]["check"]["ok"]
    # The pre-flight: the CPU result as x86's; the GPU path its own verdict, never a pass.
    preflight = manifest["preflight"]
    assert preflight["comparison"]["match"] and preflight["comparison"]["max_abs_diff"] < 1e-4
    gpu = preflight["gpu"]
    # Every library the provider needs is found on the emulated board (ldd), its CUDA runtime runs
    # and finds no driver; no CUDA session is tried (ORT 1.21's provider aborts without a driver).
    assert gpu["provider_listed"] and gpu["provider_loads"] and gpu["ran"] is False and gpu["driver"] is False
    assert {"libcudart.so.12", "libcublas.so.12", "libcudnn.so.9"} <= set(gpu["provider_needs"])
    assert gpu["verdict"].startswith("GPU path not run (no NVIDIA driver on this board: no libcuda.so.1; ")
    listed = orch_cli(build_env, "build", "list", check=True)
    table = listed.stdout + listed.stderr  # the cell wraps inside the table's column
    assert "CPU ok;" in table and "GPU path" in table and "failed" not in table
    with capsys.disabled():
        print(
            f"reduced CUDA wheel: {manifest['build_duration_s']} s; ccache {manifest['ccache']}; {gpu['verdict']}"
        )
