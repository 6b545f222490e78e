"""Which artifact a board gets, decided on the workstation before any board is touched.

``select_artifact`` picks a target's one pre-flighted artifact (or refuses, naming the choices);
``load_artifact_dir`` reads the one given by ``--artifact DIR``; ``ArtifactCache`` checks and
inspects each artifact's wheel (or C library build: ``library_choice``) once for all board
threads; ``check_compatible`` refuses a wheel the board cannot run, before any byte is sent.

A wheel and a C library build (``--scope library``) of one target, variant and release are two
artifacts: when both match, the deploy refuses and names ``--scope`` instead of choosing one.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.artifacts.identity import describe, route_of
from orchestrator.artifacts.store import (
    Artifact,
    ArtifactKind,
    ManifestError,
    list_artifacts,
    read_manifest,
)
from orchestrator.artifacts.wheel import WheelInfo, compatibility_problems, inspect_wheel
from orchestrator.board import Board
from orchestrator.common.digests import file_sha256
from orchestrator.deploy.library_choice import ChosenLibrary, checked_library
from orchestrator.errors import DeployError, UsageError
from orchestrator.fleet.board_facts import BoardFacts, cpu_problems
from orchestrator.paths import artifacts_dir

LIBRARY_LABEL = "C library"


def artifact_label(artifact: Artifact) -> str:
    """``stock 1.21.0 official``: the variant, ORT release and route of an artifact; a C library
    build's says so (``default 1.21.0 source C library``)."""
    label = describe(artifact.variant, artifact.ort_version, route_of(artifact.manifest.to_json()))
    return f"{label} {LIBRARY_LABEL}" if artifact.kind == "library" else label


def select_artifact(  # noqa: PLR0913 -- each narrowing option keyword-only, as the user gave it
    artifacts: Sequence[Artifact],
    *,
    target: str,
    variant: str | None,
    ort_version: str | None,
    where: str,
    skip_preflight_check: bool = False,
    kind: ArtifactKind | None = None,
) -> Artifact:
    """The one artifact a deploy to a ``target`` board uses: pre-flighted (any, with
    ``skip_preflight_check``), of the variant, ORT version and kind (``--scope``: wheel or C
    library) asked for. Several matches are refused with the list, never settled by build time:
    which release a board runs must not depend on what was built last, nor whether it has Python.
    ``where`` names the artifacts directory in messages."""
    good = [a for a in artifacts if a.target == target and (a.manifest.preflight_ok or skip_preflight_check)]
    matching = [
        a
        for a in good
        if (variant is None or a.variant == variant)
        and (ort_version is None or a.ort_version == ort_version)
        and (kind is None or a.kind == kind)
    ]
    if len(matching) == 1:
        return matching[0]
    if not matching:
        raise _none_matches(
            good, target=target, variant=variant, ort_version=ort_version, kind=kind, where=where
        )
    raise _several_match(matching, target=target, asked=_asked(variant, ort_version, kind))


def _asked(variant: str | None, ort_version: str | None, kind: ArtifactKind | None = None) -> str:
    """The options that narrowed the choice, as the user gave them."""
    return " ".join(
        part
        for part in (
            f"--variant {variant}" if variant else "",
            f"--ort-version {ort_version}" if ort_version else "",
            f"--scope {kind}" if kind else "",
        )
        if part
    )


def _none_matches(  # noqa: PLR0913 -- the narrowing options, keyword-only, as select_artifact got them
    good: Sequence[Artifact],
    *,
    target: str,
    variant: str | None,
    ort_version: str | None,
    kind: ArtifactKind | None,
    where: str,
) -> UsageError:
    asked = _asked(variant, ort_version, kind)
    what = f"target '{target}'" + (f", {asked}" if asked else "")
    present = "; ".join(f"{artifact_label(a)} ({a.directory})" for a in good)
    return UsageError(
        f"no pre-flighted artifact for {what} in {where}" + (f" (there are: {present})" if present else ""),
        hint=f"build one first: orch build --target {target}"
        + (f" --variant {variant}" if variant else "")
        + (f" --ort-version {ort_version}" if ort_version else "")
        + (" --scope library" if kind == "library" else ""),
    )


def _several_match(matching: Sequence[Artifact], *, target: str, asked: str) -> UsageError:
    listed = "; ".join(f"{artifact_label(a)} ({a.directory})" for a in matching)
    variants = sorted({a.variant for a in matching})
    versions = sorted({a.ort_version for a in matching})
    kinds = sorted({a.kind for a in matching})
    choose = []
    if len(variants) > 1:
        choose.append(f"--variant ({' or '.join(variants)})")
    if len(versions) > 1:
        choose.append(f"--ort-version ({' or '.join(versions)})")
    if len(kinds) > 1:
        # A wheel and a C library build of one release: with Python or without, never guessed.
        choose.append(f"--scope ({' or '.join(kinds)})")
    return UsageError(
        f"{len(matching)} artifacts match target '{target}'"
        + (f" with {asked}" if asked else "")
        + f": {listed}; which one to deploy is not guessed",
        hint=f"choose with {' and '.join(choose) or '--artifact DIR'}, or give --artifact DIR",
    )


