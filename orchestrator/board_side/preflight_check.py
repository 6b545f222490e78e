"""Pre-flight check, run on an emulated board (qemu-user, ``QEMU_CPU`` = the board's CPU).

Written to ``/pf/check.py`` by ``orchestrator.builds.preflight`` and run by preflight_install.sh
with the venv's python, no arguments: imports onnxruntime, runs ``/pf/model.onnx`` once on
``/pf/input.npy``, saves the output to ``/pf/output.npy`` and prints one line
``ORCH-PREFLIGHT {json}`` (ort_version, providers, import_s, run_s, shape). Uses only the standard
library, numpy and the wheel under test; ``sigill_guard`` (copied next to it) names an illegal
instruction (``ORCH-SIGILL {json}``, exit status 132).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import time
from pathlib import Path

# First: an instruction the emulated CPU lacks is then reported (ORCH-SIGILL ...), not just fatal.
import sigill_guard  # type: ignore[import-not-found]  # noqa: F401 -- /pf/sigill_guard.py, beside this file

t0 = time.time()
# The imports are what is timed (a CPU feature the board lacks fails here: SIGILL).
import numpy as np
import onnxruntime as ort  # noqa: TID253 -- this import is what is timed; the script runs alone

t1 = time.time()
session = ort.InferenceSession("/pf/model.onnx", providers=["CPUExecutionProvider"])
feed = {"input": np.load("/pf/input.npy")}
output = session.run(None, feed)[0]
np.save("/pf/output.npy", output)
report: dict[str, object] = {
    "ort_version": ort.__version__,
    "providers": ort.get_available_providers(),
    "import_s": round(t1 - t0, 2),
    "run_s": round(time.time() - t1, 2),
    "shape": list(output.shape),
}


def cuda_runtime(soname: str) -> dict[str, object]:
    """What the board's CUDA runtime (``libcudart.so.12``) says: its GPUs, or in its own words why none."""
    try:
        cudart = ctypes.CDLL(soname)
    except OSError as error:
        return {"devices": 0, "runtime_says": str(error)}
    count = ctypes.c_int(0)
    code = cudart.cudaGetDeviceCount(ctypes.byref(count))
    if code == 0:
        return {"devices": count.value}
    cudart.cudaGetErrorString.restype = ctypes.c_char_p
    return {"devices": 0, "runtime_says": cudart.cudaGetErrorString(code).decode()}


def provider_libraries(provider: Path) -> dict[str, object]:
    """Whether every library the CUDA provider needs is on this board, asked of the dynamic loader
    (``ldd``) without loading the provider: its constructors open the NVIDIA driver, and where
    there is none ORT 1.21's abort the process (CUDADriverWrapper)."""
    listed = subprocess.run(["ldd", str(provider)], capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        return {"provider_loads": False, "load_error": (listed.stderr or listed.stdout).strip()}
    found = dict(re.findall(r"^\s*(\S+) => (.+?)(?: \(0x[0-9a-f]+\))?$", listed.stdout, flags=re.MULTILINE))
    missing = sorted(name for name, where in found.items() if where == "not found")
    if missing:
        return {"provider_loads": False, "load_error": f"not found on this board: {', '.join(missing)}"}
    return {"provider_loads": True, "provider_needs": found}


def cuda_path() -> dict[str, object]:
    """A CUDA wheel (ORCH_PREFLIGHT_GPU): is the provider listed, is every library it needs here,
    what the CUDA runtime finds, and with an NVIDIA driver, the CUDA provider alone runs the model
    (output in /pf/output_gpu.npy)."""
    found: dict[str, object] = {"provider_listed": "CUDAExecutionProvider" in ort.get_available_providers()}
    found |= cuda_runtime(os.environ.get("ORCH_CUDA_RUNTIME", "libcudart.so.12"))
    found |= provider_libraries(Path(ort.__file__).parent / "capi" / "libonnxruntime_providers_cuda.so")
    if not found["provider_loads"]:
        return found
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        said = found.get("runtime_says")
        found |= {
            "driver": False,
            "ran": False,
            "reason": "no NVIDIA driver on this board: no libcuda.so.1"
            + (f"; the CUDA runtime says: {said}" if said else ""),
        }
        return found
    found["driver"] = True
    # The CUDA provider alone: where it cannot be created ORT falls back to the CPU, which is no
    # GPU result; what the session really got is what is reported.
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        cuda = ort.InferenceSession("/pf/model.onnx", options, providers=["CUDAExecutionProvider"])
    except Exception as error:  # noqa: BLE001 -- whatever ORT raises is the reason, reported
        found |= {"ran": False, "reason": f"the CUDA provider failed: {error}"}
        return found
    found["session_providers"] = cuda.get_providers()
    if "CUDAExecutionProvider" not in cuda.get_providers():
        found |= {
            "ran": False,
            "reason": f"ORT could not create the CUDA provider ({found.get('runtime_says')})",
        }
        return found
    np.save("/pf/output_gpu.npy", cuda.run(None, feed)[0])
    found["ran"] = True
    return found


if os.environ.get("ORCH_PREFLIGHT_GPU"):
    report["gpu"] = cuda_path()
print("ORCH-PREFLIGHT " + json.dumps(report), flush=True)
