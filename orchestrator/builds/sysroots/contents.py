"""Reading a sysroot: what a board's libraries really define, and whether a wheel's needs fit them.

A sysroot is a directory holding a board's root file system, or the part of it a cross
compiler needs (``usr/include``, the libraries of ``lib/<triplet>`` and ``usr/lib/<triplet>``).
Pure: this module reads files under that directory with pyelftools and never runs anything.

Symbolic links are resolved the way the board would resolve them, with the sysroot as ``/``:
an absolute target (``/lib/aarch64-linux-gnu/libc.so.6``) is looked up inside the sysroot,
and a relative one that climbs above the sysroot's top is refused (``SysrootError``) rather
than followed onto the workstation's own files.

``sysroot_problems(wheel, sysroot)`` is the proof the wheel check gives: every ``GLIBC_``,
``GLIBCXX_``, ``CXXABI_`` and ``GCC_`` version a shared object of the wheel needs (its ELF
verneed) that the sysroot's library of that name does not define (its ELF verdef).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection

from orchestrator.artifacts.wheel import WheelInfo, inspect_wheel, promised_glibc, python_compatible
from orchestrator.errors import UsageError

# The libraries a compiled wheel takes from the board (the rest it bundles or does not use).
CORE_LIBRARIES = ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1")
# The symbol version families the toolchain's libraries define: the ones a wheel check proves.
CHECKED_PREFIXES = ("GLIBC_", "GLIBCXX_", "CXXABI_", "GCC_")
# Linux's own limit on links followed while resolving one path (MAXSYMLINKS).
_MAX_LINKS = 40
# A Debian/Ubuntu multiarch directory name: aarch64-linux-gnu, arm-linux-gnueabihf, x86_64-linux-gnu.
_TRIPLET = re.compile(r"^[a-z0-9_]+-linux-gnu[a-z0-9_]*$")
_PYTHON_DIR = re.compile(r"^python(\d+)\.(\d+)[a-z]*$")
# glibc's own banner in libc.so.6 (what running it prints): "... stable release version 2.41."
_GLIBC_BANNER = re.compile(rb"GNU C Library [^\n\x00]*?version (\d+\.\d+(?:\.\d+)?)")
# libstdc++.so.6.0.N -> the GCC release whose libstdc++ it is (GCC's ABI policy table).
_LIBSTDCXX_GCC = {28: 10, 29: 11, 30: 12, 31: 13, 32: 13, 33: 14, 34: 15}
# What missing_dev_packages names when the board's GCC is not known: not a package apt can install.
_LIBSTDCXX_UNKNOWN = "libstdc++-dev (of the board's GCC)"


class SysrootError(UsageError):
    """A sysroot that cannot be read as one: a link out of it, a damaged library, no libc."""


@dataclass(frozen=True, kw_only=True)
class LibraryVersions:
    """One library of the sysroot and the symbol versions it defines (ELF verdef)."""

    name: str  # as the dynamic linker looks it up: "libc.so.6"
    path: str  # where it really is inside the sysroot, links resolved: "usr/lib/aarch64-linux-gnu/libc.so.6"
    machine: str  # ELF e_machine: "EM_AARCH64"
    versions: frozenset[str]

    def highest(self, prefix: str) -> str | None:
        """The newest version of one family (``GLIBCXX_`` -> ``GLIBCXX_3.4.33``), or None."""
        found = [v for v in self.versions if v.startswith(prefix) and _numbers(v[len(prefix) :])]
        return max(found, key=lambda v: _numbers(v[len(prefix) :])) if found else None


@dataclass(frozen=True, kw_only=True)
class MissingVersions:
    """Symbol versions a shared object of the wheel needs from a library the sysroot lacks or is too old for."""

    shared_object: str  # the wheel member: "onnxruntime/capi/libonnxruntime.so.1.21.0"
    library: str  # "libc.so.6"
    versions: tuple[str, ...]  # () when the library itself is missing
    sysroot_has: tuple[str, ...] = ()  # the library's newest version of each missing family, for the message

    def __str__(self) -> str:
        if not self.versions:
            return f"{self.shared_object} needs {self.library}, which the sysroot does not have"
        have = f" (the sysroot's newest: {', '.join(self.sysroot_has)})" if self.sysroot_has else ""
        return f"{self.shared_object} needs {', '.join(self.versions)} from {self.library}{have}"


def _numbers(text: str) -> tuple[int, ...]:
    parts = text.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def resolve_inside(root: Path, path: str) -> PurePosixPath | None:
    """``path`` (relative to the sysroot, or absolute as seen on the board) with every link resolved.

    Returns the real path relative to ``root`` (``PurePosixPath("usr/lib/x/libc.so.6")``), or None
    when nothing is there (a missing file, a dangling link). Raises ``SysrootError`` when a link
    leads above the sysroot's top or links loop.
    """
    pending = [p for p in PurePosixPath(path).parts if p not in ("/", ".", "")]
    done: list[str] = []
    followed = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if not done:
                raise SysrootError(
                    f"{root}: {path} leads outside the sysroot (a '..' above its top)",
                    hint="a sysroot's links must stay inside it; fix or remove that link",
                )
            done.pop()
            continue
        candidate = root.joinpath(*done, part)
        if candidate.is_symlink():
            followed += 1
            if followed > _MAX_LINKS:
                raise SysrootError(f"{root}: too many levels of symbolic links resolving {path}")
            target = PurePosixPath(candidate.readlink().as_posix())
            if target.is_absolute():
                done = []  # the board's "/" is the sysroot's top
            pending = [p for p in target.parts if p not in ("/", ".", "")] + pending
            continue
        if not candidate.exists():
            return None
        done.append(part)
    return PurePosixPath(*done) if done else PurePosixPath(".")


def _read_verdef(file: Path, shown: str) -> tuple[str, frozenset[str]]:
    try:
        with file.open("rb") as handle:
            elf = ELFFile(handle)
            machine = str(elf["e_machine"])
            versions: set[str] = set()
            for section in elf.iter_sections():
                if isinstance(section, GNUVerDefSection):
                    for verdef, auxiliaries in section.iter_versions():
                        names = [aux.name for aux in auxiliaries]
                        # The base entry names the file itself (its soname), not a version.
                        if names and not verdef["vd_flags"] & 0x1:
                            versions.add(names[0])
    except (ELFError, OSError) as error:
        raise SysrootError(f"{shown}: not a readable ELF library: {error}") from error
    return machine, frozenset(versions)


@dataclass(frozen=True)
class Sysroot:
    """A sysroot directory, read lazily; ``name`` is what messages call it (a board, a rootfs)."""

    root: Path
    name: str = ""
    _libraries: dict[str, LibraryVersions | None] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    @property
    def label(self) -> str:
        return f"sysroot {self.name}" if self.name else f"sysroot {self.root}"

    @functools.cached_property
    def triplet(self) -> str | None:
        """The multiarch triplet whose directory holds libc.so.6 (``aarch64-linux-gnu``), or None."""
        candidates: list[str] = []
        for top in ("usr/lib", "lib"):
            where = resolve_inside(self.root, top)
            if where is None or not (self.root / where).is_dir():
                continue
            for entry in sorted((self.root / where).iterdir()):
                if _TRIPLET.match(entry.name) and entry.name not in candidates:
                    candidates.append(entry.name)
        for triplet in candidates:
            for top in ("usr/lib", "lib"):
                if resolve_inside(self.root, f"{top}/{triplet}/libc.so.6") is not None:
                    return triplet
        return candidates[0] if candidates else None

    @property
    def library_dirs(self) -> tuple[str, ...]:
        """Where the board's dynamic linker looks, in its order (multiarch first)."""
        dirs = [f"{top}/{self.triplet}" for top in ("lib", "usr/lib")] if self.triplet else []
        return (*dirs, "lib", "usr/lib", "lib64", "usr/lib64")

    def find_library(self, name: str) -> PurePosixPath | None:
        """The real path (inside the sysroot) of the library the board would load as ``name``."""
        for directory in self.library_dirs:
            found = resolve_inside(self.root, f"{directory}/{name}")
            if found is not None and (self.root / found).is_file():
                return found
        return None

    def library(self, name: str) -> LibraryVersions | None:
        """``name``'s verdef, or None when the sysroot has no such library (read once per name)."""
        if name not in self._libraries:
            found = self.find_library(name)
            library = None
            if found is not None:
                machine, versions = _read_verdef(self.root / found, f"{self.label}: {found}")
                library = LibraryVersions(name=name, path=str(found), machine=machine, versions=versions)
            self._libraries[name] = library
        return self._libraries[name]

    @functools.cached_property
    def glibc(self) -> str | None:
        """The glibc release of the sysroot's libc.so.6 ("2.41"), from the banner glibc carries."""
        found = self.find_library("libc.so.6")
        if found is None:
            return None
        data = (self.root / found).read_bytes()
        match = _GLIBC_BANNER.search(data)
        if match:
            return match.group(1).decode()
        # No banner (a stripped or unusual libc): its newest GLIBC_x.y version is the closest fact.
        library = self.library("libc.so.6")
        newest = library.highest("GLIBC_") if library else None
        return newest.removeprefix("GLIBC_") if newest else None

    @functools.cached_property
    def python_versions(self) -> tuple[str, ...]:
        """Every CPython the sysroot has headers or a standard library for, newest first ("3.13", ...)."""
        found: set[tuple[int, int]] = set()
        for top in ("usr/include", "usr/lib"):
            where = resolve_inside(self.root, top)
            if where is None or not (self.root / where).is_dir():
                continue
            for entry in (self.root / where).iterdir():
                match = _PYTHON_DIR.match(entry.name)
                real = resolve_inside(self.root, f"{where}/{entry.name}") if match else None
                if match and real is not None and (self.root / real).is_dir():
                    found.add((int(match.group(1)), int(match.group(2))))
        return tuple(f"{major}.{minor}" for major, minor in sorted(found, reverse=True))

    @property
    def python_version(self) -> str | None:
        """The sysroot's Python ("3.13"): the one with headers when there are several, else the newest."""
        with_headers = [v for v in self.python_versions if self._has(f"usr/include/python{v}/Python.h")]
        if with_headers:
            return with_headers[0]
        return self.python_versions[0] if self.python_versions else None

    @property
    def python_executable(self) -> str | None:
        """The board's interpreter of ``python_version``, relative to the sysroot ("usr/bin/python3.13").

        A cross build of the Python module runs it under emulation (CMake's FindPython asks it for
        its version, ABI and paths); it finds its prefix by its standard library's ``os.py``, so both
        must be there. None for a sysroot without them (pulled before sysroots carried them).
        """
        version = self.python_version
        if not version:
            return None
        interpreter = f"usr/bin/python{version}"
        if self._has(interpreter) and self._has(f"usr/lib/python{version}/os.py"):
            return interpreter
        return None

    def _has(self, path: str) -> bool:
        found = resolve_inside(self.root, path)
        return found is not None and (self.root / found).is_file()

    @property
    def has_libc_headers(self) -> bool:
        return self._has("usr/include/stdio.h")

    @property
    def has_python_headers(self) -> bool:
        version = self.python_version
        return bool(version) and self._has(f"usr/include/python{version}/Python.h")

    @property
    def has_cxx_headers(self) -> bool:
        where = resolve_inside(self.root, "usr/include/c++")
        return where is not None and (self.root / where).is_dir() and any((self.root / where).iterdir())

    def missing_dev_packages(self) -> tuple[str, ...]:
        """Debian/Ubuntu packages a board needs before its sysroot can compile (not only check) a wheel."""
        missing = []
        if not self.has_libc_headers:
            missing.append("libc6-dev")
        if not self.has_python_headers:
            missing.append("python3-dev")
        if not self.has_cxx_headers:
            missing.append(self.libstdcxx_dev_package())
        return tuple(missing)

    def libstdcxx_dev_package(self) -> str:
        """The libstdc++-N-dev of the GCC whose libstdc++ the sysroot holds (or a placeholder naming g++)."""
        found = self.find_library("libstdc++.so.6")
        match = re.search(r"libstdc\+\+\.so\.6\.0\.(\d+)$", found.name) if found else None
        gcc = _LIBSTDCXX_GCC.get(int(match.group(1))) if match else None
        return f"libstdc++-{gcc}-dev" if gcc else _LIBSTDCXX_UNKNOWN

    def os_release(self) -> dict[str, str]:
        """``etc/os-release`` (or ``usr/lib/os-release``) as a dict; empty when the sysroot has neither."""
        for path in ("etc/os-release", "usr/lib/os-release"):
            found = resolve_inside(self.root, path)
            if found is not None and (self.root / found).is_file():
                return _parse_os_release((self.root / found).read_text(errors="replace"))
        return {}

    def core_libraries(self) -> dict[str, LibraryVersions | None]:
        return {name: self.library(name) for name in CORE_LIBRARIES}


