"""The deploy plan: what one board gets, computed without touching it. Pure.

Inputs are what the workstation knows (``ReleaseFiles``: artifact, wheel, dependency wheels,
models, agent files, all hashed) and what was read from the board (``Survey``: its facts, its
store, its releases). The output, a ``BoardPlan``, holds every file with its sha256, what must be
sent and what is already there, the release id, the on-board paths and the exact argv lists that
create the venv and install the wheel. ``--dry-run`` prints it; ``orchestrator.deploy.execute``
executes it. A C library build's release (no venv, no pip: its native runner) is planned by
``orchestrator.deploy.native_plan`` into the same ``BoardPlan``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypedDict

from orchestrator.artifacts.store import Artifact, ArtifactKind
from orchestrator.board import Board
from orchestrator.deploy.release_files import LocalFile, LocalFileDocument, ReleaseFiles
from orchestrator.deploy.release_listing import (
    Listing,
    ReleaseInfo,
    VerifiedRecord,
    layout_for,
    make_release_id,
    releases_to_prune,
)
from orchestrator.deploy.survey_format import Survey
from orchestrator.errors import UsageError
from orchestrator.fleet.board_facts import BoardFacts

# Installing unpacks wheels (and compiles .pyc): the venv needs a few times the wheels' size.
INSTALL_SPACE_FACTOR = 4


class NativeDocument(TypedDict):
    """release.json's ``native``: where the runner is, what it links, their sizes (the footprint)."""

    runner: str
    runner_sha256: str
    runner_size: int
    library: str
    library_size: int | None
    ort_version: str | None


class _ReleaseDocumentFields(TypedDict):
    id: str
    variant: str
    target: str
    ort_version: str
    wheel: str
    wheel_sha256: str
    models: dict[str, str]  # "<name>.onnx" -> sha256
    dependencies: dict[str, str]  # wheel file name -> sha256
    agent: dict[str, str]  # file name -> sha256
    python_version: str
    created: str
    manifest: dict[str, object]  # the artifact's manifest.json, as it is


class ReleaseDocument(_ReleaseDocumentFields, total=False):
    """A release's ``release.json``, written last on the board (a release without it is never used)."""

    native: NativeDocument  # only when the artifact has a native runner


class NativeReleaseDocument(TypedDict):
    """The ``release.json`` of a C library build's release: no wheel, no venv, no board Python."""

    id: str
    kind: Literal["library"]
    variant: str
    target: str
    ort_version: str
    models: dict[str, str]  # "<name>.onnx" -> sha256
    libraries: dict[str, str]  # file under native/ (lib/..., include/...) -> sha256
    agent: dict[str, str]  # file name -> sha256 (the README: the agent itself needs Python)
    native: NativeDocument
    created: str
    manifest: dict[str, object]  # the artifact's manifest.json, as it is


class _BoardPlanKeys(TypedDict):
    board: str
    address: str
    workdir: str
    release_id: str
    release_dir: str
    python: str | None
    current: str | None
    release_exists: bool
    unchanged: bool
    already_verified: bool
    verified: dict[str, object] | None  # the board's verified.json of this release
    reuse_from: str | None
    files: list[LocalFileDocument]
    send: list[LocalFileDocument]
    bytes_to_send: int
    already_there: list[LocalFileDocument]
    venv_argv: list[str]
    install_argv: list[str]
    prune: list[str]
    free_bytes: int | None
    space_needed: int
    facts: dict[str, object]


class BoardPlanDocument(_BoardPlanKeys, total=False):
    """A board's plan as ``orch deploy --dry-run`` prints it."""

    # Said only of a C library build's release: a wheel's plan reads as it always did.
    kind: ArtifactKind
    verify_argv: list[list[str]]


class RollbackDocument(TypedDict):
    rollback_from: str | None
    rollback_to: str


