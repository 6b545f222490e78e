"""`orch build` with several targets, variants or engines: the batch's plan, run and summary table.

    orch build --target lab --variant tuned,default --docker-host local --docker-host ssh://bigbox

Not a sub-command of its own: ``orch build`` hands over here when it is given more than one
target, variant or engine.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.markup import escape
from rich.table import Table

from orchestrator.adapters.engine import Engine
from orchestrator.builds.build_log import Log
from orchestrator.builds.endpoints import RemoteCache
from orchestrator.builds.execute import BuildResult, ExecuteOptions, execute
from orchestrator.builds.image import base_image_refusal, made_offline
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.queue import (
    LOCAL,
    BatchResult,
    BatchSteps,
    QueuedBuild,
    engine_label,
    prepare_shared,
    run_batch,
)
from orchestrator.builds.request import BuildRequest, PlanContext, plan_build
from orchestrator.builds.variants import Variant, resolve_variant
from orchestrator.console import PlainProgress, console, emit_json, print_whole
from orchestrator.errors import BuildError, PartialFailure, UsageError
from orchestrator.targets import TargetProfile, resolve_target


def run_batch_command(request: BuildRequest, cache: RemoteCache | None) -> int:
    """Every target x variant of ``request`` on its engines; ``cache`` is the shared compiler cache."""
    engines = list(request.engines) or [LOCAL]
    profiles = {name: resolve_target(name) for name in request.targets}
    kinds = {name: resolve_variant(name) for name in request.variants}
    stock = [name for name, variant in kinds.items() if not variant.build]
    if stock:
        raise UsageError(
            f"variant '{stock[0]}' is not built (it fetches the official wheel): build it on its own",
            hint=f"orch build --target {request.targets[0]} --variant {stock[0]}",
        )
    batch = _Batch(request, PlanContext(docker_host=request.docker_host, cache=cache), profiles, kinds)
    builds = [QueuedBuild(target=t, variant=v) for t in request.targets for v in request.variants]
    # Every build's plan for this machine, first: a plan any build refuses stops the batch before it starts.
    plans = {build: batch.plan(build, None) for build in builds}
    for build, planned in plans.items():
        if planned.refused:
            raise BuildError(f"cannot build {build.name} here: {planned.refused}")
    # Before any source is fetched (a git clone) and in the dry run alike: a registry base image the
    # workstation's engine lacks (it makes every build image of the batch) stops the batch.
    _refuse_missing_base_images(list(plans.values()))
    if request.dry_run:
        return _show(request, plans, engines)
    return _run(batch, plans, engines)


def _refuse_missing_base_images(plans: list[BuildPlan]) -> None:
    """The first build whose base image is a registry image the workstation's engine does not have
    (Debian images are made offline: the engine is asked only when some build needs another)."""
    needing = [plan for plan in plans if not made_offline(plan)]
    if not needing:
        return
    local = Engine()
    local.ping()
    for plan in needing:
        refusal = base_image_refusal(local, plan)
        if refusal is not None:
            raise refusal


class _Batch:
    """The batch's shared request, and each build planned and run from it."""

    def __init__(
        self,
        request: BuildRequest,
        context: PlanContext,
        profiles: dict[str, TargetProfile],
        kinds: dict[str, Variant],
    ) -> None:
        self.request = request
        self.context = context
        self.profiles = profiles
        self.kinds = kinds

    def plan(self, build: QueuedBuild, engine: Engine | None) -> BuildPlan:
        return plan_build(
            self.request, self.profiles[build.target], self.kinds[build.variant], self.context, engine
        )

    def execute(self, plan: BuildPlan, engine: Engine, workstation: Engine | None, say: Log) -> BuildResult:
        options = ExecuteOptions(
            local_engine=workstation,
            force_flags=self.request.force_flags,
            progress=PlainProgress("compiling (ninja steps)", say=say),
            preflight=self.request.preflight,
        )
        return execute(plan, engine, log=say, options=options)


def _run(batch: _Batch, plans: dict[QueuedBuild, BuildPlan], engines: list[str]) -> int:

    lock = threading.Lock()

    def log(line: str) -> None:
        with lock:
            console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    console.print(
        f"[bold]{len(plans)} builds on {len(engines)} engines[/] (one build per engine at a time):"
        f" {', '.join(b.name for b in plans)}"
    )
    local = Engine()
    prepare_shared(list(plans.values()), local, log)

    def connect(url: str) -> Engine:
        return Engine() if url == LOCAL else Engine(url)

    def plan(build: QueuedBuild, engine: Engine) -> BuildPlan:
        # Planned for the engine that runs it: its own cores and memory set the job count.
        remote = engine if engine.docker_host and engine.docker_host != local.docker_host else None
        return batch.plan(build, remote)

    steps = BatchSteps(connect=connect, plan=plan, execute=batch.execute)
    result = run_batch(list(plans), engines, steps, log=log)
    _report(batch.request, result)
    if result.ok:
        return 0
    if any(o.ok for o in result.outcomes):
        return PartialFailure.exit_code
    return BuildError.exit_code


def _show(request: BuildRequest, plans: dict[QueuedBuild, BuildPlan], engines: list[str]) -> int:
    document: dict[str, Any] = {
        "engines": engines,
        "schedule": "one build per engine at a time, each planned for its engine's cores and memory",
        "builds": [plan.as_dict() for plan in plans.values()],
    }
    if request.json:
        emit_json(document)
        return 0
    console.print(
        f"[bold]orch build plan[/] — {len(plans)} builds on {len(engines)} engines"
        f" ({', '.join(engine_label(e) for e in engines)}), one build per engine at a time"
    )
    for build, plan in plans.items():
        console.print(
            f"  {build.name}: ORT {plan.ort_version}, image {plan.image.tag}, network {plan.network or 'default'}"
            f"{', shared cache ' + escape(plan.cache.display) if plan.cache else ''}",
            soft_wrap=True,
        )
    console.print("`orch build --target T --variant V --dry-run` shows one build's full plan")
    return 0


def _report(request: BuildRequest, result: BatchResult) -> None:
    if request.json:
        emit_json(result.as_dict())
        return
    table = Table(title=f"{len(result.outcomes)} builds in {result.duration_s / 60:.1f} min")
    for column in ("build", "engine", "result", "time", "ccache hits/misses", "output"):
        table.add_column(column)
    for outcome in result.outcomes:
        ccache = outcome.result.ccache if outcome.result else None
        where = ""
        if outcome.result:
            where = str(
                outcome.result.artifact.directory if outcome.result.artifact else outcome.result.build_dir
            )
        table.add_row(
            outcome.build.name,
            engine_label(outcome.engine) if outcome.engine else "-",
            "[green]ok[/]" if outcome.ok else f"[red]failed[/]: {escape(outcome.error or '')}",
            f"{outcome.duration_s / 60:.1f} min" if outcome.engine else "",
            f"{ccache.hits}/{ccache.misses}" if ccache is not None and ccache.recorded else "",
            escape(where),
        )
    print_whole(table)
    for report in result.engines:
        if not report.ok:
            console.print(
                f"[red]engine {escape(engine_label(report.engine))} failed:[/] {escape(report.error or '')}"
            )
    built = sum(1 for o in result.outcomes if o.ok)
    failed = [o.build.name for o in result.outcomes if not o.ok]
    console.print(
        f"{len(result.outcomes)} builds: {built} ok"
        + (f", {len(failed)} failed ({', '.join(failed)})" if failed else "")
    )
