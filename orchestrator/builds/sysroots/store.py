"""The sysroot store: trees of boards' headers and libraries, kept by content hash.

Layout under ``$ORCH_HOME/sysroots/``::

    <digest>/root/          the tree (usr/include, lib/<triplet>, usr/lib/<triplet>, ...)
    <digest>/sysroot.json   where it came from, when, the board's facts, glibc, Python, the GPU
                            stack (CUDA, cuDNN, TensorRT), files, size
    index.json              name (a board, or the --name of an added rootfs) -> digest

The digest is a SHA-256 over the tree's content (each path with its file hash or link target),
not over the tarball, whose bytes change with every pack: pulling an unchanged board again
gives the same digest, and nothing new is stored.

Whatever the source (a board's tarball, a rootfs tarball, a rootfs directory), only the part a
cross compiler needs is kept, and nothing is ever written through a link (``staging``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TypedDict

from orchestrator.builds.sysroots.contents import Sysroot, SysrootError
from orchestrator.builds.sysroots.gpu import GpuStack, read_gpu_stack
from orchestrator.builds.sysroots.staging import StagingTree, stage_directory, stage_tarball
from orchestrator.common.json_fields import JsonFields, JsonSource
from orchestrator.errors import UsageError
from orchestrator.paths import orch_home

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_index_lock = threading.Lock()


def store_root() -> Path:
    return orch_home() / "sysroots"


def check_name(name: str) -> str:
    """A sysroot name (a board's, or ``--name``): letters, digits, ``_.-``; it names files."""
    if not _NAME.match(name):
        raise UsageError(
            f"sysroot name {name!r}: use letters, digits, '_', '.' and '-' (at most 64, starting with a"
            " letter or digit)"
        )
    return name


# -- the records ---------------------------------------------------------------------------------------


class OsRelease(TypedDict):
    id: str  # os-release's ID, VERSION_ID and PRETTY_NAME ("" when it does not say)
    version: str
    name: str


# Which development files the tree has ("c++" is no identifier: the functional form).
Headers = TypedDict("Headers", {"libc": bool, "python": bool, "c++": bool})


class GpuVersions(TypedDict, total=False):
    """The GPU stack a tree holds (``gpu.read_gpu_stack``), each None when it has none. A record
    stored before orch read them has none of these keys: unknown, not absent."""

    cuda: str | None  # "12.6.1" (version.json) or "12.4" (CUDART_VERSION)
    cudnn: str | None  # "9.3.0"
    tensorrt: str | None  # "10.3.0"


class SysrootDescription(GpuVersions):
    """What a stored tree says about itself (read from its files)."""

    glibc: str | None
    python: str | None  # the board's Python (X.Y), None when the tree has none
    triplet: str | None
    os: OsRelease
    headers: Headers
    missing_dev_packages: list[str]  # the Debian/Ubuntu packages that bring the missing headers


class Provenance(TypedDict, total=False):
    """Where a name's tree came from, beyond kind and source: a board's pull, or a rootfs added."""

    board: str
    pulled_at: str
    board_facts: dict[str, object]  # fleet.board_facts.BoardFacts.as_dict() at the pull
    added_at: str


class SysrootRecord(SysrootDescription, Provenance):
    """``sysroot.json``: written once with the tree, never changed (``orch sysroot list --json``'s
    ``record`` is it, with the name's own provenance on top)."""

    name: str  # the name it was first stored under
    kind: str  # "board" | "rootfs"
    source: str  # "<board> (<address>)" or the rootfs's path
    stored_at: str
    files: int
    size: int  # bytes
    digest: str


@dataclass(frozen=True, kw_only=True)
class IndexEntry:
    """A name of ``index.json``: its tree and its own provenance (two boards may share a tree)."""

    digest: str
    kind: str
    source: str
    stored_at: str | None = None  # when the name first pointed at this digest
    checked_at: str | None = None  # the last pull or add under this name
    provenance: Provenance = field(default_factory=Provenance)
    extra: dict[str, object] = field(default_factory=dict)  # keys this orch does not know: kept

    @classmethod
    def read(cls, f: JsonFields) -> IndexEntry:
        digest = f.required_text("digest")
        if not _DIGEST.fullmatch(digest):
            raise f.problem(f"key '{f.prefix}digest' must be a sha256, not {digest!r}")
        return cls(
            digest=digest,
            kind=f.required_text("kind"),
            source=f.required_text("source"),
            stored_at=f.text("stored_at"),
            checked_at=f.text("checked_at"),
            provenance=_read_provenance(f),
            extra=f.rest(),
        )

    def as_json(self) -> dict[str, object]:
        document: dict[str, object] = {**self.extra, **self.provenance}
        document.update(digest=self.digest, kind=self.kind, source=self.source)
        if self.stored_at is not None:
            document["stored_at"] = self.stored_at
        if self.checked_at is not None:
            document["checked_at"] = self.checked_at
        return document


def _add_provenance(record: SysrootRecord, provenance: Provenance) -> None:
    """``provenance`` written over ``record``'s (a TypedDict's update takes only its own type)."""
    if "board" in provenance:
        record["board"] = provenance["board"]
    if "pulled_at" in provenance:
        record["pulled_at"] = provenance["pulled_at"]
    if "board_facts" in provenance:
        record["board_facts"] = provenance["board_facts"]
    if "added_at" in provenance:
        record["added_at"] = provenance["added_at"]


def _read_provenance(f: JsonFields) -> Provenance:
    provenance = Provenance()
    if (board := f.text("board")) is not None:
        provenance["board"] = board
    if (pulled_at := f.text("pulled_at")) is not None:
        provenance["pulled_at"] = pulled_at
    if (facts := f.document_value("board_facts")) is not None:
        provenance["board_facts"] = facts
    if (added_at := f.text("added_at")) is not None:
        provenance["added_at"] = added_at
    return provenance


_AGAIN = "pull or add that sysroot again (orch sysroot pull / add)"
_DIGEST = re.compile(r"[0-9a-f]{64}")


def record_from_json(document: object, *, source: str | Path) -> SysrootRecord:
    """A ``sysroot.json`` as a SysrootRecord; a missing key or one of the wrong kind is a UsageError
    naming the file and the key."""
    f = JsonFields(
        document,
        JsonSource(
            where=str(source), error=UsageError, hint=_AGAIN, not_object_hint=_AGAIN, whole="a sysroot record"
        ),
    )
    os_fields, headers = f.required_child("os"), f.required_child("headers")
    record = SysrootRecord(
        name=f.required_text("name"),
        kind=f.required_text("kind"),
        source=f.required_text("source"),
        stored_at=f.required_text("stored_at"),
        glibc=f.text("glibc"),
        python=f.text("python"),
        triplet=f.text("triplet"),
        os=OsRelease(
            id=os_fields.text("id") or "",
            version=os_fields.text("version") or "",
            name=os_fields.text("name") or "",
        ),
        headers={
            "libc": headers.flag("libc") or False,
            "python": headers.flag("python") or False,
            "c++": headers.flag("c++") or False,
        },
        missing_dev_packages=list(f.texts("missing_dev_packages") or ()),
        files=f.required_integer("files"),
        size=f.required_integer("size"),
        digest=f.required_text("digest"),
    )
    _add_gpu(record, _read_gpu(f))
    _add_provenance(record, _read_provenance(f))
    return record


def _read_gpu(f: JsonFields) -> GpuVersions:
    """The GPU keys a record has (an older record has none: unknown)."""
    gpu = GpuVersions()
    if "cuda" in f.document:
        gpu["cuda"] = f.text("cuda")
    if "cudnn" in f.document:
        gpu["cudnn"] = f.text("cudnn")
    if "tensorrt" in f.document:
        gpu["tensorrt"] = f.text("tensorrt")
    return gpu


def _add_gpu(record: SysrootDescription, gpu: GpuVersions) -> None:
    if "cuda" in gpu:
        record["cuda"] = gpu["cuda"]
    if "cudnn" in gpu:
        record["cudnn"] = gpu["cudnn"]
    if "tensorrt" in gpu:
        record["tensorrt"] = gpu["tensorrt"]


def gpu_stack(record: GpuVersions) -> GpuStack | None:
    """The GPU stack a record names; None for a record stored before orch read it (unknown)."""
    if not any(key in record for key in ("cuda", "cudnn", "tensorrt")):
        return None
    return GpuStack(cuda=record.get("cuda"), cudnn=record.get("cudnn"), tensorrt=record.get("tensorrt"))


# -- the store ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StoredSysroot:
    """One name of the index and the stored tree it points at."""

    name: str
    digest: str
    directory: Path  # $ORCH_HOME/sysroots/<digest>
    tree: SysrootRecord  # sysroot.json, written when the tree was first stored (under any name)
    entry: IndexEntry  # this name's index entry: kind, source, stored_at, checked_at, its own facts

    @property
    def record(self) -> SysrootRecord:
        """What is known under this name: the tree's facts, with this name's own provenance on top.

        Two identical boards share one stored tree; each keeps its own board facts and pull time."""
        record = self.tree.copy()
        _add_provenance(record, self.entry.provenance)
        record["name"], record["kind"], record["source"] = self.name, self.entry.kind, self.entry.source
        if self.entry.stored_at is not None:
            record["stored_at"] = self.entry.stored_at
        return record

    @property
    def sysroot(self) -> Sysroot:
        return Sysroot(root=self.directory / "root", name=self.name)


@dataclass(frozen=True, kw_only=True)
class StoreOutcome:
    stored: StoredSysroot
    new: bool  # False: a tree with this digest was already stored, nothing new was written
    previous_digest: str | None  # what the name pointed at before (None: a new name)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(kw_only=True)
class SysrootIndex:
    """``index.json``: ``{"sysroots": {name: entry}}``, read and written only here."""

    entries: dict[str, IndexEntry]
    extra: dict[str, object] = field(default_factory=dict)  # top-level keys this orch does not know

    @classmethod
    def from_json(cls, document: object, *, source: str | Path) -> SysrootIndex:
        again = "fix it, or delete it and pull/add the sysroots again"
        f = JsonFields(
            document, JsonSource(where=str(source), error=UsageError, hint=again, not_object_hint=again)
        )
        names = f.document_value("sysroots")
        if names is None:
            raise f.problem("key 'sysroots' must be a JSON object", hint="delete it and pull again")
        entries = f.required_child("sysroots")
        found = {}
        for name in sorted(names):
            entry = entries.child(name)
            if entry is None:
                raise f.problem(f"sysroot {name!r} has no valid 'digest'")
            found[name] = IndexEntry.read(entry)
        return cls(entries=found, extra=f.rest())

    def as_json(self) -> dict[str, object]:
        return {**self.extra, "sysroots": {name: entry.as_json() for name, entry in self.entries.items()}}


@contextlib.contextmanager
def _locked_index(root: Path) -> Iterator[SysrootIndex]:
    """The index, read and written back under a lock (boards are pulled in parallel threads, and
    two orch processes may share one ORCH_HOME)."""
    root.mkdir(parents=True, exist_ok=True)
    with _index_lock, (root / "index.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        index = _read_index(root)
        yield index
        tmp = root / "index.json.tmp"
        tmp.write_text(json.dumps(index.as_json(), indent=2, sort_keys=True) + "\n")
        tmp.replace(root / "index.json")


def _read_index(root: Path) -> SysrootIndex:
    path = root / "index.json"
    if not path.is_file():
        return SysrootIndex(entries={})
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{path}: not valid JSON (line {error.lineno}): {error.msg}",
            hint="fix it, or delete it and pull/add the sysroots again",
        ) from error
    return SysrootIndex.from_json(document, source=path)


def describe(sysroot: Sysroot) -> SysrootDescription:
    """What a stored tree says about itself (the part of sysroot.json read from the files)."""
    os_release = sysroot.os_release()
    gpu = read_gpu_stack(sysroot.root, sysroot.triplet)
    return SysrootDescription(
        glibc=sysroot.glibc,
        python=sysroot.python_version,
        triplet=sysroot.triplet,
        os=OsRelease(
            id=os_release.get("ID", ""),
            version=os_release.get("VERSION_ID", ""),
            name=os_release.get("PRETTY_NAME", ""),
        ),
        headers={
            "libc": sysroot.has_libc_headers,
            "python": sysroot.has_python_headers,
            "c++": sysroot.has_cxx_headers,
        },
        missing_dev_packages=list(sysroot.missing_dev_packages()),
        cuda=gpu.cuda,
        cudnn=gpu.cudnn,
        tensorrt=gpu.tensorrt,
    )


def store(
    name: str,
    stage: Callable[[StagingTree], None],
    *,
    kind: str,
    source: str,
    extra: Provenance | None = None,
) -> StoreOutcome:
    """Stage a tree with ``stage``, store it under its digest (unless already there), point ``name`` at it."""
    check_name(name)
    base = store_root()
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=base))
    try:
        tree = StagingTree(root=staging / "root")
        tree.root.mkdir()
        stage(tree)
        sysroot = Sysroot(root=tree.root, name=name)
        if sysroot.find_library("libc.so.6") is None:
            raise SysrootError(
                f"{source}: no libc.so.6 under lib/<triplet>, usr/lib/<triplet>, lib or usr/lib:"
                " not a Linux root file system (or not a glibc one)",
                hint="give the top directory of a root file system, or a tarball of one",
            )
        digest = tree.digest
        target = base / digest
        now_text = now()
        described = describe(sysroot)
        record = SysrootRecord(
            name=name,
            kind=kind,
            source=source,
            stored_at=now_text,
            glibc=described["glibc"],
            python=described["python"],
            triplet=described["triplet"],
            os=described["os"],
            headers=described["headers"],
            missing_dev_packages=described["missing_dev_packages"],
            files=tree.files,
            size=tree.size,
            digest=digest,
        )
        _add_gpu(record, described)
        _add_provenance(record, extra or Provenance())
        new = _move_in(staging, target, record)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    with _locked_index(base) as index:
        known = index.entries.get(name)
        previous = known.digest if known else None
        entry = IndexEntry(
            digest=digest,
            kind=kind,
            source=source,
            stored_at=(known.stored_at if known and previous == digest else None) or now_text,
            checked_at=now_text,
            provenance=extra or Provenance(),
        )
        index.entries[name] = entry
    stored = StoredSysroot(name=name, digest=digest, directory=target, tree=_read_record(target), entry=entry)
    return StoreOutcome(stored=stored, new=new, previous_digest=previous)


