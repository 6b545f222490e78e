"""Executes deploys and rollbacks on boards, one thread per board (``orchestrator.fleet.parallel``).

Per board, in this order, so that a failure or interruption at any step leaves the previous
verified release current:

0. take the board lock (``orchestrator.deploy.board_lock``: one writer per board, released when
   orch's channel closes), and under it
1. read the board's facts and its releases (one script: ``orchestrator.deploy.survey``) and
   refuse an incompatible wheel *before any byte is sent*;
2. resolve the wheel's dependencies for the board on the workstation (cached);
3. plan (``orchestrator.deploy.plan``): what the store lacks, the release id, the argv lists; a release that
   is current and was verified on the board already is done here (that one round trip);
4. upload the missing contents to temporary names, renamed into ``store/sha256/<hex>``;
5. build the release directory (hard links into the store), venv, ``pip install --no-index``,
   then ``release.json`` (a release without it is never used);
6. verify the release where it lies, with its own interpreter and models (import, version,
   build info, one inference per model), and record the pass in it (``verified.json``);
7. only then switch ``current`` to it atomically (a rename; the board-side script refuses a
   release without ``verified.json``), through the ``SwitchGate`` that a ``--timeout`` or Ctrl-C
   closes before the board is reported;
8. prune to ``--keep`` releases.

A C library build (``--scope library``) takes the same steps with its own branch where a wheel's
differ: no dependencies, no venv or pip (``native_plan``, ``native_steps``), its files checked
for the board's architecture and glibc instead of a wheel's tags, and its native runner running
each model as the verification.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from orchestrator.adapters import ssh
from orchestrator.adapters.signals import watch_signals
from orchestrator.artifacts.dependencies import resolve_dependencies
from orchestrator.artifacts.store import Artifact, ArtifactKind, Manifest, ManifestError
from orchestrator.board import Board
from orchestrator.board_side import read_text
from orchestrator.console import console
from orchestrator.deploy.artifact_choice import ArtifactCache, ArtifactChoice, ChosenWheel, check_compatible
from orchestrator.deploy.board_lock import DEFAULT_LOCK_TIMEOUT, BoardLock, acquire
from orchestrator.deploy.board_steps import (
    Expected,
    install_release,
    now_utc,
    recorded_verification,
    stage_pairs,
    upload,
    verify_and_record,
)
from orchestrator.deploy.counted_session import CountedSession
from orchestrator.deploy.library_choice import ChosenLibrary, check_library_compatible
from orchestrator.deploy.native_plan import plan_native_board
from orchestrator.deploy.native_steps import install_native_release
from orchestrator.deploy.plan import BoardPlan, RollbackPlan, plan_board
from orchestrator.deploy.release_files import (
    NATIVE_AGENT_FILES,
    LocalFile,
    ReleaseFiles,
    native_files,
    wheel_files,
)
from orchestrator.deploy.releases import (
    Layout,
    Listing,
    ReleaseInfo,
    choose_rollback,
    layout_for,
    parse_listing,
    prune,
    read_listing,
    switch_current,
)
from orchestrator.deploy.report import BoardReport, DeployAction
from orchestrator.deploy.survey import Survey, parse_survey, read_survey, survey_args, survey_script
from orchestrator.deploy.switch_gate import KnownCurrent, SwitchGate
from orchestrator.deploy.transfer_view import TransferView
from orchestrator.deploy.verification import Verification
from orchestrator.errors import DeployError, RemoteError
from orchestrator.fleet.parallel import FleetResult, run_on_boards


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
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT  # --lock-timeout: how long to wait for a busy board
    skip_preflight_check: bool = False  # --skip-preflight-check: artifacts without a passed pre-flight too
    kind: ArtifactKind | None = None  # --scope: a wheel or a C library build (None: whichever matches)

    @property
    def choice(self) -> ArtifactChoice:
        return ArtifactChoice(
            artifact=self.artifact,
            by_target=self.by_target,
            variant=self.variant,
            ort_version=self.ort_version,
            skip_preflight_check=self.skip_preflight_check,
            kind=self.kind,
        )


class _Clock:
    """Seconds spent per deploy step, for the report (where does the time of a deploy go?)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.mark = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.mark
        self.mark = now


