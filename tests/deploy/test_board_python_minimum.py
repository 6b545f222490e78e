"""The board-side files a board's own python3 runs (``BOARD_PYTHON_FILES``: the deploy lock) need
nothing newer than the oldest Python among orch's target profiles (JetPack 4's 3.6 on
``jetson-nano``), whose C library releases are deployed under that lock too. vermin reads the
language features and standard-library calls each file uses, annotations evaluated as Python
evaluates them at run time (``capture_output=``, ``from __future__ import annotations`` or an
unquoted ``list[str]`` in a signature need 3.7 or later)."""

from __future__ import annotations

import pytest
import vermin

from orchestrator.board_side import BOARD_PYTHON_FILES, read_text
from orchestrator.builds.variants import release_tuple
from orchestrator.targets import load_profiles

pytestmark = pytest.mark.unit


def _oldest_board_python() -> tuple[int, ...]:
    return min(release_tuple(profile.os.python) for profile in load_profiles().values())


def _needs(source: str) -> tuple[int, int]:
    config = vermin.Config()
    config.set_eval_annotations(True)  # signatures are evaluated at definition time
    needed = vermin.detect(source, config)[1]
    assert needed is not None
    return (needed[0], needed[1])


def test_the_oldest_board_python_is_jetpack_4s() -> None:
    assert _oldest_board_python() == (3, 6)


@pytest.mark.parametrize("name", BOARD_PYTHON_FILES)
def test_a_file_the_boards_own_python_runs_needs_nothing_newer_than_the_oldest_target_has(name: str) -> None:
    source = read_text(name)
    floor = _oldest_board_python()
    assert _needs(source) <= floor, f"{name} needs Python {_needs(source)}, boards may have {floor}"
    # The check itself: what came after 3.6, added to the same file, is caught.
    for newer in (
        "subprocess.run(['true'], capture_output=True)\n",
        "def later(argv: list[str]) -> None:\n    pass\n",
    ):
        assert _needs(source + "\n" + newer) > floor, newer
