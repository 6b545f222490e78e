"""The sysroot store: trees of boards' headers and libraries, kept by content hash.

Layout under ``$ORCH_HOME/sysroots/``::

    <digest>/root/          the tree (usr/include, lib/<triplet>, usr/lib/<triplet>, ...)
    <digest>/sysroot.json   where it came from, when, the board's facts, glibc, Python, files, size
    index.json              name (a board, or the --name of an added rootfs) -> digest

The digest is a SHA-256 over the tree's content (each path with its file hash or link target),
not over the tarball, whose bytes change with every pack: pulling an unchanged board again
gives the same digest, and nothing new is stored.

Whatever the source (a board's tarball, a rootfs tarball, a rootfs directory), only the part a
cross compiler needs is kept (``wanted``, the same rules as ``board_side/sysroot_pack.sh``),
and nothing is ever written through a link: a tarball cannot place a file outside the store.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import IO, Any, Literal

from orchestrator.builds.sysroots.contents import Sysroot, SysrootError
from orchestrator.errors import UsageError
from orchestrator.paths import orch_home

_TRIPLET = re.compile(r"^[a-z0-9_]+-linux-gnu[a-z0-9_]*$")
_PYTHON_LIB = re.compile(r"^python\d+\.\d+$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# What a path of a root file system is, as a sysroot keeps it.
EntryKind = Literal["file", "link", "dir"]
_TOP_LINKS = frozenset({"lib", "lib64", "lib32", "libx32", "usr/lib64"})
_LOADER_DIRS = frozenset({"lib", "usr/lib", "lib64", "usr/lib64"})
_OS_FILES = frozenset(
    {"etc/os-release", "usr/lib/os-release", "etc/debian_version", "etc/lsb-release", "etc/nv_tegra_release"}
)
_CHUNK = 1 << 20
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


# -- what is kept -------------------------------------------------------------------------------------


def _library_file(name: str) -> bool:
    return name.endswith((".so", ".a", ".o")) or ".so." in name


def wanted(path: PurePosixPath, *, kind: EntryKind) -> bool:
    """Is ``path`` (relative to ``/``) part of a sysroot?

    Directories are created as the files in them are; only ``usr/lib/python3.X`` is kept as an
    empty directory, since it says which Python the board runs.
    """
    parts = path.parts
    if not parts:
        return False
    if kind == "dir":
        return len(parts) == 3 and parts[:2] == ("usr", "lib") and bool(_PYTHON_LIB.match(parts[2]))
    known = _known_entry(path, kind)
    if known is not None:
        return known
    rest = _under_triplet(parts)
    if rest is None:
        return False
    if not rest:  # the triplet directory itself, when it is a link
        return kind == "link"
    name = rest[-1]
    return _library_file(name) or ("pkgconfig" in rest[:-1] and name.endswith(".pc"))


def _known_entry(path: PurePosixPath, kind: EntryKind) -> bool | None:
    """Headers, the top-level links, the OS's identity files, the loader and Python's sysconfig data
    are decided by their place; None for every other path."""
    parts = path.parts
    text = path.as_posix()
    if parts[:2] == ("usr", "include") and len(parts) > 2:
        return True
    if text in _TOP_LINKS:
        return kind == "link"
    if text in _OS_FILES or (str(path.parent) in _LOADER_DIRS and path.name.startswith("ld-linux")):
        return True
    if len(parts) == 4 and parts[:2] == ("usr", "lib") and _PYTHON_LIB.match(parts[2]):
        return parts[3].startswith("_sysconfigdata") and parts[3].endswith(".py")
    return None


def _under_triplet(parts: tuple[str, ...]) -> tuple[str, ...] | None:
    """What follows a multiarch directory (lib/<triplet>, usr/lib/<triplet>, usr/lib/gcc/<triplet>/<v>),
    or None when ``parts`` is not under one."""
    if len(parts) >= 2 and parts[0] == "lib" and _TRIPLET.match(parts[1]):
        return parts[2:]
    if len(parts) >= 3 and parts[:2] == ("usr", "lib") and _TRIPLET.match(parts[2]):
        return parts[3:]
    if len(parts) >= 5 and parts[:3] == ("usr", "lib", "gcc") and _TRIPLET.match(parts[3]):
        return parts[5:]
    return None


# -- staging a tree -----------------------------------------------------------------------------------


@dataclass
class _Tree:
    """A tree being written into the store's staging area, with what the digest needs."""

    root: Path
    entries: dict[str, str] = field(default_factory=dict)  # path -> "f <sha256> <x>" / "l <target>" / "d"
    sizes: dict[str, int] = field(default_factory=dict)

    def _parent(self, rel: PurePosixPath) -> Path:
        """``rel``'s directory inside the tree, created; never through a link (that could leave the tree)."""
        current = self.root
        for part in rel.parent.parts:
            current = current / part
            if current.is_symlink():
                raise SysrootError(
                    f"{rel}: lies under {current.relative_to(self.root)}, which is a link in the sysroot",
                    hint="a sysroot source must not place files under its own links; repack it",
                )
            if not current.exists():
                current.mkdir()
            elif not current.is_dir():
                raise SysrootError(f"{rel}: {current.relative_to(self.root)} is a file, not a directory")
        return current

    def _clear(self, target: Path, rel: PurePosixPath) -> None:
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            if any(target.iterdir()):
                raise SysrootError(f"{rel}: replaces a directory that has files in it")
            target.rmdir()
        self.entries.pop(str(rel), None)
        self.sizes.pop(str(rel), None)

    def add_file(self, rel: PurePosixPath, source: IO[bytes], mode: int) -> None:
        target = self._parent(rel) / rel.name
        self._clear(target, rel)
        digest = hashlib.sha256()
        size = 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        executable = bool(mode & 0o111)
        descriptor = os.open(target, flags, 0o755 if executable else 0o644)
        with os.fdopen(descriptor, "wb") as out:
            while chunk := source.read(_CHUNK):
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        self.entries[str(rel)] = f"f {digest.hexdigest()} {'x' if executable else '-'}"
        self.sizes[str(rel)] = size

    def add_link(self, rel: PurePosixPath, target_text: str) -> None:
        target = self._parent(rel) / rel.name
        self._clear(target, rel)
        # Kept as the board has it; orchestrator.builds.sysroots.contents resolves it inside the tree.
        os.symlink(target_text, target)
        self.entries[str(rel)] = f"l {target_text}"

    def add_dir(self, rel: PurePosixPath) -> None:
        target = self._parent(rel) / rel.name
        if target.is_symlink():
            raise SysrootError(f"{rel}: a directory where the sysroot already has a link")
        target.mkdir(exist_ok=True)
        self.entries.setdefault(str(rel), "d")

    def hardlink(self, rel: PurePosixPath, existing: PurePosixPath) -> bool:
        """A tar hard link to a member already written: the same content. False when it was not kept."""
        entry = self.entries.get(str(existing), "")
        if not entry.startswith("f "):
            return False
        with (self.root / existing).open("rb") as source:
            self.add_file(rel, source, 0o755 if entry.endswith(" x") else 0o644)
        return True

    @property
    def digest(self) -> str:
        lines = "".join(f"{path}\0{entry}\n" for path, entry in sorted(self.entries.items()))
        return hashlib.sha256(lines.encode("utf-8", "surrogateescape")).hexdigest()

    @property
    def files(self) -> int:
        return sum(1 for entry in self.entries.values() if not entry.startswith("d"))

    @property
    def size(self) -> int:
        return sum(self.sizes.values())


