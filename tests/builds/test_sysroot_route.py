"""The sysroot route for real, offline: `orch build --target jetson --sysroot-from <board>`.

The Jetson Orin's lab stand-in is a Debian 12 board (glibc 2.36, libstdc++ of GCC 12 as on JetPack
6, Python 3.11) emulating a Cortex-A76 (dot product), with its development files. orch pulls its
sysroot over SSH, then builds ORT 1.21.0's MLAS scope (MLAS, ORT's common code with abseil from
source, googletest and ``onnxruntime_mlas_test``) with clang against that sysroot, in the one clang
build container (Debian 13, CMake 3.31), every dependency from a Debian source package, no network.
The executable then runs a shard of MLAS's tests on the board it was built for.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from board_checks import built_mlas_test

from orchestrator.builds.sysroots.contents import Sysroot
from tests.conftest import Lab, profile_lab

pytestmark = pytest.mark.integration

BUILD_TIMEOUT = 3600
BOARD = "jetson-orin-1"
# 1 of 80 shards (~400 of MLAS's 32,447 cases): every kernel family, a few minutes emulated.
SHARDS, SHARD = 80, 1


@pytest.fixture(scope="module")
def orin_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with profile_lab(tmp_path_factory.mktemp("orin-lab"), "jetson-orin:1") as the_lab:
        yield the_lab


def _run_on_board(lab: Lab, board: str, bundle: Path) -> tuple[int, str]:
    """Copy the test executable and its libraries onto the board's container and run one shard there."""
    boards = json.loads(lab.orch("lab", "status", "--json").stdout)["boards"]
    name = next(b["container"] for b in boards if b["name"] == board)
    subprocess.run(["docker", "exec", name, "rm", "-rf", "/tmp/mlas"], check=True)
    subprocess.run(["docker", "cp", f"{bundle}/.", f"{name}:/tmp/mlas"], check=True)
    shard = lab.orch(
        "exec",
        "--host",
        board,
        "--timeout",
        "1500",
        "--",
        f"cd /tmp/mlas && GTEST_TOTAL_SHARDS={SHARDS} GTEST_SHARD_INDEX={SHARD} LD_LIBRARY_PATH=/tmp/mlas"
        " ./onnxruntime_mlas_test",
        timeout=1800,
    )
    return shard.returncode, shard.stdout + shard.stderr


def _dumpmachine(image: str, scratch: Path) -> str:
    """What the toolchain file's C compiler prints for -dumpmachine, in the build image, as ORT's
    cmake/onnxruntime_common.cmake runs it."""
    (scratch / "probe.cmake").write_text(
        "include(/toolchains/clang-sysroot.cmake)\n"
        "execute_process(COMMAND ${CMAKE_C_COMPILER} -dumpmachine OUTPUT_VARIABLE machine)\n"
        'message("${machine}")\n'
    )
    toolchains = Path(__file__).resolve().parents[2] / "toolchains"
    volumes = ["-v", f"{toolchains}:/toolchains:ro", "-v", f"{scratch}:/probe:ro"]
    probe = [
        "docker",
        "run",
        "--rm",
        "--network",
        "none",
        *volumes,
        image,
        "cmake",
        "-P",
        "/probe/probe.cmake",
    ]
    return subprocess.run(probe, capture_output=True, text=True, check=True).stderr.strip()


@pytest.mark.timeout(BUILD_TIMEOUT + 2400)
def test_a_jetson_build_against_the_sysroot_pulled_from_its_stand_in_runs_there(
    orin_lab: Lab, seed_ort_source, tmp_path: Path
) -> None:
    seed_ort_source(orin_lab.home)
    pulled = orin_lab.orch("sysroot", "pull", "--host", BOARD, "--no-compress", "--json", timeout=1800)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    record = json.loads(pulled.stdout)[BOARD]["record"]
    assert record["missing_dev_packages"] == [], record  # the stand-in carries its development files

    args = ("--target", "jetson", "--sysroot-from", BOARD, "--variant", "default", "--scope", "mlas-test")
    dry = orin_lab.orch("build", *args, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["toolchain"] == "clang-sysroot" and plan["dependencies"] == "source"
    assert plan["network"] == "none" and plan["image"]["tag"].startswith("orch/build-clang-sysroot:")

    result = orin_lab.orch("build", *args, "--json", timeout=BUILD_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    # Linked against the sysroot's glibc 2.36 and GCC 12's libstdc++, not the build container's
    # (Debian 13: glibc 2.41, GCC 14's GLIBCXX_3.4.33).
    build_dir, exe = built_mlas_test(result.stdout, max_glibc=(2, 36))
    sysroot = Sysroot(Path(json.loads(pulled.stdout)[BOARD]["path"]) / "root")
    libstdcxx = sysroot.library("libstdc++.so.6")
    assert libstdcxx is not None and libstdcxx.highest("GLIBCXX_") == "GLIBCXX_3.4.30"
    needed = re.findall(rb"GLIBCXX_3\.4\.(\d+)", exe)
    assert needed and max(int(n) for n in needed) <= 30
    # Every compile was clang's, for aarch64, against the sysroot; abseil came from the Debian source.
    commands = json.loads((build_dir / "orch-report" / "compile_commands.json").read_text())
    assert all("clang" in c["command"] and "--sysroot=/sysroot" in c["command"] for c in commands)
    assert any(c["file"].startswith("/deps/abseil_cpp/absl/") for c in commands)

    # ORT tells the CPU of its common library (and so whether cpuinfo is linked into libonnxruntime)
    # from `${CMAKE_C_COMPILER} -dumpmachine` alone: the toolchain file's compiler names the board's.
    assert _dumpmachine(plan["image"]["tag"], tmp_path).startswith("aarch64-"), (
        "ORT would take it for another CPU"
    )

    code, text = _run_on_board(orin_lab, BOARD, build_dir / "out")
    passed = re.search(r"\[  PASSED  \] (\d+) test", text)
    assert code == 0 and passed and int(passed.group(1)) > 100 and "[  FAILED  ]" not in text, text[-3000:]
    print(f"sysroot-route MLAS build {document['duration_s']} s; shard on {BOARD}: {passed.group(1)} passed")
