"""The deploy plan: what one board gets, computed without touching it. Pure.

Inputs are what the workstation knows (artifact, wheel, dependency wheels, models, agent
files, all hashed) and what was read from the board (its facts, its store, its releases).
The output, a ``BoardPlan``, holds every file with its sha256, what must be sent and what
is already there, the release id, the on-board paths and the exact argv lists that create
the venv and install the wheel. ``--dry-run`` prints it; ``orchestrator.deploy.execute`` executes it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.artifacts.identity import describe, route_of
from orchestrator.artifacts.store import Artifact
from orchestrator.board import Board
from orchestrator.deploy.releases import Layout, Listing, ReleaseInfo, make_release_id, releases_to_prune
from orchestrator.digests import file_sha256
from orchestrator.errors import UsageError
from orchestrator.fleet.board_facts import BoardFacts

AGENT_DIR = Path(__file__).resolve().parent.parent / "board_side"
# What a release carries of board_side/ (under <release>/agent/): the benchmark agent and the
# folder's README. The other files there are sent for each use (on stdin, as `python -c`) and
# stay out, so adding one does not change what a release holds.
AGENT_FILES = ("bench_agent.py", "README.md")

# Where a release keeps the native runner and (in lib/) links to ORT's C library: one directory a
# product can take off the board as it is.
NATIVE_DIR = "native"

# Installing unpacks wheels (and compiles .pyc): the venv needs a few times the wheels' size.
INSTALL_SPACE_FACTOR = 4


@dataclass(frozen=True, kw_only=True)
class LocalFile:
    """A workstation file that ends up in a release, under ``name`` (relative to the release dir)."""

    role: str  # "wheel" | "dependency" | "model" | "agent" | "runner"
    name: str
    path: Path
    sha256: str
    size: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "name": self.name,
            "path": str(self.path),
            "sha256": self.sha256,
            "size": self.size,
        }


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


def local_file(role: str, path: Path, name: str) -> LocalFile:
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


def artifact_label(artifact: Artifact) -> str:
    """``stock 1.21.0 official``: the variant, ORT release and route of an artifact."""
    return describe(artifact.variant, artifact.ort_version, route_of(artifact.manifest.to_json()))


def select_artifact(
    artifacts: Sequence[Artifact], *, target: str, variant: str | None, ort_version: str | None, where: str
) -> Artifact:
    """The one artifact a deploy to a ``target`` board uses: pre-flighted, of the variant and ORT
    version asked for. Several matches are refused with the list, never settled by build time:
    which release a board runs must not depend on what was built last. ``where`` names the
    artifacts directory in messages."""
    good = [a for a in artifacts if a.target == target and a.manifest.preflight_ok]
    matching = [
        a
        for a in good
        if (variant is None or a.variant == variant) and (ort_version is None or a.ort_version == ort_version)
    ]
    asked = " ".join(
        part
        for part in (
            f"--variant {variant}" if variant else "",
            f"--ort-version {ort_version}" if ort_version else "",
        )
        if part
    )
    if len(matching) == 1:
        return matching[0]
    if not matching:
        what = f"target '{target}'" + (f", {asked}" if asked else "")
        present = "; ".join(f"{artifact_label(a)} ({a.directory})" for a in good)
        raise UsageError(
            f"no pre-flighted artifact for {what} in {where}"
            + (f" (there are: {present})" if present else ""),
            hint=f"build one first: orch build --target {target}"
            + (f" --variant {variant}" if variant else "")
            + (f" --ort-version {ort_version}" if ort_version else ""),
        )
    listed = "; ".join(f"{artifact_label(a)} ({a.directory})" for a in matching)
    variants = sorted({a.variant for a in matching})
    versions = sorted({a.ort_version for a in matching})
    choose = []
    if len(variants) > 1:
        choose.append(f"--variant ({' or '.join(variants)})")
    if len(versions) > 1:
        choose.append(f"--ort-version ({' or '.join(versions)})")
    raise UsageError(
        f"{len(matching)} artifacts match target '{target}'"
        + (f" with {asked}" if asked else "")
        + f": {listed}; which one to deploy is not guessed",
        hint=f"choose with {' and '.join(choose) or '--artifact DIR'}, or give --artifact DIR",
    )


def default_model_paths(directory: Path = Path("models")) -> list[Path]:
    """The project's models: ``./models/*.onnx``."""
    return sorted(directory.glob("*.onnx")) if directory.is_dir() else []


def model_files(paths: Sequence[Path]) -> list[LocalFile]:
    """Models as release files ``models/<name>.onnx``; two models with the same file name are refused."""
    files: dict[str, LocalFile] = {}
    for path in paths:
        path = Path(path)
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


