"""The orch command line as the benchmark scripts run it: a subprocess, output captured."""

from __future__ import annotations

import subprocess
import sys


def orch(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def require(done: subprocess.CompletedProcess[str], what: str, ok: tuple[int, ...] = (0,)) -> None:
    """Stop the benchmark, with the command's error output, when it did not exit with one of ``ok``."""
    if done.returncode not in ok:
        sys.stderr.write(f"{what} failed ({done.returncode}):\n{done.stderr[-3000:]}\n")
        sys.exit(1)
