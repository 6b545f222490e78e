"""clang's flavour of the profile-guided loop (the sysroot route, ``clang-sysroot``). Pure: flags,
and what llvm-profdata and the compiler print, read from text.

The loop is GCC's (``builds.pgo.profile``) with LLVM's tools, as clang 19 of the build image showed them
(a small program against a Debian 11 sysroot, run under qemu-user as a Cortex-A57):

* instrumented: ``-fprofile-generate`` (IR instrumentation), counters atomic on the same CPUs as
  GCC's (``atomic_counters``: with ``-march=armv8.2-a`` clang too makes an atomic update an inline
  ``ldadd``); the link takes clang's profile runtime for aarch64 (``libclang_rt.profile-aarch64.a``,
  the arm64 ``libclang-rt-19-dev`` of the image), which needs nothing newer than GLIBC_2.17.
* on the board each process writes one raw profile per instrumented binary at exit
  (``LLVM_PROFILE_FILE=<scratch>/%m-%p.profraw``: ``%m`` keeps a library's profile apart from the
  program's, ``%p`` one file per run, so the runs can be counted: IR profiles hold no run count).
* ``llvm-profdata-19 merge`` (the compiler's own LLVM release: an indexed profile is read by the
  release that wrote it) adds every board's raw profiles up into one ``.profdata``; ``show`` says
  how many functions have counters and ``show --covered`` which of them ran.
* optimised: ``-fprofile-use=<file>``. clang's ``-Wprofile-instr-unprofiled``/``-missing``/
  ``-out-of-date`` are about front-end profiles and print nothing for an IR profile; what an IR
  profile does not fit is told by LLVM's PGO pass as ``-Wbackend-plugin`` warnings: a function
  whose code changed (hash mismatch, on by default: under ``-Werror`` an error, hence
  ``-Wno-error=backend-plugin``) and, asked with ``-pgo-warn-missing-function``, each function the
  profile has no data for. The build counts both, per function and per source.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.builds.pgo.profile import (
    PROFILE_ROOT,
    Coverage,
    ProfileUse,
    atomic_counters,
    profile_dir_in_container,
)

LLVM_MAJOR = "19"  # the build image's clang (docker/build/packages/clang-sysroot.txt: llvm-19)
PROFDATA = f"llvm-profdata-{LLVM_MAJOR}"
PROFDATA_FILE = "merged.profdata"  # the merged profile, beside what llvm-profdata said of it
SHOW_FILE = "show.txt"  # `llvm-profdata show`: the summary
COVERED_FILE = "covered.txt"  # `llvm-profdata show --covered`: one function that ran per line
VERSION_FILE = "version.txt"  # `llvm-profdata --version`
RAW_SUFFIX = ".profraw"
# On the board: one raw profile per instrumented binary (%m) and process (%p).
RAW_PATTERN = f"%m-%p{RAW_SUFFIX}"
# Each function the profile has no data for, named by the PGO pass (off by default). Through -Xclang:
# CMAKE_CXX_FLAGS reach the link too, where a bare `-mllvm X` without LTO makes clang warn "argument
# unused during compilation", the very text CMake's compiler-flag checks fail on (3.31's
# Internal/CheckFlagCommonConfig.cmake); the optimised build's configure must decide as the
# instrumented one's did. clang 19 passes -Xclang options to the compiler alone, silently at a link.
WARN_MISSING = ("-Xclang", "-mllvm", "-Xclang", "-pgo-warn-missing-function")


def instrument_flags(mcpu: str) -> tuple[str, ...]:
    """IR instrumentation; counters atomic where the CPU has LSE, as GCC's. The raw profiles are
    named on the board (LLVM_PROFILE_FILE), so the path given here is never written to."""
    return (
        f"-fprofile-generate={PROFILE_ROOT}",
        f"-fprofile-update={'prefer-atomic' if atomic_counters(mcpu) else 'single'}",
    )


def profile_file_in_container(digest: str) -> str:
    """The merged profile the optimised build reads (the digest in the path keeps ccache's entries apart)."""
    return f"{profile_dir_in_container(digest)}/{PROFDATA_FILE}"


def optimise_flags(digest: str) -> tuple[str, ...]:
    """The profile used; a stale or partial profile warns, never fails (``-Werror`` or not), and
    each function without data is named, for the record's count."""
    return (f"-fprofile-use={profile_file_in_container(digest)}", "-Wno-error=backend-plugin", *WARN_MISSING)


class ProfileShowError(ValueError):
    """``llvm-profdata show`` printed something orch does not read (not an IR profile)."""


_TOTAL = re.compile(r"^Total functions: (\d+)\s*$", re.MULTILINE)
_LEVEL = re.compile(r"^Instrumentation level: (\S+)", re.MULTILINE)


def functions_with_counters(summary: str) -> int:
    """``Total functions`` of ``llvm-profdata show``, for an IR-level profile (the kind
    ``-fprofile-generate`` writes; a front-end profile would be another flag's)."""
    level, total = _LEVEL.search(summary), _TOTAL.search(summary)
    if level is None or total is None:
        raise ProfileShowError(f"not the summary of llvm-profdata show: {summary[:200]!r}")
    if level.group(1) != "IR":
        raise ProfileShowError(f"a {level.group(1)}-level profile; -fprofile-generate writes IR-level ones")
    return int(total.group(1))


def functions_run(covered: str) -> int:
    """``llvm-profdata show --covered`` names each function that ran once per line."""
    return sum(1 for line in covered.splitlines() if line.strip())


def raw_runs(names: Iterable[str]) -> int:
    """How many runs one board's raw profiles add up: each process writes one per instrumented
    binary (``<signature>_<pool>-<pid>.profraw``), so the binary with the most files ran that often.
    (A process that got an earlier one's pid back adds into that file, %m merging: its counts are
    kept, its run is not counted.)"""
    per_binary = Counter(name.rsplit("-", 1)[0] for name in names if name.endswith(RAW_SUFFIX))
    return max(per_binary.values(), default=0)


def raw_profiles(directory: Path) -> list[Path]:
    return sorted(directory.rglob(f"*{RAW_SUFFIX}"))


def coverage_of(merged: Path, boards: Iterable[Path]) -> Coverage:
    """What the merged profile covers (``merged`` holds llvm-profdata's own words about it), and
    the runs and raw profiles of each board's tree it was merged from."""
    trees = list(boards)
    raw = [raw_profiles(tree) for tree in trees]
    return Coverage(
        files=sum(len(files) for files in raw),
        functions=functions_with_counters((merged / SHOW_FILE).read_text()),
        functions_run=functions_run((merged / COVERED_FILE).read_text()),
        runs=sum(raw_runs(path.name for path in files) for files in raw),
    )


@dataclass(frozen=True, kw_only=True)
class Merged:
    """How the boards' raw profiles became one: the tool, its version, what went in."""

    tool: str
    version: str  # its --version line (Debian LLVM version 19.1.7)
    image: str
    raw_profiles: int
    boards: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "version": self.version,
            "image": self.image,
            "raw_profiles": self.raw_profiles,
            "boards": self.boards,
        }