@dataclass(frozen=True, kw_only=True)
class _BoardRun:
    """One board's deploy under way: what each of its steps needs."""

    board: Board
    request: DeployRequest
    view: TransferView
    session: CountedSession
    layout: Layout
    clock: _Clock
    started: float
    gate: SwitchGate

    def seconds(self) -> float:
        return time.monotonic() - self.started

    def switch(self, release_id: str) -> None:
        """Make a verified release current, unless the board's gate closed (timeout, Ctrl-C)."""
        self.gate.switch(
            self.board.name, release_id, lambda: switch_current(self.session, self.layout, release_id)
        )


def _lock_board(run: _BoardRun, command: str, then: tuple[str, tuple[str, ...]]) -> BoardLock:
    """The board's lock, with ``then`` (a script) run under it; a broken dead holder's lock is said."""
    board, view = run.board.name, run.view
    lock = acquire(
        run.session,
        run.layout.workdir,
        command=command,
        wait=run.request.lock_timeout,
        then=then,
        on_wait=lambda message: view.status(board, message, log=True),
    )
    if lock.broken:
        view.status(board, f"warning: {lock.broken}", log=True)
    result = lock.then
    if result is None or result.exit_code != 0:
        lock.release()
        detail = result.tail() if result else "no result"
        raise RemoteError(f"{board}: reading the board under its lock failed: {detail}")
    return lock


def deploy_board(
    board: Board, request: DeployRequest, artifacts: ArtifactCache, view: TransferView, gate: SwitchGate
) -> BoardReport:
    started = time.monotonic()
    layout = layout_for(board)
    chosen = artifacts.for_board(board)
    view.status(board.name, "connecting")
    with ssh.connect(board, connect_timeout=request.connect_timeout) as connection:
        run = _BoardRun(
            board=board,
            request=request,
            view=view,
            session=CountedSession(connection),
            layout=layout,
            clock=_Clock(),
            started=started,
            gate=gate,
        )
        if request.dry_run:  # reads only: no lock
            plan, listing = _survey_and_plan(run, chosen, read_survey(run.session, board, layout))
            return _with_runner(
                _planned(run, plan, _release_python(plan, listing, layout)), plan, listing, layout
            )
        view.status(board.name, "taking the board lock, reading board facts and releases")
        with _lock_board(run, "deploy", (survey_script(), survey_args(board, layout))) as lock:
            assert lock.then is not None  # _lock_board checked it
            survey = parse_survey(lock.then.stdout, board=board.name, python=board.python)
            gate.seen(board.name, survey.listing.current)
            plan, listing = _survey_and_plan(run, chosen, survey)
            python_abs = _release_python(plan, listing, layout)
            recorded = recorded_verification(plan, board=board.name) if plan.already_verified else None
            if recorded is not None and not request.verify:
                return _with_runner(_unchanged(run, plan, python_abs, recorded), plan, listing, layout)
            report = _install_and_verify(run, plan, listing, chosen.artifact, python_abs)
            return _with_runner(report, plan, listing, layout)


def _with_runner(report: BoardReport, plan: BoardPlan, listing: Listing, layout: Layout) -> BoardReport:
    """A C library build's report names its runner (it has no interpreter); a wheel's is as it was."""
    runner = _release_runner(plan, listing, layout)
    return replace(report, runner=runner) if runner else report


