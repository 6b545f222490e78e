"""The profile-guided loop on two lab boards, at MLAS scope (every CI run).

`orch build --target lab --variant pgo --scope mlas-test --train-on lab1,lab2`: ORT 1.21.0's MLAS
and its test executable compiled with GCC's counters, a shard of those tests run on each lab board
(an emulated Cortex-A72), the counters fetched and added up with the cross GCC's `gcov-tool merge`,
and MLAS compiled again with them. The record says what each board ran, how the counters were
merged, what they covered and how many compiled sources had counters; the optimised executable
passes its tests on the emulated CPU; the stored profile is refused for a build with another flag,
before anything is compiled.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from board_checks import compile_commands, exec_count, mlas_commands, mlas_shard

# In `full` since the cold CI budget (docs/development.md): two MLAS builds, the training on both
# lab boards and a test shard, about 10 minutes on a new machine; CI keeps the loop's plans, profiles
# and refusals (test_pgo_plan.py, test_pgo_profiles.py) and compiles the system route's MLAS scope
# in the instruction-count test (tests/bench/test_count_mlas_lab.py).
pytestmark = [pytest.mark.integration, pytest.mark.full]

MLAS_TIMEOUT = 3600
ARGS = ("build", "--target", "lab", "--variant", "pgo", "--scope", "mlas-test")


@pytest.mark.timeout(2 * MLAS_TIMEOUT + 2400)  # two MLAS builds, the training and a test shard
def test_a_profile_trained_on_two_lab_boards_optimises_mlas_and_is_refused_for_another_build(
    lab, engine, seed_ort_source
) -> None:
    seed_ort_source(lab.home)
    dry = lab.orch(*ARGS, "--train-on", "lab1,lab2", "--dry-run", "--json", check=True)
    steps = json.loads(dry.stdout)["profile_guided"]
    assert "-fprofile-generate=/orch-profile" in steps["instrument"]["compiler_flags"]
    assert steps["train"]["boards"] == ["lab1", "lab2"]
    assert steps["train"]["merge"] == "aarch64-linux-gnu-gcov-tool merge"

    built = lab.orch(*ARGS, "--train-on", "lab1", "--train-on", "lab2", "--json", timeout=2 * MLAS_TIMEOUT)
    assert built.returncode == 0, built.stderr[-3000:]
    document = json.loads(built.stdout)
    profile = document["manifest"]["profile"]
    trainings, coverage, use = profile["trainings"], profile["coverage"], profile["use"]
    assert [training["board"] for training in trainings] == ["lab1", "lab2"]
    for training in trainings:
        assert training["workload"].startswith("onnxruntime_mlas_test shard 2/80")
        assert training["cpu"].startswith("cortex-a72; features: ") and training["runs"] == 1
    assert (
        profile["merged"]["tool"] == "aarch64-linux-gnu-gcov-tool" and profile["merged"]["counter_files"] > 50
    )
    # The counters add up one run on each board, and the training ran part of MLAS, not all of it.
    assert coverage["runs"] == 2 and coverage["counter_files"] > 50
    assert 0 < coverage["functions_run"] < coverage["functions"]
    # GCC found counters for most of what it compiled (the ones it did not, it named).
    assert use["sources_compiled"] > 100 and use["sources_with_counters"] > use["sources_compiled"] // 2
    build_dir = Path(document["build_dir"])
    mlas = mlas_commands(compile_commands(build_dir), suffixes=(".cpp",))
    use_flag = f"-fprofile-use=/orch-profile/{profile['counters_digest'][:16]}"
    assert all(use_flag in c and "-mcpu=cortex-a72" in c for c in mlas)
    print(
        f"pgo at MLAS scope: {document['duration_s']} s; trainings {trainings}; coverage {coverage}; use {use}"
    )

    # The optimised executable passes a shard of its tests on the emulated CPU.
    code, text, passed = mlas_shard(engine, "lab", build_dir / "out", shards=80, shard=0)
    assert code == 0 and passed > 100 and "[  FAILED  ]" not in text, text[-3000:]

    # Nothing of the training is left on either board.
    for board in ("lab1", "lab2"):
        left = lab.orch(
            "exec", "--host", board, "--json", "--", "sh", "-c", "ls orch/pgo 2>/dev/null | wc -l"
        )
        assert exec_count(left, board) == 0

    # The stored profile, for a build with one more CMake define: refused before anything runs.
    for dry_run in (["--dry-run"], []):
        refused = lab.orch(
            *ARGS, "--profile", profile["stored"], "-D", "onnxruntime_BUILD_BENCHMARKS=OFF", *dry_run
        )
        assert refused.returncode == 2, refused.stderr
        assert (
            "was measured on another build: build_args: +onnxruntime_BUILD_BENCHMARKS=OFF" in refused.stderr
        )
