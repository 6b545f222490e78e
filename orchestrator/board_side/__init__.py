"""Files that run on a board (or in an emulated board container), kept as real, linted files.

Two ways a file here reaches a board (see README.md in this folder):

* sent for each use: the ``*.sh`` scripts go to ``sh -s -- ARGS`` on stdin
  (``BoardSession.run_script``), ``verify_release.py`` to ``python -c``, and the pre-flight
  files into its container; they are read with ``read_text``;
* shipped inside each release under ``<release>/agent/`` (``orchestrator.deploy.release_files.AGENT_FILES``):
  the benchmark agent and this folder's README.

Most Python files here run in a release's venv (Python >= 3.10, as ORT's wheels need). Those in
``BOARD_PYTHON_FILES`` run under the board's own ``python3`` on every board, a C library release's
too, so they keep to what the oldest board Python of orch's targets has (JetPack 4's 3.6).
"""

from __future__ import annotations

import functools
from importlib import resources

# Run by the board's own python3 (``orch deploy``'s lock), not a release's venv.
BOARD_PYTHON_FILES = ("board_lock.py",)


@functools.cache
def read_text(name: str) -> str:
    """The text of the board-side file ``name`` (e.g. ``"pin_clocks.sh"``), read once per process."""
    resource = resources.files(__name__).joinpath(name)
    if not resource.is_file():
        raise FileNotFoundError(f"{name}: no such file in {__name__} (a packaging error)")
    return resource.read_text(encoding="utf-8")
