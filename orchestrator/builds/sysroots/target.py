"""A target profile whose OS is taken from a stored sysroot (``orch build --sysroot-from NAME``).

A sysroot pulled from a board is the truth about that board: its glibc, Python and distribution
replace the profile's OS facts; the profile still gives the CPU (``-mcpu``, the emulated
pre-flight). The build then runs in a container of that distribution, and the wheel is checked
against the sysroot's own libraries (``orchestrator.builds.sysroots.contents.check_wheel_against``). Pure,
apart from reading the stored sysroot's files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.builds.sysroots.contents import Sysroot, apt_install_command
from orchestrator.builds.sysroots.gpu import GpuStack, read_gpu_stack
from orchestrator.builds.sysroots.store import StoredSysroot, gpu_stack
from orchestrator.errors import UsageError
from orchestrator.targets import BoardOS, TargetProfile

# Release numbers to code names, for sysroots that lack os-release's VERSION_CODENAME.
_CODENAMES = {
    ("debian", "11"): "bullseye",
    ("debian", "12"): "bookworm",
    ("debian", "13"): "trixie",
    ("ubuntu", "18.04"): "bionic",
    ("ubuntu", "20.04"): "focal",
    ("ubuntu", "22.04"): "jammy",
    ("ubuntu", "24.04"): "noble",
}


@dataclass(frozen=True, kw_only=True)
class SysrootRef:
    """Which stored sysroot a build is for, as the plan and the manifest record it."""

    name: str
    digest: str
    root: Path
    board: str | None
    os: BoardOS
    gpu: GpuStack | None = None  # CUDA, cuDNN and TensorRT as the sysroot's files say

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "digest": self.digest,
            "board": self.board,
            "os": f"{self.os.distro} {self.os.release} ({self.os.codename})",
            "glibc": self.os.glibc,
            "python": self.os.python,
            "gpu": self.gpu.summary if self.gpu else None,
        }


def _os_of(stored: StoredSysroot) -> BoardOS:
    sysroot = stored.sysroot
    release = sysroot.os_release()
    facts = stored.record.get("board_facts") or {}
    distro = (release.get("ID") or str(facts.get("os_id", ""))).lower()
    version = release.get("VERSION_ID") or str(facts.get("os_version", ""))
    named = re.search(r"\(([a-z]+)\)", str(facts.get("os_name", "")))
    codename = (
        release.get("VERSION_CODENAME")
        or (named.group(1) if named else "")
        or _CODENAMES.get((distro, version), "")
    )
    glibc = sysroot.glibc or str(facts.get("glibc", "") or "")
    python = sysroot.python_version or ".".join(str(facts.get("python_version", "")).split(".")[:2])
    missing = [
        what
        for what, value in (
            ("distribution", distro),
            ("release", version),
            ("code name", codename),
            ("glibc", glibc),
            ("Python", python),
        )
        if not value
    ]
    if missing:
        raise UsageError(
            f"sysroot {stored.name!r} does not say its {', '.join(missing)}",
            hint="pull it from the board again (orch sysroot pull), or add a rootfs that has etc/os-release,"
            " libc.so.6 and Python",
        )
    return BoardOS(distro=distro, release=version, codename=codename, glibc=glibc, python=python)


def profile_for_sysroot(profile: TargetProfile, stored: StoredSysroot) -> tuple[TargetProfile, SysrootRef]:
    """``profile`` with the sysroot's OS (and the build container of that distribution)."""
    board_os = _os_of(stored)
    debian = board_os.distro == "debian"
    adjusted = replace(
        profile,
        os=board_os,
        # Debian build containers are made offline; others come from a registry image.
        bootstrap_suite=board_os.codename if debian else None,
        base_image=f"{board_os.distro}:{board_os.codename if debian else board_os.release}",
    )
    reference = SysrootRef(
        name=stored.name,
        digest=stored.digest,
        root=stored.directory / "root",
        board=stored.record.get("board"),
        os=board_os,
        # A record stored before orch read GPU stacks says nothing: read the tree itself.
        gpu=gpu_stack(stored.record) or read_gpu_stack(stored.sysroot.root, stored.sysroot.triplet),
    )
    return adjusted, reference


def missing_for_build(ref: SysrootRef, *, wheel: bool) -> list[tuple[str, str]]:
    """What a cross build needs from a sysroot and this one lacks: (what, the Debian/Ubuntu package
    that brings it). Glibc's and libstdc++'s headers always; for a wheel, the board's Python headers
    and its interpreter with its standard library (CMake's FindPython runs it under emulation).
    Asked of the stored tree, whose links resolve inside it, never on the workstation."""
    tree, python = Sysroot(root=ref.root, name=ref.name), ref.os.python
    # In the order `orch sysroot pull` names the packages, so both print the same apt line.
    libc = ("glibc's headers (usr/include/stdio.h)", "libc6-dev", tree.has_libc_headers)
    cxx = ("libstdc++'s headers (usr/include/c++/)", tree.libstdcxx_dev_package(), tree.has_cxx_headers)
    if not wheel:
        needs = [libc, cxx]
    else:
        needs = [
            libc,
            (f"Python {python}'s headers", "python3-dev", tree.has_python_headers),
            cxx,
            (
                f"the python{python} interpreter and its standard library",
                f"python{python}",
                tree.python_executable is not None,
            ),
        ]
    return [(what, package) for what, package, present in needs if not present]


def refuse_incomplete(ref: SysrootRef, *, wheel: bool) -> None:
    """One message naming everything the sysroot lacks, with the line that installs it on the board."""
    missing = missing_for_build(ref, wheel=wheel)
    if not missing:
        return
    where = f"board {ref.board}" if ref.board else f"the root file system of sysroot {ref.name!r}"
    raise UsageError(
        f"sysroot {ref.name!r} lacks what a cross build needs: {'; '.join(what for what, _ in missing)}",
        hint=f"install what {where} lacks ({apt_install_command(package for _, package in missing)}),"
        " then take the sysroot again (orch sysroot pull --host BOARD, or orch sysroot add): a sysroot"
        " pulled by an orch that did not keep the board's interpreter lacks it even when the board has it",
    )
