"""The command that verifies a C library build's release (``native_plan``): its native runner
running one inference of one model, by the release's own paths. Pure: ``native_steps`` runs it on
the board and ``native_verification`` reads what it printed.
"""

from __future__ import annotations

import posixpath

# One inference, no warm-up, no minimum time: the verification's, not a measurement.
VERIFY_OPTIONS = ("--warmup", "0", "--min-runs", "1", "--min-duration", "0", "--max-runs", "1")


def runner_verify_argv(release_dir: str, runner: str, model: str) -> tuple[str, ...]:
    """The runner's command for one model: ``runner`` and the model by the release's own paths
    (``runner`` relative to the release: ``native/orch-runner``; ``model``: a file of models/)."""
    return (
        posixpath.join(release_dir, runner),
        "--model",
        posixpath.join(release_dir, "models", model),
        *VERIFY_OPTIONS,
    )
