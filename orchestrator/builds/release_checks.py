"""What an ONNX Runtime release needs from the build container's distribution, compared with what
the distribution has, before anything is built.

The build container is the board's distribution (its cross GCC, CMake and Python), so a release
whose minimums that distribution does not meet would fail at configure time, minutes into the
run. The minimums are ORT's own (each names the file it comes from); the distributions' tool
versions are their package versions (``cmake``, ``g++-aarch64-linux-gnu``, ``python3``). Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from orchestrator.builds.build_args import BuildScope
from orchestrator.builds.image_plan import read_packages
from orchestrator.builds.routes import DependencyRoute
from orchestrator.builds.sysroots.contents import Sysroot
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.toolchain import CLANG_CMAKE, CLANG_PYTHON, CLANG_SUITE, SYSROOT_WAYS, Toolchain
from orchestrator.builds.variants import release_tuple
from orchestrator.errors import UsageError
from orchestrator.targets import TargetProfile

Tool = Literal["CMake", "Python", "GCC"]


@dataclass(frozen=True, kw_only=True)
class Minimum:
    """A tool version a release needs, from which release on, and where ORT says so."""

    tool: Tool
    version: tuple[int, ...]
    since: tuple[int, ...]  # the first release the minimum is known for (later ones keep it)
    source: str
    scopes: tuple[BuildScope, ...] = ("wheel", "library", "mlas-test")


MINIMUMS = (
    Minimum(
        tool="CMake",
        version=(3, 28),
        since=(1, 21),
        source="cmake_minimum_required(VERSION 3.28) in ORT 1.21.0's cmake/CMakeLists.txt",
    ),
    Minimum(
        tool="Python",
        version=(3, 10),
        since=(1, 21),
        source="find_package(Python 3.10 ...) for the shared library and the wheel in ORT 1.21.0's"
        " cmake/CMakeLists.txt",
        # The MLAS test scope builds neither the shared library nor the Python module.
        scopes=("wheel", "library"),
    ),
    Minimum(
        tool="GCC",
        version=(11,),
        since=(1, 22),
        # Not read from a 1.22 tree here: the requirement the jetson-nano profile records.
        source="GCC >= 11 for ORT >= 1.22, as toolchains/targets/jetson-nano.yaml records it",
    ),
)
# The first release orch knows minimums for: older ones are planned without this check (and say so).
KNOWN_SINCE = min(minimum.since for minimum in MINIMUMS)

# Against a board's sysroot: ORT's sources use std::filesystem, which libstdc++ carries in
# libstdc++.so itself from GCC 9 on (GLIBCXX_3.4.26; GCC 8 kept it in a separate libstdc++fs, GCC 7
# only as <experimental/filesystem>).
LIBSTDCXX_MINIMUM = (3, 4, 26)
LIBSTDCXX_SOURCE = (
    "ORT's minimum GCC went from 8 to 9 and its link of GCC 8's separate libstdc++fs was removed"
    " (microsoft/onnxruntime PR #20893); std::filesystem is in libstdc++.so from GCC 9 on"
)

# The official wheels for CPython 3.6 end with this release (1.11 dropped Python 3.6).
LAST_CP36_RELEASE = (1, 10, 0)


@dataclass(frozen=True, kw_only=True)
class DistributionTools:
    """CMake and the aarch64 cross GCC a distribution release packages."""

    cmake: str
    gcc: str


# Package versions of each release (Debian and Ubuntu archives; major.minor is what is compared).
DISTRIBUTION_TOOLS = {
    "bionic": DistributionTools(cmake="3.10", gcc="7.5"),
    "focal": DistributionTools(cmake="3.16", gcc="9.4"),
    "jammy": DistributionTools(cmake="3.22", gcc="11.4"),
    "noble": DistributionTools(cmake="3.28", gcc="13.2"),
    "bullseye": DistributionTools(cmake="3.18", gcc="10.2"),
    "bookworm": DistributionTools(cmake="3.25", gcc="12.2"),
    "trixie": DistributionTools(cmake="3.31", gcc="14.2"),
}
# CMake of the suites a package list takes it from (``cmake/<suite>`` in docker/build/packages).
SUITE_CMAKE = {"bookworm-backports": "3.31"}


@dataclass(frozen=True, kw_only=True)
class ReleaseCheck:
    """The comparison the plan shows (``notes``) and what it refuses (``unmet``)."""

    notes: tuple[str, ...]
    unmet: tuple[str, ...]


def version_numbers(text: str) -> tuple[int, ...]:
    """The first three numbers of a tool's version text (``"3.31.6"``, ``"gcc (Debian 14.2.0-19) 14.2.0"``,
    ``"3.4.26"``), for comparing it with a minimum; ORT releases themselves are ``variants.release_tuple``."""
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def build_tools(
    profile: TargetProfile,
    route: DependencyRoute,
    toolchain: Toolchain = "gcc-multiarch",
    scope: BuildScope = "wheel",
) -> dict[Tool, tuple[str, str]]:
    """(version, where it comes from) of each tool in the build container, where orch knows it."""
    codename = profile.os.codename
    where = f"{profile.os.distro} {profile.os.release} ({codename})"
    tools: dict[Tool, tuple[str, str]] = {"Python": (profile.os.python, f"{where}'s python3")}
    if toolchain == "clang-sysroot":
        # The board gives only its Python for a wheel (headers in the sysroot); the C library's build
        # runs ORT's scripts with the container's. CMake and the compiler (clang, not GCC) are the
        # one build container's.
        if scope != "wheel":
            tools["Python"] = (CLANG_PYTHON, f"the sysroot route's build container ({CLANG_SUITE}'s python3)")
        tools["CMake"] = (CLANG_CMAKE, f"the sysroot route's build container ({CLANG_SUITE}'s cmake)")
        return tools
    known = DISTRIBUTION_TOOLS.get(codename)
    if known is not None:
        tools["GCC"] = (known.gcc, f"{where}'s g++-{profile.cross_prefix.rstrip('-')}")
        tools["CMake"] = (known.cmake, f"{where}'s cmake")
    for package in read_packages(codename, route).host:
        name, _, suite = package.partition("/")
        if name == "cmake" and suite in SUITE_CMAKE:
            tools["CMake"] = (SUITE_CMAKE[suite], f"cmake of {suite}")
    return tools


def check_release(
    profile: TargetProfile,
    route: DependencyRoute,
    version: str,
    scope: BuildScope,
    toolchain: Toolchain = "gcc-multiarch",
) -> ReleaseCheck:
    """The release's minimums against the build container's CMake, GCC and the board's Python."""
    release = release_tuple(version)
    if release < KNOWN_SINCE:
        known = ".".join(map(str, KNOWN_SINCE))
        unknown = (
            f"ORT {version}'s CMake, Python and GCC minimums are not known to orch (it knows them"
            f" from {known} on): not checked before the build"
        )
        return ReleaseCheck(
            notes=(unknown,),
            unmet=(),
        )
    tools = build_tools(profile, route, toolchain, scope)
    met: list[str] = []
    unmet: list[str] = []
    for minimum in MINIMUMS:
        if release < minimum.since or scope not in minimum.scopes:
            continue
        wanted = ".".join(map(str, minimum.version))
        have = tools.get(minimum.tool)
        if have is None:
            met.append(f"{minimum.tool} >= {wanted}: {profile.os.codename}'s is not known, not checked")
        elif version_numbers(have[0])[: len(minimum.version)] < minimum.version:
            unmet.append(f"{have[1]} is {have[0]}, below ORT {version}'s minimum {wanted} ({minimum.source})")
        else:
            met.append(f"{minimum.tool} {have[0]} >= {wanted}")
    note = f"ORT {version}'s minimums against the build container: " + "; ".join(met) if met else ""
    return ReleaseCheck(notes=(note,) if note else (), unmet=tuple(unmet))


