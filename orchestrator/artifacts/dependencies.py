"""A wheel's dependencies for a board, resolved on the workstation (boards have no internet).

``pip download --only-binary=:all: --platform ... --python-version ... --implementation cp
--abi cpXY`` fetches wheels for the board's platform into a cache (``$ORCH_HOME/wheels``);
the board installs them with ``pip install --no-index``. pip is asked for its own wheel too:
the board runs pip from that wheel, so its Python needs neither pip nor ensurepip.

A resolution is remembered by key (wheel hash, platform, Python): an unchanged re-deploy
runs no pip at all, and works offline once the cache holds the files.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path

from orchestrator.adapters import process
from orchestrator.adapters.process import ProcessResult
from orchestrator.artifacts.pip_download import pip_download_argv
from orchestrator.errors import DeployError
from orchestrator.paths import orch_home

# Oldest glibc a manylinux tag can name (manylinux2014 = 2.17); pip does not expand
# `manylinux_2_X` to older tags by itself, so every one up to the board's glibc is listed.
_OLDEST_MANYLINUX_MINOR = 17
_LEGACY = {
    "x86_64": ("manylinux2014", "manylinux2010", "manylinux1"),
    "i686": ("manylinux2014", "manylinux2010", "manylinux1"),
}

_SAVED = re.compile(r"^(?:Saved|File was already downloaded)\s+(.+\.whl)\s*$")
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def cache_dir() -> Path:
    path = orch_home() / "wheels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def pip_platforms(arch: str, glibc: str) -> list[str]:
    """Every platform tag a board with this arch and glibc accepts, newest first.

    ``linux_<arch>`` is included for locally built wheels (``orch build`` tags them so)."""
    major, minor = (int(p) for p in glibc.split(".")[:2])
    if major != 2:
        raise DeployError(f"unexpected glibc version {glibc}")
    tags = [f"manylinux_2_{m}_{arch}" for m in range(minor, _OLDEST_MANYLINUX_MINOR - 1, -1)]
    legacy = _LEGACY.get(arch, ("manylinux2014",))
    tags += [f"{name}_{arch}" for name in legacy]
    tags.append(f"linux_{arch}")
    return tags


def download_argv(
    requirements: Sequence[str],
    *,
    dest: Path,
    platforms: Sequence[str],
    python_version: str,
    offline: bool = False,
) -> list[str]:
    """The pip command that fetches ``requirements`` (and their dependencies) for a board. Pure."""
    return pip_download_argv(
        requirements,
        dest=dest,
        python_version=python_version,
        platforms=platforms,
        extra_abis=("abi3", "none"),
        offline=offline,
    )


def resolution_key(
    wheel_sha256: str, platforms: Sequence[str], python_version: str, extra: Sequence[str]
) -> str:
    text = json.dumps([wheel_sha256, list(platforms), python_version, list(extra)])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def parse_saved(output: str) -> list[str]:
    """File names pip reported as saved or already there (its output is the only list it gives)."""
    names = []
    for line in output.splitlines():
        match = _SAVED.match(line.strip())
        if match:
            names.append(Path(match.group(1)).name)
    return names


def _lock(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def resolve_dependencies(  # noqa: PLR0913 -- the board's platform as its facts give it, keyword-only
    wheel: Path,
    *,
    wheel_sha256: str,
    arch: str,
    glibc: str,
    python_version: str,
    extra: Sequence[str] = ("pip",),
    cache: Path | None = None,
) -> list[Path]:
    """Wheels the board needs besides ``wheel`` (its dependencies, plus ``extra``), in the cache.

    Thread-safe: boards with the same platform share one resolution."""
    cache = cache or cache_dir()
    platforms = pip_platforms(arch, glibc)
    key = resolution_key(wheel_sha256, platforms, python_version, extra)
    index = cache / "resolutions" / f"{key}.json"
    with _lock(key):
        cached = _cached_resolution(index, cache)
        if cached is not None:
            return cached
        requirements = [str(wheel.resolve()), *extra]
        result = _download(requirements, dest=cache, platforms=platforms, python_version=python_version)
        if not result.ok:
            raise DeployError(
                f"could not resolve the dependencies of {wheel.name} for {arch} glibc {glibc} Python"
                f" {python_version}:\n{result.tail(6)}",
                hint="the workstation needs the package index (or a --find-links mirror in pip's config) once;"
                f" afterwards {cache} serves re-deploys offline",
            )
        names = [n for n in dict.fromkeys(parse_saved(result.stdout + result.stderr)) if n != wheel.name]
        record = {"wheel": wheel.name, "platforms": platforms, "python": python_version, "files": names}
        index.parent.mkdir(parents=True, exist_ok=True)
        tmp = index.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2))
        tmp.replace(index)
        return [cache / name for name in names]


def _cached_resolution(index: Path, cache: Path) -> list[Path] | None:
    """The wheels an earlier resolution saved, when they are all still in the cache."""
    if not index.exists():
        return None
    names = json.loads(index.read_text())["files"]
    paths = [cache / name for name in names]
    # A resolution always holds the extras (pip at least): an empty one is not an answer.
    return paths if paths and all(p.is_file() for p in paths) else None


def _download(
    requirements: Sequence[str], *, dest: Path, platforms: Sequence[str], python_version: str
) -> ProcessResult:
    """pip download from the cache alone first, then from the index."""
    for offline in (True, False):
        result = process.run(
            download_argv(
                requirements, dest=dest, platforms=platforms, python_version=python_version, offline=offline
            )
        )
        if result.ok:
            break
    return result