@dataclass(frozen=True, kw_only=True)
class BoardPlan:
    """Everything one board's deploy does, decided before it starts."""

    board: str
    address: str
    workdir: str
    release_id: str
    release_dir: str
    # The release's interpreter (relative to the login home unless workdir is absolute); None for a
    # C library build's release, which has none.
    python: str | None
    files: tuple[LocalFile, ...]
    to_send: tuple[LocalFile, ...]  # unique contents missing from the board's store
    already_there: tuple[LocalFile, ...]  # unique contents the store already has
    release_exists: bool  # a complete release with this id is on the board: nothing to install
    reuse_from: str | None  # a release on the board with the very same wheels: its packages are hard-linked
    current: str | None  # the board's current release before this deploy
    venv_argv: tuple[str, ...]
    install_argv: tuple[str, ...]
    release_document: ReleaseDocument | NativeReleaseDocument
    prune: tuple[str, ...]  # releases the deploy will delete afterwards (--keep)
    free_bytes: int | None
    space_needed: int
    facts: BoardFacts  # what was read from the board
    # The board's record of this release's passed verification (verified.json), if it has one.
    verified: VerifiedRecord | None = None
    kind: ArtifactKind = "wheel"  # "library": a C library build's release, verified by its runner
    # A C library build's release: the runner's command per model that verifies it (native_plan).
    verify_argv: tuple[tuple[str, ...], ...] = ()

    @property
    def bytes_to_send(self) -> int:
        return sum(f.size for f in self.to_send)

    @property
    def models(self) -> dict[str, str]:
        return {f.name.removeprefix("models/"): f.sha256 for f in self.files if f.role == "model"}

    @property
    def unchanged(self) -> bool:
        return self.release_exists and self.current == self.release_id

    @property
    def already_verified(self) -> bool:
        """Current already, and verified on this board since it became so: nothing to do (the
        release's content is fixed by its id), unless ``--verify`` asks to verify again."""
        return self.unchanged and self.verified is not None

    def as_dict(self) -> BoardPlanDocument:
        document = BoardPlanDocument(
            board=self.board,
            address=self.address,
            workdir=self.workdir,
            release_id=self.release_id,
            release_dir=self.release_dir,
            python=self.python,
            current=self.current,
            release_exists=self.release_exists,
            unchanged=self.unchanged,
            already_verified=self.already_verified,
            verified=self.verified.document if self.verified else None,
            reuse_from=self.reuse_from,
            files=[f.as_dict() for f in self.files],
            send=[f.as_dict() for f in self.to_send],
            bytes_to_send=self.bytes_to_send,
            already_there=[f.as_dict() for f in self.already_there],
            venv_argv=list(self.venv_argv),
            install_argv=list(self.install_argv),
            prune=list(self.prune),
            free_bytes=self.free_bytes,
            space_needed=self.space_needed,
            facts=self.facts.as_dict(),
        )
        if self.kind == "library":
            document["kind"] = self.kind
            document["verify_argv"] = [list(argv) for argv in self.verify_argv]
        return document


@dataclass(frozen=True, kw_only=True)
class RollbackPlan:
    """What a rollback does on one board: switch ``current`` from one release back to another."""

    board: str
    rollback_from: str | None  # the current release (None: the board has none)
    rollback_to: str

    def as_dict(self) -> RollbackDocument:
        return RollbackDocument(rollback_from=self.rollback_from, rollback_to=self.rollback_to)


def plan_board(board: Board, survey: Survey, files: ReleaseFiles, *, keep: int, created: str) -> BoardPlan:
    """The plan for one board: ``survey`` is what was read from it (facts, store, releases),
    ``files`` what the workstation puts in the release; ``keep`` is --keep."""
    layout = layout_for(board)
    facts, listing = survey.facts, survey.listing
    release = checked_names(files.all)
    release_id = make_release_id(
        files.artifact.variant,
        files.artifact.ort_version,
        [f"{f.role}:{f.name}:{f.sha256}" for f in release]
        + [f"target:{files.artifact.target}", f"python:{facts.python_short}"],
    )
    release_dir = layout.release(release_id)
    to_send, already = split_by_store(release, listing.store)
    existing = listing.get(release_id)
    document = _release_document(release_id, files.artifact, release, facts=facts, created=created)
    reuse_from = None if existing is not None else _same_wheels(listing, document)
    new_release = ReleaseInfo(
        id=release_id,
        variant=files.artifact.variant,
        target=files.artifact.target,
        ort_version=files.artifact.ort_version,
        path=release_dir,
        python=layout.python(release_id),
        last_used="9999",
    )
    installs = existing is None and reuse_from is None
    return BoardPlan(
        board=board.name,
        address=board.address,
        workdir=layout.workdir,
        release_id=release_id,
        release_dir=release_dir,
        python=layout.python(release_id),
        files=release,
        to_send=to_send,
        already_there=already,
        release_exists=existing is not None,
        reuse_from=reuse_from,
        current=listing.current,
        venv_argv=(board.python, "-m", "venv", "--without-pip", posixpath.join(release_dir, "venv")),
        install_argv=_install_argv(release_dir, release, files.wheels),
        release_document=document,
        prune=tuple(releases_to_prune(listing_after(listing, new_release), keep=keep)),
        free_bytes=facts.free_bytes,
        space_needed=sum(f.size for f in to_send)
        + (INSTALL_SPACE_FACTOR * sum(f.size for f in files.wheels) if installs else 0),
        facts=facts,
        verified=existing.verified if existing is not None else None,
    )


