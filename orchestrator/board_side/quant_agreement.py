"""fp32 vs int8 agreement on the board: run by ``orch bench --quantize static`` as
``<release>/venv/bin/python -c <this text> FP32.onnx INT8.onnx SAMPLES.npz``.

Standard library, numpy and onnxruntime only. ``SAMPLES.npz`` holds one array per model input,
``[samples, *input shape]`` (the calibration samples). Both models run every sample on the
board's CPU (CPU provider, default settings); prints one JSON document::

    {"ok": true, "samples": 16, "outputs": [{"name": "logits", "max_abs_diff": 0.03,
     "mean_abs_diff": 0.004, "max_abs_fp32": 5.1, "classifier": true, "top1_agreement": 0.9375}]}

An output counts as a classifier's when it is ``[batch, classes]`` with at least two classes:
top-1 agreement is the fraction of samples (rows) whose argmax is the same in both models.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main(argv: list[str]) -> int:
    try:
        import numpy as np  # noqa: PLC0415 -- in the try: a failed import still ends in the JSON reply
        import onnxruntime as ort

        fp32_path, int8_path, samples_path = argv[:3]
        with np.load(samples_path, allow_pickle=False) as archive:
            feeds = {name: archive[name] for name in archive.files}
        count = min(len(value) for value in feeds.values())
        sessions = [
            ort.InferenceSession(p, providers=["CPUExecutionProvider"]) for p in (fp32_path, int8_path)
        ]
        names = [item.name for item in sessions[0].get_outputs()]
        results: list[list[list[Any]]] = [[], []]
        for index in range(count):
            sample = {name: value[index] for name, value in feeds.items()}
            for side, session in enumerate(sessions):
                results[side].append(session.run(names, sample))
        outputs = []
        for position, name in enumerate(names):
            fp32 = np.stack([np.asarray(run[position], dtype=np.float64) for run in results[0]])
            int8 = np.stack([np.asarray(run[position], dtype=np.float64) for run in results[1]])
            diff = np.abs(fp32 - int8)
            entry: dict[str, Any] = {
                "name": name,
                "shape": list(fp32.shape[1:]),
                "max_abs_diff": float(diff.max()) if diff.size else 0.0,
                "mean_abs_diff": float(diff.mean()) if diff.size else 0.0,
                "max_abs_fp32": float(np.abs(fp32).max()) if fp32.size else 0.0,
            }
            classifier = fp32.ndim == 3 and fp32.shape[2] >= 2
            entry["classifier"] = bool(classifier)
            if classifier:
                same = np.argmax(fp32, axis=2) == np.argmax(int8, axis=2)
                entry["top1_agreement"] = float(same.mean())
                entry["top1_rows"] = int(same.size)
            outputs.append(entry)
        print(json.dumps({"ok": True, "samples": count, "outputs": outputs}))
        return 0
    except Exception as error:  # noqa: BLE001 - the workstation must always get a JSON document
        print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"}))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
