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
glibc or libstdc++ does not define fails the build, before anything is copied to a board. Then the
runner pre-flights as a wheel does: it runs a model under qemu-user with the board's CPU model and,
on the sysroot route, the board's own loader and libraries (``QEMU_LD_PREFIX`` = the sysroot), and
its outputs are compared with the workstation's x86 onnxruntime.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrator.artifacts.store import Artifact, Preflight
from orchestrator.artifacts.wheel import inspect_directory
from orchestrator.builds.container_paths import SYSROOT
from orchestrator.builds.native_runner.execute import CompileIn, Log, add_runner, compile_runner
from orchestrator.builds.native_runner.plan import HEADER_NAME, RUNNER_NAME, SONAME, library_name, runner_plan
from orchestrator.builds.preflight import (
    PREFLIGHT_TIMEOUT_S,
    compare,
    exit_reason,
    reference_run,
    stage_model,
    verdict,
)
from orchestrator.builds.sysroots.contents import Sysroot, check_wheel_against, needs_of
from orchestrator.common.digests import file_sha256
from orchestrator.errors import BuildError, ContainerTimeout

if TYPE_CHECKING:
    from orchestrator.builds.plan import BuildPlan
    from orchestrator.builds.sysroots.target import SysrootRef
    from orchestrator.targets import TargetProfile


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
    preflight: Preflight

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
            "preflight": self.preflight.to_json(),
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
    preflight = preflight_runner(where, out, plan.target.qemu_cpu)
    if not preflight.ok:
        raise BuildError(
            f"pre-flight of the C library failed: {preflight.error}", hint=f"the files are kept in {out}"
        )
    log(
        f"pre-flight of orch-runner on {plan.target.qemu_cpu}: max |diff| against x86"
        f" {preflight.details['comparison']['max_abs_diff']}"
    )
    return LibraryOutput(
        directory=out,
        library=library.relative_to(out).as_posix(),
        library_sha256=file_sha256(library),
        library_size=library.stat().st_size,
        runner_sha256=file_sha256(runner),
        runner_argv=runner_compile.argv,
        needs=needs,
        sysroot=sysroot.name if sysroot else None,
        preflight=preflight,
    )


def proved_runner(
    profile: TargetProfile, where: CompileIn, *, header: bytes | str, sysroot: SysrootRef | None, log: Log
) -> Callable[[Artifact], Artifact]:
    """What a built wheel gets before it is published (``record.finish_artifact``'s
    ``before_publish``): the native runner for its C library and, on the sysroot route, the proof
    that the runner needs nothing the board's glibc and libstdc++ lack. A runner that fails it
    fails the build with nothing published, rather than reach a board in a deployable artifact."""

    def add(artifact: Artifact) -> Artifact:
        added = add_runner(artifact, profile, where, header=header, log=log)
        if sysroot is not None:
            # The artifact's only ELF file (the wheel is a zip, proved by the wheel check).
            prove_files(added.directory, sysroot, version=added.ort_version)
        return added

    return add


def prove_files(directory: Path, sysroot: SysrootRef | None, *, version: str) -> dict[str, tuple[str, ...]]:
    """The symbol versions the ELF files under ``directory`` need, per library; with a sysroot, each
    proved against it (a version the board's libraries do not define fails the build)."""
    info = inspect_directory(directory, name="onnxruntime", version=version)
    if sysroot is None:
        return needs_of(info)
    check = check_wheel_against(info, Sysroot(root=sysroot.root, name=sysroot.name))
    if check.problems:
        raise BuildError(
            f"what the build made does not fit sysroot {sysroot.name}:\n"
            + "\n".join(str(problem) for problem in check.problems),
            hint=f"the files are kept in {directory}",
        )
    return check.needs()


# In the pre-flight container: the build's out/ and the model, the runner's outputs.
_PREFLIGHT_DIR = "/pf"


def preflight_runner(where: CompileIn, out: Path, qemu_cpu: str) -> Preflight:
    """The runner and the library run a model in the build image under qemu-user as the board's CPU,
    on the sysroot route with the sysroot's loader and libraries; outputs compared with x86's."""
    with tempfile.TemporaryDirectory(prefix="orch-library-preflight-") as tmp:
        work = Path(tmp) / "pf"
        shutil.copytree(out, work, symlinks=True)
        model, inputs = stage_model(work)
        (work / "outputs").mkdir()
        environment = {"QEMU_CPU": qemu_cpu}
        volumes = None
        if where.sysroot_volume:
            environment["QEMU_LD_PREFIX"] = SYSROOT
            volumes = {where.sysroot_volume: {"bind": SYSROOT, "mode": "ro"}}
        run = f"{_PREFLIGHT_DIR}/{RUNNER_NAME}"
        argv = [
            run,
            "--model",
            f"{_PREFLIGHT_DIR}/model.onnx",
            "--input",
            f"input={_PREFLIGHT_DIR}/input.npy",
        ]
        argv += ["--save-outputs", f"{_PREFLIGHT_DIR}/outputs", "--warmup", "0", "--min-runs", "1"]
        argv += ["--min-duration", "0", "--max-runs", "1", "--intra-op-threads", "1"]
        lines: list[str] = []
        details: dict[str, Any] = {"qemu_cpu": qemu_cpu, "image": where.image_tag, "sysroot": bool(volumes)}
        try:
            code = where.engine.run(
                where.image_id,
                # Not exec'd: the runner must not be the container's PID 1.
                ["sh", "-c", '"$@"', "sh", *argv],
                environment=environment,
                volumes=volumes,
                network="none",
                labels={"orch.role": "preflight"},
                on_log=lines.append,
                copy_in=[(work, _PREFLIGHT_DIR)],
                copy_out=[(f"{_PREFLIGHT_DIR}/outputs", Path(tmp))],
                timeout=PREFLIGHT_TIMEOUT_S,
            )
        except ContainerTimeout:
            return Preflight(ok=False, error=f"no result within {PREFLIGHT_TIMEOUT_S:g} s", details=details)
        details["exit_code"] = code
        produced = Path(tmp) / "outputs" / "logits.npy"
        if code != 0 or not produced.is_file():
            tail = " | ".join([line for line in lines if line.strip()][-5:])
            return Preflight(
                ok=False, error=f"{exit_reason(code)} on an emulated {qemu_cpu}: {tail}", details=details
            )
        document = next((line for line in reversed(lines) if line.startswith("{")), "{}")
        details["ort_version"] = json.loads(document).get("ort", {}).get("version")
        comparison = compare(np.load(produced), reference_run(model, inputs))
        details["comparison"] = comparison
        return verdict(comparison, details)