def _move_in(staging: Path, target: Path, record: SysrootRecord) -> bool:
    """The staged tree renamed to its digest's directory; False when that tree is stored already."""
    if (target / "sysroot.json").is_file():
        return False
    (staging / "sysroot.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    try:
        staging.rename(target)
    except OSError:
        # The same tree was stored meanwhile (two identical boards pulled in parallel).
        if not (target / "sysroot.json").is_file():
            raise
        return False
    return True


def store_tarball(
    name: str, tarball: Path, *, kind: str, source: str, extra: Provenance | None = None
) -> StoreOutcome:
    return store(name, lambda tree: stage_tarball(tarball, tree), kind=kind, source=source, extra=extra)


def store_directory(name: str, directory: Path, *, source: str) -> StoreOutcome:
    return store(name, lambda tree: stage_directory(directory, tree), kind="rootfs", source=source)


def _read_record(directory: Path) -> SysrootRecord:
    path = directory / "sysroot.json"
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: unreadable sysroot record: {error}", hint=_AGAIN) from error
    return record_from_json(document, source=path)


def list_sysroots(root: Path | None = None) -> list[StoredSysroot]:
    """Every name of the index with its stored tree, by name."""
    base = root or store_root()
    found = []
    for name, entry in sorted(_read_index(base).entries.items()):
        directory = base / entry.digest
        found.append(
            StoredSysroot(
                name=name, digest=entry.digest, directory=directory, tree=_read_record(directory), entry=entry
            )
        )
    return found


def find_sysroot(name: str, root: Path | None = None) -> StoredSysroot:
    """The stored sysroot called ``name`` (a board's name, or an added rootfs's --name)."""
    stored = {s.name: s for s in list_sysroots(root)}
    if name not in stored:
        known = ", ".join(stored) or "none yet"
        raise UsageError(
            f"no sysroot called {name!r} in {root or store_root()} (stored: {known})",
            hint=f"pull it from the board: orch sysroot pull --host {name}"
            " (or add a rootfs: orch sysroot add PATH --name NAME)",
        )
    return stored[name]


def remove_sysroot(name: str, root: Path | None = None) -> bool:
    """Forget ``name``; its tree goes too when no other name points at it. True when the tree was deleted."""
    base = root or store_root()
    find_sysroot(name, base)  # a clear error for a name that is not there
    with _locked_index(base) as index:
        digest = index.entries.pop(name).digest
        still_used = any(entry.digest == digest for entry in index.entries.values())
        if not still_used:
            # Renamed first: a half-deleted tree is never seen under its digest.
            doomed = base / f".removing-{digest}"
            (base / digest).rename(doomed)
            shutil.rmtree(doomed)
    return not still_used
