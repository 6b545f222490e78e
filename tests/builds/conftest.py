"""Fixtures of the build tests: a real ORT source tree (Debian's 1.21.0, fetched once with apt
in a container and kept in a shared cache) and the real build image.

Both are shared between runs: ``ORCH_TEST_CACHE`` (default /var/tmp/orch-test-cache) keeps the
38 MB source tarball, and Docker keeps the images and the ccache volume.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.builds.image import ensure_build_image
from orchestrator.builds.plan import BuildOptions, make_plan
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.variants import resolve_variant
from orchestrator.targets import resolve_target

CACHE = Path(os.environ.get("ORCH_TEST_CACHE") or "/var/tmp/orch-test-cache")


@pytest.fixture(scope="session")
def ort_tree(ort_tarball: Path) -> Path:
    """The parts of the ORT tree flag validation reads (CMake files and tools/ci_build), extracted once."""
    dest = CACHE / "tree-1.21.0"
    marker = dest / ".complete"
    if not marker.exists():
        with tarfile.open(ort_tarball) as archive:
            members = [
                m
                for m in archive.getmembers()
                if "/cmake/" in m.name or "/tools/ci_build/" in m.name or m.name.endswith("/VERSION_NUMBER")
            ]
            archive.extractall(dest, members=members, filter="data")
        marker.touch()
    (root,) = [p for p in dest.iterdir() if p.is_dir()]
    return root


@pytest.fixture(scope="session")
def build_image(engine: object) -> str:
    """The lab target's real build image (made once, shared with every build)."""
    plan = make_plan(
        resolve_target("lab"),
        resolve_variant("default"),
        BuildOptions(source=parse_source(None, version=None, suite="trixie")),
    )
    return ensure_build_image(engine, plan, lambda line: None)


@pytest.fixture(scope="session")
def seed_ort_source(ort_tarball: Path) -> Callable[[Path], None]:
    """Put the Debian source tarball into an ORCH_HOME, as orch would have downloaded it there:
    fetched once per machine, not once per build test."""

    def seed(home: Path) -> None:
        sources = home / "sources" / "debian"
        sources.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ort_tarball, sources / ort_tarball.name)

    return seed


@pytest.fixture
def build_env(orch_env: dict[str, str], seed_ort_source: Callable[[Path], None]) -> dict[str, str]:
    """``orch_env`` whose ORCH_HOME already holds the Debian source tarball."""
    seed_ort_source(Path(orch_env["ORCH_HOME"]))
    return orch_env
