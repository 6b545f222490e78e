"""Check every CMake define and build.py flag against the real ORT source tree, before a long build.

CMake accepts any ``-DNAME=VALUE`` silently: ``-DONNXRUNTIME_ENABLE_LTO=ON`` (wrong case) is
ignored and the build runs 20 minutes without LTO. This module collects the names the tree
really knows — ``option()``, ``cmake_dependent_option()`` and ``set(... CACHE ...)`` in its
CMake files, plus the variables ORT reads that a user may set (``if(NAME)`` / ``${NAME}``
under the ``onnxruntime_`` prefix) — and build.py's own ``add_argument`` flags. Unknown names
are errors with a close-match suggestion, unless forced. Pure: reads files, runs nothing.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from orchestrator.errors import UsageError

_OPTION = re.compile(r"\b(?:option|cmake_dependent_option)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
_CACHE_SET = re.compile(r"\bset\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s+[^)]*?\bCACHE\b", re.IGNORECASE | re.DOTALL)
_ORT_VAR = re.compile(r"\b(onnxruntime_[A-Za-z0-9_]+)\b")
_ARGUMENT = re.compile(r"add_argument\(\s*\"(--[A-Za-z0-9_-]+)\"(?:\s*,\s*\"(--[A-Za-z0-9_-]+)\")?")

# Variables CMake itself, its modules and our toolchain file understand (not declared in ORT).
_CMAKE_PREFIXES = ("CMAKE_", "FETCHCONTENT_", "ORCH_", "Python_", "Python3_", "PKG_CONFIG_")
_PACKAGE_VARIABLE = re.compile(
    r"^[A-Za-z0-9_.+-]+_(DIR|ROOT|SOURCE_DIR|INCLUDE_DIR|LIBRARY|EXECUTABLE|USE_STATIC_LIBS)$"
)

# Names people write that look right and are not (see the ORT option table in the docs).
_MISLEADING = {
    "ONNX_ML": "ORT forces set(ONNX_ML 1); to drop the ML ops use the build.py flag --disable_ml_ops",
    "ONNXRUNTIME_CROSS_COMPILING": "wrong case; the toolchain file makes the build a cross build "
    "(onnxruntime_CROSS_COMPILING exists but build.py sets it itself)",
    "--arm64": "--arm64 is for Windows only; on Linux it silently builds x86-64. orch cross-compiles "
    "through the toolchain file",
    "--use_binskim_compliant_compile_flags": "adds host-only flags (-fcf-protection) that break an aarch64 cross build",
}


@dataclass(frozen=True, kw_only=True)
class KnownNames:
    cmake: frozenset[str]
    build_py: frozenset[str]

    def is_cmake_name(self, name: str) -> bool:
        return name in self.cmake or name.startswith(_CMAKE_PREFIXES) or bool(_PACKAGE_VARIABLE.match(name))


@lru_cache(maxsize=8)
def _scan(tree: str) -> KnownNames:
    root = Path(tree)
    cmake_names: set[str] = set()
    cmake_dir = root / "cmake"
    files = list(cmake_dir.rglob("*.cmake")) + list(cmake_dir.rglob("CMakeLists.txt"))
    for path in files:
        if (
            "external" in path.relative_to(cmake_dir).parts[:1]
            and path.name != "onnxruntime_external_deps.cmake"
        ):
            # Vendored third-party CMake (external/*) declares options of those projects; keep ORT's own.
            text = path.read_text(errors="replace")
            cmake_names.update(_OPTION.findall(text))
            continue
        text = path.read_text(errors="replace")
        cmake_names.update(_OPTION.findall(text))
        cmake_names.update(_CACHE_SET.findall(text))
        cmake_names.update(_ORT_VAR.findall(text))
    flags: set[str] = set()
    # ORT >= 1.22 moved build.py's parser into build_args.py.
    for name in ("build.py", "build_args.py"):
        path = root / "tools" / "ci_build" / name
        if path.is_file():
            for first, second in _ARGUMENT.findall(path.read_text(errors="replace")):
                flags.add(first)
                if second:
                    flags.add(second)
    if not cmake_names or not flags:
        raise UsageError(
            f"{root} does not look like an ONNX Runtime tree (no CMake options or build.py flags found)"
        )
    return KnownNames(cmake=frozenset(cmake_names), build_py=frozenset(flags))


def known_names(tree: Path) -> KnownNames:
    return _scan(str(Path(tree).resolve()))


def suggest(name: str, choices: Iterable[str]) -> str | None:
    """A close match: same name in another case first, then difflib on lower-cased names."""
    pool = list(choices)
    lowered = {choice.lower(): choice for choice in pool}
    if name.lower() in lowered:
        return lowered[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.75)
    return lowered[close[0]] if close else None


# A CMake -D name, or one of build.py's own flags.
NameKind = Literal["define", "flag"]


@dataclass(frozen=True, kw_only=True)
class FlagProblem:
    kind: NameKind
    name: str
    suggestion: str | None
    explanation: str | None

    def sentence(self) -> str:
        what = f"CMake define '{self.name}'" if self.kind == "define" else f"build.py flag '{self.name}'"
        if self.explanation:
            return f"{what} does not do what it seems: {self.explanation}"
        text = f"{what} is not known to this ORT source tree"
        if self.suggestion:
            text += f" (did you mean '{self.suggestion}'?)"
        return text


def check_flags(tree: Path, defines: Iterable[str], build_flags: Iterable[str]) -> list[FlagProblem]:
    """Problems with the given define names and build.py flags (empty list: all known)."""
    names = known_names(tree)
    problems: list[FlagProblem] = []
    for define in defines:
        if names.is_cmake_name(define) and define not in _MISLEADING:
            continue
        problems.append(
            FlagProblem(
                kind="define",
                name=define,
                suggestion=None if define in _MISLEADING else suggest(define, names.cmake),
                explanation=_MISLEADING.get(define),
            )
        )
    for flag in build_flags:
        if flag in names.build_py and flag not in _MISLEADING:
            continue
        problems.append(
            FlagProblem(
                kind="flag",
                name=flag,
                suggestion=None if flag in _MISLEADING else suggest(flag, names.build_py - set(_MISLEADING)),
                explanation=_MISLEADING.get(flag),
            )
        )
    return problems


_DEFINE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.+-]*")


def check_without_tree(defines: Iterable[str]) -> list[FlagProblem]:
    """What is known to be wrong before any source tree is at hand: names CMake cannot take,
    names that look right and are not (``ONNX_ML``), and ORT's ``onnxruntime_`` prefix in another
    case (``ONNXRUNTIME_ENABLE_LTO``: ORT reads only ``onnxruntime_ENABLE_LTO``)."""
    problems: list[FlagProblem] = []
    for define in defines:
        if define in _MISLEADING:
            problems.append(
                FlagProblem(kind="define", name=define, suggestion=None, explanation=_MISLEADING[define])
            )
        elif not _DEFINE_NAME.fullmatch(define):
            problems.append(
                FlagProblem(
                    kind="define",
                    name=define,
                    suggestion=None,
                    explanation="not a CMake variable name (letters, digits and _ . + -, not starting with a digit)",
                )
            )
        elif define.lower().startswith("onnxruntime_") and not define.startswith("onnxruntime_"):
            fixed = "onnxruntime_" + define[len("onnxruntime_") :]
            explanation = f"ORT reads its options only with the lower-case prefix (did you mean '{fixed}'?)"
            problems.append(
                FlagProblem(kind="define", name=define, suggestion=fixed, explanation=explanation)
            )
    return problems


def flags_of(build_args: Iterable[str]) -> list[str]:
    """The ``--flag`` names of a build.py argv (values and the define list after --cmake_extra_defines skipped)."""
    found = []
    for arg in build_args:
        if arg == "--cmake_extra_defines":
            found.append(arg)
            break
        if arg.startswith("--"):
            found.append(arg.split("=", 1)[0])
    return found


def validate_or_raise(
    tree: Path, defines: Iterable[str], build_flags: Iterable[str], *, force: bool
) -> list[str]:
    """Raise a UsageError listing every unknown name (with suggestions); with ``force`` return them as warnings."""
    problems = check_flags(tree, defines, build_flags)
    sentences = [problem.sentence() for problem in problems]
    if problems and not force:
        raise UsageError(
            "unknown build options:\n  " + "\n  ".join(sentences),
            hint="fix the names, or pass --force-flags to build anyway",
        )
    return sentences
