"""Getting an ONNX Runtime source tree ready to mount into the build container: fetched, extracted
or copied, and patched. What ``--ort-source`` names is parsed in ``ort_spec`` (pure).

The Debian route's source package is fetched with ``apt-get source --download-only`` inside a
container of the board's Debian suite (the ``deb-src`` entry is derived from that image's own apt
sources, so whatever mirror the image uses serves the source too); a git URL is cloned with its
submodules.

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
from typing import TYPE_CHECKING

from orchestrator.adapters import process
from orchestrator.builds.sources.ort_spec import SourceSpec, tree_version
from orchestrator.builds.sources.release_files import DEPS_FILE
from orchestrator.common.digests import file_sha256
from orchestrator.errors import BuildError
from orchestrator.paths import DOCKER_DIR, TOOLCHAINS_DIR, orch_home

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

# Run inside a container of the suite (see its header): a file of docker/build, copied in where
# the build's scripts go (orchestrator.builds.container_paths.SCRIPTS) and run with the image's `sh`.
_FETCH_SCRIPT = DOCKER_DIR / "build" / "fetch_debian_source.sh"
_FETCH_IN_CONTAINER = "/opt/orch/fetch_debian_source.sh"


@dataclass(frozen=True, kw_only=True)
class SourceTree:
    """A prepared ORT tree: ready to mount into the build container."""

    path: Path
    version: str
    spec: SourceSpec
    source_sha256: str
    patches: tuple[dict[str, str], ...]


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
    found = tree_version(tree)
    if found != spec.version:
        origin = "" if spec.version_origin == "source" else f" (from {spec.version_origin})"
        raise BuildError(
            f"{spec.describe()} holds ORT {found or '(no VERSION_NUMBER)'}, but the build was planned for"
            f" {spec.version}{origin}",
            hint="name the ref of that release, or give --ort-version of the release the ref holds",
        )


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
    if len(roots) == 1 and tree_version(roots[0]):
        return roots[0]
    if tree_version(dest):
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
