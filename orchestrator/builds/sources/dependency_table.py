"""The self-contained route's dependency table: which of ORT's FetchContent dependencies come from
which Debian source package, and where the build finds each. Pure: reads orch's own
``toolchains/deps/<ort-version>.yaml`` (see that file's header); downloading and unpacking them is
``dependencies``'.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import BuildError
from orchestrator.paths import TOOLCHAINS_DIR

DEPS = "/deps"  # where the unpacked dependencies are mounted in the build container
TABLES_DIR = TOOLCHAINS_DIR / "deps"
# The CUDA provider's own dependencies (cross CUDA builds only): a second table, so that adding
# them changes nothing of a CPU build (its table's digest names its prepared tree).
GPU_TABLES_DIR = TABLES_DIR / "cuda"
PROJECTS_DIR = TABLES_DIR / "projects"  # CMake projects orch gives to dependencies that ship none
_KINDS = ("source", "headers", "wheel")
_KEYS = {"package", "version", "suite", "pins", "patch", "kind", "within", "subdir", "define", "project"}


@dataclass(frozen=True, kw_only=True)
class Dependency:
    """One FetchContent dependency of ORT and the Debian package that provides its source."""

    name: str  # ORT's FetchContent name: abseil_cpp, Protobuf, onnx ...
    pins: str  # what ORT's cmake/deps.txt asks for
    package: str | None = None
    version: str | None = None  # the Debian version (upstream + Debian revision)
    suite: str = "trixie"
    # "source": orig tarball; "headers": an architecture-independent -dev package; "wheel": a
    # Python wheel from the machine's pip source (its headers: NVIDIA ships CUTLASS and the cuDNN
    # frontend at ORT's pinned releases that way, Debian not)
    kind: str = "source"
    patch: str | None = None  # ORT's patch for it, relative to <ORT>/cmake/patches
    within: str | None = None  # a directory of another dependency's tree ...
    subdir: str | None = None  # ... at this path
    define: tuple[str, str] | None = None  # (CMake variable, path inside the unpacked tree)
    project: str | None = None  # PROJECTS_DIR/<project>.cmake becomes the tree's CMakeLists.txt

    @property
    def upstream_version(self) -> str:
        """``3.21.12-11+deb13u1`` -> ``3.21.12``; ``23.5.26+dfsg-4`` -> ``23.5.26``."""
        return (self.version or "").rsplit("-", 1)[0].split("+")[0]

    @property
    def apt_spec(self) -> str:
        """What fetch_debian_source.sh takes: ``abseil=20240722.0-4`` or ``deb:pybind11-dev=2.13.6-2``."""
        spec = f"{self.package}={self.version}"
        return f"deb:{spec}" if self.kind == "headers" else spec

    def cmake_define(self) -> tuple[str, str]:
        if self.within:
            return (f"FETCHCONTENT_SOURCE_DIR_{self.name.upper()}", f"{DEPS}/{self.within}/{self.subdir}")
        if self.define:
            variable, relative = self.define
            return (variable, f"{DEPS}/{self.name}/{relative}")
        return (f"FETCHCONTENT_SOURCE_DIR_{self.name.upper()}", f"{DEPS}/{self.name}")


@dataclass(frozen=True, kw_only=True)
class DependencyTable:
    ort_version: str
    dependencies: tuple[Dependency, ...]
    path: Path
    gpu_path: Path | None = None  # the CUDA provider's table, merged in for --ep cuda builds

    @property
    def digest(self) -> str:
        """Names the prepared tree: the tables' bytes (versions, patches, layout)."""
        files = (self.path, *([self.gpu_path] if self.gpu_path else []))
        return hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest()[:12]

    def defines(self) -> list[tuple[str, str]]:
        return [dependency.cmake_define() for dependency in self.dependencies]

    def fetched(self) -> tuple[Dependency, ...]:
        return tuple(d for d in self.dependencies if d.within is None)


def table_path(ort_version: str) -> Path:
    return TABLES_DIR / f"{ort_version}.yaml"


def known_versions() -> list[str]:
    return sorted(path.stem for path in TABLES_DIR.glob("*.yaml"))


