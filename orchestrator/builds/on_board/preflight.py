"""The pre-flight of a wheel a board built itself, run on that board (no emulation: its real CPU,
and for CUDA its real GPU).

In a scratch directory on the board: a venv that sees the system's numpy (the build needed it), the
wheel installed from the board's own build tree without any index, and ``preflight_on_board.py``
running the pre-flight model with the build's execution provider alone. A provider that did not
load fails the pre-flight (onnxruntime would quietly run on the CPU). The output is compared with
the workstation's x86 onnxruntime, as the emulated pre-flight's is. The scratch directory is
removed afterwards, whatever happened.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.adapters.session import BoardSession
from orchestrator.artifacts.store import Preflight
from orchestrator.board_side import read_text
from orchestrator.builds.preflight import compare, preflight_report, reference_run, stage_model, verdict

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}
TIMEOUT_S = 900.0
NOT_LOADED = 3  # preflight_on_board.py's exit status for a provider that did not load


def preflight_on_board(session: BoardSession, root: str, wheel: str, provider: str) -> Preflight:
    """``wheel`` (a path on the board) installed in a scratch venv there and run with ``provider``."""
    started = time.monotonic()
    scratch = f"{root}/preflight-{secrets.token_hex(6)}"
    name = PROVIDERS[provider]
    details: dict[str, Any] = {"board": session.board.name, "provider": name}
    session.mkdir_p(scratch)
    try:
        with tempfile.TemporaryDirectory(prefix="orch-preflight-") as local_dir:
            local = Path(local_dir)
            model, inputs = stage_model(local)
            (local / "check.py").write_text(read_text("preflight_on_board.py"))
            for file in ("model.onnx", "input.npy", "check.py"):
                session.put(local / file, f"{scratch}/{file}")
            python = f"{scratch}/venv/bin/python"
            session.run(
                ["python3", "-m", "venv", "--system-site-packages", f"{scratch}/venv"], timeout=TIMEOUT_S
            )
            session.run(
                [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", wheel],
                timeout=TIMEOUT_S,
            )
            ran = session.run(
                [python, f"{scratch}/check.py", f"{scratch}/model.onnx", f"{scratch}/input.npy",
                 f"{scratch}/output.npy", name],
                timeout=TIMEOUT_S,
                check=False,
            )  # fmt: skip
            details.update(exit_code=ran.exit_code, duration_s=round(time.monotonic() - started, 1))
            report = preflight_report(ran.stdout.splitlines())
            if report is not None:
                details.update(report)
            if ran.exit_code == NOT_LOADED and report is not None:
                return Preflight(ok=False, error=str(report.get("error")), details=details)
            if not ran.ok or report is None:
                return Preflight(
                    ok=False, error=f"exit status {ran.exit_code}: {ran.tail(5)}", details=details
                )
            session.get(f"{scratch}/output.npy", local / "output.npy")
            comparison = compare(np.load(local / "output.npy"), reference_run(model, inputs))
            details["comparison"] = comparison
            return verdict(comparison, details)
    finally:
        session.run(["rm", "-rf", "--", scratch], check=False)
