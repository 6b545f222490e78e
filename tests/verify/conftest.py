"""The tuned build the verify tests run next to stock, without a second full wheel build.

``tuned_artifact`` takes, in order: the lab's own tuned artifact when ``tests/build/test_real_build.py``
built it earlier in the session (it runs before this folder in a full run); the artifact directory
named by ``ORCH_TEST_TUNED_ARTIFACT`` (a tuned lab build made earlier on this machine, for running
this folder alone); else it runs the same ``orch build --target lab --variant tuned`` the build
test runs, in the lab's ORCH_HOME (so the build test, if it runs later, finds it done).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

TUNED_BUILD_TIMEOUT = 5400


def _tuned_in(artifacts: Path) -> Path | None:
    for manifest in sorted(artifacts.glob("lab/tuned/*/manifest.json")):
        document = json.loads(manifest.read_text())
        if document.get("preflight", {}).get("ok"):
            return manifest.parent
    return None


@pytest.fixture(scope="session")
def tuned_artifact(lab) -> Path:
    found = _tuned_in(Path(lab.env["ORCH_ARTIFACTS"]))
    if found:
        return found
    named = os.environ.get("ORCH_TEST_TUNED_ARTIFACT")
    if named:
        directory = Path(named)
        if not (directory / "manifest.json").is_file():
            pytest.fail(f"ORCH_TEST_TUNED_ARTIFACT={named}: no manifest.json there", pytrace=False)
        return directory
    built = lab.orch("build", "--target", "lab", "--variant", "tuned", "--json", timeout=TUNED_BUILD_TIMEOUT)
    if built.returncode != 0:
        pytest.fail(f"orch build --target lab --variant tuned failed:\n{built.stderr[-3000:]}", pytrace=False)
    return Path(json.loads(built.stdout)["artifact"])
