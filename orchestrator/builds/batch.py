"""`orch build` with several targets, variants or engines: the batch planned, refused or run.

    orch build --target lab --variant tuned,default --docker-host local --docker-host ssh://bigbox

``run_batch_request`` plans every build for this machine first (a plan any build refuses stops
the batch before it starts, as does a registry base image the workstation's engine lacks), then,
unless it is a dry run, hands the builds to the queue (``builds.queue``): each engine takes the
next build whenever it is free, planned again for that engine's cores and memory.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from orchestrator.adapters.engine import Engine
from orchestrator.builds.build_log import Log
from orchestrator.builds.endpoints import RemoteCache
from orchestrator.builds.execute import BuildResult, ExecuteOptions, execute
from orchestrator.builds.image import base_image_refusal, made_offline
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.queue import LOCAL, BatchResult, BatchSteps, QueuedBuild, prepare_shared, run_batch
from orchestrator.builds.request import BuildRequest, PlanContext, plan_build
from orchestrator.builds.variants import Variant, resolve_variant
from orchestrator.builds.view import BuildView
from orchestrator.console import PlainProgress
from orchestrator.errors import UsageError
from orchestrator.targets import TargetProfile, resolve_target


@dataclass(frozen=True, kw_only=True)
class BatchBuild:
    """Several builds on several engines; ``result`` is None for the dry run."""

    plans: dict[QueuedBuild, BuildPlan]
    engines: tuple[str, ...]
    result: BatchResult | None = None

    def plan_document(self) -> dict[str, Any]:
        """The dry run's document: the engines, the schedule and every build's plan."""
        return {
            "engines": list(self.engines),
            "schedule": "one build per engine at a time, each planned for its engine's cores and memory",
            "builds": [plan.as_dict() for plan in self.plans.values()],
        }


def run_batch_request(request: BuildRequest, cache: RemoteCache | None, view: BuildView) -> BatchBuild:
    """Every target x variant of ``request`` on its engines; ``cache`` is the shared compiler cache."""
    engines = tuple(request.engines) or (LOCAL,)
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
    # Before any source is fetched (a git clone) and in the dry run alike: a registry base image the
    # workstation's engine lacks (it makes every build image of the batch) stops the batch.
    _refuse_missing_base_images(list(plans.values()))
    if request.dry_run:
        return BatchBuild(plans=plans, engines=engines)
    return BatchBuild(plans=plans, engines=engines, result=_run(batch, plans, engines, view))


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


def _run(
    batch: _Batch, plans: dict[QueuedBuild, BuildPlan], engines: tuple[str, ...], view: BuildView
) -> BatchResult:
    lock = threading.Lock()

    def log(line: str) -> None:
        with lock:  # the engines' workers log at once: one line at a time
            view.log(line)

    view.batch_starting([b.name for b in plans], engines)
    local = Engine()
    prepare_shared(list(plans.values()), local, log)

    def connect(url: str) -> Engine:
        return Engine() if url == LOCAL else Engine(url)

    def plan(build: QueuedBuild, engine: Engine) -> BuildPlan:
        # Planned for the engine that runs it: its own cores and memory set the job count.
        remote = engine if engine.docker_host and engine.docker_host != local.docker_host else None
        return batch.plan(build, remote)

    steps = BatchSteps(connect=connect, plan=plan, execute=batch.execute)
    return run_batch(list(plans), list(engines), steps, log=log)
