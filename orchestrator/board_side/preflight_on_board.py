"""Pre-flight of a wheel the board built itself (``orch build --on-board``), run on that board.

``python preflight_on_board.py MODEL INPUT OUTPUT PROVIDER`` with the interpreter of a scratch venv
the wheel was installed in: one inference of MODEL on INPUT (.npy) with PROVIDER only
(``CPUExecutionProvider``, ``CUDAExecutionProvider``...), the output saved to OUTPUT (.npy) for orch
to compare with the workstation's, and one line ``ORCH-PREFLIGHT {json}``.

A provider that does not load is a failure, not a fallback: onnxruntime quietly runs a session on
the CPU when CUDA's libraries are missing, so the session's own provider list is checked (the
available-providers list only says the wheel was built with CUDA). Exit status 3 names that.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import onnxruntime as ort  # noqa: TID253 -- the wheel under test, in the scratch venv

NOT_LOADED = 3


def main(model: str, inputs: str, output: str, provider: str) -> int:
    started = time.time()
    session = ort.InferenceSession(model, providers=[provider])
    used = session.get_providers()
    report: dict[str, object] = {
        "ort_version": ort.__version__,
        "available": ort.get_available_providers(),
        "session_providers": used,
        "provider": provider,
    }
    if not used or used[0] != provider:
        report["error"] = f"{provider} did not load: the session runs on {used}"
        print("ORCH-PREFLIGHT " + json.dumps(report), flush=True)
        return NOT_LOADED
    feed = {session.get_inputs()[0].name: np.load(inputs)}
    result = session.run(None, feed)[0]
    np.save(output, result)
    report.update(run_s=round(time.time() - started, 3), shape=list(result.shape))
    print("ORCH-PREFLIGHT " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
