"""Executes deploys and rollbacks on boards, one thread per board (``orchestrator.fleet.parallel``).

Per board, in this order, so that a failure at any step leaves the previous release current:

1. read the board's facts and its releases (one script: ``orchestrator.deploy.survey``) and
   refuse an incompatible wheel *before any byte is sent*;
2. resolve the wheel's dependencies for the board on the workstation (cached);
3. plan (``deploy_plan``): what the store lacks, the release id, the argv lists; a release that
   is current and was verified on the board already is done here (that one round trip);
4. upload the missing contents to temporary names, renamed into ``store/sha256/<hex>``;
5. build the release directory (hard links into the store), venv, ``pip install --no-index``,
   then ``release.json`` (a release without it is never used);
6. switch ``current`` atomically, verify on the board (import, version, build info, one
   inference per model); a failed verification switches back, a passed one is recorded in the
   release (``verified.json``);
7. prune to ``--keep`` releases.
"""

from __future__ import annotations

import json
import posixpath
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from orchestrator.adapters import ssh as remote
from orchestrator.adapters.session import BoardSession, CommandResult, Stream
from orchestrator.artifacts.dependencies import resolve_dependencies
from orchestrator.artifacts.store import (
    Artifact,
    Manifest,
    ManifestError,
    list_artifacts,
    read_manifest,
)
from orchestrator.artifacts.wheel import WheelInfo, compatibility_problems, inspect_wheel
from orchestrator.board import Board
from orchestrator.board_side import read_text
from orchestrator.builds.native_runner.plan import SONAME
from orchestrator.console import console
from orchestrator.deploy.plan import (
    BoardPlan,
    LocalFile,
    RollbackPlan,
    native_files,
    plan_board,
    select_artifact,
    stage_pairs,
    wheel_files,
)
from orchestrator.deploy.releases import (
    Layout,
    Listing,
    ReleaseInfo,
    choose_rollback,
    layout_for,
    prune,
    read_listing,
    switch_current,
)
from orchestrator.deploy.survey import read_survey
from orchestrator.deploy.verification import Verification, parse_verification
from orchestrator.digests import file_sha256
from orchestrator.errors import DeployError, RemoteError
from orchestrator.fleet.board_facts import BoardFacts, cpu_problems
from orchestrator.fleet.parallel import FleetResult, run_on_boards
from orchestrator.paths import artifacts_dir

if TYPE_CHECKING:
    from typing_extensions import Self


@dataclass(frozen=True, kw_only=True)
class DeployRequest:
    """What the user asked for, resolved on the workstation (no board touched yet)."""

    artifact: Artifact | None  # --artifact DIR; None = each board's target's one matching artifact
    variant: str | None
    models: tuple[LocalFile, ...]
    agent: tuple[LocalFile, ...]
    keep: int = 3
    dry_run: bool = False
    rollback: bool = False
    connect_timeout: float = 30.0
    dependency_cache: Path | None = None
    ort_version: str | None = None  # --ort-version
    # The artifact chosen for each target before any board is touched (commands/deploy.py).
    by_target: Mapping[str, Artifact] = field(default_factory=dict)
    verify: bool = False  # verify even a release that is current and verified already