@dataclass(frozen=True, kw_only=True)
class BoardPlan:
    """Everything one board's deploy does, decided before it starts."""

    board: str
    address: str
    workdir: str
    release_id: str
    release_dir: str
    python: str  # the release's interpreter (relative to the login home unless workdir is absolute)
    files: tuple[LocalFile, ...]
    to_send: tuple[LocalFile, ...]  # unique contents missing from the board's store
    already_there: tuple[LocalFile, ...]  # unique contents the store already has
    release_exists: bool  # a complete release with this id is on the board: nothing to install
    reuse_from: str | None  # a release on the board with the very same wheels: its packages are hard-linked
    current: str | None  # the board's current release before this deploy
    venv_argv: tuple[str, ...]
    install_argv: tuple[str, ...]
    release_document: dict[str, Any]
    prune: tuple[str, ...]  # releases the deploy will delete afterwards (--keep)
    free_bytes: int | None
    space_needed: int
    facts: BoardFacts  # what was read from the board
    # The board's record of this release's passed verification (verified.json), if it has one.
    verified: dict[str, Any] | None = None

    @property
    def bytes_to_send(self) -> int:
        return sum(f.size for f in self.to_send)

    @property
    def models(self) -> dict[str, str]:
        return {f.name.removeprefix("models/"): f.sha256 for f in self.files if f.role == "model"}

    @property
    def unchanged(self) -> bool:
        return self.release_exists and self.current == self.release_id

    @property
    def already_verified(self) -> bool:
        """Current already, and verified on this board since it became so: nothing to do (the
        release's content is fixed by its id), unless ``--verify`` asks to verify again."""
        return self.unchanged and self.verified is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "board": self.board,
            "address": self.address,
            "workdir": self.workdir,
            "release_id": self.release_id,
            "release_dir": self.release_dir,
            "python": self.python,
            "current": self.current,
            "release_exists": self.release_exists,
            "unchanged": self.unchanged,
            "already_verified": self.already_verified,
            "verified": self.verified,
            "reuse_from": self.reuse_from,
            "files": [f.as_dict() for f in self.files],
            "send": [f.as_dict() for f in self.to_send],
            "bytes_to_send": self.bytes_to_send,
            "already_there": [f.as_dict() for f in self.already_there],
            "venv_argv": list(self.venv_argv),
            "install_argv": list(self.install_argv),
            "prune": list(self.prune),
            "free_bytes": self.free_bytes,
            "space_needed": self.space_needed,
            "facts": self.facts.as_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class RollbackPlan:
    """What a rollback does on one board: switch ``current`` from one release back to another."""

    board: str
    rollback_from: str | None  # the current release (None: the board has none)
    rollback_to: str

    def as_dict(self) -> dict[str, Any]:
        return {"rollback_from": self.rollback_from, "rollback_to": self.rollback_to}


