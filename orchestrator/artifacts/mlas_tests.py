"""MLAS test builds on the workstation: what ``orch build --scope mlas-test`` leaves, found, read and
chosen for ``orch bench --metric instructions --workload mlas-test``.

Such a build has no wheel to publish: it lands in the build's record directory,
``$ORCH_HOME/builds/<target>/<variant>/<ort-version>-mlas-test/``, with ``manifest.json`` (how it was
made: the build record, ``artifacts.store.BuildRecord``) and ``out/`` (``onnxruntime_mlas_test`` and
the libraries it needs on a board). A build is named by its target, variant and release, and known by
the content of ``out/``: its id ends with that digest, so that two counts of one id counted the same
bytes, and a board keeps each bundle once under that digest. Reads files only (no engine, no board).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from orchestrator.artifacts.store import BuildRecord, ManifestError
from orchestrator.common.digests import file_sha256
from orchestrator.common.json_fields import JsonSource, load_fields
from orchestrator.paths import orch_home

MLAS_TEST_EXE = "onnxruntime_mlas_test"
SCOPE_SUFFIX = "-mlas-test"
# Container builds only: an on-board build (<version>-mlas-test-on-<board>) brings back the executable
# alone, linked against the libraries of the board that built it.
_RECORD = re.compile(r"^(?P<version>\d+\.\d+\.\d+)-mlas-test$")


def builds_root() -> Path:
    """Where every route's build records live: ``$ORCH_HOME/builds``."""
    return orch_home() / "builds"


@dataclass(frozen=True, kw_only=True)
class MlasTestBuild:
    """One ``--scope mlas-test`` build: where it is, what it was made from, and its files' content."""

    target: str
    variant: str
    ort_version: str
    directory: Path  # $ORCH_HOME/builds/<target>/<variant>/<version>-mlas-test
    created: str  # when its manifest was written (ISO 8601, UTC): the newest build wins
    config: str  # build.py's --config (Release, Debug, ...)
    lto: bool  # build.py's --enable_lto
    compiler_flags: tuple[str, ...]
    linker_flags: tuple[str, ...]
    compiler: str
    files: tuple[tuple[str, str], ...]  # out/'s regular files (relative path, sha256), sorted

    @property
    def out(self) -> Path:
        return self.directory / "out"

    @property
    def digest(self) -> str:
        """The content of ``out/`` (every file's name and sha256): what names it on a board."""
        text = "".join(f"{name}\0{sha}\n" for name, sha in self.files)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def id(self) -> str:
        """``lab/tuned/1.21.0-mlas-test@<digest>``: the build by name and by content."""
        return f"{self.target}/{self.variant}/{self.directory.name}@{self.digest}"


def read_mlas_test_build(directory: Path) -> MlasTestBuild | None:
    """The build in ``directory`` (``<root>/<target>/<variant>/<version>-mlas-test``); None when it
    is not a finished one (no manifest, or no test executable in ``out/``: a build that failed)."""
    match = _RECORD.match(directory.name)
    manifest = directory / "manifest.json"
    if match is None or not manifest.is_file() or not (directory / "out" / MLAS_TEST_EXE).is_file():
        return None
    source = JsonSource(
        where=str(manifest),
        error=ManifestError,
        hint="build it again (orch build --scope mlas-test)",
        not_object_hint="build it again (orch build --scope mlas-test)",
        whole="the build's manifest",
    )
    record = BuildRecord.read(load_fields(manifest, source))
    argv = record.build_argv or ()
    config = argv[argv.index("--config") + 1] if "--config" in argv[:-1] else "?"
    out = directory / "out"
    files = tuple(
        sorted((str(path.relative_to(out)), file_sha256(path)) for path in out.rglob("*") if path.is_file())
    )
    created = datetime.fromtimestamp(manifest.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return MlasTestBuild(
        target=directory.parent.parent.name,
        variant=directory.parent.name,
        ort_version=match.group("version"),
        directory=directory,
        created=created,
        config=config,
        lto="--enable_lto" in argv,
        compiler_flags=record.compiler_flags or (),
        linker_flags=record.linker_flags or (),
        compiler=record.compiler or "?",
        files=files,
    )


def list_mlas_test_builds(target: str, variant: str, root: Path | None = None) -> list[MlasTestBuild]:
    """Every finished mlas-test build of ``target`` and ``variant``, oldest first."""
    base = (root or builds_root()) / target / variant
    found = [
        build
        for directory in (sorted(base.glob(f"*{SCOPE_SUFFIX}")) if base.is_dir() else [])
        if (build := read_mlas_test_build(directory)) is not None
    ]
    return sorted(found, key=lambda build: (build.created, build.ort_version))
