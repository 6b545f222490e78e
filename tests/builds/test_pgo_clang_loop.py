"""clang's profile-guided loop on the sysroot route, at MLAS scope, for the Jetson Nano's Debian 11
stand-in (glibc 2.31, GCC 10's libstdc++, an emulated Cortex-A57).

`orch build --target jetson-nano --sysroot-from jetson-nano-1 --variant pgo --scope mlas-test
--train-on jetson-nano-1`: ORT 1.21.0's MLAS and its test executable compiled by clang 19 against the
sysroot pulled from the board, with IR instrumentation (plain counter updates: the A57 has no LSE);
a shard of those tests run on the board, each run writing its raw profile; the raw profiles merged
by the build image's llvm-profdata-19; MLAS compiled again with the merged profile. The record
says what the board ran, how the profile was merged, what it covers and how many compiled sources
had profile data; the optimised executable passes a shard of its tests on the board; the stored
profile is refused for a build with another flag, before anything is compiled.

In the full suite for now (two MLAS builds and a training, emulated); its pure steps are
tests/builds/test_pgo_clang_plan.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from board_checks import compile_commands, exec_count, mlas_commands

from tests.conftest import Lab, profile_lab

pytestmark = [pytest.mark.integration, pytest.mark.full]

BUILD_TIMEOUT = 3600
BOARD = "jetson-nano-1"
ARGS = (
    "build", "--target", "jetson-nano", "--sysroot-from", BOARD, "--variant", "pgo", "--scope", "mlas-test",
)  # fmt: skip
SHARDS, SHARD = 80, 1  # the optimised executable's check (the training runs shard 2/80)


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with profile_lab(tmp_path_factory.mktemp("jetson-nano-lab"), "jetson-nano:1") as the_lab:
        yield the_lab


def _run_shard_on_board(lab: Lab, bundle: Path) -> tuple[int, str]:
    """The optimised test executable and its libraries copied onto the board's container, one
    shard run there (as tests/builds/test_sysroot_route.py does)."""
    boards = json.loads(lab.orch("lab", "status", "--json").stdout)["boards"]
    container = next(b["container"] for b in boards if b["name"] == BOARD)
    subprocess.run(["docker", "exec", container, "rm", "-rf", "/tmp/mlas"], check=True)
    subprocess.run(["docker", "cp", f"{bundle}/.", f"{container}:/tmp/mlas"], check=True)
    shard = lab.orch(
        "exec", "--host", BOARD, "--timeout", "1500", "--",
        f"cd /tmp/mlas && GTEST_TOTAL_SHARDS={SHARDS} GTEST_SHARD_INDEX={SHARD} LD_LIBRARY_PATH=/tmp/mlas"
        " ./onnxruntime_mlas_test",
        timeout=1800,
    )  # fmt: skip
    return shard.returncode, shard.stdout + shard.stderr


@pytest.mark.timeout(2 * BUILD_TIMEOUT + 3600)  # two MLAS builds, the training and a test shard
def test_a_clang_profile_trained_on_the_debian_11_stand_in_optimises_mlas_and_is_refused_for_another_build(
    stand_in: Lab, seed_ort_source
) -> None:
    lab = stand_in
    seed_ort_source(lab.home)
    pulled = lab.orch("sysroot", "pull", "--host", BOARD, "--no-compress", "--json", timeout=1800)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr

    dry = lab.orch(*ARGS, "--train-on", BOARD, "--dry-run", "--json", check=True)
    plan = json.loads(dry.stdout)
    steps = plan["profile_guided"]
    assert plan["toolchain"] == "clang-sysroot"
    assert "-fprofile-update=single" in steps["instrument"]["compiler_flags"]
    assert steps["train"]["merge"] == "llvm-profdata-19 merge"

    built = lab.orch(*ARGS, "--train-on", BOARD, "--json", timeout=2 * BUILD_TIMEOUT)
    assert built.returncode == 0, built.stderr[-3000:]
    document = json.loads(built.stdout)
    profile = document["manifest"]["profile"]
    (training,) = profile["trainings"]
    coverage, use, merged = profile["coverage"], profile["use"], profile["merged"]
    assert training["board"] == BOARD and training["workload"].startswith("onnxruntime_mlas_test shard 2/80")
    assert training["cpu"].startswith("cortex-a57; features: ")
    assert merged["tool"] == "llvm-profdata-19" and merged["version"].startswith("Debian LLVM version 19.")
    # One run of the test executable; part of MLAS ran, not all of it.
    assert coverage["runs"] == 1 and coverage["counter_files"] >= 1
    assert 0 < coverage["functions_run"] < coverage["functions"]
    # clang had profile data for the functions of many compiled sources (the others it named).
    assert use["sources_compiled"] > 50 and use["sources_with_counters"] > 0
    assert use["functions_stale"] == 0

    build_dir = Path(document["build_dir"])
    mlas = mlas_commands(compile_commands(build_dir), suffixes=(".cpp",))
    use_flag = f"-fprofile-use=/orch-profile/{profile['counters_digest'][:16]}/merged.profdata"
    assert all(use_flag in c and "--sysroot=/sysroot" in c for c in mlas)
    print(f"clang pgo at MLAS scope: {document['duration_s']} s; {training}; coverage {coverage}; use {use}")

    # The optimised executable passes a shard of its tests on the board it was built for.
    code, text = _run_shard_on_board(lab, build_dir / "out")
    passed = re.search(r"\[  PASSED  \] (\d+) test", text)
    assert code == 0 and passed and int(passed.group(1)) > 100 and "[  FAILED  ]" not in text, text[-3000:]

    # Nothing of the training is left on the board.
    left = lab.orch("exec", "--host", BOARD, "--json", "--", "sh", "-c", "ls orch/pgo 2>/dev/null | wc -l")
    assert exec_count(left, BOARD) == 0

    # The stored profile, for a build with one more CMake define: refused before anything runs.
    for dry_run in (["--dry-run"], []):
        refused = lab.orch(
            *ARGS, "--profile", profile["stored"], "-D", "onnxruntime_BUILD_BENCHMARKS=OFF", *dry_run
        )
        assert refused.returncode == 2, refused.stderr
        assert (
            "was measured on another build: build_args: +onnxruntime_BUILD_BENCHMARKS=OFF" in refused.stderr
        )