def load_table(ort_version: str, *, gpu: bool = False) -> DependencyTable | None:
    """The dependency table of an ORT release (with ``gpu``, its CUDA provider's dependencies too),
    or None when orch has none for it."""
    path = table_path(ort_version)
    if not path.is_file():
        return None
    parsed = _read_table(path)
    gpu_path = GPU_TABLES_DIR / f"{ort_version}.yaml"
    if gpu:
        if not gpu_path.is_file():
            raise BuildError(
                f"orch has no table of the CUDA provider's dependencies for ORT {ort_version} ({gpu_path})",
                hint=f"known: {', '.join(sorted(p.stem for p in GPU_TABLES_DIR.glob('*.yaml'))) or 'none'}",
            )
        parsed += _read_table(gpu_path)
    names = {dependency.name for dependency in parsed}
    for dependency in parsed:
        if dependency.within and dependency.within not in names:
            raise BuildError(f"{path}: {dependency.name}: 'within: {dependency.within}' names no dependency")
    return DependencyTable(
        ort_version=ort_version, dependencies=parsed, path=path, gpu_path=gpu_path if gpu else None
    )


def _read_table(path: Path) -> tuple[Dependency, ...]:
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise BuildError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(document, dict) or not isinstance(document.get("dependencies"), dict):
        raise BuildError(f"{path}: needs a mapping 'dependencies: {{NAME: {{package, version, pins}}}}'")
    suite = str(document.get("suite", "trixie"))
    return tuple(_dependency(path, name, entry, suite) for name, entry in document["dependencies"].items())


def _dependency(path: Path, name: object, entry: object, suite: str) -> Dependency:
    where = f"{path}: dependency {name!r}"
    if not isinstance(entry, dict):
        raise BuildError(f"{where}: must be a mapping")
    unknown = set(entry) - _KEYS
    if unknown:
        raise BuildError(f"{where}: unknown key {min(unknown)!r} (known: {', '.join(sorted(_KEYS))})")
    values: dict[str, Any] = {key: str(value) for key, value in entry.items()}
    if "pins" not in values:
        raise BuildError(f"{where}: missing key 'pins' (what ORT's cmake/deps.txt asks for)")
    if "within" in values:
        if "subdir" not in values:
            raise BuildError(f"{where}: 'within' needs 'subdir'")
    else:
        for key in ("package", "version"):
            if key not in values:
                raise BuildError(f"{where}: missing key '{key}'")
    kind = values.get("kind", "source")
    if kind not in _KINDS:
        raise BuildError(f"{where}: kind must be one of {', '.join(_KINDS)}, not {kind!r}")
    define = None
    if "define" in values:
        variable, sep, relative = values["define"].partition("=")
        if not sep or not variable or not relative or relative.startswith("/") or ".." in relative.split("/"):
            raise BuildError(
                f"{where}: define must be NAME=relative/path inside the package, not {values['define']!r}"
            )
        define = (variable, relative)
    project = values.get("project")
    if project is not None and not (PROJECTS_DIR / f"{project}.cmake").is_file():
        raise BuildError(f"{where}: project {project!r}: orch has no {PROJECTS_DIR / project}.cmake")
    return Dependency(
        name=str(name),
        pins=values["pins"],
        package=values.get("package"),
        version=values.get("version"),
        suite=values.get("suite", suite),
        kind=kind,
        patch=values.get("patch"),
        within=values.get("within"),
        subdir=values.get("subdir"),
        define=define,
        project=project,
    )


def describe(records: tuple[Mapping[str, str], ...]) -> list[str]:
    """One line per dependency for the plan and the manifest readers."""
    lines = []
    for record in records:
        if "within" in record:
            lines.append(f"{record['name']}: inside {record['within']} ({record['subdir']})")
            continue
        patch = f", ORT patch {record['patch']}" if "patch" in record else ""
        origin = "wheel" if record.get("kind") == "wheel" else f"Debian {record['suite']}"
        lines.append(
            f"{record['name']}: {origin} {record['package']} {record['version']}"
            f" (ORT pins {record['pins']}; sha256 {record['sha256'][:12]}){patch}"
        )
    return lines
