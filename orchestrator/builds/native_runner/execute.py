"""Compile the native runner for an artifact (the plan is ``orchestrator.builds.native_runner.plan``).

Runs after the wheel is made and checked, for built and stock wheels alike: ORT's C library comes
out of the wheel, the C API header out of the release's source tree (a built wheel's own tree;
for a stock wheel, the Debian source package of that release when the board's suite carries it),
and the runner is compiled in the target's build image with no network. The runner lands next to
the wheel and is recorded in the manifest (size, sha256, the argv); a wheel without the library or
a release without an offline header gets a manifest entry saying why there is no runner, and the
Python side of the artifact is untouched.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.artifacts.store import Artifact, NativeRunner, write_manifest
from orchestrator.board_side import read_text
from orchestrator.builds.container_paths import SYSROOT
from orchestrator.builds.native_runner.plan import (
    HEADER_IN_TREE,
    HEADER_NAME,
    OUT,
    RUNNER_NAME,
    SOURCE_NAME,
    WORK,
    RunnerPlan,
    runner_plan,
    wheel_library,
)
from orchestrator.builds.sources.ort import fetch_debian_tarball
from orchestrator.builds.sources.ort_spec import DEBIAN_ORT_VERSIONS
from orchestrator.common.digests import file_sha256
from orchestrator.errors import BuildError
from orchestrator.targets import TargetProfile

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

Log = Callable[[str], None]
# Seconds: one C file; the container start dominates.
COMPILE_TIMEOUT = 600


def header_from_tree(tree: Path) -> bytes:
    path = tree / HEADER_IN_TREE
    if not path.is_file():
        raise BuildError(f"{tree} has no {HEADER_IN_TREE}: not an ONNX Runtime source tree")
    return path.read_bytes()


def header_from_tarball(tarball: Path) -> bytes | None:
    """The C API header out of a source tarball (``<top>/include/...``), or None when it has none."""
    with tarfile.open(tarball) as archive:
        for member in archive:
            if member.isfile() and member.name.endswith("/" + HEADER_IN_TREE):
                handle = archive.extractfile(member)
                if handle is not None:
                    return handle.read()
    return None


def stock_header(
    engine: Engine, profile: TargetProfile, version: str, base_image: str | None, log: Log
) -> bytes | str:
    """The header for a stock wheel of ``version``, or the reason there is none offline."""
    suite = profile.bootstrap_suite
    carried = DEBIAN_ORT_VERSIONS.get(suite or "")
    if carried != version or base_image is None:
        return (
            f"no C API header of ONNX Runtime {version} offline: the source package of Debian"
            f" {suite or profile.os.codename} is {carried or 'not available'}; build the release"
            f" (orch build --target {profile.name} --variant tuned --ort-version {version}) for a runner"
        )
    tarball = fetch_debian_tarball(engine, base_image, version, log)
    header = header_from_tarball(tarball)
    return header if header is not None else f"{tarball.name} has no {HEADER_IN_TREE}"


def _library_sha256(wheel: Path, member: str) -> str:
    """The sha256 of the wheel's C library, the one the runner is deployed with (the manifest's record)."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True, kw_only=True)
class CompileIn:
    """Where the runner is compiled: the target's build image (it has the cross compiler) on an engine,
    and on the sysroot route the volume of the board's sysroot (mounted at ``SYSROOT``)."""

    engine: Engine
    image_id: str
    image_tag: str
    sysroot_volume: str | None = None


def add_runner(
    artifact: Artifact, profile: TargetProfile, where: CompileIn, *, header: bytes | str, log: Log
) -> Artifact:
    """Compile the runner for ``artifact`` and record it in its manifest (rewritten in place).

    ``header`` is the C API header, or (a string) why there is none; the manifest then says so."""
    version = artifact.ort_version
    plan = runner_plan(profile, version, sysroot=SYSROOT if where.sysroot_volume else None)
    found = wheel_library(artifact.wheel_path, version)
    if found is None:
        return _record(
            artifact,
            NativeRunner(
                ort_version=version,
                skipped=f"the wheel has no onnxruntime/capi/{plan.library} (built without --build_shared_lib)",
            ),
            log,
        )
    member, library_size = found
    if isinstance(header, str):
        return _record(
            artifact,
            NativeRunner(ort_version=version, library=member, library_size=library_size, skipped=header),
            log,
        )
    log(f"compiling the native runner for ONNX Runtime {version} ({plan.compiler})")
    library_sha256 = _library_sha256(artifact.wheel_path, member)
    target = compile_runner(where, plan, header, artifact.directory, log)
    record = NativeRunner(
        file=RUNNER_NAME,
        sha256=file_sha256(target),
        size=target.stat().st_size,
        ort_version=version,
        library=member,
        library_size=library_size,
        library_sha256=library_sha256,
        compile_argv=plan.argv,
        image=where.image_tag,
    )
    return _record(artifact, record, log)


def compile_runner(where: CompileIn, plan: RunnerPlan, header: bytes, dest: Path, log: Log) -> Path:
    """The runner compiled with no network and put, executable, into ``dest`` (beside the artifact's
    wheel, or beside the C library of a library build)."""
    with tempfile.TemporaryDirectory(prefix="orch-runner-") as tmp:
        stage = Path(tmp) / "runner"
        (stage / "include").mkdir(parents=True)
        (stage / "include" / HEADER_NAME).write_bytes(header)
        (stage / SOURCE_NAME).write_text(read_text("native_runner.c"))
        lines: list[str] = []
        code = where.engine.run(
            where.image_id,
            ["sh", "-c", f'mkdir -p {OUT} && exec "$@"', "sh", *plan.argv],
            network="none",
            volumes={where.sysroot_volume: {"bind": SYSROOT, "mode": "ro"}} if where.sysroot_volume else None,
            labels={"orch.role": "build", "orch.target": plan.target},
            on_log=lines.append,
            copy_in=[(stage, WORK)],
            copy_out=[(OUT, Path(tmp))],
            timeout=COMPILE_TIMEOUT,
        )
        built = Path(tmp) / "out" / RUNNER_NAME
        if code != 0 or not built.is_file():
            raise BuildError(
                f"compiling the native runner failed (exit {code}):\n" + "\n".join(lines[-20:]),
                hint=f"what the build made is kept in {dest} (a wheel there deploys without the runner)",
            )
        for line in lines:
            log(line)
        target = dest / RUNNER_NAME
        shutil.copy2(built, target)
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return target


def _record(artifact: Artifact, runner: NativeRunner, log: Log) -> Artifact:
    manifest = replace(artifact.manifest, native_runner=runner)
    write_manifest(artifact.directory, manifest)
    if runner.skipped:
        log(f"no native runner: {runner.skipped}")
    else:
        log(
            f"native runner {runner.file}: {(runner.size or 0) / 1e3:.0f} kB, loads"
            f" {runner.library} ({(runner.library_size or 0) / 1e6:.1f} MB)"
        )
    return replace(artifact, manifest=manifest)
