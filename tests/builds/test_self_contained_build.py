"""The self-contained route for real, offline: ORT 1.21.0 for a Debian 12 (bookworm) board.

Every dependency ORT compiles in comes from a Debian source package of the release ORT pins
(toolchains/deps/1.21.0.yaml), built with bookworm's own cross compiler in a bookworm build
container with no network. CI builds the MLAS scope (MLAS, ORT's common code with abseil from
source, googletest and ``onnxruntime_mlas_test``) and runs a shard of the tests in an arm64
Debian 12 image on an emulated Cortex-A72: the executable loads with bookworm's glibc 2.36 and
libstdc++. The full self-contained wheel is built in the ``full`` suite (docs/targets.md).

In the ``full`` suite since the sysroot route: CI compiles the same scope, from the same Debian
sources, with clang against a Debian 12 sysroot pulled from a lab board
(``test_sysroot_route.py``); two cold compiles of it do not fit CI's budget.
"""

from __future__ import annotations

import json

import pytest
from board_checks import built_mlas_test, mlas_shard

pytestmark = [pytest.mark.integration, pytest.mark.full]

BUILD_TIMEOUT = 3600
# 1 of 80 shards (~400 of MLAS's 32,447 cases): every kernel family, a few minutes emulated.
SHARDS, SHARD = 80, 1


@pytest.mark.timeout(BUILD_TIMEOUT + 1800)
def test_bookworm_self_contained_mlas_build_runs_on_an_emulated_debian_12_cortex_a72(
    build_env: dict[str, str], orch_cli, engine
) -> None:
    dry = orch_cli(
        build_env, "build", "--target", "rpi4-bookworm", "--scope", "mlas-test", "--dry-run", "--json"
    )
    plan = json.loads(dry.stdout)
    assert plan["dependencies"] == "source" and plan["network"] == "none", dry.stderr
    result = orch_cli(
        build_env,
        "build",
        "--target",
        "rpi4-bookworm",
        "--variant",
        "default",
        "--scope",
        "mlas-test",
        "--json",
        timeout=BUILD_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    # Built against bookworm's glibc: nothing newer than 2.36 is needed.
    build_dir, _ = built_mlas_test(result.stdout, max_glibc=(2, 36))
    # abseil was compiled from the Debian source tree mounted at /deps, not taken from a system package.
    commands = json.loads((build_dir / "orch-report" / "compile_commands.json").read_text())
    assert any(c["file"].startswith("/deps/abseil_cpp/absl/") for c in commands)
    assert not any("/usr/include/absl" in c["command"] for c in commands)

    code, text, passed = mlas_shard(engine, "rpi4-bookworm", build_dir / "out", shards=SHARDS, shard=SHARD)
    assert code == 0 and passed > 100 and "[  FAILED  ]" not in text, text[-3000:]
    print(f"self-contained bookworm MLAS build {document['duration_s']} s; shard: {passed} passed")
