"""The sysroot route's plan (pure): which toolchain, image, defines and refusals a `--sysroot-from`
build gets, from a sysroot tree made here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.builds.build_args import BuildScope
from orchestrator.builds.plan import BuildOptions, BuildPlan, make_plan
from orchestrator.builds.run import plan_document
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.variants import resolve_variant
from orchestrator.errors import UsageError
from orchestrator.targets import BoardOS, resolve_target

BOOKWORM = BoardOS(distro="debian", release="12", codename="bookworm", glibc="2.36", python="3.11")
COMPLETE = (
    "usr/include/stdio.h",
    "usr/include/c++/12/vector",
    "usr/include/python3.11/Python.h",
    "usr/bin/python3.11",
    "usr/lib/python3.11/os.py",
)


def _sysroot(root: Path, files: tuple[str, ...] = COMPLETE) -> SysrootRef:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    return SysrootRef(name="orin01", digest="ab" * 32, root=root, board="orin01", os=BOOKWORM)


def _plan(ref: SysrootRef, scope: BuildScope = "wheel", target: str = "jetson-orin") -> BuildPlan:
    profile = replace(resolve_target(target), os=ref.os, bootstrap_suite=ref.os.codename)
    source = parse_source(None, version=None, suite="trixie")
    return make_plan(
        profile, resolve_variant("default"), BuildOptions(source=source, sysroot=ref, scope=scope)
    )


def test_a_sysroot_selects_clang_in_the_one_build_container_and_the_boards_python(tmp_path: Path) -> None:
    plan = _plan(_sysroot(tmp_path))
    assert plan.toolchain == "clang-sysroot" and plan.toolchain_file.name == "clang-sysroot.cmake"
    assert plan.image.tag.startswith("orch/build-clang-sysroot:") and plan.image.base_suite == "trixie"
    defines = dict(plan.defines)
    assert defines["CMAKE_TOOLCHAIN_FILE"] == "/orch/toolchains/clang-sysroot.cmake"
    assert "ORCH_CROSS_PREFIX" not in defines  # no cross GCC on this route
    # FindPython runs the board's interpreter; its headers are the sysroot's.
    assert defines["Python_EXECUTABLE"] == "/opt/orch/board_python.sh"
    assert defines["Python_INCLUDE_DIR"] == "/sysroot/usr/include/python3.11"
    # Nothing of the board's distribution is installed in the container: dependencies from source.
    assert plan.dependencies == "source" and plan.network == "none"
    assert "--compile_no_warning_as_error" in plan.build_args
    # The wheel is retagged for the board's CPython and bundled from the sysroot's libraries.
    assert "--python-tag=cp311" in plan.package_argv
    assert "--libdir=/sysroot/usr/lib/aarch64-linux-gnu" in plan.package_argv
    # Jammy's CMake no longer limits the release: the container's 3.31 is compared.
    assert any("CMake 3.31 >= 3.28" in note for note in plan.notes)


def test_the_same_board_without_a_sysroot_keeps_the_distributions_own_toolchain() -> None:
    plan = make_plan(
        resolve_target("rpi4-bookworm"),
        resolve_variant("default"),
        BuildOptions(source=parse_source(None, version=None, suite="bookworm")),
    )
    assert plan.toolchain == "gcc-multiarch" and plan.image.tag.startswith("orch/build-bookworm-source:")
    assert dict(plan.defines)["CMAKE_TOOLCHAIN_FILE"] == "/orch/toolchains/aarch64-linux-gnu.cmake"
    assert "Python_EXECUTABLE" not in dict(plan.defines)


def test_the_mlas_scope_needs_no_python_from_the_sysroot(tmp_path: Path) -> None:
    plan = _plan(_sysroot(tmp_path, COMPLETE[:2]), scope="mlas-test")
    assert "Python_EXECUTABLE" not in dict(plan.defines)
    assert "/sysroot/usr/lib/aarch64-linux-gnu" in plan.package_argv


def test_a_sysroot_without_development_files_is_refused_naming_them_and_the_apt_line(tmp_path: Path) -> None:
    ref = _sysroot(tmp_path, ("usr/include/python3.11/Python.h",))
    with pytest.raises(UsageError) as refused:
        _plan(ref)
    message, hint = refused.value.message, refused.value.hint or ""
    assert "glibc's headers" in message and "libstdc++'s headers" in message
    assert "the python3.11 interpreter" in message and "Python 3.11's headers" not in message
    assert "sudo apt install libc6-dev g++ python3.11" in hint and "board orin01" in hint


BULLSEYE = BoardOS(distro="debian", release="11", codename="bullseye", glibc="2.31", python="3.9")
BULLSEYE_FILES = ("usr/include/stdio.h", "usr/include/c++/10/vector")


def _bullseye(root: Path) -> SysrootRef:
    return replace(_sysroot(root, BULLSEYE_FILES), name="nano01", board="nano01", os=BULLSEYE)


def test_a_board_whose_python_the_release_cannot_target_is_told_to_build_the_c_library(
    tmp_path: Path,
) -> None:
    with pytest.raises(UsageError) as refused:
        _plan(_bullseye(tmp_path), target="jetson-nano")
    assert "python3 is 3.9, below ORT 1.21.0's minimum 3.10" in refused.value.message
    assert "--sysroot-from BOARD --scope library" in (refused.value.hint or "")


def test_the_c_library_scope_builds_the_shared_library_alone_against_the_sysroot(tmp_path: Path) -> None:
    plan = _plan(_bullseye(tmp_path), scope="library", target="jetson-nano")
    assert plan.toolchain == "clang-sysroot" and plan.target.qemu_cpu == "cortex-a57"
    # The shared library's target only: no Python module, no wheel, no tests.
    assert "--build_wheel" not in plan.build_args and "--build_shared_lib" in plan.build_args
    target = plan.build_args.index("--target")
    assert plan.build_args[target + 1] == "onnxruntime"
    defines = dict(plan.defines)
    assert "Python_EXECUTABLE" not in defines and defines["onnxruntime_BUILD_UNIT_TESTS"] == "OFF"
    # Packaged as the library, its SONAME link and what it needs from the sysroot's libraries.
    assert plan.package_argv[2:5] == ["--library", "/build/Release/libonnxruntime.so.1.21.0", "/out"]
    assert "/sysroot/usr/lib/aarch64-linux-gnu" in plan.package_argv
    # ORT's scripts run with the build container's Python; CMake is the container's too.
    assert any("Python 3.13 >= 3.10" in note and "CMake 3.31 >= 3.28" in note for note in plan.notes)
    # The runner beside it: clang against the same sysroot, loading the library of out/lib.
    runner = plan_document(plan, force_flags=False)["native_runner"]
    assert runner["argv"][:3] == ["clang", "--target=aarch64-linux-gnu", "--sysroot=/sysroot"]
    assert runner["library"].startswith("lib/libonnxruntime.so.1.21.0 of the build's out/")


def test_gccs_inline_limit_is_not_passed_to_clang_and_the_plan_says_so(tmp_path: Path) -> None:
    ref = _sysroot(tmp_path)
    profile = replace(resolve_target("jetson-orin"), os=ref.os, bootstrap_suite=ref.os.codename)
    source = parse_source(None, version=None, suite="trixie")
    plan = make_plan(profile, resolve_variant("tuned"), BuildOptions(source=source, sysroot=ref))
    # clang 19 accepts -finline-limit and ignores it: the record must not claim a limit it never had.
    assert not any(flag.startswith("-finline-limit") for flag in plan.compiler_flags)
    assert "-finline-limit" not in dict(plan.defines)["CMAKE_CXX_FLAGS"]
    assert "-mcpu=cortex-a78ae+nofp16" in plan.compiler_flags and "--enable_lto" in plan.build_args
    assert any(note.startswith("-finline-limit=600 is GCC's; clang ignores it") for note in plan.notes)
