"""A C library build (``--scope library``) as a deploy takes it, on the workstation: its files
checked against the sha256 its manifest recorded and their ELF needs read once for all board
threads (``checked_library``), and the board refused before any byte is sent when they cannot run
there (``check_library_compatible``: architecture, glibc, the CPU features of its ``-mcpu``).

There is no Python tag to check: such a release runs no Python (ORT's C library and orch's native
runner), which is what it is for (JetPack 4 and 5, whose Python ORT's wheel cannot target).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.artifacts.store import Artifact
from orchestrator.artifacts.wheel import WheelInfo, inspect_directory, library_problems
from orchestrator.deploy.release_files import LocalFile, library_release_files
from orchestrator.errors import DeployError
from orchestrator.fleet.board_facts import BoardFacts, cpu_problems


@dataclass(frozen=True, kw_only=True)
class ChosenLibrary:
    """A board's C library build, its files checked against the manifest and its ELF files read."""

    artifact: Artifact
    info: WheelInfo  # the ELF files of the build (runner, lib/), read as a wheel without tags
    files: tuple[LocalFile, ...]  # as the release holds them: native/orch-runner, native/lib/...


def checked_library(artifact: Artifact) -> ChosenLibrary:
    """The build's files, refused when one is not what its manifest recorded."""
    library = artifact.manifest.library
    recorded = dict(library.files) if library else {}
    files = tuple(library_release_files(artifact))
    for item in files:
        expected = recorded.get(str(item.path.relative_to(artifact.directory).as_posix()))
        if expected != item.sha256:
            raise DeployError(
                f"{item.path}: sha256 {item.sha256[:12]}... differs from the manifest's"
                f" {(expected or 'none')[:12]}...: the artifact was changed after it was built",
                hint="rebuild it (orch build --scope library) or restore the original files",
            )
    info = inspect_directory(artifact.directory, name="onnxruntime", version=artifact.ort_version)
    return ChosenLibrary(artifact=artifact, info=info, files=files)


def check_library_compatible(chosen: ChosenLibrary, facts: BoardFacts, compiler_flags: Sequence[str]) -> None:
    problems = library_problems(chosen.info, arch=facts.arch, glibc=facts.glibc, board=facts.board)
    problems += cpu_problems(compiler_flags, facts)
    if problems:
        raise DeployError(
            f"{facts.board}: the C library build {chosen.artifact.directory} refused, nothing was sent: "
            + "; ".join(problems),
            hint="build for this board's target (orch build --scope library --target ...) or pick another"
            " --artifact",
        )
