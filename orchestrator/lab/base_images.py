"""Debian base images without a container registry.

An air-gapped build host (or this project's CI) cannot pull ``debian:trixie``. orch makes
the same thing itself: ``debootstrap --variant=minbase`` a root filesystem (any
architecture qemu-user can run) and ``docker import`` it. The image is tagged
``orch/debian-<suite>-<arch>:<8 hex of the package list>`` and reused when it exists.
Users who do have a registry set ``ORCH_BASE_IMAGE_<SUITE>`` (e.g.
``ORCH_BASE_IMAGE_TRIXIE=debian:trixie``); Dockerfiles then install missing packages with apt.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.adapters import process
from orchestrator.errors import ContainerError
from orchestrator.lab.base_image_tags import (
    base_image_tag,
    base_image_variable,
    debian_arch,
    packages_hash,
    registry_override,
)

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

# The names are pure (a build plan reads them from base_image_tags); they stay importable from here.
__all__ = [
    "apt_sources",
    "base_image_tag",
    "base_image_variable",
    "bootstrap_rootfs",
    "debian_arch",
    "debian_mirror",
    "debootstrap_argv",
    "ensure_base_image",
    "packages_hash",
    "registry_override",
]
_SETUP_HINT = "sudo scripts/setup (installs debootstrap and registers qemu-user for foreign architectures)"


# -- mirror, from the machine's own apt configuration ------------------------------------------------


def _one_line_sources(text: str) -> list[tuple[str, list[str]]]:
    entries = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        # Drop "[arch=amd64 signed-by=...]" options.
        words = re.sub(r"\[[^\]]*\]", " ", line).split()
        if len(words) >= 3:
            entries.append((words[1], [words[2]]))
    return entries


def _deb822_sources(text: str) -> list[tuple[str, list[str]]]:
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            entries.append((uri, fields.get("suites", "").split()))
    return entries


def apt_sources(root: Path = Path("/etc/apt")) -> list[tuple[str, list[str]]]:
    """(URI, suites) of every enabled binary source of this machine, in apt's reading order."""
    entries: list[tuple[str, list[str]]] = []
    main = root / "sources.list"
    if main.is_file():
        entries += _one_line_sources(main.read_text(errors="replace"))
    directory = root / "sources.list.d"
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            if path.suffix == ".list":
                entries += _one_line_sources(path.read_text(errors="replace"))
            elif path.suffix == ".sources":
                entries += _deb822_sources(path.read_text(errors="replace"))
    return entries


def debian_mirror(root: Path = Path("/etc/apt")) -> str | None:
    """The Debian archive this machine already uses (not its security archive), or None.

    Only a URI whose path ends in ``/debian`` qualifies: an Ubuntu or third-party source
    does not carry Debian suites, and debootstrap's own default is better than a wrong guess.
    """
    for uri, suites in apt_sources(root):
        if not uri.rstrip("/").endswith("/debian"):
            continue
        if suites and all(suite.endswith("-security") for suite in suites):
            continue
        return uri.rstrip("/")
    return None


# -- making the image ---------------------------------------------------------------------------------


def debootstrap_argv(
    suite: str, arch: str, target: Path, packages: Sequence[str], mirror: str | None
) -> list[str]:
    argv = ["debootstrap", "--variant=minbase", f"--arch={debian_arch(arch)}"]
    if packages:
        argv.append("--include=" + ",".join(sorted(set(packages))))
    argv += [suite, str(target)]
    if mirror:
        argv.append(mirror)
    return argv


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve()) + "/"
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    points = [line.split()[1].replace("\\040", " ") for line in lines if len(line.split()) > 1]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def _remove_rootfs(path: Path) -> None:
    """Delete a bootstrap directory, never following a mount left behind by a failed debootstrap."""
    for point in _mounts_under(path):
        process.run(["umount", "-l", point])
    if _mounts_under(path):
        raise ContainerError(
            f"{path} still has mounts inside; not deleting it", hint=f"umount them, then rm -rf {path}"
        )
    shutil.rmtree(path, ignore_errors=True)


def bootstrap_rootfs(
    suite: str,
    arch: str,
    target: Path,
    packages: Sequence[str] = (),
    on_log: Callable[[str], None] | None = None,
) -> None:
    """debootstrap a minbase root filesystem into ``target`` (needs root, and qemu-user for foreign arches)."""
    if shutil.which("debootstrap") is None:
        raise ContainerError(
            "debootstrap is not installed: it makes base images without a registry", hint=_SETUP_HINT
        )
    if os.geteuid() != 0:
        raise ContainerError(
            "making a base image with debootstrap needs root",
            hint=f"run as root, or configure a registry image: {base_image_variable(suite)}=debian:{suite}",
        )
    argv = debootstrap_argv(suite, arch, target, packages, debian_mirror())
    if on_log:
        on_log("$ " + " ".join(argv))
    result = process.run_streaming(argv, on_log or (lambda line: None), keep=15)
    if not result.ok:
        log = target / "debootstrap" / "debootstrap.log"
        detail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else [result.tail(15)]
        raise ContainerError(
            f"debootstrap {suite} ({arch}) failed with exit code {result.exit_code}:\n" + "\n".join(detail),
            hint=_SETUP_HINT,
        )


def ensure_base_image(
    engine: Engine,
    suite: str,
    arch: str,
    packages: Sequence[str] = (),
    *,
    on_log: Callable[[str], None] | None = None,
) -> str:
    """The tag of a Debian ``suite`` base image for ``arch`` containing ``packages``; made when missing.

    A configured registry image (``ORCH_BASE_IMAGE_<SUITE>``) wins; it may lack the packages,
    so Dockerfiles built on it install what is missing.
    """
    override = registry_override(suite)
    if override:
        return override
    tag = base_image_tag(suite, arch, packages)
    if engine.image_id(tag):
        return tag
    scratch = Path(os.environ.get("ORCH_BOOTSTRAP_DIR") or "/var/tmp")
    scratch.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"orch-rootfs-{suite}-{debian_arch(arch)}-", dir=scratch))
    try:
        rootfs = workdir / "rootfs"
        bootstrap_rootfs(suite, arch, rootfs, packages, on_log)
        # debootstrap leaves its apt lists and caches; the image does not need them.
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (rootfs / cache).glob("*"):
                if item.is_file() and item.name not in ("lock",):
                    item.unlink()
        if on_log:
            on_log(f"importing {rootfs} as {tag}")
        engine.import_rootfs_dir(rootfs, tag)
    finally:
        _remove_rootfs(workdir)
    return tag
