"""The three dependency routes of a build, the first that applies:

* ``system`` (boards whose distribution carries every ORT dependency at ORT's pinned version,
  Debian 13 for ORT 1.21): CMake's ``FETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS`` with the
  board's arm64 ``-dev`` packages, fully disconnected, plus the small shims of
  ``toolchains/cmake-shims``. No network at all; the fastest (nothing to compile but ORT).
* ``source`` (self-contained, when ``toolchains/deps/<version>.yaml`` exists): every dependency
  compiled from Debian source packages of ORT's pinned releases into the wheel, in a container of
  the board's own distribution (its compiler, glibc and libstdc++), fully disconnected.
* ``fetch``: ORT's own FetchContent downloads (``cmake/deps.txt``), the upstream default; also
  what ``--dependencies fetch`` asks for whatever else would apply.

Each route gives its CMake defines, its build.py arguments, its build image's package list and
the note the plan shows. Pure: reads only orch's own files (toolchains/deps, docker/build/packages).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.builds.container_paths import SHIMS
from orchestrator.builds.sources.dependency_table import DependencyTable, load_table
from orchestrator.builds.toolchain import Toolchain
from orchestrator.paths import DOCKER_DIR, TOOLCHAINS_DIR
from orchestrator.targets import TargetProfile

DependencyRoute = Literal["system", "source", "fetch"]
# --dependencies: ``auto`` takes the first route that applies; ``fetch`` forces ORT's own downloads.
DependencyChoice = Literal["auto", "fetch"]
DEPENDENCY_CHOICES: tuple[DependencyChoice, ...] = ("auto", "fetch")
# Suites whose packages carry ORT's dependencies (for these ORT versions) at the pinned versions.
SYSTEM_DEPS = {("trixie", "1.21.0")}
# The build image's package lists, one per distribution release and route (image_plan reads them).
PACKAGES_DIR = DOCKER_DIR / "build" / "packages"
DEFAULT_PACKAGES = PACKAGES_DIR / "default.txt"


@dataclass(frozen=True, kw_only=True)
class RouteChoice:
    """The route a build takes, with the self-contained route's dependency table."""

    route: DependencyRoute
    table: DependencyTable | None  # only on the source route
    wanted: DependencyChoice = "auto"  # --dependencies


def choose_route(
    profile: TargetProfile,
    version: str,
    toolchain: Toolchain = "gcc-multiarch",
    wanted: DependencyChoice = "auto",
    *,
    gpu: bool = False,
) -> RouteChoice:
    """The first route that applies to the board's distribution, the ORT release and the toolchain
    (``wanted="fetch"``: ORT's own downloads, whatever else applies). On the sysroot route nothing of
    the board's distribution is installed in the build container: its dependencies are compiled from
    source (or fetched), never taken from packages; ``gpu`` adds the CUDA provider's."""
    if wanted == "fetch":
        return RouteChoice(route="fetch", table=None, wanted=wanted)
    if toolchain == "clang-sysroot":
        table = load_table(version, gpu=gpu)
        return RouteChoice(route="source" if table else "fetch", table=table)
    if (profile.os.codename, version) in SYSTEM_DEPS:
        return RouteChoice(route="system", table=None)
    # The self-contained route needs a table for the release and a build image orch knows how to
    # make for the board's distribution (CMake >= 3.28, a cross GCC against the board's glibc).
    if packages_file(profile.os.codename, "source") == DEFAULT_PACKAGES:
        return RouteChoice(route="fetch", table=None)
    table = load_table(version)
    return RouteChoice(route="source" if table else "fetch", table=table)


def packages_file(codename: str, route: DependencyRoute) -> Path:
    """``<codename>.txt`` (system route), ``<codename>-source.txt`` (self-contained), else default.txt."""
    name = {"system": f"{codename}.txt", "source": f"{codename}-source.txt"}.get(route, "default.txt")
    path = PACKAGES_DIR / name
    return path if path.is_file() else DEFAULT_PACKAGES


