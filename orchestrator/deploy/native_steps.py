"""The board steps of a C library build's release (``native_plan``) that differ from a wheel's:
installing it is staging its files from the store, the SONAME link and sealing (no venv, no pip),
and verifying it is its native runner running each of its models (``native_verification``). The
upload, the verification record, the switch and the pruning are a wheel's (``board_steps``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from orchestrator.adapters.session import BoardSession
from orchestrator.board_side import read_text
from orchestrator.builds.native_runner.plan import SONAME
from orchestrator.deploy.native_verification import native_verification
from orchestrator.deploy.native_verify_command import runner_verify_argv
from orchestrator.deploy.plan import BoardPlan
from orchestrator.deploy.releases import Layout
from orchestrator.deploy.transfer_view import TransferView
from orchestrator.deploy.verification import Verification

# Seconds for the runner's --version, and for each model's one inference (as the wheel's verification).
RUNNER_TIMEOUT = 600.0


def install_native_release(
    session: BoardSession, plan: BoardPlan, layout: Layout, view: TransferView, *, stage_args: Sequence[str]
) -> None:
    """The release directory from the store, the runner made runnable, then its release.json."""
    view.status(plan.board, "installing (the C library and its runner: no venv, no pip)", log=True)
    session.run_script(
        read_text("stage_release.sh"), (layout.workdir, plan.release_id, *stage_args), timeout=600
    )
    native = plan.release_document["native"]
    session.run_script(
        read_text("link_native_library.sh"),
        (plan.release_dir, native["library"], SONAME),
        timeout=RUNNER_TIMEOUT,
    )
    session.run_script(
        read_text("seal_release.sh"),
        (plan.release_dir, json.dumps(plan.release_document, sort_keys=True, default=str)),
        timeout=120,
    )


def run_native_verification(
    session: BoardSession, release_dir: str, runner: str, models: Sequence[str]
) -> Verification:
    """The runner's one inference of each model, by the release's own paths (not through
    ``current``: it is verified before it becomes current); the verification, not yet checked."""
    results = {
        model: session.run(
            list(runner_verify_argv(release_dir, runner, model)), timeout=RUNNER_TIMEOUT, check=False
        )
        for model in models
    }
    return native_verification(results)
