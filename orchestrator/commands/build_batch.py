"""`orch build` with several targets, variants or engines: the batch's plan, run and summary table.

    orch build --target lab --variant tuned,default --docker-host local --docker-host ssh://bigbox

Not a sub-command of its own: ``orch build`` hands over here when it is given more than one
target, variant or engine.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from orchestrator.builds.execute import execute
from orchestrator.builds.queue import (
    LOCAL,
    BatchResult,
    BuildRequest,
    engine_label,
    prepare_shared,
    run_batch,
)
from orchestrator.builds.variants import resolve_variant
from orchestrator.console import PlainProgress, console, emit_json, print_whole
from orchestrator.errors import BuildError, PartialFailure, UsageError
from orchestrator.targets import resolve_target

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine
    from orchestrator.builds.execute import BuildResult
    from orchestrator.builds.plan import BuildPlan

# (args, profile, variant, engine or None for this machine's resources) -> plan
PlanFor = Callable[..., "BuildPlan"]


def run_batch_command(
    args: argparse.Namespace, targets: list[str], variants: list[str], engines: list[str], plan_for: PlanFor
) -> int:
    profiles = {name: resolve_target(name) for name in targets}
    kinds = {name: resolve_variant(name) for name in variants}
    stock = [name for name, variant in kinds.items() if not variant.build]
    if stock:
        raise UsageError(
            f"variant '{stock[0]}' is not built (it fetches the official wheel): build it on its own",
            hint=f"orch build --target {targets[0]} --variant {stock[0]}",
        )
    requests = [BuildRequest(target=t, variant=v) for t in targets for v in variants]
    # Every build's plan for this machine, first: a plan any build refuses stops the batch before it starts.
    plans = {r: plan_for(args, profiles[r.target], kinds[r.variant], None) for r in requests}
    for request, planned in plans.items():
        if planned.refused:
            raise BuildError(f"cannot build {request.name} here: {planned.refused}")
    if args.dry_run:
        return _show(args, plans, engines)

    from orchestrator.adapters.engine import Engine

    lock = threading.Lock()

    def log(line: str) -> None:
        with lock:
            console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    console.print(
        f"[bold]{len(requests)} builds on {len(engines)} engines[/] (one build per engine at a time):"
        f" {', '.join(r.name for r in requests)}"
    )
    local = Engine()
    prepare_shared(list(plans.values()), local, log)

    def connect(url: str) -> Engine:
        return Engine() if url == LOCAL else Engine(url)

    def plan(request: BuildRequest, engine: Engine) -> BuildPlan:
        # Planned for the engine that runs it: its own cores and memory set the job count.
        remote = engine if engine.docker_host and engine.docker_host != local.docker_host else None
        return plan_for(args, profiles[request.target], kinds[request.variant], remote)

    def run_one(
        plan: BuildPlan, engine: Engine, workstation: Engine | None, say: Callable[[str], None]
    ) -> BuildResult:
        return execute(
            plan,
            engine,
            local_engine=workstation,
            force_flags=args.force_flags,
            log=say,
            progress=PlainProgress("compiling (ninja steps)", say=say),
            preflight=not args.no_preflight,
        )

    result = run_batch(requests, engines, connect=connect, plan=plan, execute=run_one, log=log)
    _report(args, result)
    if result.ok:
        return 0
    if any(o.ok for o in result.outcomes):
        return PartialFailure.exit_code
    return BuildError.exit_code


def _show(args: argparse.Namespace, plans: dict[BuildRequest, BuildPlan], engines: list[str]) -> int:
    document: dict[str, Any] = {
        "engines": engines,
        "schedule": "one build per engine at a time, each planned for its engine's cores and memory",
        "builds": [plan.as_dict() for plan in plans.values()],
    }
    if args.json:
        emit_json(document)
        return 0
    console.print(
        f"[bold]orch build plan[/] — {len(plans)} builds on {len(engines)} engines"
        f" ({', '.join(engine_label(e) for e in engines)}), one build per engine at a time"
    )
    for request, plan in plans.items():
        console.print(
            f"  {request.name}: ORT {plan.ort_version}, image {plan.image.tag}, network {plan.network or 'default'}"
            f"{', shared cache ' + escape(plan.cache.display) if plan.cache else ''}",
            soft_wrap=True,
        )
    console.print("`orch build --target T --variant V --dry-run` shows one build's full plan")
    return 0


def _report(args: argparse.Namespace, result: BatchResult) -> None:
    if args.json:
        emit_json(result.as_dict())
        return
    table = Table(title=f"{len(result.outcomes)} builds in {result.duration_s / 60:.1f} min")
    for column in ("build", "engine", "result", "time", "ccache hits/misses", "output"):
        table.add_column(column)
    for outcome in result.outcomes:
        ccache = outcome.result.ccache if outcome.result else {}
        where = ""
        if outcome.result:
            where = str(
                outcome.result.artifact.directory if outcome.result.artifact else outcome.result.build_dir
            )
        table.add_row(
            outcome.request.name,
            engine_label(outcome.engine) if outcome.engine else "-",
            "[green]ok[/]" if outcome.ok else f"[red]failed[/]: {escape(outcome.error or '')}",
            f"{outcome.duration_s / 60:.1f} min" if outcome.engine else "",
            f"{ccache.get('hits')}/{ccache.get('misses')}" if ccache else "",
            escape(where),
        )
    print_whole(table)
    for report in result.engines:
        if not report.ok:
            console.print(
                f"[red]engine {escape(engine_label(report.engine))} failed:[/] {escape(report.error or '')}"
            )
    built = sum(1 for o in result.outcomes if o.ok)
    failed = [o.request.name for o in result.outcomes if not o.ok]
    console.print(
        f"{len(result.outcomes)} builds: {built} ok"
        + (f", {len(failed)} failed ({', '.join(failed)})" if failed else "")
    )
