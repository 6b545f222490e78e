"""The workstation files a release holds, hashed: the wheel and its dependency wheels, the models,
the agent files and the native runner, each as a ``LocalFile`` under its name in the release."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from orchestrator.artifacts.model_file import onnx_file_problem
from orchestrator.artifacts.store import Artifact
from orchestrator.common.digests import file_sha256
from orchestrator.errors import UsageError

AGENT_DIR = Path(__file__).resolve().parent.parent / "board_side"
# What a release carries of board_side/ (under <release>/agent/): the benchmark agent and the
# folder's README. The other files there are sent for each use (on stdin, as `python -c`) and
# stay out, so adding one does not change what a release holds.
AGENT_FILES = ("bench_agent.py", "README.md")

# Where a release keeps the native runner and (in lib/) links to ORT's C library: one directory a
# product can take off the board as it is.
NATIVE_DIR = "native"

# A release of a C library build (no Python) carries of the agent files only the README: the agent
# itself needs the release's onnxruntime wheel.
NATIVE_AGENT_FILES = ("README.md",)

# "library": ORT's C library and the libraries it needs, "header": its C API header (a C library
# build's release, under native/).
FileRole = Literal["wheel", "dependency", "model", "agent", "runner", "library", "header"]


class LocalFileDocument(TypedDict):
    role: FileRole
    name: str
    path: str
    sha256: str
    size: int


@dataclass(frozen=True, kw_only=True)
class LocalFile:
    """A workstation file that ends up in a release, under ``name`` (relative to the release dir)."""

    role: FileRole
    name: str
    path: Path
    sha256: str
    size: int

    def as_dict(self) -> LocalFileDocument:
        return LocalFileDocument(
            role=self.role, name=self.name, path=str(self.path), sha256=self.sha256, size=self.size
        )


@dataclass(frozen=True, kw_only=True)
class ReleaseFiles:
    """Everything the workstation puts in one board's release: the artifact's wheel with its
    dependency wheels (``wheel_files``), the models, the agent files and the native runner."""

    artifact: Artifact
    wheels: Sequence[LocalFile]
    models: Sequence[LocalFile]
    agent: Sequence[LocalFile]
    native: Sequence[LocalFile] = ()

    @property
    def all(self) -> tuple[LocalFile, ...]:
        return (*self.wheels, *self.models, *self.agent, *self.native)


def _check_release_name(name: str) -> str:
    parts = name.split("/")
    if (
        not name
        or name.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
        or any(c in name for c in "\n\r\0")
    ):
        raise UsageError(f"file name {name!r} cannot be used inside a release")
    return name


def local_file(role: FileRole, path: Path, name: str) -> LocalFile:
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{role} file not found: {path}")
    return LocalFile(
        role=role,
        name=_check_release_name(name),
        path=path,
        sha256=file_sha256(path),
        size=path.stat().st_size,
    )


def default_model_paths(directory: Path = Path("models")) -> list[Path]:
    """The project's models: ``./models/*.onnx``, each checked as a ``--model`` file is (on the
    workstation, before anything is planned or sent): one that is not an ONNX model is refused by name."""
    paths = sorted(directory.glob("*.onnx")) if directory.is_dir() else []
    for path in paths:
        problem = onnx_file_problem(path)
        if problem:
            raise UsageError(
                f"{path}: {problem} (deploy's default models are {directory}/*.onnx)",
                hint="fix or remove it, or name the models to deploy with --model",
            )
    return paths


def model_files(paths: Sequence[Path]) -> list[LocalFile]:
    """Models as release files ``models/<name>.onnx``; two models with the same file name are refused."""
    files: dict[str, LocalFile] = {}
    for given in paths:
        path = Path(given)
        if not path.is_file():
            raise UsageError(f"model not found: {path}")
        if path.suffix != ".onnx":
            raise UsageError(f"{path}: a model must be an .onnx file")
        if path.name in files:
            raise UsageError(
                f"two models are both named {path.name} ({files[path.name].path} and {path}); rename one"
            )
        files[path.name] = local_file("model", path, f"models/{path.name}")
    return list(files.values())


def agent_files(directory: Path = AGENT_DIR, names: Sequence[str] = AGENT_FILES) -> list[LocalFile]:
    """The release's agent files (``AGENT_FILES`` of ``directory``), as ``agent/<name>``."""
    return [local_file("agent", directory / name, f"agent/{name}") for name in names]


def wheel_files(wheel: Path, dependencies: Iterable[Path]) -> list[LocalFile]:
    files = [local_file("wheel", wheel, f"wheels/{wheel.name}")]
    seen = {wheel.name}
    for dep in dependencies:
        if dep.name not in seen:
            seen.add(dep.name)
            files.append(local_file("dependency", dep, f"wheels/{dep.name}"))
    return files


def library_release_files(artifact: Artifact) -> list[LocalFile]:
    """A C library build's files as a release holds them: ``native/orch-runner``, ``native/lib/*``
    (ORT's C library and what it needs) and ``native/include/<header>``, each as its manifest
    lists it (links, like the SONAME's, are made on the board)."""
    library, runner = artifact.manifest.library, artifact.runner_path
    if library is None or runner is None:
        raise UsageError(f"{artifact.directory}: its manifest lists no C library or no runner")
    files = []
    for name in sorted(library.files):
        role: FileRole = "runner" if artifact.directory / name == runner else "library"
        if name == library.header:
            role = "header"
        files.append(local_file(role, artifact.directory / name, f"{NATIVE_DIR}/{name}"))
    return files


def native_files(artifact: Artifact) -> list[LocalFile]:
    """The artifact's native runner as ``native/orch-runner`` (none when the build made no runner)."""
    path = artifact.runner_path
    return [local_file("runner", path, f"{NATIVE_DIR}/{path.name}")] if path else []
