"""Pre-flight check, run on an emulated board (qemu-user, ``QEMU_CPU`` = the board's CPU).

Written to ``/pf/check.py`` by ``orchestrator.builds.preflight`` and run by preflight_install.sh
with the venv's python, no arguments: imports onnxruntime, runs ``/pf/model.onnx`` once on
``/pf/input.npy``, saves the output to ``/pf/output.npy`` and prints one line
``ORCH-PREFLIGHT {json}`` (ort_version, providers, import_s, run_s, shape). Uses only the standard
library, numpy and the wheel under test; ``sigill_guard`` (copied next to it) names an illegal
instruction (``ORCH-SIGILL {json}``, exit status 132).
"""

from __future__ import annotations

import json
import time

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
report = {
    "ort_version": ort.__version__,
    "providers": ort.get_available_providers(),
    "import_s": round(t1 - t0, 2),
    "run_s": round(time.time() - t1, 2),
    "shape": list(output.shape),
}
print("ORCH-PREFLIGHT " + json.dumps(report), flush=True)
