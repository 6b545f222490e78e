"""Releases on a board, as orch reads them: the on-board layout, release ids, the release listing's
parser and the choices made from a listing (rollback, prune). Pure: no session, no board.

Layout under the board's working directory (relative paths are relative to the login home)::

    <workdir>/
      store/sha256/<hex>          content-addressed uploads (wheels, dependency wheels, models, agent files)
      releases/<release-id>/      one per deployed content; <variant>-<ort-version>-<8 hex>
          release.json            written last: a release without it is incomplete and never used
          verified.json           its verification passed on this board (before it became current)
          venv/bin/python         the release's interpreter
          wheels/<file>.whl       hard links into the store (what pip installed from, --no-index)
          models/<name>.onnx      hard links into the store
          agent/                  the on-device agent
          native/                 the native runner, and in lib/ links to ORT's C library; a C library
                                  build's release (kind "library") has it as files instead of venv/ and
                                  wheels/, and its agent/ holds the README alone
      current -> releases/<id>    replaced atomically by a rename, only ever by a verified release
      .orch.lock(.holder)         the board lock (``orchestrator.deploy.board_lock``) and its holder
      history                     "<utc time> <release-id>" per switch, newest last (rollback order)

``orchestrator.deploy.releases`` runs the board-side scripts that list, switch and prune; the plans
(``orchestrator.deploy.plan``, ``orchestrator.verify.plan``) read only this module, so they stay
apart from the session.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from orchestrator.errors import DeployError

if TYPE_CHECKING:
    from orchestrator.board import Board

RELEASE_JSON = "release.json"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def normalize_workdir(workdir: str) -> str:
    """``~/orch`` and ``orch`` mean the same: relative to the login home. Refuses unusable values."""
    if not workdir or "\n" in workdir or "\0" in workdir:
        raise DeployError(f"unusable workdir {workdir!r}: it must be a non-empty single-line path")
    if workdir == "~":
        return "."
    workdir = workdir.removeprefix("~/")
    return workdir.rstrip("/") or "/"


@dataclass(frozen=True, kw_only=True)
class Layout:
    """Paths of the on-board layout, as the board's login shell sees them (relative to home or absolute)."""

    workdir: str

    @property
    def store(self) -> str:
        return posixpath.join(self.workdir, "store", "sha256")

    def blob(self, sha256: str) -> str:
        return posixpath.join(self.store, sha256)

    @property
    def releases(self) -> str:
        return posixpath.join(self.workdir, "releases")

    def release(self, release_id: str) -> str:
        return posixpath.join(self.releases, release_id)

    def python(self, release_id: str) -> str:
        return posixpath.join(self.release(release_id), "venv", "bin", "python")

    @property
    def current(self) -> str:
        return posixpath.join(self.workdir, "current")

    @property
    def history(self) -> str:
        return posixpath.join(self.workdir, "history")


def layout_for(board: Board) -> Layout:
    return Layout(workdir=normalize_workdir(board.workdir))


def make_release_id(variant: str, ort_version: str, content: Iterable[str]) -> str:
    """``<variant>-<ort-version>-<8 hex>``: the hex is a digest of everything the release holds,
    so deploying the same content again yields the same release (and nothing to do)."""
    digest = hashlib.sha256("\n".join(sorted(content)).encode()).hexdigest()[:8]
    safe_variant = "".join(c if c.isalnum() or c in "._" else "_" for c in variant) or "variant"
    safe_version = "".join(c if c.isalnum() or c in "._+" else "_" for c in ort_version) or "unknown"
    return f"{safe_variant}-{safe_version}-{digest}"


@dataclass(frozen=True, kw_only=True)
class VerifiedRecord:
    """A release's ``verified.json``: the verification that passed on this board once the release
    was current (a release's content never changes, so it stays true until the board itself changes)."""

    release: str
    verified_at: str | None  # when it ran (UTC, ISO 8601)
    # The record as the board keeps it: its ``verification`` is parsed when used (a record that does
    # not parse is no proof, and the release is verified again).
    document: dict[str, object]


class ReleaseSummary(TypedDict):
    """A release as ``orch deploy --list`` and ``--json`` show it."""

    id: str
    variant: str
    target: str
    ort_version: str
    path: str
    python: str
    models: dict[str, str]
    created: str
    current: bool
    last_used: str


@dataclass(frozen=True, kw_only=True)
class ReleaseInfo:
    id: str
    variant: str
    target: str
    ort_version: str
    path: str  # absolute on the board
    python: str  # absolute path of the release's interpreter
    models: dict[str, str] = field(default_factory=dict)  # "<name>.onnx" -> sha256
    created: str = ""
    current: bool = False
    last_used: str = ""  # last time `current` was switched to it ("" when never)
    # Its release.json as read (written by an orch of any version: its readers check each key they use).
    document: dict[str, object] = field(default_factory=dict, compare=False)
    verified: VerifiedRecord | None = field(default=None, compare=False)

    def as_dict(self) -> ReleaseSummary:
        return ReleaseSummary(
            id=self.id,
            variant=self.variant,
            target=self.target,
            ort_version=self.ort_version,
            path=self.path,
            python=self.python,
            models=dict(self.models),
            created=self.created,
            current=self.current,
            last_used=self.last_used,
        )


