"""ORT's dependencies built from source (the self-contained route), made ready to mount.

``toolchains/deps/<ort-version>.yaml`` names, for each dependency ORT declares with FetchContent,
the Debian package of the same upstream release (for the CUDA provider's, ``deps/cuda/``: NVIDIA's
wheels of the pinned release, fetched with pip); ``dependency_table`` reads and validates it
(pure). ``prepare_dependencies`` downloads what is missing with apt in a container of
the suite (``docker/build/fetch_debian_source.sh``: the machine's own Debian mirror), unpacks each
into ``$ORCH_HOME/sources/deps/``, applies ORT's own patch for it and records every file's sha256.
The build mounts the result at ``/deps`` and points ``FETCHCONTENT_SOURCE_DIR_<NAME>`` (or the
entry's define) into it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.adapters import process
from orchestrator.artifacts.pip_download import pip_download_argv
from orchestrator.builds.sources.dependency_table import (
    PROJECTS_DIR,
    Dependency,
    DependencyTable,
    table_path,
)
from orchestrator.common.digests import file_sha256
from orchestrator.errors import BuildError
from orchestrator.paths import DOCKER_DIR, orch_home

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

_FETCH_SCRIPT = DOCKER_DIR / "build" / "fetch_debian_source.sh"
_FETCH_IN_CONTAINER = "/opt/orch/fetch_debian_source.sh"
Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class PreparedDependencies:
    """The unpacked, patched dependency trees (one directory per name) and what they were made of."""

    path: Path
    records: tuple[dict[str, str], ...]

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.records, sort_keys=True).encode()).hexdigest()[:12]


def _downloaded(directory: Path, dependency: Dependency) -> Path | None:
    if dependency.kind == "wheel":
        found = sorted(
            directory.glob(f"{str(dependency.package).replace('-', '_')}-{dependency.version}-*.whl")
        )
    elif dependency.kind == "headers":
        found = sorted(
            directory.glob(f"{dependency.package}_{str(dependency.version).replace(':', '%3a')}_*.deb")
        )
    else:
        found = sorted(directory.glob(f"{dependency.package}_{dependency.upstream_version}*.orig.tar.*"))
    return found[-1] if found else None


def download(
    engine: Engine, base_image: str, dependencies: tuple[Dependency, ...], log: Log, *, dest: Path
) -> dict[str, Path]:
    """Each dependency's Debian file in ``dest`` (downloaded once; one container run per suite)."""
    dest.mkdir(parents=True, exist_ok=True)
    missing = [d for d in dependencies if _downloaded(dest, d) is None]
    for suite in sorted({d.suite for d in missing}):
        wanted = [d for d in missing if d.suite == suite]
        log(
            f"fetching {len(wanted)} dependency source package(s) from Debian {suite} with apt: "
            + ", ".join(d.package or d.name for d in wanted)
        )
        with tempfile.TemporaryDirectory(dir=dest) as staging:
            code = engine.run(
                base_image,
                ["sh", _FETCH_IN_CONTAINER, *[d.apt_spec for d in wanted]],
                environment={"ORCH_DEB_SRC_SUITE": suite},
                on_log=log,
                copy_in=[(_FETCH_SCRIPT, _FETCH_IN_CONTAINER)],
                copy_out=[("/out", Path(staging))],
            )
            # Moved in only when complete: an interrupted download leaves nothing that looks finished.
            for item in Path(staging, "out").glob("*"):
                if item.name.endswith(".deb") or ".orig.tar." in item.name:
                    item.rename(dest / item.name)
        still = [d for d in wanted if _downloaded(dest, d) is None]
        if code != 0 or still:
            raise BuildError(
                f"could not download from Debian {suite}: "
                + ", ".join(f"{d.package} {d.version}" for d in still or wanted)
                + f" (exit {code})",
                hint=f"the machine's Debian mirror must carry them; the table is {table_path('<version>').parent}",
            )
    return {d.name: path for d in dependencies if (path := _downloaded(dest, d)) is not None}


# Wheels are taken for their headers, which are the same in every platform's wheel: one platform,
# so that every machine downloads the same file (and records the same digest).
_WHEEL_PLATFORM, _WHEEL_PYTHON = "manylinux_2_28_x86_64", "3.11"