def tool_version(text: str) -> str:
    """The line of ``llvm-profdata --version`` that names the release."""
    line = next((line.strip() for line in text.splitlines() if "version" in line.lower()), "")
    if not line:
        raise ProfileShowError(f"llvm-profdata --version printed no version: {text[:200]!r}")
    return line


# warning: /src/a.cpp: no profile data available for function f Hash = 42 up to 0 count discarded [-Wbackend-plugin]
_MISSING = re.compile(r"(?:warning|error): (.+?): no profile data available for function .*\[-W")
# warning: /src/a.cpp: function control flow change detected (hash mismatch) f Hash = 42 ... [-Wbackend-plugin]
_STALE = re.compile(r"(?:warning|error): (.+?): function control flow change detected \(hash mismatch\)")


def profile_use(log_lines: Iterable[str], compiled: int) -> ProfileUse:
    """What the optimised build's clang said: functions it had no data for, functions whose data
    no longer fits their code, and the sources they are in; a source without either had data for
    every function it compiled."""
    missing: list[str] = []
    stale: list[str] = []
    for line in log_lines:
        if found := _MISSING.search(line):
            missing.append(found.group(1))
        elif found := _STALE.search(line):
            stale.append(found.group(1))
    return ProfileUse(
        compiled=compiled,
        without_counters=len(set(missing) | set(stale)),
        functions_without_data=len(missing),
        functions_stale=len(stale),
    )
