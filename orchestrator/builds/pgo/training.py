"""Training a profile-instrumented build on a board over SSH: send it, run it there with its counters
redirected into a scratch directory (``board_side/pgo_train.sh``), fetch the counters, clean up.

The instrumented build is never installed as a release: it runs from the scratch directory, which
is removed afterwards whatever happens, so the board's current release stays as it was. A wheel is
unpacked there and imported ahead of the release's own onnxruntime (PYTHONPATH), by the release's
interpreter (it has numpy), running orch's benchmark agent on each model.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.adapters.session import BoardSession, CommandResult
from orchestrator.board_side import read_text
from orchestrator.builds.pgo.profile import Compiler, Training
from orchestrator.errors import RemoteError

MLAS_TEST = "onnxruntime_mlas_test"
RUN_TIMEOUT = 3600.0  # per call of the training script: an emulated board runs a shard in minutes


@dataclass(frozen=True, kw_only=True)
class MlasWorkload:
    """Which of ORT's MLAS tests train the profile: one gtest shard (the kernels' own tests)."""

    shard: int  # 1-based
    shards: int
    runs: int

    def describe(self) -> str:
        return f"{MLAS_TEST} shard {self.shard}/{self.shards}, {self.runs} run(s)"


@dataclass(frozen=True, kw_only=True)
class ModelWorkload:
    """The user's models, each run by orch's benchmark agent with the bench settings."""

    models: tuple[Path, ...]
    runs: int  # processes per model (counters are written at each one's exit)
    inferences: int  # per process
    threads: int  # intra-op threads, 0: onnxruntime's default
    opt_level: str

    def describe(self) -> str:
        names = ", ".join(model.name for model in self.models)
        threads = self.threads or "default"
        return (
            f"{names}: {self.runs} run(s) of {self.inferences} inferences each, {threads} threads,"
            f" optimisation level {self.opt_level}"
        )

    def settings(self) -> dict[str, object]:
        return {"threads": self.threads, "opt_level": self.opt_level, "inferences": self.inferences}


@dataclass(frozen=True)
class CountersInto:
    """Where a training's counters are brought on the workstation, and whose they are (how the
    board-side script redirects them)."""

    path: Path
    compiler: Compiler = "gcc"


class _Scratch:
    """A directory of its own on the board, absolute, removed at the end whatever happened."""

    def __init__(self, session: BoardSession, compiler: Compiler) -> None:
        self.session = session
        self.compiler = compiler
        relative = f"{session.board.workdir}/pgo/{secrets.token_hex(6)}"
        self.path = relative if relative.startswith("/") else f"{session.home()}/{relative}"

    def __enter__(self) -> _Scratch:  # noqa: PYI034 -- typing.Self is newer than the oldest Python orch runs on
        self.session.mkdir_p(self.path)
        return self

    def __exit__(self, *_: object) -> None:
        self.session.run(["rm", "-rf", "--", self.path], check=False)

    def put(self, local: Path, name: str) -> str:
        remote = f"{self.path}/{name}"
        self.session.put(local, remote)
        return remote

    def train(self, runs: int, environment: Sequence[str], argv: Sequence[str], what: str) -> dict[str, str]:
        result = self.session.run_script(
            read_text("pgo_train.sh"),
            (self.path, str(runs), self.compiler, *environment, *argv),
            timeout=RUN_TIMEOUT,
            check=False,
        )
        if not result.ok:
            raise RemoteError(
                f"{self.session.label}: the instrumented {what} failed on the board: {result.tail(12)}",
                hint="a program that fails writes no counters; the instrumented build itself is kept",
            )
        return _values(result)

    def fetch(self, values: dict[str, str], into: Path) -> None:
        pack = values.get("pack", "")
        if not pack.startswith("/"):
            raise RemoteError(
                f"{self.session.label}: the training printed no counter pack",
                hint="the board needs tar and gzip",
            )
        into.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="orch-pgo-") as local_dir:
            local = Path(local_dir) / "counters.tgz"
            self.session.get(pack, local)
            with tarfile.open(local) as archive:
                # Only regular files and directories, inside ``into`` (the "data" filter refuses the rest).
                archive.extractall(into, filter="data")


def _values(result: CommandResult) -> dict[str, str]:
    lines = (line.partition("=") for line in result.stdout.splitlines())
    return {key.strip(): value.strip() for key, sep, value in lines if sep}


def train_mlas_test(
    session: BoardSession,
    bundle: Path,
    *,
    workload: MlasWorkload,
    cpu: str,
    into: CountersInto,
) -> Training:
    """Run ``bundle``'s instrumented MLAS test executable (with its libraries) on the board; its
    counter files end up under ``into``."""
    started = time.monotonic()
    with _Scratch(session, into.compiler) as scratch:
        session.mkdir_p(f"{scratch.path}/bundle")
        for item in sorted(bundle.iterdir()):
            if item.is_file():
                scratch.put(item, f"bundle/{item.name}")
        exe = f"{scratch.path}/bundle/{MLAS_TEST}"
        session.run(["chmod", "+x", exe])
        environment = (
            f"LD_LIBRARY_PATH={scratch.path}/bundle",
            f"GTEST_TOTAL_SHARDS={workload.shards}",
            f"GTEST_SHARD_INDEX={workload.shard - 1}",
        )
        scratch.fetch(scratch.train(workload.runs, environment, [exe], MLAS_TEST), into.path)
    return Training(
        board=session.board.name,
        cpu=cpu,
        workload=workload.describe(),
        runs=workload.runs,
        seconds=time.monotonic() - started,
    )


def release_python(session: BoardSession) -> str:
    """The interpreter of the board's current release (it has numpy and the release's onnxruntime)."""
    python = f"{session.board.workdir}/current/venv/bin/python"
    if session.stat(python) is None:
        raise RemoteError(
            f"{session.label}: no release orch deployed to train with (no {python})",
            hint=f"a wheel is trained with a release's Python (numpy): orch deploy --host {session.board.name} first",
        )
    return python


def train_wheel(
    session: BoardSession,
    wheel: Path,
    *,
    workload: ModelWorkload,
    cpu: str,
    into: CountersInto,
) -> Training:
    """Run each model with the instrumented wheel, imported from a scratch directory by the current
    release's interpreter; the counters of every run end up under ``into``."""
    started = time.monotonic()
    python = release_python(session)
    with _Scratch(session, into.compiler) as scratch:
        remote_wheel = scratch.put(wheel, wheel.name)
        site = f"{scratch.path}/site"
        session.run([python, "-m", "zipfile", "-e", remote_wheel, site], timeout=600)
        with tempfile.TemporaryDirectory(prefix="orch-pgo-") as local_dir:
            agent = Path(local_dir) / "bench_agent.py"
            agent.write_text(read_text("bench_agent.py"))
            remote_agent = scratch.put(agent, "bench_agent.py")
        models: list[dict[str, str]] = []
        values: dict[str, str] = {}
        for model in workload.models:
            remote_model = scratch.put(model, f"model-{len(models)}-{model.name}")
            models.append({"name": model.name, "sha256": hashlib.sha256(model.read_bytes()).hexdigest()})
            argv = [
                python, remote_agent, "--model", remote_model, "--opt-level", workload.opt_level,
                "--intra-op-threads", str(workload.threads), "--warmup", "0", "--min-duration", "0",
                "--min-runs", str(workload.inferences), "--max-runs", str(workload.inferences),
            ]  # fmt: skip
            values = scratch.train(workload.runs, [f"PYTHONPATH={site}"], argv, f"wheel on {model.name}")
            _check_imported_from(session, values.get("log", ""), site)
        scratch.fetch(values, into.path)
    return Training(
        board=session.board.name,
        cpu=cpu,
        workload=workload.describe(),
        runs=workload.runs,
        seconds=time.monotonic() - started,
        models=tuple(models),
        settings=workload.settings(),
    )


def _check_imported_from(session: BoardSession, log: str, site: str) -> None:
    """The agent's document says which onnxruntime it imported: the instrumented one, not the release's."""
    text = session.run(["cat", "--", log], check=False).stdout if log else ""
    try:
        document = json.loads(text.strip().splitlines()[-1])
        imported = str(document["ort"]["file"])
    except (ValueError, IndexError, KeyError, TypeError):
        raise RemoteError(
            f"{session.label}: the training run printed no agent document: {text[-500:]!r}"
        ) from None
    if not imported.startswith(site):
        raise RemoteError(
            f"{session.label}: the training imported {imported}, not the instrumented wheel in {site}",
            hint="the release's Python must honour PYTHONPATH",
        )
