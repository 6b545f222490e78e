"""ORT's C library built alone (``--scope library``): the native runner compiled beside it, both
proved against the board's sysroot.

For a board whose Python the release's Python package cannot target (JetPack 4 and 5: Python 3.6
and 3.8; ORT 1.21 needs 3.10), what runs there is ORT's C library with a program of the user's, or
orch's native runner. The build's ``out/`` directory is laid out as a release's ``native/``
directory on a board, so it can be copied as it is:

    out/orch-runner                       the runner (RPATH $ORIGIN/lib)
    out/lib/libonnxruntime.so.<version>   ORT's C library, its SONAME link and what it needs
    out/include/onnxruntime_c_api.h       the C API header of the release, for users' own programs

Every ELF file there is checked against the sysroot it was built for: a symbol version the board's
glibc or libstdc++ does not define fails the build, before anything is copied to a board.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.artifacts.wheel import inspect_directory
from orchestrator.builds.container_paths import SYSROOT
from orchestrator.builds.native_runner.execute import CompileIn, Log, compile_runner
from orchestrator.builds.native_runner.plan import HEADER_NAME, RUNNER_NAME, SONAME, library_name, runner_plan
from orchestrator.builds.sysroots.contents import Sysroot, check_wheel_against
from orchestrator.digests import file_sha256
from orchestrator.errors import BuildError

if TYPE_CHECKING:
    from orchestrator.builds.plan import BuildPlan
    from orchestrator.builds.sysroots.target import SysrootRef


@dataclass(frozen=True, kw_only=True)
class LibraryOutput:
    """What a C library build left in ``out/`` and what it needs of the board."""

    directory: Path
    library: str  # lib/libonnxruntime.so.<version>
    library_sha256: str
    library_size: int
    runner_sha256: str
    runner_argv: tuple[str, ...]
    # The checked symbol versions (GLIBC_, GLIBCXX_, ...) every ELF file there needs, per library.
    needs: dict[str, tuple[str, ...]]
    sysroot: str | None  # the sysroot they were proved against

    def as_dict(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "library": self.library,
            "library_sha256": self.library_sha256,
            "library_size": self.library_size,
            "soname": f"lib/{SONAME}",
            "runner": RUNNER_NAME,
            "runner_sha256": self.runner_sha256,
            "runner_compile_argv": list(self.runner_argv),
            "header": f"include/{HEADER_NAME}",
            "needs": {lib: list(versions) for lib, versions in self.needs.items()},
            "checked_against_sysroot": self.sysroot,
        }


def finish_library(out: Path, plan: BuildPlan, *, where: CompileIn, header: bytes, log: Log) -> LibraryOutput:
    """The runner compiled into ``out`` next to the packaged library, and both checked."""
    version, sysroot = plan.ort_version, plan.sysroot
    library = out / "lib" / library_name(version)
    if not library.is_file():
        raise BuildError(f"the build left no {library.relative_to(out.parent)}: ORT's C library is missing")
    (out / "include").mkdir(exist_ok=True)
    (out / "include" / HEADER_NAME).write_bytes(header)
    runner_compile = runner_plan(plan.target, version, sysroot=SYSROOT if where.sysroot_volume else None)
    log(f"compiling the native runner for ONNX Runtime {version} ({runner_compile.compiler})")
    runner = compile_runner(where, runner_compile, header, out, log)
    needs = prove_files(out, sysroot, version=version)
    return LibraryOutput(
        directory=out,
        library=library.relative_to(out).as_posix(),
        library_sha256=file_sha256(library),
        library_size=library.stat().st_size,
        runner_sha256=file_sha256(runner),
        runner_argv=runner_compile.argv,
        needs=needs,
        sysroot=sysroot.name if sysroot else None,
    )


def prove_files(directory: Path, sysroot: SysrootRef | None, *, version: str) -> dict[str, tuple[str, ...]]:
    """The symbol versions the ELF files under ``directory`` need, per library; with a sysroot, each
    proved against it (a version the board's libraries do not define fails the build)."""
    info = inspect_directory(directory, name="onnxruntime", version=version)
    if sysroot is None:
        merged: dict[str, set[str]] = {}
        for so in info.shared_objects:
            for lib, versions in so.needs.items():
                merged.setdefault(lib, set()).update(versions)
        return {lib: tuple(sorted(versions)) for lib, versions in sorted(merged.items())}
    check = check_wheel_against(info, Sysroot(root=sysroot.root, name=sysroot.name))
    if check.problems:
        raise BuildError(
            f"what the build made does not fit sysroot {sysroot.name}:\n"
            + "\n".join(str(problem) for problem in check.problems),
            hint=f"the files are kept in {directory}",
        )
    return check.needs()
