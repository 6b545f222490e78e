"""Each target's distribution (its CMake, cross GCC and Python) against the release's minimums,
in the plan, before anything is built: through the real CLI and the plan's own check."""

from __future__ import annotations

import json

import pytest

from orchestrator.builds.release_checks import check_release
from orchestrator.builds.routes import choose_route
from orchestrator.targets import known_target_names, resolve_target


def test_jetson_nano_is_refused_before_any_build_with_the_reason_and_its_source(
    orch_env: dict[str, str], orch_cli
) -> None:
    # Before: planned ORT 1.21.0 for Python 3.6 and exited 0.
    for args in (("--dry-run",), ("--dry-run", "--json"), ()):
        result = orch_cli(orch_env, "build", "--target", "jetson-nano", *args, timeout=120)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        for text in (
            "ORT 1.21.0 cannot be built for jetson-nano (ubuntu 18.04)",
            "python3 is 3.6, below ORT 1.21.0's minimum 3.10",
            "find_package(Python 3.10",
            "cmake is 3.10, below ORT 1.21.0's minimum 3.28",
            "cmake_minimum_required(VERSION 3.28) in ORT 1.21.0's cmake/CMakeLists.txt",
            "ORT's C library with orch's native runner, built against its sysroot",
            "orch build --target jetson-nano --sysroot-from BOARD --scope library",
        ):
            assert text in result.stderr, text


def test_jetson_nano_stock_wheel_is_refused_before_pip(orch_env: dict[str, str], orch_cli) -> None:
    result = orch_cli(orch_env, "build", "--target", "nano", "--variant", "stock", "--dry-run")
    assert result.returncode == 2
    assert "no official ONNX Runtime 1.21.0 wheel exists for jetson-nano's Python 3.6" in result.stderr
    assert "cp36 wheels end at 1.10.0" in result.stderr


def test_jetson_orin_is_refused_for_jammys_cmake(orch_env: dict[str, str], orch_cli) -> None:
    result = orch_cli(orch_env, "build", "--target", "jetson", "--dry-run")
    assert result.returncode == 2
    assert "ubuntu 22.04 (jammy)'s cmake is 3.22, below ORT 1.21.0's minimum 3.28" in result.stderr
    assert "python3" not in result.stderr.split("hint:")[0]  # Python 3.10 meets the minimum


@pytest.mark.parametrize("target", known_target_names())
def test_every_targets_plan_compares_its_distribution_with_the_release(target: str) -> None:
    profile = resolve_target(target)
    check = check_release(profile, choose_route(profile, "1.21.0").route, "1.21.0", "wheel")
    said = " ".join(check.notes + check.unmet)
    assert "CMake" in said or "cmake" in said
    assert "Python" in said or "python3" in said
    assert bool(check.unmet) == (not profile.bootstrap_suite)


def test_the_plan_shows_the_comparison(orch_env: dict[str, str], orch_cli) -> None:
    for target, cmake, python in (("lab", "3.31", "3.13"), ("rpi4-bookworm", "3.31", "3.11")):
        result = orch_cli(orch_env, "build", "--target", target, "--dry-run", "--json", check=True)
        notes = json.loads(result.stdout)["notes"]
        assert (
            f"ORT 1.21.0's minimums against the build container: CMake {cmake} >= 3.28; Python {python} >= 3.10"
            in notes
        )


def test_bookworm_without_backports_cmake_and_gcc_of_old_releases_are_refused() -> None:
    # Bookworm's own CMake is 3.25 (only the self-contained image adds backports' 3.31): the check itself refuses it.
    bookworm = check_release(resolve_target("rpi4-bookworm"), "fetch", "1.22.0", "wheel")
    assert any("cmake is 3.25, below ORT 1.22.0's minimum 3.28" in problem for problem in bookworm.unmet)
    nano = check_release(resolve_target("jetson-nano"), "fetch", "1.22.0", "mlas-test")
    assert any("g++-aarch64-linux-gnu is 7.5, below ORT 1.22.0's minimum 11" in p for p in nano.unmet)
    assert not any("python3" in p for p in nano.unmet)  # the MLAS test builds no Python module
    older = check_release(resolve_target("jetson-nano"), "fetch", "1.20.0", "wheel")
    assert not older.unmet and "not known to orch" in older.notes[0]
