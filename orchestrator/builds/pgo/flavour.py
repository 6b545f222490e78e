"""Which compiler's profile-guided loop a build runs: GCC's counters (``builds.pgo.profile``) for the
board's own distribution, clang's raw and indexed profiles (``builds.pgo.clang``) on the sysroot
route. One value answers every step's question (flags, board-side redirection, merge, use), so
the command runs one loop for both. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orchestrator.builds.pgo import clang, profile
from orchestrator.builds.pgo.merge import gcov_tool
from orchestrator.builds.pgo.profile import Compiler, ProfileUse
from orchestrator.builds.toolchain import Toolchain


@dataclass(frozen=True, kw_only=True)
class Flavour:
    compiler: Compiler
    name: str  # in messages: "GCC", "clang"

    @property
    def profile_glob(self) -> str:
        """The files the optimised build reads, hashed into its profile digest."""
        return "*.gcda" if self.compiler == "gcc" else f"*{clang.PROFDATA_FILE}"

    def instrument_flags(self, mcpu: str) -> tuple[str, ...]:
        if self.compiler == "gcc":
            return profile.instrument_flags(mcpu)
        return clang.instrument_flags(mcpu)

    def optimise_flags(self, digest: str) -> tuple[str, ...]:
        if self.compiler == "gcc":
            return profile.optimise_flags(digest)
        return clang.optimise_flags(digest)

    def merges(self, boards: int) -> bool:
        """GCC's counters add up on the board, one board's are the profile; clang's optimised build
        reads an indexed profile, which llvm-profdata makes of one board's raw profiles too."""
        return boards > 1 if self.compiler == "gcc" else boards > 0

    def merge_tool(self, cross_prefix: str) -> str:
        return gcov_tool(cross_prefix) if self.compiler == "gcc" else clang.PROFDATA

    def profile_use(self, log_lines: Iterable[str], compiled: int) -> ProfileUse:
        if self.compiler == "gcc":
            return profile.profile_use(log_lines, compiled)
        return clang.profile_use(log_lines, compiled)


GCC = Flavour(compiler="gcc", name="GCC")
CLANG = Flavour(compiler="clang", name="clang")


def flavour_of(toolchain: Toolchain) -> Flavour:
    return CLANG if toolchain == "clang-sysroot" else GCC
