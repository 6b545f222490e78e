"""What a wheel needs from a board: its tags and, per shared object, ELF machine, glibc and versions.

Pure: reads a ``.whl`` (a zip) on the workstation with pyelftools, no binutils and no
board. ``inspect_wheel`` says what the wheel is; ``compatibility_problems`` compares that
with what a board has (architecture, glibc, Python tag) and returns human sentences, so
``orch build`` can check its own output and ``orch deploy`` can refuse a wheel *before*
sending a byte ("wheel needs GLIBC_2.38, nano01 has 2.27"). Each shared object also lists
every symbol version it needs per library (ELF verneed), which ``orchestrator.builds.sysroots.contents``
proves against a sysroot's real libraries.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

from orchestrator.errors import DeployError

# ELF e_machine -> the name `uname -m` prints on such a machine.
_ELF_MACHINES = {
    "EM_AARCH64": "aarch64",
    "EM_X86_64": "x86_64",
    "EM_ARM": "armv7l",
    "EM_386": "i686",
    "EM_RISCV": "riscv64",
    "EM_PPC64": "ppc64le",
    "EM_S390": "s390x",
}

# Legacy manylinux aliases (PEP 600) -> the glibc they promise to need at most.
_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}

# Architectures that run each other's binaries: a board's `uname -m` -> wheel arch names it accepts.
_ARCH_ALIASES = {
    "aarch64": {"aarch64", "arm64"},
    "arm64": {"aarch64", "arm64"},
    "x86_64": {"x86_64", "amd64"},
    "armv7l": {"armv7l", "armv7"},
    "armv8l": {"armv7l", "armv7"},
}

_WHEEL_CHARS = re.compile(r"^[A-Za-z0-9_.+!-]+$")
_GLIBC_SYMBOL = re.compile(r"^GLIBC_(\d+(?:\.\d+)+)$")
_WHEEL_NAME = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)


@dataclass(frozen=True, kw_only=True)
class VersionNeed:
    """The symbol versions one shared object needs from one library (one ELF verneed entry)."""

    library: str  # the needed file name as the dynamic linker looks it up: "libc.so.6"
    versions: tuple[str, ...]  # sorted: ("GLIBC_2.17", "GLIBC_2.34")


@dataclass(frozen=True, kw_only=True)
class SharedObjectInfo:
    """One ELF shared object inside the wheel."""

    path: str
    machine: str  # as `uname -m` says it: "aarch64", "x86_64", ... or the raw e_machine when unknown
    glibc: str | None  # highest GLIBC_x.y symbol version required, e.g. "2.28"; None when it needs none
    # Every library it asks symbol versions of, in file order; empty when it has no verneed section.
    version_needs: tuple[VersionNeed, ...] = ()
    soname: str | None = None  # its DT_SONAME: how other shared objects of the wheel name it

    @property
    def glibc_tuple(self) -> tuple[int, ...] | None:
        return _version_tuple(self.glibc) if self.glibc else None

    @property
    def needs(self) -> dict[str, tuple[str, ...]]:
        """``{"libc.so.6": ("GLIBC_2.17", ...), ...}``: the version needs keyed by library."""
        return {need.library: need.versions for need in self.version_needs}


@dataclass(frozen=True, kw_only=True)
class WheelInfo:
    path: Path
    name: str
    version: str
    python_tags: tuple[str, ...]
    abi_tags: tuple[str, ...]
    platform_tags: tuple[str, ...]
    shared_objects: tuple[SharedObjectInfo, ...]

    @property
    def machines(self) -> tuple[str, ...]:
        """Every ELF machine found among the shared objects, sorted."""
        return tuple(sorted({so.machine for so in self.shared_objects}))

    @property
    def glibc_required(self) -> str | None:
        """The highest GLIBC symbol version any shared object needs."""
        found = [so for so in self.shared_objects if so.glibc]
        if not found:
            return None
        return max(found, key=lambda so: so.glibc_tuple or ()).glibc

    @property
    def platform_arches(self) -> tuple[str, ...]:
        """Architectures named by the platform tags ("any" for pure-Python wheels)."""
        return tuple(sorted({_platform_arch(tag) for tag in self.platform_tags}))

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "version": self.version,
            "python_tags": list(self.python_tags),
            "abi_tags": list(self.abi_tags),
            "platform_tags": list(self.platform_tags),
            "machines": list(self.machines),
            "glibc_required": self.glibc_required,
            "shared_objects": [
                {"path": so.path, "machine": so.machine, "glibc": so.glibc, "needs": _lists(so.needs)}
                for so in self.shared_objects
            ],
        }


def _lists(needs: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    return {library: list(versions) for library, versions in needs.items()}


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _platform_arch(tag: str) -> str:
    """``manylinux_2_28_aarch64`` -> ``aarch64``; ``linux_x86_64`` -> ``x86_64``; ``any`` -> ``any``."""
    if tag == "any":
        return "any"
    match = re.match(r"^(?:manylinux_\d+_\d+|manylinux\d+|musllinux_\d+_\d+|linux)_(.+)$", tag)
    return match.group(1) if match else tag


def _platform_glibc(tag: str) -> tuple[int, int] | None:
    """The glibc a manylinux tag promises to need at most (None for linux_*/any)."""
    match = re.match(r"^manylinux_(\d+)_(\d+)_", tag)
    if match:
        return int(match.group(1)), int(match.group(2))
    for legacy, version in _LEGACY_MANYLINUX.items():
        if tag.startswith(legacy + "_"):
            return version
    return None


def _parse_filename(path: Path) -> dict[str, str]:
    match = _WHEEL_NAME.match(path.name)
    # Wheel names only ever hold these characters (PEP 427 escapes the rest): anything else is refused
    # rather than carried into paths and argv lists on boards.
    if not match or not _WHEEL_CHARS.match(path.name):
        raise DeployError(
            f"{path.name} is not a wheel file name (name-version-python-abi-platform.whl)",
            hint="pass the .whl that `orch build` or `pip download` produced, unrenamed",
        )
    return match.groupdict()


def _inspect_elf(member: str, data: bytes) -> SharedObjectInfo | None:
    if not data.startswith(b"\x7fELF"):
        return None
    try:
        elf = ELFFile(io.BytesIO(data))
        machine = _ELF_MACHINES.get(elf["e_machine"], str(elf["e_machine"]))
        highest: tuple[int, ...] | None = None
        needs: list[VersionNeed] = []
        for section in elf.iter_sections():
            if not isinstance(section, GNUVerNeedSection):
                continue
            for verneed, auxiliaries in section.iter_versions():
                names = sorted({aux.name for aux in auxiliaries}, key=_version_sort_key)
                needs.append(VersionNeed(library=verneed.name or "", versions=tuple(names)))
                for name in names:
                    match = _GLIBC_SYMBOL.match(name)
                    if match:
                        version = _version_tuple(match.group(1))
                        if highest is None or version > highest:
                            highest = version
        soname = None
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags("DT_SONAME"):
                    soname = str(getattr(tag, "soname", "")) or None
    except ELFError as error:
        raise DeployError(f"{member}: unreadable ELF file: {error}") from error
    glibc = ".".join(str(part) for part in highest) if highest else None
    return SharedObjectInfo(
        path=member, machine=machine, glibc=glibc, version_needs=tuple(needs), soname=soname
    )


def _version_sort_key(name: str) -> tuple[str, tuple[int, ...]]:
    """Version names grouped by prefix, then in numeric order (``GLIBC_2.4`` before ``GLIBC_2.17``)."""
    prefix = re.split(r"\d", name, maxsplit=1)[0]
    return prefix, _version_tuple(name[len(prefix) :])


def _is_shared_object(member: str) -> bool:
    base = member.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


def inspect_wheel(path: Path) -> WheelInfo:
    """Read a wheel's tags (file name) and every shared object's ELF machine and glibc need."""
    path = Path(path)
    if not path.is_file():
        raise DeployError(f"wheel not found: {path}")
    parts = _parse_filename(path)
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as error:
        raise DeployError(f"{path}: not a valid wheel (zip) file: {error}") from error
    shared: list[SharedObjectInfo] = []
    with archive:
        for member in sorted(archive.namelist()):
            if not _is_shared_object(member):
                continue
            info = _inspect_elf(member, archive.read(member))
            if info is not None:
                shared.append(info)
    return WheelInfo(
        path=path,
        name=parts["name"],
        version=parts["version"],
        python_tags=tuple(parts["py"].split(".")),
        abi_tags=tuple(parts["abi"].split(".")),
        platform_tags=tuple(parts["plat"].split(".")),
        shared_objects=tuple(shared),
    )


def inspect_directory(path: Path, *, name: str, version: str) -> WheelInfo:
    """The ELF files under a directory (a C library build's output: ``lib/``, the runner), read as a
    wheel without tags, so that the checks of a wheel's shared objects serve it as they are."""
    shared = []
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
        with file.open("rb") as handle:
            if handle.read(4) != b"\x7fELF":
                continue  # a header, a log, a wheel: not read whole
        info = _inspect_elf(file.relative_to(path).as_posix(), file.read_bytes())
        if info is not None:
            shared.append(info)
    return WheelInfo(
        path=path,
        name=name,
        version=version,
        python_tags=(),
        abi_tags=(),
        platform_tags=(),
        shared_objects=tuple(shared),
    )


def python_compatible(info: WheelInfo, python_tag: str) -> bool:
    """Does a Python whose tag is ``python_tag`` (``cp313``) import this wheel (its tags, abi3 included)?"""
    return _python_ok(info, python_tag)


def promised_glibc(info: WheelInfo) -> tuple[int, int] | None:
    """The glibc the wheel's manylinux tags promise to need at most (the lowest of them), or None."""
    promised = [v for v in (_platform_glibc(t) for t in info.platform_tags) if v is not None]
    return min(promised) if promised else None


def _python_ok(info: WheelInfo, python_tag: str) -> bool:
    """Is a board running ``python_tag`` (e.g. ``cp313``) able to import this wheel?"""
    board = re.match(r"^cp(\d)(\d+)$", python_tag)
    for tag in info.python_tags:
        if tag == python_tag or tag in ("py3", f"py{python_tag[2:3]}"):
            return True
        wheel = re.match(r"^cp(\d)(\d+)$", tag)
        # The stable ABI: a cp38-abi3 wheel imports on every CPython >= 3.8.
        if (
            wheel
            and board
            and "abi3" in info.abi_tags
            and wheel.group(1) == board.group(1)
            and int(board.group(2)) >= int(wheel.group(2))
        ):
            return True
        if re.match(r"^py3\d+$", tag) and board and tag[2:] == board.group(1) + board.group(2):
            return True
    return False


def compatibility_problems(
    info: WheelInfo, *, arch: str, glibc: str, python_tag: str, board: str = "the board"
) -> list[str]:
    """Why this wheel would not work on a board (empty list = compatible).

    ``arch`` is the board's ``uname -m``, ``glibc`` its glibc version ("2.41"),
    ``python_tag`` its interpreter's tag ("cp313"). Each problem is one sentence naming
    what the wheel needs and what the board has.
    """
    problems: list[str] = []
    accepted = _ARCH_ALIASES.get(arch, {arch})
    wheel_arches = [a for a in info.platform_arches if a != "any"]
    if wheel_arches and not any(a in accepted for a in wheel_arches):
        problems.append(
            f"wheel is built for {', '.join(wheel_arches)} (platform tag {'.'.join(info.platform_tags)}),"
            f" {board} is {arch}"
        )
    foreign = _foreign_code(info, accepted)
    if foreign:
        problems.append(f"wheel contains {foreign}, {board} is {arch}")
    board_glibc = _version_tuple(glibc)
    needed = info.glibc_required
    if needed and _version_tuple(needed) > board_glibc:
        problems.append(f"wheel needs GLIBC_{needed}, {board} has {glibc}")
    else:
        promised = [v for v in (_platform_glibc(t) for t in info.platform_tags) if v is not None]
        # A manylinux_2_X tag is the wheel's own promise; pip on the board refuses it when X is newer.
        if promised and min(promised) > board_glibc:
            low = min(promised)
            problems.append(
                f"wheel is tagged manylinux_{low[0]}_{low[1]} (needs glibc {low[0]}.{low[1]}),"
                f" {board} has {glibc}"
            )
    if not _python_ok(info, python_tag):
        problems.append(
            f"wheel is for Python {', '.join(info.python_tags)} (ABI {', '.join(info.abi_tags)}),"
            f" {board} runs {python_tag}"
        )
    return problems


def _foreign_code(info: WheelInfo, accepted: set[str]) -> str | None:
    """``<machine> machine code (<first file>[ and N more])`` for ELF files of another
    architecture than ``accepted``; None when every file fits."""
    wrong_machine = [so for so in info.shared_objects if so.machine not in accepted]
    if not wrong_machine:
        return None
    first = wrong_machine[0]
    more = f" and {len(wrong_machine) - 1} more" if len(wrong_machine) > 1 else ""
    return f"{first.machine} machine code ({first.path}{more})"


def library_problems(info: WheelInfo, *, arch: str, glibc: str, board: str = "the board") -> list[str]:
    """Why a C library build's files (``inspect_directory``: no tags, no Python) would not run on a
    board: machine code of another architecture, a newer glibc than the board's (empty: they fit)."""
    problems: list[str] = []
    accepted = _ARCH_ALIASES.get(arch, {arch})
    foreign = _foreign_code(info, accepted)
    if foreign:
        problems.append(f"the C library build contains {foreign}, {board} is {arch}")
    needed = info.glibc_required
    if needed and _version_tuple(needed) > _version_tuple(glibc):
        problems.append(f"the C library build needs GLIBC_{needed}, {board} has {glibc}")
    return problems