@dataclass(frozen=True, kw_only=True)
class BoardReport:
    """One board's outcome value: what was done, sent, verified."""

    board: str
    action: str  # "deployed" | "unchanged" | "rolled back" | "planned"
    release_id: str
    previous: str | None
    python: str  # absolute path of the release's interpreter on the board
    files_sent: int = 0
    bytes_sent: int = 0
    files_skipped: int = 0
    bytes_skipped: int = 0
    transfer_seconds: float = 0.0
    seconds: float = 0.0
    verification: Verification | None = None  # None: not verified (a dry run)
    verified_at: str | None = None  # when that verification ran (UTC, ISO 8601)
    verification_recorded: bool = False  # it is the board's record of an earlier run, not run now
    remote_calls: int = 0  # commands and file operations sent to the board after connecting
    pruned: tuple[str, ...] = ()
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step: facts, upload, install...
    plan: BoardPlan | RollbackPlan | None = None  # a dry run's plan

    @property
    def rate(self) -> float:
        """Upload rate in bytes/s (0 when nothing was sent)."""
        return self.bytes_sent / self.transfer_seconds if self.transfer_seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "board": self.board,
            "action": self.action,
            "release_id": self.release_id,
            "previous": self.previous,
            "python": self.python,
            "files_sent": self.files_sent,
            "bytes_sent": self.bytes_sent,
            "files_skipped": self.files_skipped,
            "bytes_skipped": self.bytes_skipped,
            "transfer_seconds": round(self.transfer_seconds, 3),
            "rate_bytes_per_s": round(self.rate),
            "seconds": round(self.seconds, 3),
            "verification": self.verification.as_dict() if self.verification else {},
            "verified_at": self.verified_at,
            "verification_recorded": self.verification_recorded,
            "remote_calls": self.remote_calls,
            "pruned": list(self.pruned),
            "phases": {k: round(v, 3) for k, v in self.phases.items()},
            **({"plan": self.plan.as_dict()} if self.plan else {}),
        }


class TransferView:
    """Per-board progress on stderr: a status line, bytes sent and the rate (rich Progress)."""

    def __init__(self, boards: Sequence[Board], *, enabled: bool) -> None:
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]{task.fields[board]}"),
            BarColumn(bar_width=24),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            transient=False,
            disable=not enabled,
        )
        self.tasks: dict[str, TaskID] = {
            b.name: self.progress.add_task(b.name, board=escape(b.name), status="waiting", total=None)
            for b in boards
        }

    def __enter__(self) -> Self:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def status(self, board: str, text: str, *, log: bool = False) -> None:
        self.progress.update(self.tasks[board], status=escape(text))
        if log or not self.enabled:
            console.print(f"{escape(board)}: {escape(text)}", soft_wrap=True)

    def start_transfer(self, board: str, total: int) -> None:
        self.progress.reset(self.tasks[board], total=total or 1, completed=0 if total else 1)
        self.progress.start_task(self.tasks[board])

    def advance_to(self, board: str, done: int) -> None:
        self.progress.update(self.tasks[board], completed=done)


INSTALL_TIMEOUT = 1800.0
VERIFY_TIMEOUT = 600.0


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def load_artifact_dir(directory: Path) -> Artifact:
    """An artifact given by path (``--artifact DIR``): a manifest.json naming a wheel next to it."""
    manifest_path = Path(directory) / "manifest.json"
    if not manifest_path.is_file():
        raise DeployError(
            f"{directory}: no manifest.json: not an artifact directory",
            hint="point --artifact at artifacts/<target>/<variant>/<version>/",
        )
    try:
        manifest = read_manifest(manifest_path)
    except ManifestError as error:
        raise DeployError(error.message, hint=error.hint) from error
    artifact = Artifact(directory=Path(directory), manifest=manifest)
    if not artifact.wheel_path.is_file():
        raise DeployError(f"{manifest_path} names {manifest.wheel}, which is not in {directory}")
    return artifact


class _Artifacts:
    """Artifacts and their wheel inspection, resolved once per target and shared by board threads."""

    def __init__(self, request: DeployRequest) -> None:
        self.request = request
        self.lock = threading.Lock()
        self.cache: dict[str, tuple[Artifact, WheelInfo, str]] = {}

    def for_board(self, board: Board) -> tuple[Artifact, WheelInfo, str]:
        key = "--artifact" if self.request.artifact else board.target
        with self.lock:
            if key not in self.cache:
                artifact = (
                    self.request.artifact
                    or self.request.by_target.get(board.target)
                    or select_artifact(
                        list_artifacts(),
                        target=board.target,
                        variant=self.request.variant,
                        ort_version=self.request.ort_version,
                        where=str(artifacts_dir()),
                    )
                )
                sha = file_sha256(artifact.wheel_path)
                expected = artifact.manifest.wheel_sha256
                if expected and expected != sha:
                    raise DeployError(
                        f"{artifact.wheel_path}: sha256 {sha[:12]}... differs from the manifest's"
                        f" {expected[:12]}...: the artifact was changed after it was built",
                        hint="rebuild it (orch build) or restore the original wheel",
                    )
                self.cache[key] = (artifact, inspect_wheel(artifact.wheel_path), sha)
            return self.cache[key]


