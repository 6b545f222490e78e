"""Where the ONNX Runtime source tree of a build comes from, and getting it ready.

``--ort-source`` accepts:

* ``debian`` — the offline route: the distribution's ``onnxruntime`` source package, fetched
  with ``apt-get source --download-only`` inside a container of the board's Debian suite (the
  ``deb-src`` entry is derived from that image's own apt sources, so whatever mirror the
  image uses serves the source too). Debian 13 carries ORT 1.21.0.
* a git URL, optionally with ``@<ref>`` (default ref ``v<ort-version>``), cloned with submodules;
* a local directory (an ORT checkout);
* a source tarball (``.tar.gz``/``.tar.xz``/...).

Preparing a source copies it into ``$ORCH_HOME/sources/`` when patches must be applied (a
user's checkout is never modified), applies the version's patch series from
``toolchains/patches/<version>/series`` and records each patch's sha256.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from orchestrator.adapters import process
from orchestrator.builds.sources.release_files import DEPS_FILE, read_tarball, read_tree
from orchestrator.common.digests import file_sha256
from orchestrator.common.ort_versions import check_ort_version
from orchestrator.errors import BuildError, UsageError
from orchestrator.paths import DOCKER_DIR, TOOLCHAINS_DIR, orch_home

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

UPSTREAM_GIT = "https://github.com/microsoft/onnxruntime"
DEFAULT_ORT_VERSION = "1.21.0"
# The ORT version each Debian suite's source package carries (what the offline route can build).
DEBIAN_ORT_VERSIONS = {"trixie": "1.21.0"}
_TARBALL = re.compile(r"\.(tar|tar\.gz|tgz|tar\.xz|txz|tar\.bz2|tbz2|tar\.zst)$")

# Run inside a container of the suite (see its header): a file of docker/build, copied in where
# the build's scripts go (orchestrator.builds.container_paths.SCRIPTS) and run with the image's `sh`.
_FETCH_SCRIPT = DOCKER_DIR / "build" / "fetch_debian_source.sh"
_FETCH_IN_CONTAINER = "/opt/orch/fetch_debian_source.sh"


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


@dataclass(frozen=True, kw_only=True)
class SourceTree:
    """A prepared ORT tree: ready to mount into the build container."""

    path: Path
    version: str
    spec: SourceSpec
    source_sha256: str
    patches: tuple[dict[str, str], ...]


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
        if _tree_version(path) is None:
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


def fetch_entries(tree: Path) -> tuple[dict[str, str], ...]:
    """What ORT's FetchContent may download, from the tree's ``cmake/deps.txt``: name, URL and the
    SHA1 it checks each archive against (empty when the tree has no such file)."""
    deps = tree / DEPS_FILE
    if not deps.is_file():
        return ()
    entries = []
    for line in deps.read_text(errors="replace").splitlines():
        fields = [field.strip() for field in line.split("#", 1)[0].split(";")]
        if len(fields) >= 3 and fields[0] and "://" in fields[1]:
            entries.append({"name": fields[0], "url": fields[1], "sha1": fields[2]})
    return tuple(entries)


def _check_fetched_release(spec: SourceSpec, tree: Path) -> None:
    """The fetched tree must hold the release the plan was made for (a git ref may name another)."""
    found = _tree_version(tree)
    if found != spec.version:
        origin = "" if spec.version_origin == "source" else f" (from {spec.version_origin})"
        raise BuildError(
            f"{spec.describe()} holds ORT {found or '(no VERSION_NUMBER)'}, but the build was planned for"
            f" {spec.version}{origin}",
            hint="name the ref of that release, or give --ort-version of the release the ref holds",
        )


def _tree_version(path: Path) -> str | None:
    marker = path / "VERSION_NUMBER"
    if not marker.is_file() or not (path / "tools" / "ci_build" / "build.py").is_file():
        return None
    return marker.read_text().strip()


def patch_series(version: str) -> list[Path]:
    """The patches for an ORT version, in the order of its ``series`` file (empty when none)."""
    directory = TOOLCHAINS_DIR / "patches" / version
    series = directory / "series"
    if not series.is_file():
        return []
    names = [
        line.strip() for line in series.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    missing = [name for name in names if not (directory / name).is_file()]
    if missing:
        raise BuildError(f"{series} lists missing patches: {', '.join(missing)}")
    return [directory / name for name in names]


def patch_records(version: str) -> tuple[dict[str, str], ...]:
    return tuple({"name": p.name, "sha256": file_sha256(p)} for p in patch_series(version))


def sources_root() -> Path:
    root = orch_home() / "sources"
    root.mkdir(parents=True, exist_ok=True)
    return root


# -- fetching ----------------------------------------------------------------------------------------


def fetch_debian_tarball(  # noqa: PLR0913 -- where it runs (engine, image), what, the log; suite and dest are options
    engine: Engine,
    base_image: str,
    version: str,
    log: Callable[[str], None],
    *,
    suite: str = "trixie",
    dest: Path | None = None,
) -> Path:
    """The Debian orig tarball of ORT ``version`` (downloaded once into $ORCH_HOME/sources/debian)."""
    out = dest or sources_root() / "debian"
    out.mkdir(parents=True, exist_ok=True)
    existing = sorted(out.glob(f"onnxruntime_{version}*.orig.tar.*"))
    if existing:
        return existing[-1]
    log(f"fetching the onnxruntime {version} source package with apt in {base_image}")
    with tempfile.TemporaryDirectory(dir=out) as staging:
        code = engine.run(
            base_image,
            ["sh", _FETCH_IN_CONTAINER],
            # The suite that carries the release (the image's own, or derived from its mirror).
            environment={"ORT_DEBIAN_VERSION": f"{version}+dfsg-1", "ORCH_DEB_SRC_SUITE": suite},
            on_log=log,
            copy_in=[(_FETCH_SCRIPT, _FETCH_IN_CONTAINER)],
            copy_out=[("/out", Path(staging))],
        )
        # Moved in only when complete: an interrupted download leaves nothing that looks finished.
        for tarball in Path(staging, "out").glob(f"onnxruntime_{version}*.orig.tar.*"):
            tarball.rename(out / tarball.name)
    found = sorted(out.glob(f"onnxruntime_{version}*.orig.tar.*"))
    if code != 0 or not found:
        raise BuildError(
            f"could not download the onnxruntime {version} source package (exit {code})",
            hint="the suite's apt sources must reach a Debian mirror; or pass --ort-source <tarball|dir|git URL>",
        )
    return found[-1]


def _extract(tarball: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as archive:
        archive.extractall(dest, filter="data")
    roots = [p for p in dest.iterdir() if p.is_dir()]
    if len(roots) == 1 and _tree_version(roots[0]):
        return roots[0]
    if _tree_version(dest):
        return dest
    raise BuildError(f"{tarball} does not contain an ONNX Runtime source tree")


def _apply_patches(tree: Path, patches: list[Path], log: Callable[[str], None]) -> None:
    for patch in patches:
        log(f"applying {patch.parent.name}/{patch.name}")
        result = process.run(["patch", "-p1", "--forward", "--batch", "-i", str(patch)], cwd=tree)
        if not result.ok:
            raise BuildError(f"patch {patch.name} does not apply to {tree}:\n{result.tail(20)}")


def prepare_source(
    spec: SourceSpec, *, engine: Engine | None, base_image: str | None, log: Callable[[str], None]
) -> SourceTree:
    """Fetch/extract/copy the tree, apply the version's patches once; reused on the next build."""
    patches = patch_series(spec.version)
    records = patch_records(spec.version)
    if spec.kind == "dir" and not patches:
        origin = Path(spec.location)
        return SourceTree(
            path=origin, version=spec.version, spec=spec, source_sha256=_dir_identity(origin), patches=()
        )
    tarball = _tarball(spec, engine, base_image, log)
    source_hash = (
        _dir_identity(Path(spec.location)) if spec.kind == "dir" else file_sha256(tarball) if tarball else ""
    )
    patch_key = hashlib.sha256(json.dumps(records).encode()).hexdigest()[:8]
    # A git URL is known only by its address and ref before the clone: both name the tree (a fork
    # of the same release is another tree).
    where = source_hash or hashlib.sha256(f"{spec.location}@{spec.ref}".encode()).hexdigest()
    key = f"{spec.kind}-{spec.version}-{where[:12]}-{patch_key}"
    work = sources_root() / re.sub(r"[^A-Za-z0-9._-]", "_", key)
    done = work / "orch-source.json"
    if done.is_file():
        info = json.loads(done.read_text())
        return SourceTree(
            path=Path(info["path"]),
            version=spec.version,
            spec=spec,
            source_sha256=info["source_sha256"],
            patches=records,
        )
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    tree, source_hash = _materialise(spec, work, tarball, source_hash, log)
    _check_fetched_release(spec, tree)
    _apply_patches(tree, patches, log)
    done.write_text(json.dumps({"path": str(tree), "source_sha256": source_hash}))
    return SourceTree(path=tree, version=spec.version, spec=spec, source_sha256=source_hash, patches=records)


