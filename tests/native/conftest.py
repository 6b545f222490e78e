"""Fixtures of the native runner tests: the runner compiled for this workstation, and a tuned lab
artifact with its cross-built runner.

The workstation build (host ``gcc``, the venv's x86-64 onnxruntime library, the C API header of
Debian's ORT 1.21.0 source tarball) runs the very C source that ships to boards, in milliseconds
instead of the seconds an emulated board takes: the schema, the .npy handling, the outputs and the
version check are tested there. It is built for the workstation's ORT release (a newer one than the
header's: the C API only grows, and ORT_API_VERSION 21 is served by every later release), so the
version check passes exactly when the library is the one it was built for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnxruntime
import pytest

from orchestrator import board_side
from orchestrator.builds.native_runner.execute import header_from_tarball
from orchestrator.builds.native_runner.plan import (
    HEADER_IN_TREE,
    HEADER_NAME,
    RUNNER_NAME,
    SONAME,
    SOURCE_NAME,
)

CACHE = Path(os.environ.get("ORCH_TEST_CACHE") or "/var/tmp/orch-test-cache")
SOURCE = Path(board_side.__file__).resolve().parent / SOURCE_NAME
HOST_LIBRARY = Path(onnxruntime.__file__).parent / "capi" / f"libonnxruntime.so.{onnxruntime.__version__}"


@pytest.fixture(scope="session")
def c_api_header(ort_tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    header = header_from_tarball(ort_tarball)
    assert header is not None, f"{ort_tarball} has no {HEADER_IN_TREE}"
    include = tmp_path_factory.mktemp("c-api") / "include"
    include.mkdir()
    (include / HEADER_NAME).write_bytes(header)
    return include


@dataclass(frozen=True)
class HostRunner:
    """The runner built for the workstation: run it like orch runs it on a board."""

    path: Path
    built_for: str

    def run(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
        done = subprocess.run(
            [str(self.path), *args], capture_output=True, text=True, check=False, timeout=120, env=env
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        assert len(lines) == 1, f"one JSON line expected, got:\n{done.stdout}\n{done.stderr}"
        return done.returncode, json.loads(lines[0])


def compile_host_runner(include: Path, dest: Path, built_for: str) -> HostRunner:
    """The runner compiled with the workstation's gcc, laid out as on a board (lib/ beside it)."""
    if shutil.which("gcc") is None:
        pytest.fail("the native runner tests compile with gcc: apt-get install gcc", pytrace=False)
    assert HOST_LIBRARY.is_file(), f"the workstation's onnxruntime has no {HOST_LIBRARY.name}"
    (dest / "lib").mkdir(parents=True)
    (dest / "lib" / SONAME).symlink_to(HOST_LIBRARY)
    argv = [
        "gcc",
        "-std=c11",
        "-O2",
        "-Wall",
        "-Wextra",
        "-Werror",
        f'-DORCH_ORT_VERSION="{built_for}"',
        f"-I{include}",
        str(SOURCE),
        "-o",
        str(dest / RUNNER_NAME),
        "-ldl",
        "-lm",
        "-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return HostRunner(path=dest / RUNNER_NAME, built_for=built_for)


@pytest.fixture(scope="session")
def host_runner(c_api_header: Path, tmp_path_factory: pytest.TempPathFactory) -> HostRunner:
    return compile_host_runner(c_api_header, tmp_path_factory.mktemp("runner"), onnxruntime.__version__)


@pytest.fixture(scope="session")
def make_host_runner(
    c_api_header: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], HostRunner]:
    """A runner built for another release than the workstation's library (the refusal)."""

    def make(built_for: str) -> HostRunner:
        return compile_host_runner(c_api_header, tmp_path_factory.mktemp("runner-other"), built_for)

    return make