def plan_board(
    *,
    board: Board,
    facts: BoardFacts,
    layout: Layout,
    artifact: Artifact,
    wheels: Sequence[LocalFile],
    models: Sequence[LocalFile],
    agent: Sequence[LocalFile],
    store: Iterable[str],
    listing: Listing,
    keep: int,
    created: str,
    native: Sequence[LocalFile] = (),
) -> BoardPlan:
    """The plan for one board. ``store`` = sha256 names already in its store, ``listing`` = its releases.
    ``native`` = the artifact's native runner (``native_files``), when it has one."""
    files = (*wheels, *models, *agent, *native)
    names = [f.name for f in files]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"two files would land on the same path in the release: {', '.join(duplicates)}")
    wheel = next(f for f in files if f.role == "wheel")
    content = [f"{f.role}:{f.name}:{f.sha256}" for f in files]
    content += [f"target:{artifact.target}", f"python:{facts.python_short}"]
    release_id = make_release_id(artifact.variant, artifact.ort_version, content)
    release_dir = layout.release(release_id)

    present = set(store)
    unique: dict[str, LocalFile] = {}
    for f in files:
        unique.setdefault(f.sha256, f)
    to_send = tuple(f for sha, f in unique.items() if sha not in present)
    already = tuple(f for sha, f in unique.items() if sha in present)
    existing = listing.get(release_id)
    release_exists = existing is not None

    pip_wheel = next((f for f in wheels if f.role == "dependency" and f.name.startswith("wheels/pip-")), None)
    python = layout.python(release_id)
    venv_argv = (board.python, "-m", "venv", "--without-pip", posixpath.join(release_dir, "venv"))
    # pip runs straight from its wheel (a zip on sys.path): the board needs no pip of its own. It runs
    # inside the release directory with relative paths because pip parses a requirement that is a
    # path as text: a workdir with spaces or quotes would be misread as a requirement specifier.
    pip = (f"{pip_wheel.name}/pip",) if pip_wheel else ("-m", "pip")
    install_argv = (
        "sh",
        "-c",
        'cd -- "$1" && shift && exec "$@"',
        "sh",
        release_dir,
        "venv/bin/python",
        *pip,
        "install",
        "--no-index",
        "--find-links",
        "wheels",
        "--no-input",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--no-warn-script-location",
        # .pyc files are written at first import instead: only for the modules really used.
        "--no-compile",
        wheel.name,
    )
    document = {
        "id": release_id,
        "variant": artifact.variant,
        "target": artifact.target,
        "ort_version": artifact.ort_version,
        "wheel": wheel.name.removeprefix("wheels/"),
        "wheel_sha256": wheel.sha256,
        "models": {f.name.removeprefix("models/"): f.sha256 for f in files if f.role == "model"},
        "dependencies": {f.name.removeprefix("wheels/"): f.sha256 for f in files if f.role == "dependency"},
        "agent": {f.name.removeprefix("agent/"): f.sha256 for f in files if f.role == "agent"},
        **_native_document(artifact, files),
        "python_version": facts.python_version,
        "created": created,
        "manifest": artifact.manifest.to_json(),
    }
    # What --keep will delete once the new release is current.
    # The release current until now is the rollback target: it counts as the most recently used.
    after = Listing(
        workdir_abs=listing.workdir_abs,
        current=release_id,
        releases=(
            *[
                replace(r, last_used="9998") if r.id == listing.current else r
                for r in listing.releases
                if r.id != release_id
            ],
            ReleaseInfo(
                id=release_id,
                variant=artifact.variant,
                target=artifact.target,
                ort_version=artifact.ort_version,
                path=release_dir,
                python=python,
                last_used="9999",
            ),
        ),
        incomplete=tuple(i for i in listing.incomplete if i != release_id),
    )
    reuse_from = None if release_exists else _same_wheels(listing, document)
    wheel_bytes = sum(f.size for f in wheels)
    install_space = 0 if release_exists or reuse_from else INSTALL_SPACE_FACTOR * wheel_bytes
    space = sum(f.size for f in to_send) + install_space
    return BoardPlan(
        board=board.name,
        address=board.address,
        workdir=layout.workdir,
        release_id=release_id,
        release_dir=release_dir,
        python=python,
        files=files,
        to_send=to_send,
        already_there=already,
        release_exists=release_exists,
        reuse_from=reuse_from,
        current=listing.current,
        venv_argv=venv_argv,
        install_argv=install_argv,
        release_document=document,
        prune=tuple(releases_to_prune(after, keep=keep)),
        free_bytes=facts.free_bytes,
        space_needed=space,
        facts=facts,
        verified=existing.verified if existing is not None else None,
    )


def native_files(artifact: Artifact) -> list[LocalFile]:
    """The artifact's native runner as ``native/orch-runner`` (none when the build made no runner)."""
    path = artifact.runner_path
    return [local_file("runner", path, f"{NATIVE_DIR}/{path.name}")] if path else []


def _native_document(artifact: Artifact, files: Sequence[LocalFile]) -> dict[str, Any]:
    """release.json's ``native``: where the runner is, what it links, their sizes (the footprint)."""
    runner = next((f for f in files if f.role == "runner"), None)
    record = artifact.manifest.native_runner
    if runner is None or record is None or not record.library:
        return {}
    return {
        "native": {
            "runner": runner.name,
            "runner_sha256": runner.sha256,
            "runner_size": runner.size,
            "library": posixpath.basename(record.library),
            "library_size": record.library_size,
            "ort_version": record.ort_version,
        }
    }


def _same_wheels(listing: Listing, document: dict[str, Any]) -> str | None:
    """A complete release whose installed packages are exactly what this one would install.

    Only the models or the agent changed: copying its site-packages as hard links gives the
    same result as running pip again, in a second instead of minutes on a small board."""
    keys = ("wheel_sha256", "dependencies", "python_version")
    for release in reversed(listing.releases):  # most recently used first
        if all(release.document.get(k) == document[k] for k in keys):
            return release.id
    return None


def stage_pairs(plan: BoardPlan) -> list[str]:
    """Flat ``name sha256 name sha256 ...`` args for the staging script (release path <- store blob)."""
    args: list[str] = []
    for f in plan.files:
        args += [f.name, f.sha256]
    return args