def _member_path(name: str) -> PurePosixPath | None:
    """A tar member's path relative to ``/`` (``./usr/lib/x`` and ``/usr/lib/x`` alike), or None if it climbs."""
    parts = [p for p in PurePosixPath(name).parts if p not in ("/", ".", "")]
    if not parts or ".." in parts:
        return None
    return PurePosixPath(*parts)


def _stage_tarball(tarball: Path, tree: _Tree) -> None:
    """Keep the wanted members of a tarball (any compression tar reads), in one streaming pass."""
    missed_links: list[tuple[PurePosixPath, PurePosixPath]] = []
    try:
        with tarfile.open(tarball, mode="r|*") as archive:
            for member in archive:
                missed = _stage_member(archive, member, tree)
                if missed is not None:
                    missed_links.append(missed)
        if missed_links:
            _stage_missed_links(tarball, tree, missed_links)
    except (tarfile.TarError, EOFError, OSError) as error:
        if isinstance(error, OSError) and error.filename:
            raise
        raise UsageError(f"{tarball}: not a readable tarball: {error}") from error


def _stage_member(
    archive: tarfile.TarFile, member: tarfile.TarInfo, tree: _Tree
) -> tuple[PurePosixPath, PurePosixPath] | None:
    """Keep one member if wanted; a hard link to a member not kept yet is returned (link, target)."""
    rel = _member_path(member.name)
    if rel is None:
        return None
    if member.isdir():
        if wanted(rel, kind="dir"):
            tree.add_dir(rel)
    elif member.issym():
        if wanted(rel, kind="link"):
            tree.add_link(rel, member.linkname)
    elif member.isfile() and wanted(rel, kind="file"):
        source = archive.extractfile(member)
        if source is not None:
            tree.add_file(rel, source, member.mode)
    elif member.islnk() and wanted(rel, kind="file"):
        existing = _member_path(member.linkname)
        if existing is not None and not tree.hardlink(rel, existing):
            return rel, existing
    return None


