"""What a board must have to build ONNX Runtime on itself, checked against what it has.

``board_side/build_facts.sh`` prints the board's tools; ``read_facts`` parses them and
``unmet_requirements`` lists, in one go, everything missing for the release, scope and execution
provider: the release's own minimums (``release_checks.MINIMUMS``: CMake, GCC, Python) and the tools
the build runs (ninja, ccache, Python's headers for a wheel, nvcc and cuDNN for CUDA), each with
what installs it. ``refuse_unmet`` turns them into one message with the install lines. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.builds.build_args import BuildScope
from orchestrator.builds.release_checks import MINIMUMS, Tool, version_numbers
from orchestrator.builds.variants import release_tuple
from orchestrator.errors import BuildError

GIB = 1 << 20  # in KiB, the unit of the board's facts
# The build tree of each scope on an arm64 board (measured on the lab's boards: MLAS and its tests
# about 1 GiB, a whole wheel with the compiler cache about 10 GiB), with room to spare.
FREE_SPACE_KIB: dict[BuildScope, int] = {"mlas-test": 3 * GIB, "library": 12 * GIB, "wheel": 15 * GIB}
# JetPack's CMake (Ubuntu's 3.22 on JetPack 6) is older than ORT's minimum: Kitware's wheel is the
# usual way there, for the login user only.
CMAKE_INSTALL = "python3 -m pip install --user 'cmake>={version}'"


@dataclass(frozen=True, kw_only=True)
class BoardBuildFacts:
    """What ``build_facts.sh`` found on a board; an empty string is a tool the board lacks."""

    machine: str
    cores: int
    memory_kib: int
    free_kib: int
    cmake: str
    ninja: str
    ccache: str
    gcc: str
    cxx: str
    python: str
    python_headers: bool
    numpy: str
    setuptools: str
    packaging: str
    boost_mp11: bool
    nvcc: str
    cudnn: str


@dataclass(frozen=True, kw_only=True)
class Unmet:
    """One thing the board lacks, why the build needs it, and how it is installed."""

    what: str
    apt: str | None = None  # a Debian/Ubuntu package that provides it
    other: str | None = None  # another way (a command line) where apt's is too old


def read_facts(text: str) -> BoardBuildFacts:
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def number(key: str) -> int:
        value = values.get(key, "").strip()
        return int(value) if value.isdigit() else 0

    def text_of(key: str) -> str:
        return values.get(key, "").strip()

    return BoardBuildFacts(
        machine=text_of("machine"),
        cores=number("cores"),
        memory_kib=number("memory_kb"),
        free_kib=number("free_kb"),
        cmake=text_of("cmake"),
        ninja=text_of("ninja"),
        ccache=text_of("ccache"),
        gcc=text_of("gcc"),
        cxx=text_of("cxx"),
        python=text_of("python"),
        python_headers=text_of("python_headers") == "True",
        numpy=text_of("numpy"),
        setuptools=text_of("setuptools"),
        packaging=text_of("packaging"),
        boost_mp11=text_of("boost_mp11") == "True",
        nvcc=text_of("nvcc"),
        cudnn=text_of("cudnn"),
    )


def _tool_version(facts: BoardBuildFacts, tool: Tool) -> str:
    return {"CMake": facts.cmake, "GCC": facts.gcc, "Python": facts.python}[tool]


_TOOL_INSTALL: dict[Tool, tuple[str | None, str | None]] = {
    "CMake": ("cmake", CMAKE_INSTALL),
    "GCC": ("g++", None),
    "Python": (None, None),
}


def _release_minimums(facts: BoardBuildFacts, version: str, scope: BuildScope) -> list[Unmet]:
    release = release_tuple(version)
    unmet = []
    for minimum in MINIMUMS:
        if release < minimum.since or scope not in minimum.scopes:
            continue
        wanted = ".".join(map(str, minimum.version))
        have = _tool_version(facts, minimum.tool)
        if have and version_numbers(have)[: len(minimum.version)] >= minimum.version:
            continue
        apt, other = _TOOL_INSTALL[minimum.tool]
        state = f"is {have}" if have else "is missing"
        unmet.append(
            Unmet(
                what=f"{minimum.tool} {state}, ORT {version} needs >= {wanted} ({minimum.source})",
                apt=apt if not have else None,
                other=other.format(version=wanted) if other else None,
            )
        )
    return unmet


def unmet_requirements(
    facts: BoardBuildFacts, *, version: str, scope: BuildScope, provider: str
) -> list[Unmet]:
    """Everything the board lacks for this build (empty: it can build)."""
    unmet = []
    if facts.machine not in ("aarch64", "arm64"):
        unmet.append(Unmet(what=f"the board is {facts.machine or 'of an unknown machine'}, not aarch64"))
    unmet += _release_minimums(facts, version, scope)
    unmet += _build_tools(facts)
    if scope == "wheel":
        unmet += _wheel_tools(facts)
    if provider in ("cuda", "tensorrt"):
        unmet += _cuda_tools(facts)
    wanted_free = FREE_SPACE_KIB[scope]
    if facts.free_kib < wanted_free:
        unmet.append(
            Unmet(
                what=f"{facts.free_kib / GIB:.1f} GiB free in the work directory, the {scope} build"
                f" needs about {wanted_free // GIB} GiB"
            )
        )
    return unmet


def _build_tools(facts: BoardBuildFacts) -> list[Unmet]:
    needs = [
        (facts.gcc, Unmet(what="no C++ compiler (c++)", apt="g++")),
        (facts.ninja, Unmet(what="no ninja (orch builds with CMake's Ninja generator)", apt="ninja-build")),
        (
            facts.ccache,
            Unmet(what="no ccache (the board's compiler cache, kept between builds)", apt="ccache"),
        ),
        (
            facts.boost_mp11,
            Unmet(
                what="no Boost headers (boost/mp11.hpp, which ORT finds on the system)", apt="libboost-dev"
            ),
        ),
        (
            facts.packaging,
            Unmet(what="no Python packaging module (build.py imports it)", apt="python3-packaging"),
        ),
    ]
    return [unmet for have, unmet in needs if not have]


def _wheel_tools(facts: BoardBuildFacts) -> list[Unmet]:
    needs = [
        (
            facts.python_headers,
            Unmet(what="no Python headers (Python.h) for the wheel's extension", apt="python3-dev"),
        ),
        (facts.numpy, Unmet(what="no numpy (ORT's Python module compiles against it)", apt="python3-numpy")),
        (
            facts.setuptools,
            Unmet(
                what="no setuptools/wheel (build.py packages the wheel with them)",
                apt="python3-setuptools python3-wheel",
            ),
        ),
    ]
    return [unmet for have, unmet in needs if not have]


def _cuda_tools(facts: BoardBuildFacts) -> list[Unmet]:
    # JetPack's meta-package installs the toolkit and cuDNN with their headers.
    needs = [
        (facts.nvcc, Unmet(what="no CUDA toolkit (/usr/local/cuda/bin/nvcc)", apt="nvidia-jetpack")),
        (facts.cudnn, Unmet(what="no cuDNN headers (cudnn_version.h)", apt="nvidia-jetpack")),
    ]
    return [unmet for have, unmet in needs if not have]


def install_hint(unmet: list[Unmet]) -> str:
    """The lines that install what is missing, on the board."""
    packages = sorted({package for item in unmet if item.apt for package in item.apt.split()})
    lines = [f"sudo apt install {' '.join(packages)}"] if packages else []
    lines += sorted({item.other for item in unmet if item.other})
    return "on the board: " + "; ".join(lines) if lines else "free space in the board's work directory"


def refuse_unmet(board: str, unmet: list[Unmet], *, version: str, scope: BuildScope) -> None:
    """One message with everything the board lacks, before anything is sent to it."""
    if not unmet:
        return
    raise BuildError(
        f"{board} cannot build ORT {version} ({scope}) on itself:\n  "
        + "\n  ".join(item.what for item in unmet),
        hint=install_hint(unmet),
    )
