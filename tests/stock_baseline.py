"""The stock baseline the lab tests share: the official aarch64 wheel and orch's own stock artifact.

The fixtures ``stock_wheel`` and ``stock_build`` (tests/conftest.py) use these helpers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.artifacts.pip_download import pip_download_argv
from orchestrator.artifacts.store import Artifact, read_manifest

# The lab boards: Debian 13, Python 3.13, glibc 2.41, aarch64.
LAB_PYTHON = "3.13"
LAB_PLATFORM = "manylinux_2_28_aarch64"


def download_stock(dest: Path) -> Path:
    found = sorted(dest.glob("onnxruntime-*-cp313-cp313-*aarch64*.whl"))
    if found:
        return found[-1]
    dest.mkdir(parents=True, exist_ok=True)
    argv = pip_download_argv(
        ["onnxruntime"],
        dest=dest,
        python_version=LAB_PYTHON,
        platforms=[LAB_PLATFORM],
        with_dependencies=False,
    )
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    found = sorted(dest.glob("onnxruntime-*-cp313-cp313-*aarch64*.whl"))
    if result.returncode != 0 or not found:
        pytest.fail(
            "could not download the official aarch64 onnxruntime wheel (pip needs the package index):\n"
            + result.stdout[-2000:]
            + result.stderr[-2000:],
            pytrace=False,
        )
    return found[-1]


def wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


# Pip download, wheel check and one emulated pre-flight: ~1 min on an idle machine.
STOCK_BUILD_TIMEOUT = 1200


@dataclass(frozen=True)
class StockBuild:
    """What ``orch build --target lab --variant stock --json`` made, and the environment it ran in."""

    env: dict[str, str]  # ORCH_HOME / ORCH_ARTIFACTS of the build (orch build list reads the same)
    artifact: Artifact
    manifest: dict[str, Any]  # manifest.json as written, read as plain JSON
    output: dict[str, Any]  # the command's --json document


def build_stock(stock_wheel: Path, root: Path) -> StockBuild:
    """Run the real ``orch build --target lab --variant stock`` for ``stock_wheel``'s release in a
    private ORCH_HOME and artifacts directory under ``root``."""
    for name in ("home", "artifacts", "results"):
        (root / name).mkdir()
    (root / "inventory.yaml").write_text("all: {}\n")
    env = {
        **os.environ,
        "ORCH_HOME": str(root / "home"),
        "ORCH_ARTIFACTS": str(root / "artifacts"),
        "ORCH_RESULTS": str(root / "results"),
        "ORCH_INVENTORY": str(root / "inventory.yaml"),
        "COLUMNS": "200",
    }
    argv = ["build", "--target", "lab", "--variant", "stock", "--ort-version", wheel_version(stock_wheel)]
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", *argv, "--json"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=STOCK_BUILD_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"orch {' '.join(argv)} exited {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
            f"\n--- stderr\n{result.stderr[-4000:]}",
            pytrace=False,
        )
    output = json.loads(result.stdout)
    directory = Path(output["artifact"])
    return StockBuild(
        env=env,
        artifact=Artifact(directory=directory, manifest=read_manifest(directory / "manifest.json")),
        manifest=json.loads((directory / "manifest.json").read_text()),
        output=output,
    )
