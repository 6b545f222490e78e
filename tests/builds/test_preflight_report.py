"""The pre-flight's report and its comparison with x86 onnxruntime, as the manifest keeps them (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from orchestrator.artifacts.store import Manifest
from orchestrator.builds.build_report import read_package_report
from orchestrator.builds.preflight import (
    ATOL,
    GPU_NOT_RUN,
    RTOL,
    GpuLibraries,
    compare,
    gpu_verdict,
    preflight_report,
    verdict,
)


def test_the_report_line_and_the_comparison_become_the_manifests_preflight() -> None:
    line = 'ORCH-PREFLIGHT {"import_s": 1.5, "version": "1.21.0"}'
    report = preflight_report(["pip: installed", line, 'ORCH-PREFLIGHT {"second": 1}'])
    assert report == {"import_s": 1.5, "version": "1.21.0"}  # the first report line
    assert preflight_report(["ORCH-PREFLIGHT [1]"]) is None  # not an object: no report
    assert preflight_report(["ORCH-PREFLIGHT {cut"]) is None

    same = compare(np.ones((1, 4), np.float32), np.ones((1, 4), np.float32))
    assert same == {"match": True, "max_abs_diff": 0.0, "rtol": RTOL, "atol": ATOL}
    assert compare(np.ones((1, 4)), np.ones((1, 5))) == {"match": False, "reason": "shape (1, 4) vs (1, 5)"}
    off = compare(np.ones((1, 4)), np.full((1, 4), 1.5))
    assert off["match"] is False and off["max_abs_diff"] == 0.5

    passed = verdict(same, {"qemu_cpu": "cortex-a57", **report, "comparison": same})
    failed = verdict(off, {"qemu_cpu": "cortex-a57", "comparison": off})
    assert passed.ok and passed.error is None
    assert not failed.ok and failed.error == f"outputs differ from x86 onnxruntime: {off}"
    # Written into a manifest and read back, the details are kept as they were.
    document = {"target": "lab", "variant": "tuned", "ort_version": "1.21.0", "wheel": "w.whl"}
    manifest = Manifest.from_json({**document, "preflight": passed.to_json()}, source="m.json")
    assert manifest.preflight == passed and manifest.preflight_ok


def test_a_cuda_wheel_whose_gpu_path_did_not_run_says_so_and_never_passes_it(tmp_path: Path) -> None:
    """The pre-flight of a CUDA wheel on a board without an NVIDIA driver: the CPU result can pass,
    the GPU path is its own verdict, "not run" with the runtime's words; a provider that does not
    load fails; where the GPU ran, its output is compared with x86 like the CPU's."""
    reference = np.ones((1, 4), np.float32)
    same = compare(reference, reference)
    no_driver = {
        "provider_listed": True,
        "provider_loads": True,
        "devices": 0,
        "runtime_says": "CUDA driver version is insufficient for CUDA runtime version",
        "session_providers": ["CPUExecutionProvider"],
        "ran": False,
        "reason": "no NVIDIA GPU usable on this board: CUDA driver version is insufficient for CUDA runtime version",
    }
    not_run = gpu_verdict(no_driver, tmp_path / "none.npy", reference)
    assert not_run["verdict"] == f"{GPU_NOT_RUN} ({no_driver['reason']})"
    cpu_passed = verdict(same, {"comparison": same}, gpu=not_run)
    assert cpu_passed.ok  # the CPU path ran and matches; the GPU verdict is kept beside it, not as a pass
    assert cpu_passed.details == {"comparison": same}  # the caller keeps ``gpu`` in the details

    missing = {"provider_listed": True, "provider_loads": False, "load_error": "libcublas.so.12: cannot open"}
    failed = verdict(same, {}, gpu=gpu_verdict(missing, tmp_path / "none.npy", reference))
    assert (
        not failed.ok
        and failed.error == "CUDA provider: the CUDA provider does not load: libcublas.so.12: cannot open"
    )
    assert not verdict(same, {}, gpu=gpu_verdict({}, tmp_path / "none.npy", reference)).ok

    np.save(tmp_path / "gpu.npy", reference + 1)
    ran = {"provider_listed": True, "provider_loads": True, "devices": 1, "ran": True}
    differs = gpu_verdict(ran, tmp_path / "gpu.npy", reference)
    assert differs["verdict"] == "GPU result differs from x86" and not verdict(same, {}, gpu=differs).ok
    np.save(tmp_path / "gpu.npy", reference)
    assert gpu_verdict(ran, tmp_path / "gpu.npy", reference)["verdict"] == "GPU result matches x86"


def test_a_cuda_wheels_package_report_keeps_the_boards_gpu_libraries_and_code(tmp_path: Path) -> None:
    report = {
        "wheel": "onnxruntime_gpu-1.21.0-cp311-cp311-linux_aarch64.whl",
        "bundled": [],
        "board_libraries": {
            "libcudart.so.12": "/sysroot/usr/local/cuda-12.4/targets/aarch64-linux/lib/libcudart.so.12.4.127"
        },
        "gpu_code": {"sass": ["sm_87"], "sass_files": 120, "ptx": ["sm_87"], "ptx_files": 120},
    }
    log = tmp_path / "build.log"
    log.write_text("compiling\nORCH-PACKAGE " + json.dumps(report) + "\n")
    package = read_package_report(log)
    assert package.board_libraries == report["board_libraries"] and package.gpu_code == report["gpu_code"]
    libraries = GpuLibraries(
        sysroot=tmp_path, files={**report["board_libraries"], "libcuda.so.1": "the board's NVIDIA driver"}
    )
    assert libraries.runtime == {"ORCH_CUDA_RUNTIME": "libcudart.so.12"}
    libraries.links(tmp_path / "links")
    # Only the sysroot's files are linked (in the container, /sysroot is the stored sysroot); the driver is the board's.
    assert [p.name for p in (tmp_path / "links").iterdir()] == ["libcudart.so.12"]
    assert (tmp_path / "links" / "libcudart.so.12").readlink() == Path(
        report["board_libraries"]["libcudart.so.12"]
    )
