"""The official 1.21.0 wheel dies of SIGILL on the lab's Cortex-A72: orch refuses it and says what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_a_known_broken_official_wheel_is_refused_with_the_release_that_runs_there(
    orch_env: dict[str, str], tmp_path: Path
) -> None:
    argv = ["build", "--target", "lab", "--variant", "stock", "--ort-version", "1.21.0"]
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", *argv],
        env={**orch_env, "COLUMNS": "300"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    said = " ".join((result.stdout + result.stderr).split())  # the console wraps long lines
    assert result.returncode != 0, said
    assert "SIGILL" in said and "cortex-a72" in said, said
    # What to do instead: the nearest stock release that runs there, and orch's own patched builds.
    assert "--variant stock --ort-version 1.21.1" in said, said
    assert "orch's own 1.21.0 builds (--variant default or tuned) carry the fix" in said, said
    assert "the artifact is kept but not marked good" in said, said
