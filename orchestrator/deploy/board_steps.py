"""The steps of a deploy that act on the board, each through a ``BoardSession``: send the missing
contents into the store, install a release (stage, venv, pip or package reuse, native link, seal),
verify it where it lies with its own interpreter and models, and keep the record of a passed
verification (``verified.json``): the switch of ``current`` requires it, and an unchanged
re-deploy stops after one round trip because of it. A C library build's release is installed and
verified by ``native_steps`` instead, and recorded and switched the same way.
"""

from __future__ import annotations

import json
import posixpath
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from orchestrator.adapters.session import BoardSession
from orchestrator.board_side import read_text
from orchestrator.builds.native_runner.plan import SONAME
from orchestrator.deploy.native_steps import run_native_verification
from orchestrator.deploy.plan import BoardPlan
from orchestrator.deploy.releases import Layout
from orchestrator.deploy.transfer_view import TransferView
from orchestrator.deploy.verification import Verification, parse_verification
from orchestrator.errors import DeployError, RemoteError

INSTALL_TIMEOUT = 1800.0
VERIFY_TIMEOUT = 600.0


def now_utc() -> str:
    """The time now, as the reports and records show it (UTC, ISO 8601, seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def upload(session: BoardSession, plan: BoardPlan, layout: Layout, view: TransferView) -> tuple[int, float]:
    """Send every missing content to a temporary name, check its size, rename it into the store;
    returns the bytes sent and the seconds it took."""
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


def install_release(session: BoardSession, plan: BoardPlan, layout: Layout, view: TransferView) -> None:
    """Make the release directory from the store, its venv and packages, then its release.json."""
    view.status(
        plan.board, "installing (venv" + ("" if plan.reuse_from else " + pip --no-index") + ")", log=True
    )
    session.run_script(
        read_text("stage_release.sh"),
        (layout.workdir, plan.release_id, *stage_pairs(plan)),
        timeout=600,
    )
    session.run(list(plan.venv_argv), timeout=INSTALL_TIMEOUT)
    if plan.reuse_from:
        view.status(plan.board, f"reusing the packages of {plan.reuse_from} (same wheels)", log=True)
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


def stage_pairs(plan: BoardPlan) -> list[str]:
    """Flat ``name sha256 name sha256 ...`` args for the staging script (release path <- store blob)."""
    args: list[str] = []
    for f in plan.files:
        args += [f.name, f.sha256]
    return args


@dataclass(frozen=True, kw_only=True)
class Expected:
    """What the release meant to be current must show when verified on the board."""

    release_id: str
    ort_version: str
    models: Sequence[str]  # model file names, under the release's models/
    build_info: str | None  # onnxruntime's build info, when the manifest recorded it
    workdir_abs: str  # the board's workdir as an absolute path ("" when unknown: not checked)
    # A C library build's release: its runner (relative to the release), which verifies it.
    runner: str | None = None

    @property
    def release_dir(self) -> str | None:
        """Where onnxruntime must be imported from."""
        return posixpath.join(self.workdir_abs, "releases", self.release_id) if self.workdir_abs else None


def verify_release(session: BoardSession, layout: Layout, expected: Expected, *, board: str) -> Verification:
    """Run board_side/verify_release.py with the release's own interpreter on the release's own
    models, by the release's path (not through ``current``: it is verified before it becomes
    current); DeployError on any mismatch. A C library build's release: its runner runs each model."""
    release = layout.release(expected.release_id)
    release_id = expected.release_id
    if expected.runner is not None:
        report = run_native_verification(session, release, expected.runner, expected.models)
    else:
        python = posixpath.join(release, "venv", "bin", "python")
        paths = [posixpath.join(release, "models", name) for name in expected.models]
        code = read_text("verify_release.py")
        result = session.run([python, "-c", code, *paths], timeout=VERIFY_TIMEOUT, check=False)
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if not lines:
            tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-4:])
            raise DeployError(
                f"{board}: verification of {release_id} failed (exit {result.exit_code}): {tail}"
            )
        report = parse_verification(lines[-1], where=f"{board}: verification of {release_id}")
    problems = report.problems(
        expected_version=expected.ort_version,
        release_dir=expected.release_dir,
        expected_build_info=expected.build_info,
    )
    if problems:
        raise DeployError(f"{board}: verification of {release_id} failed: " + "; ".join(problems))
    return report


def verify_and_record(
    session: BoardSession, layout: Layout, expected: Expected, *, current: str | None, view: TransferView
) -> tuple[Verification, str]:
    """Verify the release where it lies and record the pass in it (``verified.json``, the
    switch's precondition); returns the verification and when it was recorded. A failed
    verification names the release that stays current: nothing was switched."""
    board = session.board.name
    own = "its native runner, C library and models" if expected.runner else "its own venv and models"
    view.status(board, f"verifying {expected.release_id} on the board ({own})", log=True)
    try:
        verification = verify_release(session, layout, expected, board=board)
    except DeployError as error:
        if current != expected.release_id:
            error.message += f"; {current or 'no release'} stays current (nothing was switched)"
        raise
    return verification, record_verified(session, layout, expected.release_id, verification)


def record_verified(
    session: BoardSession, layout: Layout, release_id: str, verification: Verification
) -> str:
    """Write the release's ``verified.json``; returns the time recorded."""
    when = now_utc()
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
    record = plan.verified.document if plan.verified else {}
    try:
        return parse_verification(
            json.dumps(record.get("verification")), where=f"{board}: verified.json of {plan.release_id}"
        )
    except DeployError:
        return None
