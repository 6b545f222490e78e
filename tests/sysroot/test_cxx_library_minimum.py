"""A board whose C++ library is older than ORT's sources need is refused in the plan, before any
build, naming its newest GLIBCXX version and the reason (a sysroot made here of small real ELF files)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sysroot_elves import Elves, make_sysroot

from orchestrator.builds.build_args import BuildScope
from orchestrator.builds.plan import BuildOptions, BuildPlan, make_plan
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.variants import resolve_variant
from orchestrator.errors import UsageError
from orchestrator.targets import BoardOS, resolve_target

BIONIC = BoardOS(distro="ubuntu", release="18.04", codename="bionic", glibc="2.27", python="3.6")
FOCAL = BoardOS(distro="ubuntu", release="20.04", codename="focal", glibc="2.31", python="3.8")


def _sysroot(elves: Elves, root: Path, newest: str, board_os: BoardOS) -> SysrootRef:
    libstdcxx = elves.library("libstdc++.so.6", ("GLIBCXX_3.4", newest))
    libc = elves.library("libc.so.6", ("GLIBC_2.17", f"GLIBC_{board_os.glibc}"))
    make_sysroot(root, {"libstdc++.so.6": libstdcxx, "libc.so.6": libc}, python=None)
    for header in ("usr/include/stdio.h", "usr/include/c++/8/vector"):
        (root / header).parent.mkdir(parents=True, exist_ok=True)
        (root / header).write_text("")
    return SysrootRef(name="nano01", digest="cd" * 32, root=root, board="nano01", os=board_os)


def _plan(ref: SysrootRef, scope: BuildScope = "library") -> BuildPlan:
    profile = replace(resolve_target("jetson-nano"), os=ref.os)
    source = parse_source(None, version=None, suite="trixie")
    return make_plan(
        profile, resolve_variant("default"), BuildOptions(source=source, sysroot=ref, scope=scope)
    )


def test_jetpack_4s_cxx_library_is_refused_before_any_build_with_the_reason(
    elves: Elves, tmp_path: Path
) -> None:
    # Ubuntu 18.04's libstdc++6 is GCC 8's: GLIBCXX_3.4.25, std::filesystem only in libstdc++fs.
    ref = _sysroot(elves, tmp_path / "bionic", "GLIBCXX_3.4.25", BIONIC)
    for scope in ("library", "mlas-test"):
        with pytest.raises(UsageError) as refused:
            _plan(ref, scope)
        message = refused.value.message
        assert "libstdc++ ends at GLIBCXX_3.4.25, below the GLIBCXX_3.4.26" in message
        assert "microsoft/onnxruntime PR #20893" in message and "std::filesystem" in message


def test_jetpack_5s_cxx_library_is_new_enough_for_the_c_library(elves: Elves, tmp_path: Path) -> None:
    # Ubuntu 20.04's libstdc++6 is GCC 10's: GLIBCXX_3.4.28, as the Debian 11 stand-in's.
    plan = _plan(_sysroot(elves, tmp_path / "focal", "GLIBCXX_3.4.28", FOCAL))
    assert plan.scope == "library" and plan.toolchain == "clang-sysroot"
