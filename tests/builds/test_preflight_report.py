"""The pre-flight's report and its comparison with x86 onnxruntime, as the manifest keeps them (pure)."""

from __future__ import annotations

import numpy as np

from orchestrator.artifacts.store import Manifest
from orchestrator.builds.preflight import ATOL, RTOL, compare, preflight_report, verdict


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
