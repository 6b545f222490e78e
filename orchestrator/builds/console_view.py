"""``ConsoleView``: the ``BuildView`` (``builds.view``) that shows a build on the terminal while it
runs; ``orch build`` passes it to ``builds.run.run_build``."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from rich.markup import escape

from orchestrator.builds.build_log import Progress
from orchestrator.builds.on_board.plan import OnBoardPlan
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.plan_view import show_build_plan, show_on_board_plan
from orchestrator.console import compile_progress, console


class ConsoleView:
    """``BuildView`` on the console: log lines dim, ninja's steps as a bar (plain lines when stderr
    is not a terminal), the dry run's plan as ``--json`` asks."""

    def __init__(self, *, force_flags: bool, as_json: bool) -> None:
        self.force_flags = force_flags
        self.as_json = as_json

    def log(self, line: str) -> None:
        console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    def note(self, text: str) -> None:
        console.print(text)

    def compile_progress(self) -> AbstractContextManager[Progress]:
        return compile_progress()

    def dry_run_plan(self, plan: BuildPlan) -> None:
        show_build_plan(plan, force_flags=self.force_flags, as_json=self.as_json)

    def on_board_plan(self, plan: OnBoardPlan) -> None:
        show_on_board_plan(plan, as_json=False, brief=True)  # a line before the long steps, --json or not

    def batch_starting(self, builds: Sequence[str], engines: Sequence[str]) -> None:
        console.print(
            f"[bold]{len(builds)} builds on {len(engines)} engines[/] (one build per engine at a time):"
            f" {', '.join(builds)}"
        )
