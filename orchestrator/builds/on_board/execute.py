"""Runs an ``OnBoardPlan`` over SSH: the board builds ORT with its own compiler.

1. the board's tools are read (``board_side/build_facts.sh``) and checked before anything is sent;
2. ORT's tree, its dependency sources and orch's CMake shims are prepared on the workstation (the
   container route's own steps) and sent as gzipped tars, each only when the board's copy is not the
   same (an ``.orch-input`` identity inside each);
3. ``build_on_board.sh`` runs build.py through the build container's own wrapper (``run_build.sh``:
   configure stamp, ccache statistics, compile_commands.json), with the board's persistent compiler
   cache; its output is streamed into the local build log, ninja's ``[n/N]`` to the progress bar;
4. what it made and its report come back into the local build directory, with a manifest; a
   wheel is checked, pre-flighted on the board itself and published in artifacts/ like any other.

The board's build tree and compiler cache stay there: the next build recompiles what changed.
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.adapters.session import BoardSession
from orchestrator.artifacts.store import Artifact, BuildRecord
from orchestrator.board_side import read_text
from orchestrator.builds.build_log import Log, LogSink, Progress, first_error
from orchestrator.builds.build_report import (
    REPORT_NAME,
    compiler_version,
    read_ccache_stats,
    read_incremental,
)
from orchestrator.builds.on_board.plan import OnBoardPlan
from orchestrator.builds.on_board.preflight import preflight_on_board
from orchestrator.builds.on_board.requirements import BoardBuildFacts, read_facts
from orchestrator.builds.record import BoardCheck, MadeWheel, built_for, finish_artifact, source_record
from orchestrator.builds.sources.dependencies import PreparedDependencies
from orchestrator.builds.sources.ort import SourceTree
from orchestrator.builds.workspace import build_record_dir
from orchestrator.common.digests import file_sha256
from orchestrator.errors import BuildError
from orchestrator.paths import DOCKER_DIR, TOOLCHAINS_DIR

IDENTITY = ".orch-input"
STATUS_PREFIX = "orch-on-board: status "
# A build that prints nothing for this long is taken as hung (CMake's configure under emulation, the
# longest silent step seen, takes minutes, not an hour).
SILENCE_S = 3600.0


def work_root(session: BoardSession) -> str:
    """The board's build work directory: ``<workdir>/build`` under the login home when relative."""
    workdir = session.board.workdir
    base = workdir if workdir.startswith("/") else f"{session.home()}/{workdir}"
    return f"{base}/build"


def read_board_facts(session: BoardSession, root: str) -> BoardBuildFacts:
    result = session.run_script(read_text("build_facts.sh"), (root,), timeout=300)
    return read_facts(result.stdout)


# (local directory, board directory, identity) of one input.
InputPart = tuple[Path, str, str]


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """What the board compiles, prepared on the workstation."""

    tree: SourceTree
    deps: PreparedDependencies

    def parts(self, plan: OnBoardPlan) -> list[InputPart]:
        """(local directory, board directory, identity) of each input."""
        shims = TOOLCHAINS_DIR / "cmake-shims"
        return [
            (
                self.tree.path,
                plan.paths.src,
                f"{self.tree.source_sha256} {json.dumps(self.tree.patches, sort_keys=True)}",
            ),
            (self.deps.path, plan.paths.deps, self.deps.digest),
            (shims, plan.paths.shims, _directory_digest(shims)),
        ]


@dataclass(frozen=True, kw_only=True)
class OnBoardResult:
    plan: OnBoardPlan
    build_dir: Path  # on the workstation: build.log, manifest.json, out/, orch-report/
    log_path: Path
    duration_s: float
    outputs: tuple[Path, ...]
    manifest: dict[str, Any]
    artifact: Artifact | None = None  # a wheel, published in artifacts/


def local_build_dir(plan: OnBoardPlan) -> Path:
    return build_record_dir(
        plan.target.name, plan.artifact_variant, f"{plan.ort_version}-{plan.scope}-on-{plan.board}"
    )


