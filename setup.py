"""Build hook: ships the repository's data folders inside the wheel.

``toolchains/`` (target profiles, variants, the CMake toolchain file, patches, shims),
``docker/`` (build container and lab board images) and the example ``inventory.yaml`` stay at
the repository root, where people look for them, and are copied into the package as
``orchestrator/data/`` when a wheel is built, so ``pip install .`` or ``pipx install`` gives
a working orch. ``orchestrator.paths`` finds them there through ``importlib.resources`` (or
at the repository root in a checkout). Everything else is configured in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA = ("toolchains", "docker", "inventory.yaml")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads them from the checkout itself
            return
        target = Path(self.build_lib) / "orchestrator" / "data"
        for name in DATA:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, target / name, ignore=IGNORE, dirs_exist_ok=True)
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)


setup(cmdclass={"build_py": BuildWithData})