def _survey_and_plan(
    run: _BoardRun, chosen: ChosenWheel | ChosenLibrary, survey: Survey
) -> tuple[BoardPlan, Listing]:
    """With what one round trip read from the board, the wheel is refused before any byte is
    sent when it does not fit; its dependencies are resolved for the board; the plan is made."""
    if isinstance(chosen, ChosenLibrary):
        return _survey_and_plan_native(run, chosen, survey)
    board, view, clock, artifact = run.board, run.view, run.clock, chosen.artifact
    clock.lap("connect")
    facts = survey.facts
    check_compatible(chosen.info, facts, artifact.manifest.build.compiler_flags or ())
    clock.lap("facts")
    view.status(board.name, f"resolving dependencies for {facts.arch} Python {facts.python_short}")
    dependencies = resolve_dependencies(
        artifact.wheel_path,
        wheel_sha256=chosen.sha256,
        arch=facts.arch,
        glibc=facts.glibc,
        python_version=facts.python_short,
        cache=run.request.dependency_cache,
    )
    clock.lap("dependencies")
    files = ReleaseFiles(
        artifact=artifact,
        wheels=wheel_files(artifact.wheel_path, dependencies),
        models=run.request.models,
        agent=run.request.agent,
        native=native_files(artifact),
    )
    plan = plan_board(board, survey, files, keep=run.request.keep, created=now_utc())
    clock.lap("plan")
    return plan, survey.listing


def _survey_and_plan_native(
    run: _BoardRun, chosen: ChosenLibrary, survey: Survey
) -> tuple[BoardPlan, Listing]:
    """A C library build: its files refused before any byte is sent when the board cannot run them
    (architecture, glibc, CPU features); no dependencies to resolve (no Python); the plan."""
    artifact, clock = chosen.artifact, run.clock
    clock.lap("connect")
    check_library_compatible(chosen, survey.facts, artifact.manifest.build.compiler_flags or ())
    clock.lap("facts")
    files = ReleaseFiles(
        artifact=artifact,
        wheels=(),
        models=run.request.models,
        agent=tuple(f for f in run.request.agent if f.path.name in NATIVE_AGENT_FILES),
        native=chosen.files,
    )
    plan = plan_native_board(run.board, survey, files, keep=run.request.keep, created=now_utc())
    clock.lap("plan")
    return plan, survey.listing


def _release_python(plan: BoardPlan, listing: Listing, layout: Layout) -> str | None:
    """The absolute path of the release's interpreter on the board (None: a C library build's
    release, which has none)."""
    if plan.kind == "library":
        return None
    workdir = listing.workdir_abs or posixpath.join(plan.facts.home, layout.workdir)
    return posixpath.join(workdir, "releases", plan.release_id, "venv", "bin", "python")


def _release_runner(plan: BoardPlan, listing: Listing, layout: Layout) -> str | None:
    """The absolute path of a C library build's release's runner on the board (None: a wheel's)."""
    native = plan.release_document.get("native")
    if plan.kind != "library" or not isinstance(native, dict):
        return None
    workdir = listing.workdir_abs or posixpath.join(plan.facts.home, layout.workdir)
    return posixpath.join(workdir, "releases", plan.release_id, str(native["runner"]))


def _planned(run: _BoardRun, plan: BoardPlan, python_abs: str | None) -> BoardReport:
    """A dry run: the plan, nothing done."""
    run.view.status(
        run.board.name, f"plan: send {len(plan.to_send)} files ({plan.bytes_to_send / 1e6:.1f} MB)"
    )
    return BoardReport(
        board=run.board.name,
        action="planned",
        release_id=plan.release_id,
        previous=plan.current,
        python=python_abs,
        plan=plan,
        seconds=run.seconds(),
        files_skipped=len(plan.already_there),
        bytes_skipped=sum(f.size for f in plan.already_there),
    )


