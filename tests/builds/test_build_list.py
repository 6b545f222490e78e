"""`orch build list` in a log or a pipe (80 columns): every artifact's names and figures whole."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from orchestrator.artifacts.store import Manifest, artifact_dir, write_manifest

WHEEL = "onnxruntime-1.21.0-cp313-cp313-linux_aarch64.whl"


def test_the_list_at_80_columns_keeps_wheel_names_and_figures_whole(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    for variant in ("default-xnnpack", "reduced"):
        directory = artifact_dir("rpi5", variant, "1.21.0", root=root)
        directory.mkdir(parents=True)
        wheel = directory / WHEEL
        wheel.write_bytes(b"not really a wheel" * 1000)
        document = {
            "target": "rpi5",
            "variant": variant,
            "ort_version": "1.21.0",
            "wheel": WHEEL,
            "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "wheel_size": 9_100_000,
            "created": "2026-12-01T20:00:00+00:00",
            "preflight": {"ok": True, "by": "this test"},
        }
        write_manifest(directory, Manifest.from_json(document, source="this test"))
    env = {**os.environ, "ORCH_ARTIFACTS": str(root), "COLUMNS": "80", "ORCH_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "build", "list"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 80, shown
    assert sum(WHEEL in line for line in lines) == 2, shown
    assert sum("default-xnnpack" in line for line in lines) == 1 and "9.1 MB" in shown, shown