@dataclass(frozen=True, kw_only=True)
class Listing:
    """What is on a board: complete releases (oldest use first), the current id, incomplete leftovers,
    and the contents of the store (sha256 names)."""

    workdir_abs: str
    current: str | None
    releases: tuple[ReleaseInfo, ...]
    incomplete: tuple[str, ...]
    store: frozenset[str] = frozenset()

    def get(self, release_id: str) -> ReleaseInfo | None:
        return next((r for r in self.releases if r.id == release_id), None)


def recency(release: ReleaseInfo) -> tuple[str, str, str]:
    """Sort key: least recently used first (last switch to it, else its creation time)."""
    return (release.last_used or release.created, release.created, release.id)


def parse_listing(text: str) -> Listing:
    """Pure: list_releases.sh's output -> Listing."""
    lines = _ListingLines()
    for line in text.splitlines():
        kind, _, rest = line.partition("\t")
        lines.add(kind, rest)
    return lines.listing()


class _ListingLines:
    """list_releases.sh's lines (``<kind>\\t<rest>``), gathered by kind."""

    def __init__(self) -> None:
        self.workdir_abs = ""
        self.current: str | None = None
        self.last_used: dict[str, str] = {}
        self.documents: dict[str, dict[str, object]] = {}
        self.verified: dict[str, VerifiedRecord] = {}
        self.incomplete: list[str] = []
        self.store: set[str] = set()

    def add(self, kind: str, rest: str) -> None:
        if kind == "workdir":
            self.workdir_abs = rest
        elif kind == "current":
            self.current = posixpath.basename(rest.rstrip("/")) or None
        elif kind == "history":
            when, _, release_id = rest.partition(" ")
            if release_id:
                self.last_used[release_id] = when
        elif kind == "release":
            self._release(*_split_document(rest))
        elif kind == "verified":
            self._verified(*_split_document(rest))
        elif kind == "incomplete":
            self.incomplete.append(rest)
        elif kind == "blob" and _SHA256.match(rest):
            self.store.add(rest)

    def _release(self, release_id: str, document: str) -> None:
        try:
            found = json.loads(document)
        except json.JSONDecodeError:
            found = None
        if isinstance(found, dict):
            self.documents[release_id] = found
        else:
            self.incomplete.append(release_id)  # a damaged release.json is as good as none

    def _verified(self, release_id: str, document: str) -> None:
        try:
            record = json.loads(document)
        except json.JSONDecodeError:
            return  # a damaged record proves nothing: the release is verified again
        if isinstance(record, dict) and record.get("release") == release_id:
            when = record.get("verified_at")
            self.verified[release_id] = VerifiedRecord(
                release=release_id, verified_at=str(when) if when else None, document=record
            )

    def _release_info(self, release_id: str, doc: dict[str, object]) -> ReleaseInfo:
        path = posixpath.join(self.workdir_abs, "releases", release_id)
        return ReleaseInfo(
            id=release_id,
            variant=str(doc.get("variant", "")),
            target=str(doc.get("target", "")),
            ort_version=str(doc.get("ort_version", "")),
            path=path,
            python=posixpath.join(path, "venv", "bin", "python"),
            models=_models(doc.get("models")),
            created=str(doc.get("created", "")),
            current=release_id == self.current,
            last_used=self.last_used.get(release_id, ""),
            document=doc,
            verified=self.verified.get(release_id),
        )

    def listing(self) -> Listing:
        releases = sorted(
            (self._release_info(release_id, doc) for release_id, doc in self.documents.items()), key=recency
        )
        return Listing(
            workdir_abs=self.workdir_abs,
            current=self.current,
            releases=tuple(releases),
            incomplete=tuple(self.incomplete),
            store=frozenset(self.store),
        )


def _models(value: object) -> dict[str, str]:
    """release.json's ``models`` ("<name>.onnx" -> sha256); what is not such an entry is left out."""
    if not isinstance(value, dict):
        return {}
    return {str(name): sha256 for name, sha256 in value.items() if isinstance(sha256, str)}


def _split_document(rest: str) -> tuple[str, str]:
    """``<release id>\\t<JSON>``."""
    release_id, _, document = rest.partition("\t")
    return release_id, document


def choose_rollback(listing: Listing, *, board: str) -> ReleaseInfo:
    """The release to go back to: the most recently used one that is not current.

    Releases that were current once (in the switch history) come first: a release installed by a
    deploy whose verification failed was never current, and going "back" to it would be going
    forward to a release that already failed."""
    if listing.current is None:
        raise DeployError(f"{board}: nothing to roll back: no release is current")
    candidates = [r for r in listing.releases if r.id != listing.current]
    if not candidates:
        raise DeployError(
            f"{board}: nothing to roll back to: {listing.current} is the only release on the board"
        )
    used = [r for r in candidates if r.last_used]
    return (used or candidates)[-1]


def releases_to_prune(listing: Listing, *, keep: int, protect: Iterable[str] = ()) -> list[str]:
    """Ids to delete so that ``keep`` complete releases stay (the current one and ``protect`` always stay),
    plus every incomplete leftover."""
    if keep < 1:
        raise DeployError(f"--keep must be at least 1 (got {keep})")
    protected = set(protect) | ({listing.current} if listing.current else set())
    ordered = [r.id for r in sorted(listing.releases, key=recency)]  # least recently used first
    survivors = [i for i in ordered if i in protected]
    for release_id in reversed(ordered):
        if len(survivors) >= keep:
            break
        if release_id not in survivors:
            survivors.append(release_id)
    doomed = [i for i in ordered if i not in survivors]
    return doomed + [i for i in listing.incomplete if i not in protected]