def _unchanged(
    run: _BoardRun, plan: BoardPlan, python_abs: str | None, recorded: Verification
) -> BoardReport:
    """Current and verified on this board already: the survey was the only round trip (and
    pruning, when --keep now keeps fewer releases)."""
    if plan.prune:
        prune(run.session, run.layout, plan.prune)
        run.clock.lap("prune")
    run.view.status(run.board.name, f"unchanged {plan.release_id} (current, verified)", log=True)
    return BoardReport(
        board=run.board.name,
        action="unchanged",
        release_id=plan.release_id,
        previous=plan.current,
        python=python_abs,
        seconds=run.seconds(),
        verification=recorded,
        verified_at=plan.verified.verified_at if plan.verified else None,
        verification_recorded=True,
        remote_calls=run.session.calls,
        pruned=plan.prune,
        phases=run.clock.phases,
        files_skipped=len(plan.already_there),
        bytes_skipped=sum(f.size for f in plan.already_there),
    )


def _check_space(board: Board, plan: BoardPlan, layout: Layout) -> None:
    if plan.free_bytes is not None and plan.space_needed > plan.free_bytes:
        raise DeployError(
            f"{board.name}: not enough disk: the deploy needs about {plan.space_needed / 1e6:.0f} MB,"
            f" {plan.free_bytes / 1e6:.0f} MB are free under {layout.workdir}",
            hint="free space on the board, or lower --keep to drop old releases",
        )


def _install_and_verify(
    run: _BoardRun, plan: BoardPlan, listing: Listing, artifact: Artifact, python_abs: str | None
) -> BoardReport:
    """Send what the store lacks, install the release unless it is there, verify it where it lies
    and record the pass, only then switch to it, prune."""
    board, session, layout, view, clock = run.board, run.session, run.layout, run.view, run.clock
    _check_space(board, plan, layout)
    sent, transfer_seconds = upload(session, plan, layout, view)
    clock.lap("upload")
    if sent:
        view.status(
            board.name,
            f"sent {sent / 1e6:.1f} MB in {transfer_seconds:.1f} s"
            f" ({sent / max(transfer_seconds, 1e-9) / 1e6:.2f} MB/s)",
            log=True,
        )
    if not plan.release_exists:
        if plan.kind == "library":
            install_native_release(session, plan, layout, view, stage_args=stage_pairs(plan))
        else:
            install_release(session, plan, layout, view)
        clock.lap("install")
    listing = read_listing(session, layout) if not listing.workdir_abs else listing
    expected = Expected(
        release_id=plan.release_id,
        ort_version=artifact.ort_version,
        models=sorted(plan.models),
        build_info=artifact.manifest.build_info,
        workdir_abs=listing.workdir_abs,
        runner=_native_runner(plan.release_document),
    )
    verification, verified_at = verify_and_record(session, layout, expected, current=plan.current, view=view)
    clock.lap("verify")
    if plan.current != plan.release_id:
        run.switch(plan.release_id)
        clock.lap("switch")
    # The plan already knows what --keep drops once this release is current.
    prune(session, layout, plan.prune)
    clock.lap("prune")
    action: DeployAction = "unchanged" if plan.unchanged else "deployed"
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
        seconds=run.seconds(),
        verification=verification,
        verified_at=verified_at,
        remote_calls=session.calls,
        pruned=plan.prune,
        phases=clock.phases,
        files_skipped=len(plan.already_there),
        bytes_skipped=sum(f.size for f in plan.already_there),
    )


def _native_runner(document: Mapping[str, object]) -> str | None:
    """The runner of a C library build's release (its release.json's ``native.runner``), which
    verifies it; None for a wheel's release (verified by its interpreter)."""
    native = document.get("native")
    if document.get("kind") != "library" or not isinstance(native, dict):
        return None
    runner = native.get("runner")
    return runner if isinstance(runner, str) else None


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