def image_route(route: DependencyRoute, codename: str) -> DependencyRoute:
    """The route whose package list makes the build image. The fetch route compiles every dependency
    from source as the self-contained route does, so it takes that route's image where the
    distribution has one (bookworm's: CMake from backports, none of the board's -dev packages)."""
    if route == "fetch" and packages_file(codename, "source") != DEFAULT_PACKAGES:
        return "source"
    return route


def route_defines(choice: RouteChoice, scope: str) -> list[tuple[str, str]]:
    """The CMake defines that point ORT's dependency lookups at the route's packages or sources."""
    if choice.route == "system":
        defines = [
            ("FETCHCONTENT_TRY_FIND_PACKAGE_MODE", "ALWAYS"),
            ("FETCHCONTENT_FULLY_DISCONNECTED", "ON"),
            ("CMAKE_PREFIX_PATH", SHIMS),
            ("safeint_SOURCE_DIR", "/usr/include/safeint"),
            # --use_full_protobuf selects the static library; Debian's libonnx needs the shared one.
            ("Protobuf_USE_STATIC_LIBS", "OFF"),
            ("CMAKE_PROJECT_INCLUDE", f"{SHIMS}/eigen-compat.cmake"),
        ]
        if scope == "mlas-test":
            defines.append(("onnx_SOURCE_DIR", "/opt/orch/onnx-proto"))  # made by build.Dockerfile
        return defines
    if choice.table is not None:
        return source_route_defines(choice.table)
    return []


def source_route_defines(table: DependencyTable) -> list[tuple[str, str]]:
    """FetchContent pointed at the unpacked dependency sources (mounted at /deps), nothing downloaded;
    find_package is still tried first so header-only packages of the image (Boost's mp11) are used."""
    return [
        ("FETCHCONTENT_TRY_FIND_PACKAGE_MODE", "ALWAYS"),
        ("FETCHCONTENT_FULLY_DISCONNECTED", "ON"),
        *table.defines(),
        # Debian's Eigen 3.4.0 source is older than the commit ORT pins: the same compat header as the system route.
        ("CMAKE_PROJECT_INCLUDE", f"{SHIMS}/eigen-compat.cmake"),
    ]


def route_build_args(choice: RouteChoice) -> list[str]:
    """build.py arguments a route needs."""
    if choice.route == "system":
        # Debian's libonnx links the full protobuf; the lite one would give duplicate symbols.
        return ["--use_full_protobuf"]
    return []


def route_notes(
    choice: RouteChoice, profile: TargetProfile, version: str, toolchain: Toolchain = "gcc-multiarch"
) -> list[str]:
    """What the plan says about where the dependencies come from (nothing for the system route)."""
    if choice.table is not None:
        table = choice.table.path.relative_to(TOOLCHAINS_DIR.parent)
        if toolchain == "clang-sysroot":
            notes = [
                (
                    f"self-contained: each of ORT {version}'s dependencies is compiled from a Debian source"
                    f" package of the release ORT pins ({table}) into the wheel, with clang against the"
                    f" sysroot's glibc and libstdc++; no network"
                )
            ]
            if choice.table.gpu_path is not None:
                gpu_table = choice.table.gpu_path.relative_to(TOOLCHAINS_DIR.parent)
                notes.append(
                    "the CUDA provider's header-only dependencies (CUTLASS, the cuDNN frontend) at the releases"
                    f" ORT pins, from NVIDIA's wheels through pip ({gpu_table})"
                )
            return notes
        return [
            (
                f"self-contained: {profile.os.distro} {profile.os.codename} does not carry ORT {version}'s"
                f" dependencies at its pinned versions, so each is compiled from a Debian source package of"
                f" that release ({table}) into the wheel, with"
                f" {profile.os.codename}'s own compiler, glibc and libstdc++; no network"
            )
        ]
    if choice.route == "fetch":
        why = (
            "as --dependencies fetch asks"
            if choice.wanted == "fetch"
            else f"{profile.os.distro} {profile.os.codename} does not carry them at ORT {version}'s versions"
        )
        return [
            (
                f"dependencies come from ORT's FetchContent downloads (cmake/deps.txt), each checked against"
                f" its SHA1 there and compiled with the build container's compiler: {why}; offline, put the"
                " archives listed in cmake/deps.txt under <source>/mirror/ (ORT's local mirror folder)"
            )
        ]
    return []
