"""The on-board route over real SSH: ``orch build --on-board BOARD`` asks the board for its tools, and
a lab board with a native toolchain (``orch lab up --build-tools``) builds ORT 1.21.0's MLAS and its
test executable itself, under emulation, with its own GCC and CMake and a compiler cache it keeps.

* (CI) A plain lab board lacks the tools: the dry run refuses, naming each missing one with one apt
  line, as the real run does, before anything is sent.
* (full) The builder board: the dry run plans the board's paths; the build sends ORT's tree, the
  dependency sources and the shims, compiles on the board and brings the executable and the report
  back with a manifest; the executable passes a shard of MLAS's tests on the board; the same
  command again sends nothing, does not configure again and compiles nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from board_checks import aarch64_elf

from tests.conftest import Lab, profile_lab

BOARD = "lab-1"
ARGS = ("build", "--target", "lab", "--variant", "default", "--scope", "mlas-test", "--on-board", BOARD)
SHARDS, SHARD = 80, 1
BUILD_TIMEOUT = 3 * 3600  # emulated: CMake's configure and every compile run under qemu


@pytest.mark.integration
def test_a_board_without_build_tools_is_refused_with_what_to_install(lab: Lab) -> None:
    board = lab.boards[0].name
    dry = lab.orch("build", "--target", "lab", "--scope", "mlas-test", "--on-board", board, "--dry-run")
    assert dry.returncode != 0
    said = dry.stdout + dry.stderr
    assert f"{board} cannot build ORT 1.21.0 (mlas-test) on itself" in said
    assert "CMake is missing, ORT 1.21.0 needs >= 3.28" in said
    assert "sudo apt install" in said
    for package in ("cmake", "g++", "ninja-build", "ccache", "libboost-dev"):
        assert package in said
    assert "Traceback" not in said
    # Nothing was sent: the board's work directory holds no inputs.
    inputs = lab.orch(
        "exec", "--host", board, "--", "sh", "-c", "test -e orch/build/inputs && echo sent || echo nothing-sent"
    )  # fmt: skip
    assert "nothing-sent" in inputs.stdout + inputs.stderr, inputs.stdout + inputs.stderr


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with profile_lab(
        tmp_path_factory.mktemp("builder-lab"), "lab:1", extra_args=("--build-tools",)
    ) as the_lab:
        yield the_lab


@pytest.mark.integration
@pytest.mark.full
@pytest.mark.timeout(2 * BUILD_TIMEOUT)
def test_a_lab_board_builds_mlas_itself_keeps_its_cache_and_the_result_passes_its_tests_there(
    builder: Lab, seed_ort_source: Callable[[Path], None]
) -> None:
    lab = builder
    seed_ort_source(lab.home)
    dry = lab.orch(*ARGS, "--dry-run", "--json", check=True)
    plan = json.loads(dry.stdout)
    assert plan["route"] == "on-board" and plan["board"] == BOARD
    root = plan["work_directory"]
    assert root.startswith("/") and root.endswith("/orch/build")
    assert plan["build_argv"][1] == f"{root}/inputs/src-1.21.0/tools/ci_build/build.py"

    built = lab.orch(*ARGS, "--json", timeout=BUILD_TIMEOUT)
    assert built.returncode == 0, built.stderr[-3000:]
    first = json.loads(built.stdout)
    manifest = first["manifest"]
    assert manifest["inputs_sent"] == {"src-1.21.0": True, "deps-1.21.0": True, "shims": True}
    assert manifest["compiler"].startswith(("c++ 14", "g++ 14"))  # trixie's GCC, on the board
    assert manifest["ccache"]["misses"] > 0
    assert manifest["incremental"]["configure"] == "ran"
    executable = Path(first["build_dir"]) / "out" / "onnxruntime_mlas_test"
    aarch64_elf(executable)
    assert (Path(first["build_dir"]) / "build.log").read_text().count("[1/") >= 1
    print(f"\non-board MLAS build: {manifest['build_duration_s']} s, ccache {manifest['ccache']}")

    config_dir = f"{plan['build_directory']}/Release"
    shard = lab.orch(
        "exec", "--host", BOARD, "--timeout", "3000", "--",
        f"cd {config_dir} && GTEST_TOTAL_SHARDS={SHARDS} GTEST_SHARD_INDEX={SHARD} ./onnxruntime_mlas_test",
        timeout=3600,
    )  # fmt: skip
    said = shard.stdout + shard.stderr  # orch exec prints the board's output on stderr
    assert shard.returncode == 0, said[-3000:]
    assert "[  PASSED  ]" in said and "[  FAILED  ]" not in said, said[-3000:]

    again = lab.orch(*ARGS, "--json", timeout=BUILD_TIMEOUT)
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads(again.stdout)["manifest"]
    assert second["inputs_sent"] == {"src-1.21.0": False, "deps-1.21.0": False, "shims": False}
    assert second["incremental"] == {"configure": "reused", "ninja_steps": 0}
    print(f"on-board rebuild with nothing changed: {second['build_duration_s']} s")