def execute_on_board(
    plan: OnBoardPlan,
    session: BoardSession,
    inputs: Inputs,
    *,
    log: Log,
    progress: Progress | None = None,
) -> OnBoardResult:
    started = time.monotonic()
    build_dir = local_build_dir(plan)
    for stale in ("out", REPORT_NAME):
        shutil.rmtree(build_dir / stale, ignore_errors=True)
    parts = inputs.parts(plan)  # each identity computed once (the shims are hashed file by file)
    sent = _send_inputs(plan, session, parts, log)
    _send_scripts(plan, session)
    stamp = _configure_stamp(plan, parts)
    log_path = build_dir / "build.log"
    with log_path.open("w") as handle:
        handle.write(
            f"# orch build {plan.target.name}/{plan.artifact_variant} ORT {plan.ort_version} on board {plan.board}\n"
        )
        handle.write(f"# {shlex.join(plan.build_argv)}\n")
        sink = LogSink(handle, progress, None)
        status = _compile(plan, session, stamp, sink)
        _fetch_report(plan, session, build_dir)
    if status != 0:
        reason = first_error(sink.lines) or f"build.py exited with status {status}"
        raise BuildError(f"the ORT build on {plan.board} failed:\n{reason}", hint=f"full log: {log_path}")
    outputs = _fetch_outputs(plan, session, build_dir / "out")
    report = build_dir / REPORT_NAME
    stats = read_ccache_stats(report)
    manifest = {
        **plan.as_dict(),
        "source": {
            "description": inputs.tree.spec.describe(),
            "sha256": inputs.tree.source_sha256,
            "patches": list(inputs.tree.patches),
        },
        "dependency_sources": list(inputs.deps.records),
        "inputs_sent": sent,
        "compiler": compiler_version(report),
        "ccache": None if stats is None else asdict(stats),
        "incremental": read_incremental(report, sink.lines).as_dict(),
        "build_duration_s": round(time.monotonic() - started, 1),
        "outputs": {path.name: file_sha256(path) for path in outputs},
    }
    (build_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    result = OnBoardResult(
        plan=plan,
        build_dir=build_dir,
        log_path=log_path,
        duration_s=time.monotonic() - started,
        outputs=outputs,
        manifest=manifest,
    )
    if plan.scope == "wheel":
        result = replace(result, artifact=_publish_wheel(result, session, inputs, log))
    return result


def _publish_wheel(result: OnBoardResult, session: BoardSession, inputs: Inputs, log: Log) -> Artifact:
    """The wheel into artifacts/ like any other: checked for the target, pre-flighted on the board
    that built it (its real CPU, and GPU for CUDA), with a manifest of how it was made."""
    plan, built, wheel = result.plan, result.manifest, result.outputs[0]
    profile = plan.target
    record = BuildRecord(
        variant_description=plan.variant.description,
        execution_provider=plan.execution_provider,
        source=source_record(inputs.tree.spec, inputs.tree),
        patches=tuple(inputs.tree.patches),
        dependencies="source",
        toolchain="on-board",
        dependency_sources=tuple(inputs.deps.records),
        engine=f"board {plan.board}",
        build_argv=tuple(plan.build_argv),
        defines=tuple(f"{k}={v}" for k, v in plan.defines),
        compiler_flags=plan.compiler_flags,
        linker_flags=plan.variant.ldflags,
        parallel=plan.parallel,
        target_profile=built_for(profile),
        compiler=built["compiler"],
        ccache=built["ccache"],
        incremental=built["incremental"],
        build_duration_s=built["build_duration_s"],
    )
    made = MadeWheel(
        profile=profile,
        variant=plan.artifact_variant,
        ort_version=plan.ort_version,
        wheel=wheel,
        record=record,
        log_path=result.log_path,
    )
    remote_wheel = f"{plan.outputs[0][0]}/{wheel.name}"
    check = BoardCheck(
        board=plan.board,
        check=lambda: preflight_on_board(session, plan.paths.root, remote_wheel, plan.execution_provider),
    )
    return finish_artifact(made, root=None, engine=check, log=log)


def _directory_digest(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _send_inputs(
    plan: OnBoardPlan, session: BoardSession, parts: list[InputPart], log: Log
) -> dict[str, bool]:
    """Each input sent unless the board has the same one; which were sent (True) or kept."""
    sent = {}
    for local, remote, identity in parts:
        name = remote.rsplit("/", 1)[-1]
        there = session.run(["cat", "--", f"{remote}/{IDENTITY}"], check=False)
        if there.ok and there.stdout.strip() == identity:
            log(f"{plan.board} has {name} already")
            sent[name] = False
            continue
        with tempfile.TemporaryDirectory(prefix="orch-on-board-") as scratch:
            archive = Path(scratch) / f"{name}.tgz"
            log(f"packing {name} ({local})")
            _pack(local, identity, archive)
            size = archive.stat().st_size
            log(f"sending {name} to {plan.board} ({size / 1e6:.1f} MB)")
            session.mkdir_p(f"{plan.paths.root}/inputs")
            remote_archive = f"{plan.paths.root}/inputs/{name}.tgz"
            session.put(archive, remote_archive)
        session.run_script(read_text("unpack_build_input.sh"), (remote_archive, remote), timeout=3600)
        sent[name] = True
    return sent


def _pack(directory: Path, identity: str, archive: Path) -> None:
    with tarfile.open(archive, "w:gz", compresslevel=3) as tar:
        tar.add(directory, arcname=".", filter=_without_git)
        data = (identity + "\n").encode()
        info = tarfile.TarInfo(IDENTITY)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _without_git(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "/.git/" in f"/{member.name}/" else member


def _send_scripts(plan: OnBoardPlan, session: BoardSession) -> None:
    """The build container's wrapper and the board's own script, as they are now."""
    session.mkdir_p(plan.paths.scripts)
    with tempfile.TemporaryDirectory(prefix="orch-on-board-") as scratch:
        own = Path(scratch) / "build_on_board.sh"
        own.write_text(read_text("build_on_board.sh"))
        session.put(DOCKER_DIR / "build" / "run_build.sh", f"{plan.paths.scripts}/run_build.sh")
        session.put(own, f"{plan.paths.scripts}/build_on_board.sh")


def _configure_stamp(plan: OnBoardPlan, parts: list[InputPart]) -> str:
    """Everything CMake's configure step depends on that ninja does not watch: the argv, the inputs'
    identities (run_build.sh skips the configure when the build tree has this exact stamp)."""
    identities = [identity for _, _, identity in parts]
    document = json.dumps({"argv": plan.build_argv, "inputs": identities}, sort_keys=True)
    return hashlib.sha256(document.encode()).hexdigest()


def _compile(plan: OnBoardPlan, session: BoardSession, stamp: str, sink: Callable[[str], None]) -> int:
    """build.py on the board, its output streamed line by line; its exit status."""
    argv = [
        "sh",
        f"{plan.paths.scripts}/build_on_board.sh",
        plan.paths.root,
        plan.paths.build,
        plan.config_dir,
        stamp,
        "--",
        *plan.build_argv,
    ]
    stream = session.open_stream(argv)
    status: int | None = None
    pending = b""
    try:
        stream.settimeout(SILENCE_S)
        while True:
            try:
                chunk = stream.recv(65536)
            except TimeoutError:
                raise BuildError(
                    f"the build on {plan.board} printed nothing for {SILENCE_S / 60:.0f} minutes: stopped",
                    hint="the board may be out of memory (fewer jobs: --parallel) or hung",
                ) from None
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").rstrip("\r")
                if line.startswith(STATUS_PREFIX):
                    status = int(line.removeprefix(STATUS_PREFIX))
                else:
                    sink(line)
    finally:
        stream.close()
    if pending:
        sink(pending.decode(errors="replace"))
    if status is None:
        raise BuildError(
            f"the build on {plan.board} ended without its status: the connection or the board went away",
            hint="run the same command again: the board's build tree and compiler cache are kept",
        )
    return status


def _fetch_report(plan: OnBoardPlan, session: BoardSession, build_dir: Path) -> None:
    """run_build.sh's report (ccache statistics, compile_commands.json, the compiler CMake found)."""
    remote = f"{plan.paths.build}/{REPORT_NAME}.tgz"
    packed = session.run(["tar", "-czf", remote, "-C", plan.paths.build, REPORT_NAME], check=False)
    if not packed.ok:
        return
    with tempfile.TemporaryDirectory(prefix="orch-on-board-") as scratch:
        local = Path(scratch) / "report.tgz"
        session.get(remote, local)
        with tarfile.open(local) as archive:
            archive.extractall(build_dir, filter="data")


def _fetch_outputs(plan: OnBoardPlan, session: BoardSession, into: Path) -> tuple[Path, ...]:
    """What the scope made, brought back (a wheel is found by its pattern)."""
    into.mkdir(parents=True, exist_ok=True)
    fetched = []
    for directory, name in plan.outputs:
        listed = session.run(["find", directory, "-maxdepth", "1", "-type", "f", "-name", name], check=False)
        found = sorted(line for line in listed.stdout.splitlines() if line.strip())
        if not found:
            raise BuildError(f"the build on {plan.board} succeeded but made no {directory}/{name}")
        for remote in found:
            local = into / remote.rsplit("/", 1)[-1]
            session.get(remote, local)
            fetched.append(local)
    return tuple(fetched)
