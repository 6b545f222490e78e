"""What ``--ort-source`` names, parsed: the kind of source, where it is, and the ONNX Runtime
release it holds (pure: a local tree or tarball is only read for its VERSION_NUMBER and
cmake/deps.txt; nothing is fetched, copied or run).

``--ort-source`` accepts:

* ``debian`` — the offline route: the distribution's ``onnxruntime`` source package (fetched by
  ``ort.prepare_source`` inside a container of the board's Debian suite). Debian 13 carries ORT 1.21.0.
* a git URL, optionally with ``@<ref>`` (default ref ``v<ort-version>``), cloned with submodules;
* a local directory (an ORT checkout);
* a source tarball (``.tar.gz``/``.tar.xz``/...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.builds.sources.release_files import read_tarball, read_tree
from orchestrator.common.ort_versions import check_ort_version
from orchestrator.errors import UsageError

UPSTREAM_GIT = "https://github.com/microsoft/onnxruntime"
DEFAULT_ORT_VERSION = "1.21.0"
# The ORT version each Debian suite's source package carries (what the offline route can build).
DEBIAN_ORT_VERSIONS = {"trixie": "1.21.0"}
_TARBALL = re.compile(r"\.(tar|tar\.gz|tgz|tar\.xz|txz|tar\.bz2|tbz2|tar\.zst)$")

SourceKind = Literal["debian", "git", "dir", "tarball"]
# Where the plan's release comes from: the source itself (a Debian package, a tree's or tarball's
# VERSION_NUMBER), or, for a git URL read only after cloning, the ref, --ort-version or orch's default.
VersionOrigin = Literal["source", "git ref", "--ort-version", "default"]
# A git ref that names a release: v1.21.0, 1.21.0, v1.22.0rc1.
_RELEASE_REF = re.compile(r"v?(\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?)")


@dataclass(frozen=True, kw_only=True)
class SourceSpec:
    """What the user asked for, parsed (pure)."""

    kind: SourceKind
    location: str  # suite for debian, URL, path
    ref: str | None
    version: str
    version_origin: VersionOrigin = "source"
    # ORT's FetchContent URLs (cmake/deps.txt) when the source could be read before fetching it.
    deps_urls: tuple[str, ...] | None = None

    @property
    def version_checked_after_fetch(self) -> bool:
        """The release is only a claim until the source is fetched (a git URL): checked then."""
        return self.version_origin != "source"

    def describe(self) -> str:
        if self.kind == "debian":
            return f"Debian {self.location} source package onnxruntime {self.version} (offline, apt deb-src)"
        if self.kind == "git":
            return f"git {self.location} @ {self.ref}"
        return f"{self.kind} {self.location}"


def parse_source(text: str | None, *, version: str | None, suite: str | None) -> SourceSpec:
    """Interpret ``--ort-source`` (None: the offline Debian route when it has the version, else upstream git)."""
    check_ort_version(version)
    wanted = version or DEFAULT_ORT_VERSION
    if text is None:
        # The offline route when a Debian suite carries the release: the board's own first (the
        # ORT tree is the same upstream tarball whichever suite serves it).
        carriers = sorted(s for s, v in DEBIAN_ORT_VERSIONS.items() if v == wanted)
        if carriers:
            chosen = suite if suite in carriers else carriers[0]
            return SourceSpec(kind="debian", location=chosen, ref=None, version=wanted)
        text = UPSTREAM_GIT
    if text == "debian" or text.startswith("debian:"):
        return _debian_source(text.partition(":")[2] or suite or "trixie", version)
    if re.match(r"^(https?|ssh|git|file)://", text) or text.startswith("git@") or text.endswith(".git"):
        return _git_source(text, version)
    return _local_source(text, version)


def _git_source(text: str, version: str | None) -> SourceSpec:
    """A git URL[@ref]: nothing to read before cloning, so the release is the ref's (or the option's),
    checked against the clone's VERSION_NUMBER once it is there."""
    url, _, ref = text.partition("@") if not text.startswith("git@") else (text, "", "")
    if text.startswith("git@") and text.count("@") > 1:
        url, _, ref = text.rpartition("@")
    named = _RELEASE_REF.fullmatch(ref) if ref else None
    if named and version and named.group(1) != version:
        raise UsageError(
            f"--ort-source {text}: the ref {ref} names ORT {named.group(1)}, but --ort-version says {version}",
            hint="give one release: drop --ort-version (the ref decides), or name the ref of that release",
        )
    if ref and not named and not version:
        raise UsageError(
            f"--ort-source {text}: the ref {ref!r} does not name a release",
            hint="add --ort-version X.Y.Z (checked against the clone's VERSION_NUMBER), or use @vX.Y.Z",
        )
    origin: VersionOrigin = "--ort-version" if version else "git ref" if named else "default"
    wanted = version or (named.group(1) if named else DEFAULT_ORT_VERSION)
    return SourceSpec(
        kind="git", location=url, ref=ref or f"v{wanted}", version=wanted, version_origin=origin
    )


def _debian_source(debian_suite: str, version: str | None) -> SourceSpec:
    carried = DEBIAN_ORT_VERSIONS.get(debian_suite)
    if carried is None:
        raise UsageError(
            f"no ORT source package known for Debian '{debian_suite}'",
            hint=f"known: {', '.join(f'{s} ({v})' for s, v in DEBIAN_ORT_VERSIONS.items())}",
        )
    if version and version != carried:
        raise UsageError(
            f"Debian {debian_suite} carries ORT {carried}, not {version}",
            hint="drop --ort-version or use a git URL / tarball for other versions",
        )
    return SourceSpec(kind="debian", location=debian_suite, ref=None, version=carried)


def _local_source(text: str, version: str | None) -> SourceSpec:
    """A local checkout or a source tarball: the release is the one its VERSION_NUMBER says."""
    path = Path(text).expanduser()
    try:
        path.stat()
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as error:  # a NUL byte, a name too long, a loop of links
        raise UsageError(
            f"--ort-source {text[:80]!r}: not a usable path ({getattr(error, 'strerror', None) or error})"
        ) from None
    if path.is_dir():
        if tree_version(path) is None:
            raise UsageError(
                f"{path} is not an ONNX Runtime source tree (no VERSION_NUMBER, tools/ci_build/build.py)"
            )
        files = read_tree(path)
        kind: SourceKind = "dir"
    elif path.is_file() and _TARBALL.search(path.name):
        files, kind = read_tarball(path), "tarball"
    else:
        raise UsageError(
            f"--ort-source '{text}' is neither 'debian', a git URL, an existing directory nor a source tarball",
        )
    if version and version != files.version:
        raise UsageError(
            f"--ort-source {path} holds ORT {files.version} (its VERSION_NUMBER), but --ort-version says {version}",
            hint="drop --ort-version (the release comes from the source), or give the source of that release",
        )
    return SourceSpec(
        kind=kind,
        location=str(path.resolve()),
        ref=None,
        version=files.version,
        deps_urls=files.deps_urls,
    )


def tree_version(path: Path) -> str | None:
    """The release an ORT tree says it holds (VERSION_NUMBER), None when it is no ORT tree."""
    marker = path / "VERSION_NUMBER"
    if not marker.is_file() or not (path / "tools" / "ci_build" / "build.py").is_file():
        return None
    return marker.read_text().strip()