def apt_install_command(packages: Iterable[str]) -> str:
    """The command that installs ``missing_dev_packages`` on a Debian/Ubuntu board, as it is typed there.

    The C++ headers of an unknown GCC come with ``g++``: the board's default GCC and its libstdc++-dev.
    """
    names = ["g++" if package == _LIBSTDCXX_UNKNOWN else package for package in packages]
    return "sudo apt install " + " ".join(dict.fromkeys(names))


def _parse_os_release(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            values[key] = value.strip().strip("\"'")
    return values


def _checked(versions: Iterable[str]) -> list[str]:
    return [v for v in versions if v.startswith(CHECKED_PREFIXES)]


def _family(version: str) -> str:
    # The prefixes end in "_", so none is a prefix of another (GLIBC_ vs GLIBCXX_).
    return next(prefix for prefix in CHECKED_PREFIXES if version.startswith(prefix))


def _bundled(wheel: WheelInfo) -> set[str]:
    """The names a library of the wheel is looked up by (file name or soname): the wheel satisfies those."""
    return {so.path.rsplit("/", 1)[-1] for so in wheel.shared_objects} | {
        so.soname for so in wheel.shared_objects if so.soname
    }


def needs_of(wheel: WheelInfo) -> dict[str, tuple[str, ...]]:
    """The checked versions ``wheel``'s shared objects need from libraries it does not bundle, per
    library (sorted), with no sysroot to prove them against."""
    bundled = _bundled(wheel)
    merged: dict[str, set[str]] = {}
    for so in wheel.shared_objects:
        for need in so.version_needs:
            wanted = _checked(need.versions)
            if wanted and need.library not in bundled:
                merged.setdefault(need.library, set()).update(wanted)
    return {lib: tuple(sorted(v, key=_sort_key)) for lib, v in sorted(merged.items())}


def sysroot_problems(wheel: WheelInfo, sysroot: Sysroot) -> list[MissingVersions]:
    """Every checked symbol version a shared object of ``wheel`` needs that ``sysroot`` does not define.

    A library the wheel bundles (a shared object of the wheel with that file name or soname, as
    auditwheel's ``onnxruntime.libs/`` holds) is satisfied by the wheel, not looked up.
    """
    bundled = _bundled(wheel)
    problems: list[MissingVersions] = []
    for so in wheel.shared_objects:
        for need in so.version_needs:
            wanted = _checked(need.versions)
            if not wanted or need.library in bundled:
                continue
            library = sysroot.library(need.library)
            if library is None:
                problems.append(MissingVersions(shared_object=so.path, library=need.library, versions=()))
                continue
            missing = tuple(v for v in wanted if v not in library.versions)
            if missing:
                problems.append(
                    MissingVersions(
                        shared_object=so.path,
                        library=need.library,
                        versions=missing,
                        sysroot_has=tuple(
                            newest
                            for family in dict.fromkeys(_family(v) for v in missing)
                            if (newest := library.highest(family))
                        ),
                    )
                )
    return problems


@dataclass(frozen=True, kw_only=True)
class SysrootCheck:
    """A wheel proved against a sysroot: what it needs from each library and what is missing."""

    wheel: WheelInfo
    sysroot: Sysroot
    problems: tuple[MissingVersions, ...]
    # What pip on such a board would refuse before any library is loaded: Python tag, manylinux tag.
    tag_problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems and not self.tag_problems

    @property
    def messages(self) -> list[str]:
        """Every reason the wheel does not fit, one sentence each."""
        return [*self.tag_problems, *(str(p) for p in self.problems)]

    def needs(self) -> dict[str, tuple[str, ...]]:
        """The checked versions the wheel needs, per library, over all its shared objects (sorted)."""
        return needs_of(self.wheel)

    def as_dict(self) -> dict[str, object]:
        libraries: dict[str, object] = {}
        for name in sorted(set(CORE_LIBRARIES) | set(self.needs())):
            library = self.sysroot.library(name)
            libraries[name] = (
                None
                if library is None
                else {
                    "path": library.path,
                    "newest": {
                        prefix.rstrip("_"): library.highest(prefix)
                        for prefix in CHECKED_PREFIXES
                        if library.highest(prefix)
                    },
                }
            )
        return {
            "ok": self.ok,
            "wheel": self.wheel.path.name,
            "sysroot": {
                "name": self.sysroot.name,
                "root": str(self.sysroot.root),
                "glibc": self.sysroot.glibc,
                "python": self.sysroot.python_version,
                "triplet": self.sysroot.triplet,
                "libraries": libraries,
            },
            "needs": {lib: list(versions) for lib, versions in self.needs().items()},
            "tag_problems": list(self.tag_problems),
            "problems": [
                {
                    "shared_object": p.shared_object,
                    "library": p.library,
                    "missing": list(p.versions),
                    "message": str(p),
                }
                for p in self.problems
            ],
        }


def _sort_key(version: str) -> tuple[str, tuple[int, ...]]:
    prefix = _family(version)
    return prefix, _numbers(version[len(prefix) :])


def check_wheel_against(wheel: Path | WheelInfo, sysroot: Sysroot) -> SysrootCheck:
    """Prove a built wheel's symbol version needs against a sysroot (what ``orch build`` calls after building).

    Also refuses a sysroot whose libc is not the wheel's machine: the versions would prove nothing.
    """
    info = wheel if isinstance(wheel, WheelInfo) else inspect_wheel(wheel)
    libc = sysroot.library("libc.so.6")
    if libc is None:
        raise SysrootError(
            f"{sysroot.label} has no libc.so.6 in {', '.join(sysroot.library_dirs)}",
            hint="pull it again (orch sysroot pull) or give a whole root file system (orch sysroot add)",
        )
    wheel_machines = {_elf_machine_name(m) for m in info.machines}
    if wheel_machines and libc.machine not in wheel_machines:
        raise SysrootError(
            f"{sysroot.label} is for {libc.machine.removeprefix('EM_').lower()} ({libc.path}),"
            f" the wheel {info.path.name} holds {', '.join(info.machines)} code",
            hint="check the wheel against a sysroot of the board it is built for",
        )
    return SysrootCheck(
        wheel=info,
        sysroot=sysroot,
        problems=tuple(sysroot_problems(info, sysroot)),
        tag_problems=tuple(_tag_problems(info, sysroot)),
    )


def _tag_problems(info: WheelInfo, sysroot: Sysroot) -> list[str]:
    problems = []
    python = sysroot.python_version
    if python:
        tag = "cp" + python.replace(".", "")
        if not python_compatible(info, tag):
            problems.append(
                f"{info.path.name} is for Python {', '.join(info.python_tags)}, {sysroot.label} has Python {python}"
            )
    promised = promised_glibc(info)
    glibc = sysroot.glibc
    if promised and glibc and promised > _numbers(glibc)[:2]:
        problems.append(
            f"{info.path.name} is tagged manylinux_{promised[0]}_{promised[1]} (pip installs it only where glibc"
            f" >= {promised[0]}.{promised[1]}), {sysroot.label} has glibc {glibc}"
        )
    return problems


# `uname -m` names (what WheelInfo.machines holds) -> ELF e_machine.
_MACHINE_ELF = {
    "aarch64": "EM_AARCH64",
    "x86_64": "EM_X86_64",
    "armv7l": "EM_ARM",
    "i686": "EM_386",
    "riscv64": "EM_RISCV",
    "ppc64le": "EM_PPC64",
    "s390x": "EM_S390",
}


def _elf_machine_name(machine: str) -> str:
    return _MACHINE_ELF.get(machine, machine)
