"""The plan of a "native release": a C library build (``orch build --scope library``) on one board,
computed without touching it. Pure.

Such a release runs no Python (the boards it is for have a Python ORT's wheel cannot target), so
it has no venv, no pip and no dependency wheels. It holds::

    native/orch-runner            the runner (RPATH $ORIGIN/lib)
    native/lib/<file>             ORT's C library and the libraries it needs; the SONAME link
                                  (libonnxruntime.so.1) is made on the board (link_native_library.sh)
    native/include/<header>       the C API header of the release, for the user's own programs
    models/<name>.onnx
    agent/README.md

and is sent, staged, sealed, verified, switched and pruned as a wheel's release is; only what
installs it and what verifies it differ (``verify_argv``: the runner, one inference per model).
The release id digests every file and the kind, and not the board's Python: the same content on
two boards is the same release.
"""

from __future__ import annotations

import posixpath

from orchestrator.board import Board
from orchestrator.deploy.native_verify_command import runner_verify_argv
from orchestrator.deploy.plan import (
    BoardPlan,
    NativeDocument,
    NativeReleaseDocument,
    by_role,
    checked_names,
    listing_after,
    split_by_store,
)
from orchestrator.deploy.release_files import NATIVE_DIR, LocalFile, ReleaseFiles
from orchestrator.deploy.release_listing import ReleaseInfo, layout_for, make_release_id, releases_to_prune
from orchestrator.deploy.survey_format import Survey
from orchestrator.errors import UsageError


def plan_native_board(
    board: Board, survey: Survey, files: ReleaseFiles, *, keep: int, created: str
) -> BoardPlan:
    """The plan for one board of a C library build's release: ``files.native`` holds the build's
    files (``native/...``), ``files.models`` the models the runner verifies it with."""
    artifact = files.artifact
    if not files.models:
        raise UsageError(
            f"{board.name}: a release of a C library build is verified by its native runner running each"
            " of its models, and none is given",
            hint="give the models to deploy with --model PATH (or put them in ./models/)",
        )
    layout = layout_for(board)
    listing = survey.listing
    release = checked_names(files.all)
    release_id = make_release_id(
        artifact.variant,
        artifact.ort_version,
        [f"{f.role}:{f.name}:{f.sha256}" for f in release] + [f"target:{artifact.target}", "kind:library"],
    )
    release_dir = layout.release(release_id)
    to_send, already = split_by_store(release, listing.store)
    existing = listing.get(release_id)
    document = native_release_document(release_id, files, release, created=created)
    new_release = ReleaseInfo(
        id=release_id,
        variant=artifact.variant,
        target=artifact.target,
        ort_version=artifact.ort_version,
        path=release_dir,
        python=layout.python(release_id),
        last_used="9999",
    )
    runner = document["native"]["runner"]
    return BoardPlan(
        board=board.name,
        address=board.address,
        workdir=layout.workdir,
        release_id=release_id,
        release_dir=release_dir,
        python=None,
        files=release,
        to_send=to_send,
        already_there=already,
        release_exists=existing is not None,
        reuse_from=None,
        current=listing.current,
        venv_argv=(),
        install_argv=(),
        release_document=document,
        prune=tuple(releases_to_prune(listing_after(listing, new_release), keep=keep)),
        free_bytes=survey.facts.free_bytes,
        # Nothing is unpacked or installed: what is sent is what the release takes.
        space_needed=sum(f.size for f in to_send),
        facts=survey.facts,
        verified=existing.verified if existing is not None else None,
        kind="library",
        verify_argv=tuple(
            runner_verify_argv(release_dir, runner, model) for model in sorted(document["models"])
        ),
    )


def native_release_document(
    release_id: str, files: ReleaseFiles, release: tuple[LocalFile, ...], *, created: str
) -> NativeReleaseDocument:
    """release.json of a C library build's release: its files, the runner and library it holds."""
    artifact = files.artifact
    record = artifact.manifest.native_runner
    runner = next((f for f in release if f.role == "runner"), None)
    if runner is None or record is None or not record.library:
        raise UsageError(f"{artifact.directory}: the C library build has no runner or no library recorded")
    prefix = f"{NATIVE_DIR}/"
    return NativeReleaseDocument(
        id=release_id,
        kind="library",
        variant=artifact.variant,
        target=artifact.target,
        ort_version=artifact.ort_version,
        models=by_role(release, "model", "models/"),
        libraries={f.name.removeprefix(prefix): f.sha256 for f in release if f.role in ("library", "header")},
        agent=by_role(release, "agent", "agent/"),
        native=NativeDocument(
            runner=runner.name,
            runner_sha256=runner.sha256,
            runner_size=runner.size,
            library=posixpath.basename(record.library),
            library_size=record.library_size,
            ort_version=record.ort_version,
        ),
        created=created,
        manifest=artifact.manifest.to_json(),
    )
