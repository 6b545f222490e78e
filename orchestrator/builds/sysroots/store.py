"""The sysroot store: trees of boards' headers and libraries, kept by content hash.

Layout under ``$ORCH_HOME/sysroots/``::

    <digest>/root/          the tree (usr/include, lib/<triplet>, usr/lib/<triplet>, ...)
    <digest>/sysroot.json   where it came from, when, the board's facts, glibc, Python, files, size
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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchestrator.builds.sysroots.contents import Sysroot, SysrootError
from orchestrator.builds.sysroots.staging import StagingTree, stage_directory, stage_tarball
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


# -- the store ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StoredSysroot:
    """One name of the index and the stored tree it points at."""

    name: str
    digest: str
    directory: Path  # $ORCH_HOME/sysroots/<digest>
    tree: dict[str, Any]  # sysroot.json, written when the tree was first stored (under any name)
    entry: dict[str, Any]  # this name's index entry: kind, source, stored_at, checked_at, its own facts

    @property
    def record(self) -> dict[str, Any]:
        """What is known under this name: the tree's facts, with this name's own provenance on top.

        Two identical boards share one stored tree; each keeps its own board facts and pull time."""
        return {**self.tree, **{k: v for k, v in self.entry.items() if k != "checked_at"}, "name": self.name}

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


@contextlib.contextmanager
def _locked_index(root: Path) -> Iterator[dict[str, Any]]:
    """The index, read and written back under a lock (boards are pulled in parallel threads, and
    two orch processes may share one ORCH_HOME)."""
    root.mkdir(parents=True, exist_ok=True)
    with _index_lock, (root / "index.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        index = _read_index(root)
        yield index
        tmp = root / "index.json.tmp"
        tmp.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        tmp.replace(root / "index.json")


def _read_index(root: Path) -> dict[str, Any]:
    path = root / "index.json"
    if not path.is_file():
        return {"sysroots": {}}
    try:
        index = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{path}: not valid JSON (line {error.lineno}): {error.msg}",
            hint="fix it, or delete it and pull/add the sysroots again",
        ) from error
    if not isinstance(index, dict) or not isinstance(index.get("sysroots"), dict):
        raise UsageError(f"{path}: key 'sysroots' must be a JSON object", hint="delete it and pull again")
    return index


def describe(sysroot: Sysroot) -> dict[str, Any]:
    """What a stored tree says about itself (the part of sysroot.json read from the files)."""
    os_release = sysroot.os_release()
    return {
        "glibc": sysroot.glibc,
        "python": sysroot.python_version,
        "triplet": sysroot.triplet,
        "os": {
            "id": os_release.get("ID", ""),
            "version": os_release.get("VERSION_ID", ""),
            "name": os_release.get("PRETTY_NAME", ""),
        },
        "headers": {
            "libc": sysroot.has_libc_headers,
            "python": sysroot.has_python_headers,
            "c++": sysroot.has_cxx_headers,
        },
        "missing_dev_packages": list(sysroot.missing_dev_packages()),
    }


def store(
    name: str,
    stage: Callable[[StagingTree], None],
    *,
    kind: str,
    source: str,
    extra: dict[str, Any] | None = None,
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
        record = {
            "name": name,
            "kind": kind,
            "source": source,
            "stored_at": now_text,
            **(extra or {}),
            **describe(sysroot),
            "files": tree.files,
            "size": tree.size,
            "digest": digest,
        }
        new = _move_in(staging, target, record)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    with _locked_index(base) as index:
        previous = index["sysroots"].get(name, {}).get("digest")
        entry = {"digest": digest, "kind": kind, "source": source, **(extra or {}), "checked_at": now_text}
        entry["stored_at"] = (
            now_text if previous != digest else index["sysroots"][name].get("stored_at", now_text)
        )
        index["sysroots"][name] = entry
    stored = StoredSysroot(name=name, digest=digest, directory=target, tree=_read_record(target), entry=entry)
    return StoreOutcome(stored=stored, new=new, previous_digest=previous)


def _move_in(staging: Path, target: Path, record: dict[str, Any]) -> bool:
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
    name: str, tarball: Path, *, kind: str, source: str, extra: dict[str, Any] | None = None
) -> StoreOutcome:
    return store(name, lambda tree: stage_tarball(tarball, tree), kind=kind, source=source, extra=extra)


def store_directory(name: str, directory: Path, *, source: str) -> StoreOutcome:
    return store(name, lambda tree: stage_directory(directory, tree), kind="rootfs", source=source)


def _read_record(directory: Path) -> dict[str, Any]:
    path = directory / "sysroot.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(
            f"{path}: unreadable sysroot record: {error}",
            hint="pull or add that sysroot again (orch sysroot pull / add)",
        ) from error
    if not isinstance(record, dict):
        raise UsageError(f"{path}: a sysroot record must be a JSON object")
    return record


def list_sysroots(root: Path | None = None) -> list[StoredSysroot]:
    """Every name of the index with its stored tree, by name."""
    base = root or store_root()
    index = _read_index(base)
    found = []
    for name, entry in sorted(index["sysroots"].items()):
        digest = entry.get("digest") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise UsageError(f"{base / 'index.json'}: sysroot {name!r} has no valid 'digest'")
        directory = base / digest
        found.append(
            StoredSysroot(
                name=name, digest=digest, directory=directory, tree=_read_record(directory), entry=entry
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
        digest = index["sysroots"].pop(name)["digest"]
        still_used = any(entry.get("digest") == digest for entry in index["sysroots"].values())
        if not still_used:
            # Renamed first: a half-deleted tree is never seen under its digest.
            doomed = base / f".removing-{digest}"
            (base / digest).rename(doomed)
            shutil.rmtree(doomed)
    return not still_used
