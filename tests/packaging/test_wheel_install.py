"""A non-editable install works outside the checkout: the wheel carries toolchains/ and docker/.

The wheel is built from this checkout (no network), installed into a fresh venv with
``--no-deps`` (the dependencies come from the test environment through a path entry, so nothing is
downloaded), and orch is run from an empty directory, as a user of ``pip install .`` or ``pipx``
would run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from orchestrator.paths import PROJECT_ROOT

_LOCAL_STATE = {
    ".git",
    ".venv",
    "build",
    "artifacts",
    "results",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
}


def _not_sources(folder: str, names: list[str]) -> set[str]:
    """What a checkout holds besides its sources: caches anywhere, local state at the top."""
    top = Path(folder) == PROJECT_ROOT
    return {n for n in names if n == "__pycache__" or n.endswith(".egg-info") or (top and n in _LOCAL_STATE)}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ folder of a fresh venv holding orch installed from its wheel."""
    root = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools builds in the source tree, and a build/ left in the checkout
    # would feed stale files into later wheels.
    source = root / "source"
    shutil.copytree(
        PROJECT_ROOT,
        source,
        ignore=_not_sources,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(root / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = (root / "dist").glob("orch-*.whl")
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # orch's dependencies from the test environment, after the venv's own site-packages (which
    # holds the wheel's orchestrator): a plain path entry, so the checkout's editable finder is not loaded.
    Path(site, "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return root / "venv" / "bin"


def _orch(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ORCH_HOME": str(cwd / ".orch-home"), "COLUMNS": "200"}
    env.pop("ORCH_INVENTORY", None)
    return subprocess.run(
        [str(bin_dir / "orch"), *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [
            str(installed / "python"),
            "-c",
            "import json, orchestrator.paths as p; print(json.dumps([p.__file__, str(p.TOOLCHAINS_DIR), str(p.DOCKER_DIR)]))",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    )
    module, toolchains, docker_dir = map(Path, json.loads(where.stdout))
    venv_root = installed.parent
    for path in (module, toolchains, docker_dir):
        assert venv_root in path.parents, f"{path} is not inside the installed venv"
    assert (toolchains / "targets" / "lab.yaml").is_file()
    assert (toolchains / "aarch64-linux-gnu.cmake").is_file()
    assert (docker_dir / "build.Dockerfile").is_file() and (docker_dir / "board.Dockerfile").is_file()
    assert (module.parent / "board_side" / "bench_agent.py").is_file()


def test_orch_runs_from_an_empty_directory(installed: Path, tmp_path: Path) -> None:
    help_text = _orch(installed, tmp_path, "--help")
    assert help_text.returncode == 0, help_text.stderr
    for command in ("build", "deploy", "bench", "lab", "doctor"):
        assert command in help_text.stdout

    plan = _orch(installed, tmp_path, "build", "--target", "lab", "--variant", "tuned", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert "unknown target" not in plan.stderr
    # The plan names the toolchain file it copies into the build container and the tuned flags.
    assert "CMAKE_TOOLCHAIN_FILE=/orch/toolchains/aarch64-linux-gnu.cmake" in plan.stdout + plan.stderr
    assert "-mcpu=cortex-a72" in plan.stdout + plan.stderr

    doctor = _orch(installed, tmp_path, "doctor", "--json")
    assert "Traceback" not in doctor.stderr
    checks = json.loads(doctor.stdout)
    assert checks, "orch doctor printed no checks"