def check_compatible(info: WheelInfo, facts: BoardFacts, compiler_flags: Sequence[str] = ()) -> None:
    problems = compatibility_problems(
        info, arch=facts.arch, glibc=facts.glibc, python_tag=facts.python_tag, board=facts.board
    )
    problems += cpu_problems(compiler_flags, facts)
    if problems:
        raise DeployError(
            f"{facts.board}: {info.path.name} refused, nothing was sent: " + "; ".join(problems),
            hint="build for this board's target (orch build --target ...) or pick another --artifact",
        )


def _upload(session: BoardSession, plan: BoardPlan, layout: Layout, view: TransferView) -> tuple[int, float]:
    """Send every missing content to a temporary name, check its size, rename it into the store."""
    total = plan.bytes_to_send
    if not plan.to_send:
        return 0, 0.0
    session.mkdir_p(layout.store)
    view.start_transfer(plan.board, total)
    view.status(plan.board, f"sending {len(plan.to_send)} files ({total / 1e6:.1f} MB)", log=True)
    done = 0
    start = time.monotonic()
    for item in plan.to_send:
        tmp = posixpath.join(layout.store, f".upload-{item.sha256[:16]}-{secrets.token_hex(4)}")
        base = done

        def progress(sent: int, _size: int, base: int = base) -> None:
            view.advance_to(plan.board, base + sent)

        session.put(item.path, tmp, progress=progress)
        size = session.stat(tmp)
        if size != item.size:
            raise RemoteError(
                f"{plan.board}: upload of {item.path.name} arrived with {size} of {item.size} bytes"
            )
        session.rename(tmp, layout.blob(item.sha256))
        done += item.size
        view.advance_to(plan.board, done)
    return done, time.monotonic() - start


def verify_release(
    session: BoardSession,
    layout: Layout,
    *,
    release_id: str,
    expected_version: str,
    models: Sequence[str],
    workdir_abs: str,
    expected_build_info: str | None = None,
    board: str,
) -> Verification:
    """Run board_side/verify_release.py with the current release's python; DeployError on any mismatch."""
    python = posixpath.join(layout.current, "venv", "bin", "python")
    paths = [posixpath.join(layout.current, "models", name) for name in models]
    code = read_text("verify_release.py")
    result = session.run([python, "-c", code, *paths], timeout=VERIFY_TIMEOUT, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-4:])
        raise DeployError(f"{board}: verification of {release_id} failed (exit {result.exit_code}): {tail}")
    report = parse_verification(lines[-1], where=f"{board}: verification of {release_id}")
    problems = report.problems(
        expected_version=expected_version,
        release_dir=posixpath.join(workdir_abs, "releases", release_id) if workdir_abs else None,
        expected_build_info=expected_build_info,
    )
    if problems:
        raise DeployError(f"{board}: verification of {release_id} failed: " + "; ".join(problems))
    return report


