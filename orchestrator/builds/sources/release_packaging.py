"""The variant ``upstream`` made from its release: the packaging script and build.py read from the
release's source (a tree, a tarball, the Debian source package once downloaded), the options
parsed by ``packaging`` and written into the variant before the build is planned.

A source that is not on this machine yet (a git URL before its clone, the Debian package before its
first download) is fetched first by a real build (``fetch=``); a dry run fetches nothing, so its
plan says the options are read once the source is there.
"""

from __future__ import annotations

import functools
import platform
import tarfile
from collections.abc import Callable
from pathlib import Path

from rich.markup import escape

from orchestrator.adapters.engine import Engine
from orchestrator.builds.sources.ort import prepare_source, sources_root
from orchestrator.builds.sources.ort_spec import SourceSpec
from orchestrator.builds.sources.packaging import (
    BUILD_PY,
    SCRIPT,
    PackagingError,
    PackagingOptions,
    packaging_options,
)
from orchestrator.builds.variants import Variant, pending_release, with_release_options
from orchestrator.console import console
from orchestrator.lab.base_images import ensure_base_image

Log = Callable[[str], None]
# build.py is some 100 kB, the script a few: anything much larger under these names is not ORT's.
_MAX_BYTES = 4 << 20


def release_variant(variant: Variant, source: SourceSpec, *, fetch: Log | None) -> Variant:
    """``variant`` with the release's own options when it takes them from the release (upstream);
    others unchanged. ``fetch`` (a real build's log) fetches a source not on this machine yet; None
    (a dry run) plans without the options and says so."""
    if not variant.from_release:
        return variant
    local = local_release(source)
    if local is None and fetch is not None:
        local = fetch_release(source, fetch)
    if local is None:
        return pending_release(variant, f"{source.describe()} is not on this machine yet")
    return with_release_options(variant, read_options(local, release=source.version))


def local_release(source: SourceSpec) -> Path | None:
    """Where the release's files are on this machine: the tree or tarball given, or the Debian
    source package downloaded by an earlier build; None when it must be fetched first."""
    if source.kind in ("dir", "tarball"):
        return Path(source.location)
    if source.kind == "debian":
        found = sorted((sources_root() / "debian").glob(f"onnxruntime_{source.version}*.orig.tar.*"))
        return found[-1] if found else None
    return None


def fetch_release(source: SourceSpec, log: Log) -> Path:
    """The source fetched as the build will use it (downloaded or cloned, kept for that build)."""
    local = Engine()
    base = None
    if source.kind == "debian":
        base = ensure_base_image(local, source.location, platform.machine(), on_log=log)
    log(f"reading upstream's build options from ORT {source.version}'s packaging: fetching the source first")
    return prepare_source(source, engine=local, base_image=base, log=log).path


def say(line: str) -> None:
    """A line of the source's fetching, shown as a build's log lines are."""
    console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)


def read_options(path: Path, *, release: str) -> PackagingOptions:
    """The release's options from its source tree or tarball at ``path``; PackagingError when its
    packaging script or build.py cannot be read."""
    stat = path.stat()
    return _read_options(path, release, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _read_options(path: Path, release: str, size: int, mtime_ns: int) -> PackagingOptions:
    """Read once per file as it is (a batch plans each build twice; a tarball is read member by member)."""
    del size, mtime_ns  # the cache's key: the same path changed is read again
    texts = _tree_texts(path) if path.is_dir() else _tarball_texts(path)
    missing = [name for name in (SCRIPT, BUILD_PY) if name not in texts]
    if missing:
        raise PackagingError(
            f"ORT {release} ({path}): no {' nor '.join(missing)} in the source, so upstream's build"
            " options cannot be read from it",
            hint="the variant upstream is the official wheel's build as that release's own packaging"
            " script says it; build this source with another variant (default, lto, tuned)",
        )
    return packaging_options(texts[SCRIPT], texts[BUILD_PY], release=release)


def _tree_texts(path: Path) -> dict[str, str]:
    texts = {}
    for name in (SCRIPT, BUILD_PY):
        file = path / name
        if file.is_file() and file.stat().st_size <= _MAX_BYTES:
            texts[name] = _decoded(file.read_bytes(), path, name)
    return texts


def _tarball_texts(path: Path) -> dict[str, str]:
    """The two files of a source tarball (below its single top directory, or at its root), read
    member by member: the archive is never extracted."""
    texts: dict[str, str] = {}
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                parts = [part for part in member.name.split("/") if part not in ("", ".")]
                name = next(
                    (n for n in ("/".join(parts), "/".join(parts[1:])) if n in (SCRIPT, BUILD_PY)), None
                )
                if name is None or name in texts or not member.isfile() or member.size > _MAX_BYTES:
                    continue
                handle = archive.extractfile(member)
                if handle is not None:
                    texts[name] = _decoded(handle.read(), path, name)
                if len(texts) == 2:
                    break
    except (tarfile.TarError, OSError, EOFError) as error:
        raise PackagingError(
            f"{path}: cannot read the tarball for upstream's packaging script ({error})"
        ) from None
    return texts


def _decoded(raw: bytes, source: Path, name: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PackagingError(f"{source}: {name} is not UTF-8 text") from None