def checked_names(files: tuple[LocalFile, ...]) -> tuple[LocalFile, ...]:
    """The release's files, refused when two would land on the same path."""
    names = [f.name for f in files]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"two files would land on the same path in the release: {', '.join(duplicates)}")
    return files


def split_by_store(
    files: Sequence[LocalFile], store: Collection[str]
) -> tuple[tuple[LocalFile, ...], tuple[LocalFile, ...]]:
    """Unique contents (by sha256) the board's store lacks, and those it has."""
    present = set(store)
    unique: dict[str, LocalFile] = {}
    for f in files:
        unique.setdefault(f.sha256, f)
    to_send = tuple(f for sha, f in unique.items() if sha not in present)
    already = tuple(f for sha, f in unique.items() if sha in present)
    return to_send, already


def _install_argv(
    release_dir: str, files: Sequence[LocalFile], wheels: Sequence[LocalFile]
) -> tuple[str, ...]:
    """pip install of the wheel from the release's wheels/, offline, into the release's venv."""
    wheel = next(f for f in files if f.role == "wheel")
    pip_wheel = next((f for f in wheels if f.role == "dependency" and f.name.startswith("wheels/pip-")), None)
    # pip runs straight from its wheel (a zip on sys.path): the board needs no pip of its own. It runs
    # inside the release directory with relative paths because pip parses a requirement that is a
    # path as text: a workdir with spaces or quotes would be misread as a requirement specifier.
    pip = (f"{pip_wheel.name}/pip",) if pip_wheel else ("-m", "pip")
    return (
        "sh",
        "-c",
        'cd -- "$1" && shift && exec "$@"',
        "sh",
        release_dir,
        "venv/bin/python",
        *pip,
        "install",
        "--no-index",
        "--find-links",
        "wheels",
        "--no-input",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--no-warn-script-location",
        # .pyc files are written at first import instead: only for the modules really used.
        "--no-compile",
        wheel.name,
    )


def by_role(files: Sequence[LocalFile], role: str, prefix: str) -> dict[str, str]:
    return {f.name.removeprefix(prefix): f.sha256 for f in files if f.role == role}


def _release_document(
    release_id: str, artifact: Artifact, files: Sequence[LocalFile], *, facts: BoardFacts, created: str
) -> ReleaseDocument:
    wheel = next(f for f in files if f.role == "wheel")
    document = ReleaseDocument(
        id=release_id,
        variant=artifact.variant,
        target=artifact.target,
        ort_version=artifact.ort_version,
        wheel=wheel.name.removeprefix("wheels/"),
        wheel_sha256=wheel.sha256,
        models=by_role(files, "model", "models/"),
        dependencies=by_role(files, "dependency", "wheels/"),
        agent=by_role(files, "agent", "agent/"),
        python_version=facts.python_version,
        created=created,
        manifest=artifact.manifest.to_json(),
    )
    native = _native_document(artifact, files)
    if native is not None:
        document["native"] = native
    return document


def _native_document(artifact: Artifact, files: Sequence[LocalFile]) -> NativeDocument | None:
    """release.json's ``native``: where the runner is, what it links, their sizes (the footprint)."""
    runner = next((f for f in files if f.role == "runner"), None)
    record = artifact.manifest.native_runner
    if runner is None or record is None or not record.library:
        return None
    return NativeDocument(
        runner=runner.name,
        runner_sha256=runner.sha256,
        runner_size=runner.size,
        library=posixpath.basename(record.library),
        library_size=record.library_size,
        ort_version=record.ort_version,
    )


def listing_after(listing: Listing, new_release: ReleaseInfo) -> Listing:
    """The board's releases once ``new_release`` is current: what --keep counts to prune. The
    release current until now is the rollback target: it counts as the most recently used."""
    return Listing(
        workdir_abs=listing.workdir_abs,
        current=new_release.id,
        releases=(
            *[
                replace(r, last_used="9998") if r.id == listing.current else r
                for r in listing.releases
                if r.id != new_release.id
            ],
            new_release,
        ),
        incomplete=tuple(i for i in listing.incomplete if i != new_release.id),
    )


def _same_wheels(listing: Listing, document: ReleaseDocument) -> str | None:
    """A complete release whose installed packages are exactly what this one would install.

    Only the models or the agent changed: copying its site-packages as hard links gives the
    same result as running pip again, in a second instead of minutes on a small board."""
    wanted = (document["wheel_sha256"], document["dependencies"], document["python_version"])
    for release in reversed(listing.releases):  # most recently used first
        found = release.document
        if (found.get("wheel_sha256"), found.get("dependencies"), found.get("python_version")) == wanted:
            return release.id
    return None