def _stage_missed_links(tarball: Path, tree: _Tree, links: list[tuple[PurePosixPath, PurePosixPath]]) -> None:
    """Hard links to members that were not kept: a second pass reads just those members' data."""
    wanted_targets: dict[PurePosixPath, list[PurePosixPath]] = {}
    for rel, existing in links:
        wanted_targets.setdefault(existing, []).append(rel)
    with tarfile.open(tarball, mode="r|*") as archive:
        for member in archive:
            path = _member_path(member.name)
            if path in wanted_targets and member.isfile():
                source = archive.extractfile(member)
                if source is None:
                    continue
                first, *others = wanted_targets.pop(path)
                tree.add_file(first, source, member.mode)
                for other in others:
                    tree.hardlink(other, first)


def _worth_entering(rel: PurePosixPath) -> bool:
    """Could a directory hold wanted files? (A rootfs holds GBs elsewhere: /usr/share, /var, /opt...)"""
    parts = rel.parts
    if rel.as_posix() in ("usr", "etc", "lib", "lib64", "lib32", "libx32", "usr/lib", "usr/lib64"):
        return True
    if parts[:2] == ("usr", "include") or parts[:3] == ("usr", "lib", "gcc"):
        return True
    if len(parts) == 3 and parts[:2] == ("usr", "lib") and _PYTHON_LIB.match(parts[2]):
        return True
    if len(parts) >= 2 and parts[0] == "lib" and _TRIPLET.match(parts[1]):
        return True
    return len(parts) >= 3 and parts[:2] == ("usr", "lib") and bool(_TRIPLET.match(parts[2]))


def _stage_directory(source: Path, tree: _Tree) -> None:
    """Keep the wanted files of a root file system directory (links are never followed)."""
    for current, dirs, files in os.walk(source, followlinks=False):
        base = Path(current)
        for name in sorted(dirs + files):
            path = base / name
            rel = PurePosixPath(path.relative_to(source).as_posix())
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                if wanted(rel, kind="link"):
                    tree.add_link(rel, os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                if wanted(rel, kind="dir"):
                    tree.add_dir(rel)
            elif stat.S_ISREG(info.st_mode) and wanted(rel, kind="file"):
                with path.open("rb") as handle:
                    tree.add_file(rel, handle, info.st_mode)
        # os.walk descends into what stays in `dirs` (never into links: followlinks=False).
        dirs[:] = [
            d for d in dirs if _worth_entering(PurePosixPath((base / d).relative_to(source).as_posix()))
        ]


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
    stage: Callable[[_Tree], None],
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
        tree = _Tree(root=staging / "root")
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
    return store(name, lambda tree: _stage_tarball(tarball, tree), kind=kind, source=source, extra=extra)


def store_directory(name: str, directory: Path, *, source: str) -> StoreOutcome:
    return store(name, lambda tree: _stage_directory(directory, tree), kind="rootfs", source=source)


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
