"""What `orch build --on-board BOARD` shows: the plan the board was read for, and what it built
(the route itself is ``builds.on_board.run``)."""

from __future__ import annotations

from rich.markup import escape

from orchestrator.builds.on_board.plan import OnBoardPlan
from orchestrator.builds.on_board.run import OnBoardBuild
from orchestrator.console import console, emit_json


def show_on_board(built: OnBoardBuild, *, as_json: bool) -> None:
    """The dry run's plan, or the finished build."""
    result = built.result
    if result is None:
        show_on_board_plan(built.plan, as_json=as_json)
        return
    if as_json:
        emit_json(built.as_dict())
        return
    ccache = result.manifest.get("ccache") or {}
    outputs = ", ".join(str(p) for p in result.outputs)
    if result.artifact is not None:
        outputs = str(result.artifact.wheel_path)
    console.print(
        f"[green]built on {result.plan.board}[/] in {result.duration_s / 60:.1f} min -> {outputs}"
        f"  (board's ccache hits {ccache.get('hits', '?')}, misses {ccache.get('misses', '?')})",
        soft_wrap=True,
    )


def show_on_board_plan(plan: OnBoardPlan, *, as_json: bool, brief: bool = False) -> None:
    if as_json:
        emit_json(plan.as_dict())
        return
    console.print(
        f"[bold]build on {plan.board}[/]: {plan.target.name}/{plan.artifact_variant} ORT {plan.ort_version}"
        f" ({plan.scope}) in {escape(plan.paths.build)}",
        soft_wrap=True,
    )
    for note in plan.notes:
        console.print(f"  - {escape(note)}", soft_wrap=True)
    if not brief:
        console.print(f"  command: {escape(plan.as_dict()['command'])}", soft_wrap=True)
