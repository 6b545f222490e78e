"""`orch build --variant pgo --train-on BOARD`: the loop's plan (``--dry-run``) and what the loop
made (``builds.pgo.loop``, run by ``builds.run``) printed: a line, or the JSON document."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from orchestrator.builds.pgo.loop import PgoPlan, PgoResult
from orchestrator.console import console, emit_json


def show_result(result: PgoResult, *, as_json: bool) -> None:
    """The optimised build with its profile: one line, or its record as JSON."""
    optimised = result.optimised
    plan = optimised.plan
    if as_json:
        emit_json(
            {
                "target": plan.target.name,
                "variant": plan.artifact_variant,
                "scope": plan.scope,
                "build_dir": str(optimised.build_dir),
                "duration_s": round(optimised.duration_s, 1),  # the optimised build
                "total_s": round(result.total_s, 1),  # all three steps
                "manifest": result.record,
                "manifest_path": str(optimised.build_dir / "manifest.json"),
            }
        )
        return
    use, coverage = result.use, result.coverage
    console.print(
        f"[green]built[/] {plan.target.name}/{plan.artifact_variant} with the profile of"
        f" {', '.join(t.board for t in result.trainings)} ({result.trainings[0].workload}):"
        f" {use.with_counters} of {use.compiled}"
        f" compiled sources had counters; {coverage.functions_run} of {coverage.functions}"
        f" instrumented functions ran -> {optimised.build_dir}"
    )


def show_dry_run(plan: PgoPlan) -> None:
    """The three steps with the flags of the toolchain's loop (GCC's, or clang's on the sysroot
    route) and the tool that adds the boards' counters up."""
    base, instrumented, request = plan.base, plan.instrumented, plan.request
    flavour, boards = plan.flavour, plan.boards
    train = request.train
    optimise = [*base.compiler_flags, *flavour.optimise_flags("0" * 64)[1:], "-fprofile-use=..."]
    merges = flavour.merges(len(boards))
    merge = f"{flavour.merge_tool(base.target.cross_prefix)} merge" if merges else None
    steps: dict[str, Any] = {
        "instrument": None if train.profile else {"compiler_flags": list(instrumented.compiler_flags)},
        "train": None
        if not boards
        else {
            "boards": [board.name for board in boards],
            "workload": plan.workload,
            "merge": merge,
        },
        "optimise": {"compiler_flags": optimise},
        "profile": str(plan.profile_dir),
        "key_digest": plan.key.digest,
    }
    if request.json:
        emit_json({**base.as_dict(), "profile_guided": steps})
        return
    console.print(f"[bold]orch build plan[/] -- {base.target.name}/{base.variant.name}, profile-guided")
    if boards:
        console.print(f"1. instrumented build: {escape(' '.join(instrumented.compiler_flags))}")
        added_up = f", counters added up with {merge}" if merge else ""
        console.print(
            f"2. training on {', '.join(board.name for board in boards)}: {plan.workload}{added_up}"
        )
    else:
        console.print(f"1-2. the stored profile {train.profile} (checked against this build's key)")
    console.print(f"3. optimised build: {escape(' '.join(optimise))}")
    console.print(f"profile stored in {steps['profile']}")
