"""A C library build (``--scope library``) recorded as an artifact: its ``out/`` (the runner, ORT's C
library with what it needs, the C API header), its build log and a manifest of kind ``library``,
published in one rename into ``artifacts/<target>/<variant>/<ort-version>-library/`` beside the
wheel of the same release (never in its place), where ``orch deploy`` and ``orch build list`` find it.

Only a build whose files were proved and whose runner passed its pre-flight gets here
(``finish_library`` raises otherwise): the manifest records that pre-flight, so the deploy's check
of a passed pre-flight serves a C library build as it serves a wheel.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from orchestrator.artifacts.store import (
    Artifact,
    BuildRecord,
    LibraryFiles,
    Manifest,
    NativeRunner,
    artifact_dir,
)
from orchestrator.builds.native_runner.library import LibraryOutput
from orchestrator.builds.native_runner.plan import HEADER_NAME, RUNNER_NAME, SONAME
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.record import publish
from orchestrator.common.digests import file_sha256


def library_files(out: Path) -> dict[str, str]:
    """Every regular file under ``out`` by its path there, with its sha256. Links (the SONAME's)
    are no content: the board makes them again."""
    return {
        path.relative_to(out).as_posix(): file_sha256(path)
        for path in sorted(out.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def library_manifest(output: LibraryOutput, plan: BuildPlan, record: BuildRecord) -> Manifest:
    """The manifest of a C library build: what it holds, how its runner was made, its pre-flight."""
    out = output.directory
    runner = out / RUNNER_NAME
    sysroot = plan.sysroot
    return Manifest(
        target=plan.target.name,
        variant=plan.artifact_variant,
        ort_version=plan.ort_version,
        kind="library",
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        preflight=output.preflight,
        native_runner=NativeRunner(
            file=RUNNER_NAME,
            sha256=output.runner_sha256,
            size=runner.stat().st_size,
            ort_version=plan.ort_version,
            library=output.library,
            library_size=output.library_size,
            library_sha256=output.library_sha256,
            compile_argv=output.runner_argv,
            image=plan.image.tag,
        ),
        library=LibraryFiles(
            files=library_files(out),
            soname=f"lib/{SONAME}" if (out / "lib" / SONAME).is_symlink() else None,
            header=f"include/{HEADER_NAME}",
            details={
                "needs": {library: list(versions) for library, versions in output.needs.items()},
                "checked_against_sysroot": output.sysroot,
            },
        ),
        # The sysroot the files were proved against (a wheel's record gets it with its wheel check).
        build=replace(record, sysroot=sysroot.as_dict()) if sysroot else record,
    )


def publish_library(
    output: LibraryOutput, plan: BuildPlan, record: BuildRecord, *, log_path: Path, root: Path | None
) -> Artifact:
    """``out/`` with the build log and the manifest, into the artifact directory in one rename."""
    manifest = library_manifest(output, plan, record)
    directory = artifact_dir(plan.target.name, plan.artifact_variant, plan.ort_version, root, kind="library")
    staging = directory.with_name(directory.name + ".incoming")
    if staging.exists():
        shutil.rmtree(staging)
    directory.parent.mkdir(parents=True, exist_ok=True)
    # Links kept as links: lib/libonnxruntime.so.1 stays the link the runner loads through.
    shutil.copytree(output.directory, staging, symlinks=True)
    if log_path.exists():
        shutil.copy2(log_path, staging / "build.log")
    publish(staging, directory, manifest)
    return Artifact(directory=directory, manifest=manifest)
