"""Training a profile-instrumented build on a board over SSH: send it, run it there with its counters
redirected into a scratch directory (``board_side/pgo_train.sh``), fetch the counters, clean up.

The instrumented build is never installed as a release: it runs from the scratch directory, which
is removed afterwards whatever happens, so the board's current release is untouched.
"""

from __future__ import annotations

import secrets
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.adapters.session import BoardSession
from orchestrator.board_side import read_text
from orchestrator.builds.pgo import Training
from orchestrator.errors import RemoteError

MLAS_TEST = "onnxruntime_mlas_test"
RUN_TIMEOUT = 3600.0  # per training (all runs): an emulated board runs a shard in minutes


@dataclass(frozen=True, kw_only=True)
class MlasWorkload:
    """Which of ORT's MLAS tests train the profile: one gtest shard (the kernels' own tests)."""

    shard: int  # 1-based
    shards: int
    runs: int

    def describe(self) -> str:
        return f"{MLAS_TEST} shard {self.shard}/{self.shards}, {self.runs} run(s)"


def _values(text: str) -> dict[str, str]:
    return {
        key.strip(): value.strip()
        for key, sep, value in (line.partition("=") for line in text.splitlines())
        if sep
    }


def train_mlas_test(
    session: BoardSession,
    bundle: Path,
    *,
    workload: MlasWorkload,
    cpu: str,
    into: Path,
) -> Training:
    """Run ``bundle``'s instrumented MLAS test executable (with its libraries) ``workload.runs`` times on the
    board; its counter files end up under ``into``."""
    scratch = f"{session.board.workdir}/pgo/{secrets.token_hex(6)}"
    started = time.monotonic()
    try:
        session.mkdir_p(f"{scratch}/bundle")
        for item in sorted(bundle.iterdir()):
            if item.is_file():
                session.put(item, f"{scratch}/bundle/{item.name}")
        session.run(["chmod", "+x", f"{scratch}/bundle/{MLAS_TEST}"])
        home = session.home()
        where = f"{home}/{scratch}/bundle" if not scratch.startswith("/") else f"{scratch}/bundle"
        result = session.run_script(
            read_text("pgo_train.sh"),
            (
                scratch,
                str(workload.runs),
                f"LD_LIBRARY_PATH={where}",
                f"GTEST_TOTAL_SHARDS={workload.shards}",
                f"GTEST_SHARD_INDEX={workload.shard - 1}",
                f"{where}/{MLAS_TEST}",
            ),
            timeout=RUN_TIMEOUT,
            check=False,
        )
        if not result.ok:
            raise RemoteError(
                f"{session.label}: the instrumented {MLAS_TEST} failed on the board: {result.tail(12)}",
                hint="a program that fails writes no counters; the build itself is kept",
            )
        values = _values(result.stdout)
        _fetch(session, values.get("pack", ""), into)
    finally:
        session.run(["rm", "-rf", "--", scratch], check=False)
    return Training(
        board=session.board.name,
        cpu=cpu,
        workload=workload.describe(),
        runs=workload.runs,
        seconds=time.monotonic() - started,
    )


def _fetch(session: BoardSession, pack: str, into: Path) -> None:
    if not pack.startswith("/"):
        raise RemoteError(
            f"{session.label}: the training printed no counter pack", hint="the board needs tar and gzip"
        )
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="orch-pgo-") as scratch:
        local = Path(scratch) / "counters.tgz"
        session.get(pack, local)
        with tarfile.open(local) as archive:
            # Only regular files and directories, inside ``into`` (the "data" filter refuses the rest).
            archive.extractall(into, filter="data")
