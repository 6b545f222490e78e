"""dependencies: platform tags for pip, and a real resolution of the stock wheel for a lab board."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from orchestrator.artifacts.dependencies import parse_saved, pip_platforms, resolve_dependencies


def test_platform_tags_cover_every_older_manylinux() -> None:
    tags = pip_platforms("aarch64", "2.41")
    assert tags[0] == "manylinux_2_41_aarch64" and "manylinux_2_28_aarch64" in tags
    assert tags[-2:] == ["manylinux2014_aarch64", "linux_aarch64"]
    assert "manylinux_2_28_aarch64" not in pip_platforms("aarch64", "2.27")
    assert "manylinux1_x86_64" in pip_platforms("x86_64", "2.35")


def test_pip_output_is_parsed_for_file_names() -> None:
    output = (
        "Saved ./cache/numpy-2.5.5-cp313-cp313-manylinux_2_28_aarch64.whl\n"
        "File was already downloaded /c/pip-26.3-py3-none-any.whl\nSuccessfully downloaded numpy pip\n"
    )
    assert parse_saved(output) == [
        "numpy-2.5.5-cp313-cp313-manylinux_2_28_aarch64.whl",
        "pip-26.3-py3-none-any.whl",
    ]


def test_stock_wheel_dependencies_for_a_lab_board(stock_wheel: Path, tmp_path: Path) -> None:
    sha = hashlib.sha256(stock_wheel.read_bytes()).hexdigest()
    kwargs = {
        "wheel_sha256": sha,
        "arch": "aarch64",
        "glibc": "2.41",
        "python_version": "3.13",
        "cache": tmp_path,
    }
    deps = resolve_dependencies(stock_wheel, **kwargs)
    names = [p.name for p in deps]
    assert any(n.startswith("numpy-") and "cp313" in n and "aarch64" in n for n in names), names
    assert any(n.startswith("pip-") for n in names), names
    assert stock_wheel.name not in names and all(p.is_file() for p in deps)
    # The second resolution is remembered: no pip run, same answer.
    start = time.monotonic()
    assert resolve_dependencies(stock_wheel, **kwargs) == deps
    assert time.monotonic() - start < 0.5
