"""The one ``pip download`` command orch builds: wheels fetched for a board or for the workstation.

Pure. Binary wheels only (``--only-binary=:all:``), never a source build on the workstation. With a
``python_version``, pip is asked for another interpreter's wheels (a board's CPython), tagged for the
given platforms and ABIs; without one, for the running interpreter and machine.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path


def pip_download_argv(  # noqa: PLR0913 -- pip download's own options, each keyword-only with a default
    requirements: Sequence[str],
    *,
    dest: Path,
    python_version: str | None = None,
    platforms: Sequence[str] = (),
    extra_abis: Sequence[str] = (),
    with_dependencies: bool = True,
    offline: bool = False,
) -> list[str]:
    """pip fetching ``requirements`` into ``dest``; ``offline`` reads only what ``dest`` holds already."""
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-input"]
    if not with_dependencies:
        argv.append("--no-deps")
    argv.append("--only-binary=:all:")
    if python_version is not None:
        digits = python_version.replace(".", "")
        argv += ["--implementation", "cp", "--python-version", python_version]
        for abi in (f"cp{digits}", *extra_abis):
            argv += ["--abi", abi]
    argv += ["-d", str(dest)]
    for platform in platforms:
        argv += ["--platform", platform]
    if offline:
        # Everything needed is already in the cache: no index, no network.
        argv += ["--no-index", "--find-links", str(dest)]
    return argv + list(requirements)
