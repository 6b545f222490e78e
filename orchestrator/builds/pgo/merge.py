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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.builds.pgo.clang import PROFDATA, VERSION_FILE, Merged, tool_version
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
    code, lines = _merge_in_image(engine, image, trees, into, _Merge(SCRIPT, gcov_tool(cross_prefix), ""))
    if code != 0:
        raise BuildError(
            f"gcov-tool could not merge the boards' counters (exit {code}):\n" + "\n".join(lines[-15:]),
            hint="each board's counters are kept; train on one board (--train-on BOARD) to go on",
        )
    return sum(1 for _ in into.rglob("*.gcda"))


def merge_raw_profiles(engine: Engine, image: str, trees: Sequence[Path], into: Path) -> Merged:
    """Every raw profile under ``trees`` (one per board) added up into ``into``: the merged profile
    and what llvm-profdata says of it (``builds.pgo.clang`` reads them)."""
    if not trees:
        raise ValueError("merging needs a raw profile tree")
    code, lines = _merge_in_image(engine, image, trees, into, _Merge(CLANG_SCRIPT, PROFDATA, VERSION_FILE))
    if code != 0:
        raise BuildError(
            f"{PROFDATA} could not merge the boards' raw profiles (exit {code}):\n" + "\n".join(lines[-15:]),
            hint="each board's raw profiles are kept beside the profile",
        )
    return Merged(
        tool=PROFDATA,
        version=tool_version((into / VERSION_FILE).read_text()),
        image=image,
        raw_profiles=sum(1 for tree in trees for _ in tree.rglob("*.profraw")),
        boards=len(trees),
    )


@dataclass(frozen=True)
class _Merge:
    """One compiler's merge: its script (copied in beside the trees), its tool, and the file its
    success leaves in /merge/out ("": the directory alone)."""

    script: Path
    tool: str
    result: str


def _merge_in_image(
    engine: Engine, image: str, trees: Sequence[Path], into: Path, merge: _Merge
) -> tuple[int, list[str]]:
    """Run ``script TOOL /merge/in/0 /merge/in/1 ...`` in ``image`` with the trees copied in; on
    success (exit 0 and the script's result written) ``into`` is replaced by /merge/out. Returns
    the exit code (1 when the script said nothing went wrong yet wrote no result) and its output."""
    script = merge.script
    with tempfile.TemporaryDirectory(prefix="orch-pgo-merge-") as tmp:
        stage = Path(tmp) / "in"
        for index, tree in enumerate(trees):
            shutil.copytree(tree, stage / str(index))
        shutil.copy2(script, stage / script.name)
        lines: list[str] = []
        inputs = [f"{_WORK}/in/{index}" for index in range(len(trees))]
        code = engine.run(
            image,
            ["sh", f"{_WORK}/in/{script.name}", merge.tool, *inputs],
            network="none",
            labels={"orch.role": "pgo-merge"},
            on_log=lines.append,
            copy_in=[(stage, f"{_WORK}/in")],
            copy_out=[(f"{_WORK}/out", Path(tmp))],
            timeout=MERGE_TIMEOUT,
        )
        merged = Path(tmp) / "out"
        if code == 0 and not (merged / merge.result).exists():
            code = 1
        if code == 0:
            shutil.rmtree(into, ignore_errors=True)
            into.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(merged, into)
    return code, lines
