"""What an ONNX Runtime source says about itself before it is built: its release (the
``VERSION_NUMBER`` file at the tree's top) and the archives ORT's FetchContent downloads
(``cmake/deps.txt``: ``name;url;sha1`` lines).

A tarball is read member by member (stopping once both are found), never extracted whole.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import UsageError

VERSION_FILE = "VERSION_NUMBER"
DEPS_FILE = "cmake/deps.txt"
# Text files of a few kB: anything larger under these names is not ORT's.
_MAX_MEMBER_BYTES = 1 << 20


@dataclass(frozen=True, kw_only=True)
class ReleaseFiles:
    """The release a source holds and its FetchContent URLs (None: no cmake/deps.txt)."""

    version: str
    deps_urls: tuple[str, ...] | None


def deps_urls(text: str) -> tuple[str, ...]:
    """The download URLs of ``cmake/deps.txt`` (comments and local paths left out), in file order."""
    urls = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].strip().split(";")
        if len(fields) >= 2 and "://" in fields[1]:
            urls.append(fields[1].strip())
    return tuple(urls)


def _relative(name: str) -> str | None:
    """A member's path below the archive's single top directory (or its root), else None."""
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if len(parts) >= 2 and "/".join(parts[1:]) in (VERSION_FILE, DEPS_FILE):
        return "/".join(parts[1:])
    joined = "/".join(parts)
    return joined if joined in (VERSION_FILE, DEPS_FILE) else None


def read_tarball(path: Path) -> ReleaseFiles:
    """VERSION_NUMBER and cmake/deps.txt of a source tarball; refused (naming it) when unreadable."""
    found: dict[str, str] = {}
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                name = _relative(member.name)
                if name is None or name in found or not member.isfile():
                    continue
                if member.size > _MAX_MEMBER_BYTES:
                    continue
                handle = archive.extractfile(member)
                if handle is not None:
                    found[name] = handle.read().decode("utf-8", errors="replace")
                if len(found) == 2:
                    break
    except (tarfile.TarError, OSError, EOFError) as error:
        raise UsageError(
            f"--ort-source {path}: cannot read the tarball to find its release ({error})",
            hint="give a .tar, .tar.gz, .tar.xz or .tar.bz2 of an ONNX Runtime source tree",
        ) from None
    return _release_files(found, f"--ort-source {path}: no {VERSION_FILE} at the top of the archive")


def read_tree(path: Path) -> ReleaseFiles:
    """The same files of a source directory (a checkout)."""
    found = {
        name: (path / name).read_text(errors="replace")
        for name in (VERSION_FILE, DEPS_FILE)
        if (path / name).is_file()
    }
    return _release_files(found, f"--ort-source {path}: no {VERSION_FILE} at the top of the tree")


def _release_files(found: dict[str, str], missing: str) -> ReleaseFiles:
    version = found.get(VERSION_FILE, "").strip()
    if not version:
        raise UsageError(
            f"{missing}: its ONNX Runtime release cannot be read",
            hint="an ONNX Runtime source has VERSION_NUMBER at its top (the release, e.g. 1.21.0)",
        )
    deps = found.get(DEPS_FILE)
    return ReleaseFiles(version=version, deps_urls=None if deps is None else deps_urls(deps))
