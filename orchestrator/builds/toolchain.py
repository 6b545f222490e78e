"""Which compiler a build uses: the board's own distribution with its cross GCC, or one clang for
any board against that board's sysroot.

* ``gcc-multiarch``: the build container is the board's distribution (same glibc and Python), with
  its aarch64 cross GCC and the board's ``-dev`` packages through multiarch; no sysroot. For the
  Debian boards orch bootstraps offline.
* ``clang-sysroot`` (``--sysroot-from``): one build container, Debian 13 with clang, lld and LLVM's
  binutils, for every board; the board's headers, crt files, glibc, libstdc++ and Python headers
  come from its sysroot, mounted at /sysroot (``toolchains/clang-sysroot.cmake``). Debian's cross
  GCC would search /usr/aarch64-linux-gnu before any sysroot; clang takes everything from it, so
  the result needs only what the board has. CMake is the container's (3.31), whatever the board's
  distribution ships.

Pure: names, files and defines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from orchestrator.builds.container_paths import SCRIPTS, SHIMS, SYSROOT, TOOLCHAINS
from orchestrator.paths import TOOLCHAINS_DIR
from orchestrator.targets import TargetProfile

Toolchain = Literal["gcc-multiarch", "clang-sysroot"]
# The suite of the sysroot route's build container: the one whose clang is shown to honour a sysroot.
CLANG_SUITE = "trixie"
CLANG_CMAKE = "3.31"  # trixie's cmake package
CLANG_PYTHON = "3.13"  # trixie's python3 package

# How a board whose own distribution cannot build a release gets a build: its sysroot.
SYSROOT_WAYS = (
    "build against the board's sysroot instead, with clang in orch's Debian 13 build container (CMake"
    f" {CLANG_CMAKE}, made offline): `orch sysroot pull --host BOARD` (the board needs libc6-dev,"
    " libstdc++-dev and python3-dev), or `orch sysroot add ROOTFS.tar --name NAME` (e.g. NVIDIA's L4T"
    " sample root file system), then `orch build --sysroot-from BOARD|NAME`"
)


def toolchain_for(*, has_sysroot: bool) -> Toolchain:
    return "clang-sysroot" if has_sysroot else "gcc-multiarch"


def toolchain_file(toolchain: Toolchain) -> Path:
    """The CMake toolchain file on the workstation (copied into the container under /orch/toolchains)."""
    name = "clang-sysroot.cmake" if toolchain == "clang-sysroot" else "aarch64-linux-gnu.cmake"
    return TOOLCHAINS_DIR / name


def toolchain_defines(toolchain: Toolchain, profile: TargetProfile) -> list[tuple[str, str]]:
    """The defines that select the toolchain (and, for clang, what the sysroot lacks)."""
    container_file = f"{TOOLCHAINS}/{toolchain_file(toolchain).name}"
    if toolchain == "gcc-multiarch":
        return [("CMAKE_TOOLCHAIN_FILE", container_file), ("ORCH_CROSS_PREFIX", profile.cross_prefix)]
    return [
        ("CMAKE_TOOLCHAIN_FILE", container_file),
        ("ORCH_SYSROOT", SYSROOT),
        # Boost's header-only mp11 from the build image (toolchains/cmake-shims/boost-headers).
        ("mp11_DIR", f"{SHIMS}/boost-headers"),  # find_package(mp11 NAMES Boost) reads mp11_DIR
    ]


# The build image's numpy (Debian 13's numpy 2): its C API headers serve any board's numpy >= 1.x
# (extensions built against numpy 2 load with numpy 1.x, NumPy's own compatibility promise).
HOST_NUMPY_INCLUDE = "/usr/lib/python3/dist-packages/numpy/_core/include"
BOARD_PYTHON = f"{SCRIPTS}/board_python.sh"  # docker/build/board_python.sh


def board_interpreter(profile: TargetProfile) -> str:
    """The board's interpreter inside its sysroot (relative): ``usr/bin/python3.11``."""
    return f"usr/bin/python{profile.os.python}"


def python_defines(toolchain: Toolchain, profile: TargetProfile) -> list[tuple[str, str]]:
    """For a wheel on the sysroot route: FindPython runs the board's own interpreter (under qemu-user,
    docker/build/board_python.sh), so its version, ABI and headers are the board's, and the headers
    come from the sysroot (its pyconfig.h included); numpy's C API headers are the build image's."""
    if toolchain != "clang-sysroot":
        return []
    return [
        ("Python_EXECUTABLE", BOARD_PYTHON),
        ("Python_INCLUDE_DIR", f"{SYSROOT}/usr/include/python{profile.os.python}"),
        ("Python_NumPy_INCLUDE_DIR", HOST_NUMPY_INCLUDE),
    ]


CLANG_BIN = "/tmp/orch-clang-bin"  # toolchains/clang-sysroot.cmake's ORCH_CLANG_BIN


def toolchain_environment(toolchain: Toolchain, profile: TargetProfile) -> dict[str, str]:
    """What the build container's environment adds for the toolchain (the board interpreter's path)."""
    if toolchain != "clang-sysroot":
        return {}
    return {
        "ORCH_SYSROOT": SYSROOT,
        "ORCH_BOARD_PYTHON": board_interpreter(profile),
        # Where the toolchain file links clang under the target's name (run_build.sh makes them again
        # when CMake does not run: the container's /tmp is new each build).
        "ORCH_CLANG_BIN": CLANG_BIN,
    }


def sysroot_libdirs() -> list[str]:
    """Where the board's libraries are in the build container on the sysroot route (for bundling)."""
    return [f"{SYSROOT}/usr/lib/aarch64-linux-gnu", f"{SYSROOT}/lib/aarch64-linux-gnu"]