def _tarball(
    spec: SourceSpec, engine: Engine | None, base_image: str | None, log: Callable[[str], None]
) -> Path | None:
    """The source tarball of a Debian or tarball source (the Debian one fetched); None for the others."""
    if spec.kind == "tarball":
        return Path(spec.location)
    if spec.kind != "debian":
        return None
    if engine is None or base_image is None:
        raise BuildError("the Debian source route needs a container engine and a base image")
    return fetch_debian_tarball(engine, base_image, spec.version, log, suite=spec.location)


def _materialise(
    spec: SourceSpec, work: Path, tarball: Path | None, source_hash: str, log: Callable[[str], None]
) -> tuple[Path, str]:
    """The tree under ``work`` (extracted, cloned or copied) and its source hash (a clone's commit)."""
    if tarball is not None:
        log(f"extracting {tarball.name}")
        return _extract(tarball, work / "tree"), source_hash
    if spec.kind == "git":
        tree = work / "onnxruntime"
        log(f"cloning {spec.location} @ {spec.ref} with submodules")
        result = process.run(
            [
                "git",
                "clone",
                "--recursive",
                "--depth",
                "1",
                "--branch",
                str(spec.ref),
                spec.location,
                str(tree),
            ]
        )
        if not result.ok:
            raise BuildError(
                f"git clone of {spec.location} @ {spec.ref} failed: {result.tail()}",
                hint="offline? use --ort-source debian, a local checkout or a tarball",
            )
        return tree, process.run(["git", "rev-parse", "HEAD"], cwd=tree).stdout.strip()
    tree = work / "tree"
    log(f"copying {spec.location} (patches are applied to a copy, never to your checkout)")
    shutil.copytree(spec.location, tree, symlinks=True, ignore=shutil.ignore_patterns(".git", "build"))
    return tree, source_hash


def _dir_identity(path: Path) -> str:
    """A git commit when the directory is a checkout, else a hash of its top-level identity."""
    result = process.run(["git", "rev-parse", "HEAD"], cwd=path)
    if result.ok:
        return "git:" + result.stdout.strip()
    marker = path / "VERSION_NUMBER"
    return "dir:" + hashlib.sha256(f"{path}:{marker.stat().st_mtime_ns}".encode()).hexdigest()
