"""A wheel whose extension was compiled against NumPy 1.x headers asks for numpy<2: under NumPy 2
such an extension does not import (the self-contained bookworm wheel, compiled against Debian 12's
NumPy 1.24, failed its pre-flight with the NumPy 2.4.6 pip took for the board)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from orchestrator.paths import DOCKER_DIR


def _pin(root: Path, numpy_version: str, monkeypatch: pytest.MonkeyPatch) -> str:
    spec = importlib.util.spec_from_file_location("package_wheel", DOCKER_DIR / "build" / "package_wheel.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    # The build container's numpy, whose headers the extension was compiled against.
    monkeypatch.setitem(sys.modules, "numpy", types.SimpleNamespace(__version__=numpy_version))
    script.pin_numpy_abi(root)
    return (root / "onnxruntime-1.21.0.dist-info" / "METADATA").read_text()


@pytest.fixture
def unpacked(tmp_path: Path) -> Path:
    info = tmp_path / "onnxruntime-1.21.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Name: onnxruntime\nRequires-Dist: coloredlogs\nRequires-Dist: numpy>=1.21.6\nRequires-Dist: numpyro\n"
        # setuptools' older form, as the bookworm image's writes it, with a marker
        "Requires-Dist: numpy (>=1.21.6) ; python_version < '3.13'\n"
    )
    return tmp_path


def test_a_numpy_1_build_asks_for_numpy_below_2(unpacked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    metadata = _pin(unpacked, "1.24.2", monkeypatch)
    assert "Requires-Dist: numpy<2,>=1.21.6\n" in metadata
    assert "Requires-Dist: numpy<2,>=1.21.6 ; python_version < '3.13'\n" in metadata
    assert "Requires-Dist: numpyro\n" in metadata and "Requires-Dist: coloredlogs\n" in metadata
    # Every requirement is one pip reads.
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist: "):
            Requirement(line.removeprefix("Requires-Dist: "))


def test_a_numpy_2_build_keeps_its_requirement(unpacked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Extensions built against NumPy 2 load under NumPy 1.x too (NumPy's own promise).
    assert "Requires-Dist: numpy>=1.21.6\n" in _pin(unpacked, "2.2.4", monkeypatch)
