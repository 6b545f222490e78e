"""Real cross-compilation on the system route (shared build image and ccache volume; own ORCH_HOME).

1. ORT 1.21.0 from Debian's offline source package, ``tuned`` flags, only MLAS and ORT's own
   ``onnxruntime_mlas_test``; a shard of those tests runs on an emulated Cortex-A72 (the lab
   board OS, ``QEMU_CPU=cortex-a72``) and must pass — including the fp16 code the 1.21 patch fixes.
2. The full ``tuned`` lab wheel end to end: build (flags read back from compile_commands.json),
   wheel check, pre-flight, artifact for deploy; then ``orch deploy`` to a lab board and one
   inference there compared with the workstation's x86 onnxruntime.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from board_checks import (
    aarch64_elf,
    compile_commands,
    deploy_and_match_x86,
    mlas_commands,
    mlas_shard,
    unchanged_rebuild,
)

MLAS_TIMEOUT = 3600
FULL_TIMEOUT = 5400
# 1 of 40 (~460 of the 32,447 cases, ~8 min emulated on a busy 2-core machine): every MLAS kernel family.
SHARDS, SHARD = 40, 0


# CI compiles the system route's MLAS scope in the profile-guided loop (test_pgo_loop.py: two builds
# whose shards run on lab boards) and ORT's own route with these very checks (test_fetch_route.py):
# this third MLAS compile is left to `pytest -m full` for CI's budget on a new machine.
@pytest.mark.full
@pytest.mark.timeout(MLAS_TIMEOUT + 1800)  # the build, then the emulated test shard
def test_mlas_cross_build_and_its_tests_pass_on_an_emulated_cortex_a72(
    tmp_path: Path, build_env: dict[str, str], orch_cli, engine
) -> None:
    build_args = ("build", "--target", "lab", "--variant", "tuned", "--scope", "mlas-test", "--json")
    result = orch_cli(build_env, *build_args, timeout=MLAS_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    build_dir = Path(document["build_dir"])
    # The test executable comes back from the build volume with the board-side libraries it needs.
    bundle = build_dir / "out"
    exe = bundle / "onnxruntime_mlas_test"
    assert exe.is_file()
    aarch64_elf(exe)
    # C and C++ sources get the tuned flags.
    assert all("-mcpu=cortex-a72" in c for c in mlas_commands(compile_commands(build_dir)))
    print(f"MLAS build: {document['duration_s']} s, ccache {document['ccache']}")

    # A shard of ORT's own MLAS tests on an emulated Cortex-A72.
    code, text, passed = mlas_shard(engine, "lab", bundle, shards=SHARDS, shard=SHARD)
    assert code == 0 and passed > 150, text[-3000:]
    assert "[  FAILED  ]" not in text
    print(f"onnxruntime_mlas_test shard {SHARD + 1}/{SHARDS} on cortex-a72: {passed} passed")

    # The same build again compiles nothing (how fast: benchmarks/build_cache.py).
    rebuilt = unchanged_rebuild(orch_cli(build_env, *build_args, timeout=MLAS_TIMEOUT))
    assert exe.is_file()
    print(f"unchanged MLAS rebuild: {rebuilt['duration_s']} s (first: {document['duration_s']} s)")


# The whole wheel is the longest compile of all (529 steps and two LTO links: 40.6 min with its deploy
# on a new machine, 2 cores, one run), more than CI's budget leaves on a new machine: `pytest -m full`. CI
# compiles the same route, flags and sources at MLAS scope (the test above).
@pytest.mark.full
@pytest.mark.timeout(FULL_TIMEOUT + 1800)  # the build, pre-flight, deploy and one inference
def test_full_tuned_lab_wheel_builds_preflights_deploys_and_matches_x86(
    lab, tmp_path: Path, seed_ort_source
) -> None:
    seed_ort_source(lab.home)
    result = lab.orch("build", "--target", "lab", "--variant", "tuned", "--json", timeout=FULL_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    manifest = document["manifest"]
    assert manifest["wheel"].endswith("-cp313-cp313-linux_aarch64.whl")
    assert manifest["preflight"]["ok"] and manifest["preflight"]["qemu_cpu"] == "cortex-a72"
    assert manifest["preflight"]["comparison"]["max_abs_diff"] < 1e-4
    assert manifest["wheel_check"]["ok"] and manifest["wheel_check"]["machines"] == ["aarch64"]
    for key in ("mlas", "session"):
        flags = manifest["compile_commands_readback"][key]["flags"]
        assert flags["-mcpu=cortex-a72"] and flags["-flto"] and flags["-O3"], flags
    assert manifest["patches"][0]["name"] == "0001-mlas-fp16-constants-on-first-use.patch"
    assert manifest["source"]["kind"] == "debian" and len(manifest["source"]["sha256"]) == 64
    assert manifest["compiler"].startswith("aarch64-linux-gnu-g++")
    assert "hits" in manifest["ccache"]
    listing = json.loads(lab.orch("build", "list", "--json", check=True).stdout)
    assert any(a["variant"] == "tuned" and a["preflight"]["ok"] for a in listing)

    # Deploy to a lab board and compare one inference with the x86 stock onnxruntime.
    deploy_and_match_x86(lab, "lab1", "tuned", tmp_path, seed=3)