def download_wheels(dependencies: tuple[Dependency, ...], log: Log, *, dest: Path) -> dict[str, Path]:
    """Each ``kind: wheel`` dependency's wheel in ``dest``, from the machine's pip source (once)."""
    dest.mkdir(parents=True, exist_ok=True)
    missing = [d for d in dependencies if _downloaded(dest, d) is None]
    if missing:
        specs = [f"{d.package}=={d.version}" for d in missing]
        log(f"fetching {len(missing)} dependency wheel(s) with pip: {', '.join(specs)}")
        with tempfile.TemporaryDirectory(dir=dest) as staging:
            result = process.run(
                pip_download_argv(
                    specs,
                    dest=Path(staging),
                    python_version=_WHEEL_PYTHON,
                    platforms=[_WHEEL_PLATFORM],
                    with_dependencies=False,
                )
            )
            for item in Path(staging).glob("*.whl"):
                item.rename(dest / item.name)
        still = [d for d in missing if _downloaded(dest, d) is None]
        if still:
            raise BuildError(
                "could not download "
                + ", ".join(f"{d.package} {d.version}" for d in still)
                + f" with pip:\n{result.tail()}",
                hint="the machine's pip source (pip config list) must carry them",
            )
    return {d.name: path for d in dependencies if (path := _downloaded(dest, d)) is not None}


def _unpack(archive: Path, dependency: Dependency, dest: Path) -> None:
    if dependency.kind == "wheel":
        with zipfile.ZipFile(archive) as wheel:
            wheel.extractall(dest)  # zipfile drops absolute paths and ".." components
        return
    if dependency.kind == "headers":
        result = process.run(["dpkg-deb", "-x", str(archive), str(dest)])
        if not result.ok:
            raise BuildError(
                f"cannot unpack {archive.name}: {result.tail()}", hint="dpkg-deb comes with dpkg"
            )
        return
    with tempfile.TemporaryDirectory(dir=dest.parent) as staging, tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
        roots = list(Path(staging).iterdir())
        top = roots[0] if len(roots) == 1 and roots[0].is_dir() else Path(staging)
        shutil.move(str(top), dest)


def prepare_dependencies(
    table: DependencyTable,
    *,
    engine: Engine,
    base_image: str,
    ort_tree: Path,
    log: Log,
) -> PreparedDependencies:
    """Download, unpack and patch every dependency of ``table`` once; later builds reuse the tree."""
    root = orch_home() / "sources" / "deps"
    work = root / f"{table.ort_version}-{table.digest}"
    done = work / "orch-deps.json"
    if done.is_file():
        return PreparedDependencies(path=work / "tree", records=tuple(json.loads(done.read_text())))
    wheels = tuple(d for d in table.fetched() if d.kind == "wheel")
    fetched = tuple(d for d in table.fetched() if d not in wheels)
    files = download_wheels(wheels, log, dest=root / "downloads")
    for suite in sorted({d.suite for d in fetched}):
        files |= download(
            engine, base_image, tuple(d for d in fetched if d.suite == suite), log, dest=root / "downloads"
        )
    if work.exists():
        shutil.rmtree(work)
    tree = work / "tree"
    tree.mkdir(parents=True)
    records: list[dict[str, str]] = []
    for dependency in table.dependencies:
        record = {"name": dependency.name, "pins": dependency.pins}
        if dependency.within is None:
            archive = files[dependency.name]
            log(f"unpacking {archive.name}")
            _unpack(archive, dependency, tree / dependency.name)
            record |= {
                "package": str(dependency.package),
                "version": str(dependency.version),
                "suite": dependency.suite,
                "kind": dependency.kind,
                "file": archive.name,
                "sha256": file_sha256(archive),
            }
        else:
            record |= {"within": dependency.within, "subdir": str(dependency.subdir)}
            if not (tree / dependency.within / str(dependency.subdir)).is_dir():
                raise BuildError(f"{dependency.name}: {dependency.within} has no {dependency.subdir}")
        if dependency.project:
            project = PROJECTS_DIR / f"{dependency.project}.cmake"
            shutil.copyfile(project, tree / dependency.name / "CMakeLists.txt")
            record |= {"project": dependency.project, "project_sha256": file_sha256(project)}
        if dependency.patch:
            patch = ort_tree / "cmake" / "patches" / dependency.patch
            log(f"applying ORT's {dependency.patch} to {dependency.name}")
            result = process.run(
                ["patch", "-p1", "--forward", "--batch", "--binary", "--ignore-whitespace", "-i", str(patch)],
                cwd=tree / dependency.name,
            )
            if not result.ok:
                raise BuildError(
                    f"ORT's patch {dependency.patch} does not apply to {dependency.name}:\n{result.tail(20)}"
                )
            record |= {"patch": dependency.patch, "patch_sha256": file_sha256(patch)}
        records.append(record)
    done.write_text(json.dumps(records, indent=2))
    return PreparedDependencies(path=tree, records=tuple(records))
