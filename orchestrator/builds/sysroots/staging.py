"""Staging a sysroot's tree: which paths of a root file system a sysroot keeps (``wanted``, the
same rules as ``board_side/sysroot_pack.sh``), and the tree written from a tarball or a directory
with what its digest needs. Nothing is ever written through a link: a tarball cannot place a file
outside the store.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from orchestrator.builds.sysroots.contents import SysrootError
from orchestrator.errors import UsageError

_TRIPLET = re.compile(r"^[a-z0-9_]+-linux-gnu[a-z0-9_]*$")
# A CPython of the board: its library directory (usr/lib/python3.X) and interpreter (usr/bin/python3.X).
_PYTHON_LIB = re.compile(r"^python3\.\d+$")
# Cross builds of the Python module run the board's own interpreter under emulation (CMake's
# FindPython asks it for its version, ABI and paths), so a sysroot carries that interpreter and its
# standard library. Left out: anything under a directory with one of these names: byte code,
# Python's own test suites, GUI and teaching tools, and the board's installed packages (never part
# of a sysroot). board_side/sysroot_pack.sh prunes the same names.
PYTHON_LEFT_OUT = frozenset(
    {
        "__pycache__",
        "test",
        "tests",
        "site-packages",
        "dist-packages",
        "idlelib",
        "turtledemo",
        "tkinter",
        "ensurepip",
        "lib2to3",
    }
)
# What a path of a root file system is, as a sysroot keeps it.
EntryKind = Literal["file", "link", "dir"]
_TOP_LINKS = frozenset({"lib", "lib64", "lib32", "libx32", "usr/lib64"})
_LOADER_DIRS = frozenset({"lib", "usr/lib", "lib64", "usr/lib64"})
_OS_FILES = frozenset(
    {"etc/os-release", "usr/lib/os-release", "etc/debian_version", "etc/lsb-release", "etc/nv_tegra_release"}
)
# CUDA as JetPack installs it: usr/local/cuda -> cuda-12.6 (perhaps through etc/alternatives/cuda),
# and usr/local/cuda-12.6 with version.json, the include and lib64 links at its top and the toolkit
# under targets/<t>/. Names: cuda, cuda-12, cuda-12.6 (not cuda-samples or other programs' names).
_CUDA_NAME = re.compile(r"^cuda(-\d[\d.]*)?$")
# The static libraries nvcc links into every program (the device runtime and, unless told otherwise,
# the runtime itself): about 3 MB of the toolkit's GBs of archives.
NVCC_LINKED_ARCHIVES = ("libcudadevrt.a", "libcudart_static.a")
_CUDA_TOP_LINKS = frozenset({"include", "lib64"})
_CHUNK = 1 << 20


# -- what is kept -------------------------------------------------------------------------------------


def _library_file(name: str) -> bool:
    return name.endswith((".so", ".a", ".o")) or ".so." in name


def _shared_library(name: str) -> bool:
    return name.endswith(".so") or ".so." in name


def wanted(path: PurePosixPath, *, kind: EntryKind) -> bool:
    """Is ``path`` (relative to ``/``) part of a sysroot?

    Directories are created as the files in them are; only ``usr/lib/python3.X`` is kept as a
    directory of its own, since it says which Python the board runs. The board's interpreter
    (``usr/bin/python3.X``) and its standard library are kept: see ``PYTHON_LEFT_OUT``.
    """
    parts = path.parts
    if not parts:
        return False
    if kind == "dir":
        return len(parts) == 3 and parts[:2] == ("usr", "lib") and bool(_PYTHON_LIB.match(parts[2]))
    known = _known_entry(path, kind)
    if known is None:
        known = _cuda_place(parts, kind)
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
    """Headers, the top-level links, the OS's identity files, the loader and the board's Python
    (interpreter and standard library) are decided by their place; None for every other path."""
    parts = path.parts
    text = path.as_posix()
    if parts[:2] == ("usr", "include") and len(parts) > 2:
        return True
    if text in _TOP_LINKS:
        return kind == "link"
    if text in _OS_FILES or (str(path.parent) in _LOADER_DIRS and path.name.startswith("ld-linux")):
        return True
    if len(parts) == 3 and parts[:2] == ("usr", "bin") and _PYTHON_LIB.match(parts[2]):
        return True  # python3.X only: not python3.X-config, python3.Xm or any other program
    if len(parts) >= 4 and parts[:2] == ("usr", "lib") and _PYTHON_LIB.match(parts[2]):
        return not PYTHON_LEFT_OUT.intersection(parts[3:-1])
    return None


def _cuda_place(parts: tuple[str, ...], kind: EntryKind) -> bool | None:
    """CUDA's toolkit (``usr/local/cuda*``) and the ``etc/alternatives`` links that lead to it and to
    cuDNN's headers and libraries (JetPack's ``usr/local/cuda -> /etc/alternatives/cuda``); None for
    every other path."""
    if len(parts) == 3 and parts[:2] == ("etc", "alternatives"):
        return kind == "link" and (bool(_CUDA_NAME.match(parts[2])) or "cudnn" in parts[2])
    if len(parts) >= 3 and parts[:2] == ("usr", "local") and _CUDA_NAME.match(parts[2]):
        return _cuda_entry(parts[3:], kind)
    return None


def _cuda_entry(rest: tuple[str, ...], kind: EntryKind) -> bool:
    """Of ``usr/local/cuda*`` (``rest`` follows it): a link itself; in a real CUDA directory, its
    ``version.json``, the ``include``/``lib64`` links at its top, every header under
    ``targets/<t>/include``, the shared libraries of ``targets/<t>/lib`` and ``lib/stubs`` (the
    driver's stub ``libcuda.so``), and of the static libraries only the two nvcc links into every
    program it links (CMake's check of the CUDA compiler links one). Never the other static
    libraries (GBs), programs, nvvm, samples or docs."""
    if not rest:
        return kind == "link"  # usr/local/cuda -> cuda-12.6
    if len(rest) == 1:
        return rest[0] == "version.json" or (rest[0] in _CUDA_TOP_LINKS and kind == "link")
    if len(rest) < 4 or rest[0] != "targets":
        return False
    below = rest[3:]  # targets/<t>/<where>/...
    return rest[2] == "include" or (
        rest[2] == "lib"
        and (
            (len(below) == 1 and (_shared_library(below[0]) or below[0] in NVCC_LINKED_ARCHIVES))
            or (len(below) == 2 and below[0] == "stubs" and below[1].endswith(".so"))
        )
    )


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
class StagingTree:
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


def stage_tarball(tarball: Path, tree: StagingTree) -> None:
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
    archive: tarfile.TarFile, member: tarfile.TarInfo, tree: StagingTree
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


def _stage_missed_links(
    tarball: Path, tree: StagingTree, links: list[tuple[PurePosixPath, PurePosixPath]]
) -> None:
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


_ENTERED = frozenset(
    {
        "usr",
        "etc",
        "lib",
        "lib64",
        "lib32",
        "libx32",
        "usr/lib",
        "usr/lib64",
        "usr/bin",
        "usr/local",
        "etc/alternatives",
    }
)


def _worth_entering(rel: PurePosixPath) -> bool:
    """Could a directory hold wanted files? (A rootfs holds GBs elsewhere: /usr/share, /var, /opt...)"""
    parts = rel.parts
    if rel.as_posix() in _ENTERED:
        return True
    if parts[:2] == ("usr", "include") or parts[:3] == ("usr", "lib", "gcc"):
        return True
    if len(parts) >= 3 and parts[:2] == ("usr", "local") and _CUDA_NAME.match(parts[2]):
        rest = parts[3:]  # a CUDA directory: targets/<t>/include (all of it), targets/<t>/lib(/stubs)
        return (len(rest) <= 2 and rest[:1] in ((), ("targets",))) or (
            len(rest) >= 3
            and rest[0] == "targets"
            and (rest[2] == "include" or rest[2:] in (("lib",), ("lib", "stubs")))
        )
    if len(parts) >= 3 and parts[:2] == ("usr", "lib") and _PYTHON_LIB.match(parts[2]):
        return not PYTHON_LEFT_OUT.intersection(parts[3:])
    if len(parts) >= 2 and parts[0] == "lib" and _TRIPLET.match(parts[1]):
        return True
    return len(parts) >= 3 and parts[:2] == ("usr", "lib") and bool(_TRIPLET.match(parts[2]))


def stage_directory(source: Path, tree: StagingTree) -> None:
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