def refuse_unmet(profile: TargetProfile, version: str, check: ReleaseCheck) -> None:
    """One message with every minimum the target's distribution misses, before anything is built."""
    if not check.unmet:
        return
    board = f"{profile.os.distro} {profile.os.release}"
    python_too_old = version_numbers(profile.os.python) < (3, 10)
    raise UsageError(
        f"ORT {version} cannot be built for {profile.name} ({board}) here: " + "; ".join(check.unmet),
        hint=_unmet_hint(profile, python_too_old),
    )


def _unmet_hint(profile: TargetProfile, python_too_old: bool) -> str:
    if python_too_old:
        return (
            f"ORT's Python package cannot target Python {profile.os.python} in this release; what such a"
            " board can run is ORT's C library with orch's native runner, built against its sysroot:"
            " `orch sysroot pull --host BOARD` (the board needs libc6-dev and libstdc++-dev), then"
            f" `orch build --target {profile.name} --sysroot-from BOARD --scope library` (the board's libstdc++"
            " must be GCC 9's or newer: JetPack 5's is, JetPack 4's GCC 8 one is not)"
        )
    return (
        f"the build container here is {profile.os.distro} {profile.os.release} itself (its own compiler and"
        f" CMake); {SYSROOT_WAYS}"
    )


def check_stock_python(profile: TargetProfile, version: str) -> None:
    """No official wheel of a release after 1.10 exists for Python 3.6: refused before pip runs."""
    if version_numbers(profile.os.python) < (3, 7) and release_tuple(version) > LAST_CP36_RELEASE:
        last = ".".join(map(str, LAST_CP36_RELEASE))
        raise UsageError(
            f"no official ONNX Runtime {version} wheel exists for {profile.name}'s Python {profile.os.python}:"
            f" the cp36 wheels end at {last} (1.11 dropped Python 3.6)",
            hint=f"--ort-version {last} or older for a stock baseline on this board",
        )


def refuse_old_libstdcxx(ref: SysrootRef, version: str) -> None:
    """A sysroot whose C++ library is older than the release's sources need is refused before any
    build: neither the wheel nor the C library could be linked for that board (JetPack 4's Ubuntu
    18.04 has GCC 8's libstdc++, GLIBCXX_3.4.25)."""
    if release_tuple(version) < KNOWN_SINCE:
        return
    library = Sysroot(root=ref.root, name=ref.name).library("libstdc++.so.6")
    newest = library.highest("GLIBCXX_") if library else None
    if newest is None:
        return  # no libstdc++ at all: the sysroot's own check names what is missing
    wanted = "GLIBCXX_" + ".".join(map(str, LIBSTDCXX_MINIMUM))
    if version_numbers(newest.removeprefix("GLIBCXX_")) < LIBSTDCXX_MINIMUM:
        raise UsageError(
            f"ORT {version} cannot be built against sysroot {ref.name!r}: its libstdc++ ends at {newest},"
            f" below the {wanted} ORT {version}'s sources need ({LIBSTDCXX_SOURCE})",
            hint="neither the wheel nor the C library of this release can be linked for that board's C++"
            " library; orch does not bundle a newer libstdc++. An ORT release from before that change is"
            " the way there (orch knows no minimums before 1.21, so it does not check one)",
        )