def rollback_board(board: Board, request: DeployRequest, view: TransferView, gate: SwitchGate) -> BoardReport:
    """Under the board lock: the release to go back to is verified where it lies, recorded, and
    only then made current."""
    started = time.monotonic()
    layout = layout_for(board)
    view.status(board.name, "connecting")
    with ssh.connect(board, connect_timeout=request.connect_timeout) as connection:
        session = CountedSession(connection)
        run = _BoardRun(
            board=board,
            request=request,
            view=view,
            session=session,
            layout=layout,
            clock=_Clock(),
            started=started,
            gate=gate,
        )
        if request.dry_run:  # reads only: no lock
            listing = read_listing(session, layout)
            return _rollback_planned(run, listing, choose_rollback(listing, board=board.name))
        with _lock_board(
            run, "deploy --rollback", (read_text("list_releases.sh"), (layout.workdir,))
        ) as lock:
            assert lock.then is not None  # _lock_board checked it
            listing = parse_listing(lock.then.stdout)
            gate.seen(board.name, listing.current)
            target = choose_rollback(listing, board=board.name)
            expected = Expected(
                release_id=target.id,
                ort_version=target.ort_version,
                models=sorted(target.models),
                build_info=_recorded_build_info(target),
                workdir_abs=listing.workdir_abs,
                runner=_native_runner(target.document),
            )
            verification, verified_at = verify_and_record(
                session, layout, expected, current=listing.current, view=view
            )
            run.switch(target.id)
        view.status(board.name, f"rolled back {listing.current} -> {target.id}", log=True)
        runner = _native_runner(target.document)
        return BoardReport(
            board=board.name,
            action="rolled back",
            release_id=target.id,
            previous=listing.current,
            # A C library build's release has no interpreter: its runner instead.
            python=None if runner else target.python,
            runner=posixpath.join(target.path, runner) if runner else None,
            seconds=run.seconds(),
            verification=verification,
            verified_at=verified_at,
            remote_calls=session.calls,
        )


def _rollback_planned(run: _BoardRun, listing: Listing, target: ReleaseInfo) -> BoardReport:
    run.view.status(run.board.name, f"plan: {listing.current} -> {target.id}")
    return BoardReport(
        board=run.board.name,
        action="planned",
        release_id=target.id,
        previous=listing.current,
        python=None if _native_runner(target.document) else target.python,
        seconds=run.seconds(),
        plan=RollbackPlan(board=run.board.name, rollback_from=listing.current, rollback_to=target.id),
    )


@dataclass(frozen=True, kw_only=True)
class DeployResult:
    """Every board's outcome, and what is current on each as this orch knows it once it is done
    (the gates closed: nothing switches any more)."""

    fleet: FleetResult[BoardReport]
    current: Mapping[str, KnownCurrent]


def run_deploy(
    boards: Sequence[Board],
    request: DeployRequest,
    *,
    parallel: int,
    timeout: float | None,
    on_interrupt: Callable[[Mapping[str, KnownCurrent]], None] = lambda _current: None,
) -> DeployResult:
    """Deploy (or roll back) on every board concurrently; every board's outcome is kept. On
    Ctrl-C the gates close first and ``on_interrupt`` hears what is current where."""
    enabled = console.is_terminal
    artifacts = ArtifactCache(request.choice)
    with watch_signals() as signals, TransferView(boards, enabled=enabled) as view:
        gate = SwitchGate(stopped=signals.received)
        task: Callable[[Board], BoardReport]
        if request.rollback:

            def task(board: Board) -> BoardReport:
                return rollback_board(board, request, view, gate)
        else:

            def task(board: Board) -> BoardReport:
                return deploy_board(board, request, artifacts, view, gate)

        try:
            result = run_on_boards(
                boards, task, parallel=parallel, timeout=timeout, label="deploy", progress=False
            )
        except KeyboardInterrupt:
            on_interrupt({board.name: gate.close(board.name) for board in boards})
            raise
        current = {board.name: gate.close(board.name) for board in boards}
        for name in result.failed:
            view.status(name, "failed")
    return DeployResult(fleet=result, current=current)