def load_artifact_dir(directory: Path) -> Artifact:
    """An artifact given by path (``--artifact DIR``): a manifest.json naming a wheel next to it, or
    a C library build's listing its files there."""
    manifest_path = Path(directory) / "manifest.json"
    if not manifest_path.is_file():
        raise DeployError(
            f"{directory}: no manifest.json: not an artifact directory",
            hint="point --artifact at artifacts/<target>/<variant>/<version>/",
        )
    try:
        manifest = read_manifest(manifest_path)
    except ManifestError as error:
        raise DeployError(error.message, hint=error.hint) from error
    artifact = Artifact(directory=Path(directory), manifest=manifest)
    if artifact.kind == "library":
        library = manifest.library
        missing = sorted(
            name for name in (library.files if library else ()) if not (Path(directory) / name).is_file()
        )
        if missing:
            raise DeployError(f"{manifest_path} lists {', '.join(missing)}, which is not in {directory}")
        return artifact
    if not artifact.wheel_path.is_file():
        raise DeployError(f"{manifest_path} names {manifest.wheel}, which is not in {directory}")
    return artifact


SKIP_PREFLIGHT_OPTION = "--skip-preflight-check"


def preflight_problem(artifact: Artifact) -> str | None:
    """Why the artifact has not passed its pre-flight (None: it passed)."""
    preflight = artifact.manifest.preflight
    if preflight is None:
        return "it has no pre-flight record (never run on an emulated board CPU)"
    if preflight.ok:
        return None
    if preflight.skipped:
        return f"its pre-flight did not run ({preflight.skipped})"
    return f"its pre-flight failed: {preflight.error or 'no reason recorded'}"


def check_preflight(artifact: Artifact, *, skip: bool, named_as: str) -> str | None:
    """Refuse (UsageError, exit 2) an artifact that has not passed its pre-flight, whichever way
    it was named (``named_as``: "--artifact DIR", ...): a build that dies on the board must not
    leave the workstation. With ``skip`` (``--skip-preflight-check``) it goes, and the returned
    warning says so (None: nothing was skipped)."""
    problem = preflight_problem(artifact)
    if problem is None:
        return None
    what = f"{named_as} ({artifact_label(artifact)}, {artifact.directory})"
    if skip:
        return f"{what}: {problem}; deployed anyway: {SKIP_PREFLIGHT_OPTION} skips this check"
    raise UsageError(
        f"{what} refused: {problem}",
        hint=f"build one that passes (orch build --target {artifact.target}), or deploy it anyway"
        f" with {SKIP_PREFLIGHT_OPTION}",
    )


@dataclass(frozen=True, kw_only=True)
class ChosenWheel:
    """A board's artifact with its wheel checked against the manifest and inspected."""

    artifact: Artifact
    info: WheelInfo
    sha256: str


@dataclass(frozen=True, kw_only=True)
class ArtifactChoice:
    """What the user chose: ``--artifact DIR`` (``artifact``), else the artifact chosen per target
    before any board was touched (``by_target``), else a target's one matching artifact."""

    artifact: Artifact | None
    by_target: Mapping[str, Artifact]
    variant: str | None
    ort_version: str | None
    skip_preflight_check: bool = False
    kind: ArtifactKind | None = None  # --scope: a wheel or a C library build (None: whichever matches)


class ArtifactCache:
    """Artifacts and their wheel (or C library) inspection, resolved once per target and shared by
    board threads."""

    def __init__(self, choice: ArtifactChoice) -> None:
        self.choice = choice
        self.lock = threading.Lock()
        self.cache: dict[str, ChosenWheel | ChosenLibrary] = {}

    def for_board(self, board: Board) -> ChosenWheel | ChosenLibrary:
        key = "--artifact" if self.choice.artifact else board.target
        with self.lock:
            if key not in self.cache:
                self.cache[key] = _checked(self._artifact_for(board))
            return self.cache[key]

    def _artifact_for(self, board: Board) -> Artifact:
        return (
            self.choice.artifact
            or self.choice.by_target.get(board.target)
            or select_artifact(
                list_artifacts(),
                target=board.target,
                variant=self.choice.variant,
                ort_version=self.choice.ort_version,
                where=str(artifacts_dir()),
                skip_preflight_check=self.choice.skip_preflight_check,
                kind=self.choice.kind,
            )
        )


def _checked(artifact: Artifact) -> ChosenWheel | ChosenLibrary:
    """The artifact's wheel, refused when it is not the one its manifest recorded (a C library
    build: each of its files, the same way)."""
    if artifact.kind == "library":
        return checked_library(artifact)
    sha = file_sha256(artifact.wheel_path)
    expected = artifact.manifest.wheel_sha256
    if expected and expected != sha:
        raise DeployError(
            f"{artifact.wheel_path}: sha256 {sha[:12]}... differs from the manifest's"
            f" {expected[:12]}...: the artifact was changed after it was built",
            hint="rebuild it (orch build) or restore the original wheel",
        )
    return ChosenWheel(artifact=artifact, info=inspect_wheel(artifact.wheel_path), sha256=sha)


def check_compatible(info: WheelInfo, facts: BoardFacts, compiler_flags: Sequence[str] = ()) -> None:
    problems = compatibility_problems(
        info, arch=facts.arch, glibc=facts.glibc, python_tag=facts.python_tag, board=facts.board
    )
    problems += cpu_problems(compiler_flags, facts)
    if problems:
        raise DeployError(
            f"{facts.board}: {info.path.name} refused, nothing was sent: " + "; ".join(problems),
            hint="build for this board's target (orch build --target ...) or pick another --artifact",
        )
