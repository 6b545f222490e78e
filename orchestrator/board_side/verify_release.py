"""Deploy verification, run on the board with the release's own interpreter before it becomes current.

Sent as ``<workdir>/releases/<id>/venv/bin/python -c <this file's text> MODEL...`` by
``orchestrator.deploy.board_steps.verify_release`` (not stored in the release: releases deployed
before it existed are verified the same way on a rollback). Arguments: paths of the release's
own models (``releases/<id>/models/...``). Imports numpy and onnxruntime, then runs one inference
per model with deterministic random input (no zeros). Prints one JSON document: ok, version, file
(where onnxruntime was imported from, a real path: orch checks it lies in the release directory),
build_info, providers and per model ok, load_ms, run_ms, outputs (their shapes) or error;
``{"ok": false, "error": ...}`` when the import fails. Exits 1 when anything failed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

out: dict[str, Any] = {"ok": True, "models": {}}
try:
    import numpy as np
    import onnxruntime as ort
except Exception as error:  # noqa: BLE001 - the orchestrator must always get a JSON document
    print(json.dumps({"ok": False, "error": f"import failed: {type(error).__name__}: {error}"}))
    sys.exit(1)
out["version"] = ort.__version__
out["file"] = os.path.realpath(ort.__file__)
out["build_info"] = ort.get_build_info() if hasattr(ort, "get_build_info") else ""
out["providers"] = ort.get_available_providers()
types: dict[str, Any] = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}
rng = np.random.default_rng(0)
for path in sys.argv[1:]:
    name = os.path.basename(path)
    try:
        start = time.perf_counter()
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        loaded = time.perf_counter()
        feeds = {}
        for item in session.get_inputs():
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in item.shape]
            feeds[item.name] = rng.random(shape).astype(types.get(item.type, np.float32))
        outputs = session.run(None, feeds)
        done = time.perf_counter()
        finite = all(
            bool(np.isfinite(o).all()) for o in outputs if isinstance(o, np.ndarray) and o.dtype.kind == "f"
        )
        out["models"][name] = {
            "ok": finite,
            "load_ms": round((loaded - start) * 1000, 2),
            "run_ms": round((done - loaded) * 1000, 2),
            "outputs": [list(getattr(o, "shape", ())) for o in outputs],
        }
        if not finite:
            out["models"][name]["error"] = "output is not finite"
            out["ok"] = False
    except Exception as error:  # noqa: BLE001 - ORT raises several unrelated types for a bad model
        out["models"][name] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        out["ok"] = False
print(json.dumps(out))
sys.exit(0 if out["ok"] else 1)
