"""Fixtures of the sysroot tests: ``elves`` compiles small real ELF files (see sysroot_elves.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sysroot_elves import Elves


@pytest.fixture
def elves(tmp_path: Path) -> Elves:
    workdir = tmp_path / "elves"
    workdir.mkdir()
    return Elves(workdir)
