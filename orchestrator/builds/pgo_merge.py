"""The counters of the training boards made one profile, by the tools of the compiler that
instrumented the build, in the very build image, so the format is the one that compiler reads back.

* GCC (several boards): each board's counter files (``.gcda``, one tree per board as GCOV_PREFIX
  laid it out) are added up by the cross GCC's ``gcov-tool merge``, which takes two directories at
  a time; more boards are folded in one after the other (``docker/build/merge_counters.sh``).
* clang (always, one board too: the optimised build reads an indexed profile, not raw ones): every
  board's ``.profraw`` files are added up by ``llvm-profdata-19 merge`` into one ``.profdata``, which
  ``show`` then describes (``docker/build/merge_profiles.sh``).

Runs with no network; the inputs are copied in and the result copied out.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.builds.pgo_clang import PROFDATA, VERSION_FILE, Merged, tool_version
from orchestrator.errors import BuildError
from orchestrator.paths import DOCKER_DIR

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

MERGE_TIMEOUT = 600  # seconds: a few thousand small files
_WORK = "/merge"
SCRIPT = DOCKER_DIR / "build" / "merge_counters.sh"  # copied in beside the trees
CLANG_SCRIPT = DOCKER_DIR / "build" / "merge_profiles.sh"


def gcov_tool(cross_prefix: str) -> str:
    """The cross GCC's gcov-tool (Debian's gcc-<arch> package links the unversioned name)."""
    return f"{cross_prefix}gcov-tool"


def merge_counters(
    engine: Engine, image: str, trees: Sequence[Path], into: Path, *, cross_prefix: str
) -> int:
    """``trees`` (two or more counter directories) added up into ``into``; returns its file count."""
    if len(trees) < 2:
        raise ValueError("merging needs two counter trees or more")
    with tempfile.TemporaryDirectory(prefix="orch-pgo-merge-") as tmp:
        stage = Path(tmp) / "in"
        for index, tree in enumerate(trees):
            shutil.copytree(tree, stage / str(index))
        shutil.copy2(SCRIPT, stage / SCRIPT.name)
        lines: list[str] = []
        inputs = [f"{_WORK}/in/{index}" for index in range(len(trees))]
        code = engine.run(
            image,
            ["sh", f"{_WORK}/in/{SCRIPT.name}", gcov_tool(cross_prefix), *inputs],
            network="none",
            labels={"orch.role": "pgo-merge"},
            on_log=lines.append,
            copy_in=[(stage, f"{_WORK}/in")],
            copy_out=[(f"{_WORK}/out", Path(tmp))],
            timeout=MERGE_TIMEOUT,
        )
        merged = Path(tmp) / "out"
        if code != 0 or not merged.is_dir():
            raise BuildError(
                f"gcov-tool could not merge the boards' counters (exit {code}):\n" + "\n".join(lines[-15:]),
                hint="each board's counters are kept; train on one board (--train-on BOARD) to go on",
            )
        shutil.rmtree(into, ignore_errors=True)
        into.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(merged, into)
    return sum(1 for _ in into.rglob("*.gcda"))


def merge_raw_profiles(engine: Engine, image: str, trees: Sequence[Path], into: Path) -> Merged:
    """Every raw profile under ``trees`` (one per board) added up into ``into``: the merged profile
    and what llvm-profdata says of it (``builds.pgo_clang`` reads them)."""
    if not trees:
        raise ValueError("merging needs a raw profile tree")
    with tempfile.TemporaryDirectory(prefix="orch-pgo-merge-") as tmp:
        stage = Path(tmp) / "in"
        for index, tree in enumerate(trees):
            shutil.copytree(tree, stage / str(index))
        shutil.copy2(CLANG_SCRIPT, stage / CLANG_SCRIPT.name)
        lines: list[str] = []
        inputs = [f"{_WORK}/in/{index}" for index in range(len(trees))]
        code = engine.run(
            image,
            ["sh", f"{_WORK}/in/{CLANG_SCRIPT.name}", PROFDATA, *inputs],
            network="none",
            labels={"orch.role": "pgo-merge"},
            on_log=lines.append,
            copy_in=[(stage, f"{_WORK}/in")],
            copy_out=[(f"{_WORK}/out", Path(tmp))],
            timeout=MERGE_TIMEOUT,
        )
        merged = Path(tmp) / "out"
        if code != 0 or not (merged / VERSION_FILE).is_file():
            raise BuildError(
                f"{PROFDATA} could not merge the boards' raw profiles (exit {code}):\n"
                + "\n".join(lines[-15:]),
                hint="each board's raw profiles are kept beside the profile",
            )
        shutil.rmtree(into, ignore_errors=True)
        into.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(merged, into)
    return Merged(
        tool=PROFDATA,
        version=tool_version((into / VERSION_FILE).read_text()),
        image=image,
        raw_profiles=sum(1 for tree in trees for _ in tree.rglob("*.profraw")),
        boards=len(trees),
    )