class _Counted:
    """A ``BoardSession`` that counts what it sends to the board (the report's ``remote_calls``:
    an unchanged re-deploy should need one)."""

    def __init__(self, session: BoardSession) -> None:
        self._session = session
        self.board = session.board
        self.label = session.label
        self.calls = 0

    def close(self) -> None:
        self._session.close()

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        stdin: bytes | None = None,
    ) -> CommandResult:
        self.calls += 1
        return self._session.run(argv, timeout=timeout, check=check, stdin=stdin)

    def run_command_line(
        self, command_line: str, *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        self.calls += 1
        return self._session.run_command_line(command_line, timeout=timeout, check=check)

    def run_script(
        self, script: str, args: Sequence[str] = (), *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        self.calls += 1
        return self._session.run_script(script, args, timeout=timeout, check=check)

    def open_stream(self, argv: Sequence[str]) -> Stream:
        self.calls += 1
        return self._session.open_stream(argv)

    def put(
        self, local: Path, remote_path: str, *, progress: Callable[[int, int], None] | None = None
    ) -> None:
        self.calls += 1
        self._session.put(local, remote_path, progress=progress)

    def get(self, remote_path: str, local: Path) -> None:
        self.calls += 1
        self._session.get(remote_path, local)

    def rename(self, src: str, dst: str) -> None:
        self.calls += 1
        self._session.rename(src, dst)

    def stat(self, path: str) -> int | None:
        self.calls += 1
        return self._session.stat(path)

    def mkdir_p(self, path: str) -> None:
        self.calls += 1
        self._session.mkdir_p(path)

    def home(self) -> str:
        self.calls += 1
        return self._session.home()


def record_verified(
    session: BoardSession, layout: Layout, release_id: str, verification: Verification
) -> str:
    """Write the release's ``verified.json``; returns the time recorded."""
    when = _now()
    record = {"release": release_id, "verified_at": when, "verification": verification.as_dict()}
    session.run_script(
        read_text("record_verified.sh"),
        (layout.release(release_id), json.dumps(record, sort_keys=True)),
        timeout=60,
    )
    return when


def recorded_verification(plan: BoardPlan, *, board: str) -> Verification | None:
    """The board's record of this release's verification, or None when it cannot be read (then
    the release is verified again)."""
    record = plan.verified or {}
    try:
        return parse_verification(
            json.dumps(record.get("verification")), where=f"{board}: verified.json of {plan.release_id}"
        )
    except DeployError:
        return None


class _Clock:
    """Seconds spent per deploy step, for the report (where does the time of a deploy go?)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.mark = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.mark
        self.mark = now


def deploy_board(
    board: Board, request: DeployRequest, artifacts: _Artifacts, view: TransferView
) -> BoardReport:
    started = time.monotonic()
    clock = _Clock()
    layout = layout_for(board)
    artifact, info, wheel_sha = artifacts.for_board(board)
    view.status(board.name, "connecting")
    with remote.connect(board, connect_timeout=request.connect_timeout) as connection:
        session = _Counted(connection)
        view.status(board.name, "reading board facts and releases")
        clock.lap("connect")
        survey = read_survey(session, board, layout)
        facts, listing = survey.facts, survey.listing
        check_compatible(info, facts, artifact.manifest.build.compiler_flags or ())  # before any byte is sent
        clock.lap("facts")
        view.status(board.name, f"resolving dependencies for {facts.arch} Python {facts.python_short}")
        deps = resolve_dependencies(
            artifact.wheel_path,
            wheel_sha256=wheel_sha,
            arch=facts.arch,
            glibc=facts.glibc,
            python_version=facts.python_short,
            cache=request.dependency_cache,
        )
        clock.lap("dependencies")
        plan = plan_board(
            board=board,
            facts=facts,
            layout=layout,
            artifact=artifact,
            wheels=wheel_files(artifact.wheel_path, deps),
            models=request.models,
            agent=request.agent,
            store=listing.store,
            listing=listing,
            keep=request.keep,
            created=_now(),
            native=native_files(artifact),
        )
        clock.lap("plan")
        python_abs = posixpath.join(
            listing.workdir_abs or posixpath.join(facts.home, layout.workdir),
            "releases",
            plan.release_id,
            "venv",
            "bin",
            "python",
        )
        files_skipped = len(plan.already_there)
        bytes_skipped = sum(f.size for f in plan.already_there)
        if request.dry_run:
            view.status(
                board.name, f"plan: send {len(plan.to_send)} files ({plan.bytes_to_send / 1e6:.1f} MB)"
            )
            return BoardReport(
                board=board.name,
                action="planned",
                release_id=plan.release_id,
                previous=plan.current,
                python=python_abs,
                plan=plan,
                seconds=time.monotonic() - started,
                files_skipped=files_skipped,
                bytes_skipped=bytes_skipped,
            )
        recorded = recorded_verification(plan, board=board.name) if plan.already_verified else None
        if recorded is not None and not request.verify:
            # Current and verified on this board already: the survey was the only round trip
            # (and pruning, when --keep now keeps fewer releases).
            if plan.prune:
                prune(session, layout, plan.prune)
                clock.lap("prune")
            view.status(board.name, f"unchanged {plan.release_id} (current, verified)", log=True)
            return BoardReport(
                board=board.name,
                action="unchanged",
                release_id=plan.release_id,
                previous=plan.current,
                python=python_abs,
                seconds=time.monotonic() - started,
                verification=recorded,
                verified_at=str((plan.verified or {}).get("verified_at") or "") or None,
                verification_recorded=True,
                remote_calls=session.calls,
                pruned=plan.prune,
                phases=clock.phases,
                files_skipped=files_skipped,
                bytes_skipped=bytes_skipped,
            )
        if plan.free_bytes is not None and plan.space_needed > plan.free_bytes:
            raise DeployError(
                f"{board.name}: not enough disk: the deploy needs about {plan.space_needed / 1e6:.0f} MB,"
                f" {plan.free_bytes / 1e6:.0f} MB are free under {layout.workdir}",
                hint="free space on the board, or lower --keep to drop old releases",
            )
        sent, transfer_seconds = _upload(session, plan, layout, view)
        clock.lap("upload")
        if sent:
            view.status(
                board.name,
                f"sent {sent / 1e6:.1f} MB in {transfer_seconds:.1f} s"
                f" ({sent / max(transfer_seconds, 1e-9) / 1e6:.2f} MB/s)",
                log=True,
            )
        if not plan.release_exists:
            view.status(
                board.name,
                "installing (venv" + ("" if plan.reuse_from else " + pip --no-index") + ")",
                log=True,
            )
            session.run_script(
                read_text("stage_release.sh"),
                (layout.workdir, plan.release_id, *stage_pairs(plan)),
                timeout=600,
            )
            session.run(list(plan.venv_argv), timeout=INSTALL_TIMEOUT)
            if plan.reuse_from:
                view.status(board.name, f"reusing the packages of {plan.reuse_from} (same wheels)", log=True)
                session.run_script(
                    read_text("reuse_packages.sh"),
                    (layout.release(plan.reuse_from), plan.release_dir),
                    timeout=INSTALL_TIMEOUT,
                )
            else:
                session.run(list(plan.install_argv), timeout=INSTALL_TIMEOUT)
            native = plan.release_document.get("native")
            if native:
                # The runner is linked against the C library the release's onnxruntime installed.
                session.run_script(
                    read_text("link_native.sh"),
                    (plan.release_dir, native["library"], SONAME),
                    timeout=VERIFY_TIMEOUT,
                )
            session.run_script(
                read_text("seal_release.sh"),
                (plan.release_dir, json.dumps(plan.release_document, sort_keys=True, default=str)),
                timeout=120,
            )
            clock.lap("install")
        listing = read_listing(session, layout) if not listing.workdir_abs else listing
        verification = _switch_and_verify(
            session,
            layout,
            board=board.name,
            release_id=plan.release_id,
            previous=plan.current,
            expected_version=artifact.ort_version,
            models=sorted(plan.models),
            workdir_abs=listing.workdir_abs,
            expected_build_info=artifact.manifest.build_info,
            view=view,
        )
        verified_at = record_verified(session, layout, plan.release_id, verification)
        clock.lap("verify")
        # The plan already knows what --keep drops once this release is current.
        prune(session, layout, plan.prune)
        pruned = list(plan.prune)
        clock.lap("prune")
        action = "unchanged" if plan.unchanged else "deployed"
        view.status(board.name, f"{action} {plan.release_id}", log=True)
        return BoardReport(
            board=board.name,
            action=action,
            release_id=plan.release_id,
            previous=plan.current,
            python=python_abs,
            files_sent=len(plan.to_send),
            bytes_sent=sent,
            transfer_seconds=transfer_seconds,
            seconds=time.monotonic() - started,
            verification=verification,
            verified_at=verified_at,
            remote_calls=session.calls,
            pruned=tuple(pruned),
            phases=clock.phases,
            files_skipped=files_skipped,
            bytes_skipped=bytes_skipped,
        )


def _switch_and_verify(
    session: BoardSession,
    layout: Layout,
    *,
    board: str,
    release_id: str,
    previous: str | None,
    expected_version: str,
    models: Sequence[str],
    workdir_abs: str,
    expected_build_info: str | None,
    view: TransferView,
) -> Verification:
    if previous != release_id:
        switch_current(session, layout, release_id)
    view.status(board, "verifying on the board")
    try:
        return verify_release(
            session,
            layout,
            release_id=release_id,
            expected_version=expected_version,
            models=models,
            workdir_abs=workdir_abs,
            expected_build_info=expected_build_info,
            board=board,
        )
    except DeployError as error:
        if previous and previous != release_id:
            switch_current(session, layout, previous)
            error.message += f"; switched back to {previous}"
        raise


def _recorded_build_info(release: ReleaseInfo) -> str | None:
    """The build info recorded by the release's copy of its manifest (in release.json), if any.

    A copy that cannot be read leaves the build info unchecked (everything else is verified):
    a rollback is not refused for a release's metadata."""
    document = release.document.get("manifest")
    if document is None:
        return None
    try:
        return Manifest.from_json(document, source=f"{release.path}/release.json").build_info
    except ManifestError:
        return None


def rollback_board(board: Board, request: DeployRequest, view: TransferView) -> BoardReport:
    started = time.monotonic()
    layout = layout_for(board)
    view.status(board.name, "connecting")
    with remote.connect(board, connect_timeout=request.connect_timeout) as session:
        listing: Listing = read_listing(session, layout)
        target: ReleaseInfo = choose_rollback(listing, board=board.name)
        if request.dry_run:
            view.status(board.name, f"plan: {listing.current} -> {target.id}")
            return BoardReport(
                board=board.name,
                action="planned",
                release_id=target.id,
                previous=listing.current,
                python=target.python,
                seconds=time.monotonic() - started,
                plan=RollbackPlan(board=board.name, rollback_from=listing.current, rollback_to=target.id),
            )
        verification = _switch_and_verify(
            session,
            layout,
            board=board.name,
            release_id=target.id,
            previous=listing.current,
            expected_version=target.ort_version,
            models=sorted(target.models),
            workdir_abs=listing.workdir_abs,
            expected_build_info=_recorded_build_info(target),
            view=view,
        )
        verified_at = record_verified(session, layout, target.id, verification)
        view.status(board.name, f"rolled back {listing.current} -> {target.id}", log=True)
        return BoardReport(
            board=board.name,
            action="rolled back",
            release_id=target.id,
            previous=listing.current,
            python=target.python,
            seconds=time.monotonic() - started,
            verification=verification,
            verified_at=verified_at,
        )


def run_deploy(
    boards: Sequence[Board],
    request: DeployRequest,
    *,
    parallel: int,
    timeout: float | None,
    show_progress: bool | None = None,
) -> FleetResult[BoardReport]:
    """Deploy (or roll back) on every board concurrently; every board's outcome is kept."""
    enabled = console.is_terminal if show_progress is None else show_progress
    artifacts = _Artifacts(request)
    with TransferView(boards, enabled=enabled) as view:
        task: Callable[[Board], BoardReport]
        if request.rollback:

            def task(board: Board) -> BoardReport:
                return rollback_board(board, request, view)
        else:

            def task(board: Board) -> BoardReport:
                return deploy_board(board, request, artifacts, view)

        result = run_on_boards(
            boards, task, parallel=parallel, timeout=timeout, label="deploy", progress=False
        )
        for name in result.failed:
            view.status(name, "failed")
    return result
