"""What a build tells the one who asked for it while it runs: ``BuildView``.

The build stage prints nothing of its own; ``orch build`` passes a view that prints (a progress
bar on a terminal, plain lines in a log) and prints the result the stage returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from orchestrator.builds.build_log import Progress

if TYPE_CHECKING:
    from orchestrator.builds.on_board.plan import OnBoardPlan
    from orchestrator.builds.plan import BuildPlan


class BuildView(Protocol):
    """Told as it happens, in this order: notes and plans first, then log lines and progress."""

    def log(self, line: str) -> None:
        """A line of the build's own log (a build of a batch: prefixed with its name)."""

    def note(self, text: str) -> None:
        """A line for the user about the request (plain text)."""

    def compile_progress(self) -> AbstractContextManager[Progress]:
        """ninja's ``[n/N]`` of one build, for as long as it compiles."""

    def dry_run_plan(self, plan: BuildPlan) -> None:
        """The dry run's plan, shown before the refusals the real run would meet."""

    def on_board_plan(self, plan: OnBoardPlan) -> None:
        """The on-board build's plan, in brief, before its sources are prepared and sent."""

    def batch_starting(self, builds: Sequence[str], engines: Sequence[str]) -> None:
        """A batch's builds (``target/variant``) and engines, before anything is prepared."""
