"""`orch build`'s request: the command line read once into a typed value, and one build planned
from it (for this machine, or for the engine that will run it).

Used by ``orch build`` (one build) and by its batch (several targets, variants or engines).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.builds.build_args import BuildScope
from orchestrator.builds.config import BuildSettings, load_config
from orchestrator.builds.endpoints import RemoteCache, check_docker_host, parse_cache_url
from orchestrator.builds.pgo.training import MlasWorkload, ModelWorkload
from orchestrator.builds.plan import BuildOptions, BuildPlan, machine_resources, make_plan, parse_define
from orchestrator.builds.queue import LOCAL
from orchestrator.builds.reduced_ops import OperatorConfig, operator_config
from orchestrator.builds.routes import DependencyChoice
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.sources.release_packaging import release_variant, say
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.variants import Variant
from orchestrator.common.ort_versions import check_ort_version
from orchestrator.errors import UsageError
from orchestrator.targets import TargetProfile

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine


@dataclass(frozen=True, kw_only=True)
class TrainRequest:
    """The profile-guided options of ``orch build``."""

    boards: tuple[str, ...]  # --train-on (repeated, or comma-separated): their counters add up
    profile: Path | None  # --profile: a stored profile instead of a training
    mlas: MlasWorkload  # --scope mlas-test: the MLAS test shard the board runs, how many times
    models: ModelWorkload  # a wheel: the models the board runs with the instrumented wheel
    force_profile: bool
    inventory: Path | None


def read_train_request(args: argparse.Namespace) -> TrainRequest:
    shard, sep, shards = str(args.train_shard).partition("/")
    if not (sep and shard.isdigit() and shards.isdigit() and 1 <= int(shard) <= int(shards)):
        raise UsageError(
            f"--train-shard {args.train_shard!r} is not K/N with 1 <= K <= N", hint="e.g. --train-shard 2/80"
        )
    return TrainRequest(
        boards=tuple(
            dict.fromkeys(name for given in args.train_on or () for name in given.split(",") if name)
        ),
        profile=args.profile,
        mlas=MlasWorkload(shard=int(shard), shards=int(shards), runs=args.train_runs),
        models=ModelWorkload(
            models=tuple(args.model),
            runs=args.train_runs,
            inferences=args.train_inferences,
            threads=args.train_threads,
            opt_level="all",
        ),
        force_profile=args.force_profile,
        inventory=args.inventory,
    )


@dataclass(frozen=True, kw_only=True)
class BuildRequest:
    """What ``orch build`` (not list or clean) was asked, checked as far as the command line allows."""

    targets: tuple[str, ...]
    variants: tuple[str, ...]
    # --docker-host (repeated), else build.engines of orch.yaml; () = the local one.
    engines: tuple[str, ...]
    docker_host: str | None  # the one engine given on the command line, when it is not `local`
    docker_hosts_given: bool
    ort_source: str | None
    ort_version: str | None
    cmake_defines: tuple[str, ...]
    execution_provider: str
    parallel: int | None
    scope: BuildScope
    dependencies: DependencyChoice  # --dependencies
    cache_url: str | None  # --cache as given
    remote_cache_only: bool
    settings: BuildSettings  # orch.yaml's build section
    sysroot_from: str | None
    on_board: str | None  # --on-board: the board builds ORT itself, over SSH
    # Read once, before any plan (every build of a batch plans with it), so that the dry run
    # refuses a model the real run would refuse.
    operator_config: OperatorConfig | None
    force_flags: bool
    preflight: bool
    dry_run: bool
    json: bool
    train: TrainRequest  # --train-on, --profile and their options (profile-guided variants)

    @property
    def is_batch(self) -> bool:
        return len(self.targets) > 1 or len(self.variants) > 1 or len(self.engines) > 1


@dataclass(frozen=True, kw_only=True)
class PlanContext:
    """Where one build is planned for: the engine's address, the shared cache, the board's OS."""

    docker_host: str | None
    cache: RemoteCache | None
    sysroot: SysrootRef | None = None


def read_build_request(args: argparse.Namespace) -> BuildRequest:
    """The request of ``orch build --target ...``; bad input is refused here, in the order a user
    fixes it (target, numbers, release, engines, cache, names, models)."""
    if not args.target:
        raise UsageError("orch build needs --target", hint="e.g. orch build --target lab --variant tuned")
    if args.parallel is not None and args.parallel < 1:
        raise UsageError("--parallel must be at least 1")
    check_ort_version(args.ort_version)
    settings = load_config().build
    given = _given_engines(args.docker_host or [])
    if args.cache is not None:
        parse_cache_url(args.cache)  # refused before anything else, by the dry run as by the real one
    targets, variants = _names(args.target, "--target"), _names(args.variant, "--variant")
    return BuildRequest(
        targets=targets,
        variants=variants,
        engines=given or settings.engines,
        docker_host=given[0] if len(given) == 1 and given[0] != LOCAL else None,
        docker_hosts_given=bool(given),
        ort_source=args.ort_source,
        ort_version=args.ort_version,
        cmake_defines=tuple(args.cmake_define),
        execution_provider=args.ep,
        parallel=args.parallel,
        scope=args.scope,
        dependencies=args.dependencies,
        cache_url=args.cache,
        remote_cache_only=args.remote_cache_only,
        settings=settings,
        sysroot_from=args.sysroot_from,
        on_board=args.on_board,
        operator_config=operator_config(args.model) if args.model else None,
        force_flags=args.force_flags,
        preflight=not args.no_preflight,
        dry_run=args.dry_run,
        json=args.json,
        train=read_train_request(args),
    )


def _given_engines(given: list[str]) -> tuple[str, ...]:
    """--docker-host as given (repeated: several engines), each checked and named once."""
    for url in given:
        if url != LOCAL:
            check_docker_host(url)
    repeated = sorted({url for url in given if given.count(url) > 1})
    if repeated:
        raise UsageError(f"--docker-host {repeated[0]} is given twice", hint="name each engine once")
    return tuple(given)


def _names(value: str, option: str) -> tuple[str, ...]:
    """``a,b`` -> (a, b) (several targets or variants build as a batch on the engines)."""
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        raise UsageError(
            f"{option} {value!r}: an empty name in the list", hint=f"e.g. {option} tuned,default"
        )
    if len(set(names)) != len(names):
        raise UsageError(f"{option} {value!r} names one twice")
    return tuple(names)


def remote_cache(request: BuildRequest) -> RemoteCache | None:
    """--cache / --remote-cache-only, else the settings file's build.cache / build.remote_cache_only."""
    settings = request.settings
    url = request.cache_url if request.cache_url is not None else settings.cache
    remote_only = request.remote_cache_only or (settings.remote_cache_only and request.cache_url is None)
    if url is None:
        if remote_only:
            raise UsageError(
                "--remote-cache-only needs a shared cache",
                hint="add --cache redis://host:port, or build.cache in orch.yaml",
            )
        return None
    return parse_cache_url(
        url, remote_only=remote_only, option="--cache" if request.cache_url else "build.cache"
    )


def plan_build(
    request: BuildRequest,
    profile: TargetProfile,
    variant: Variant,
    context: PlanContext,
    engine: Engine | None,
) -> BuildPlan:
    """One build's plan; ``engine`` (another machine's) is asked for its cores and memory so that
    the job count fits the machine that does the work (None: this machine's)."""
    source = parse_source(request.ort_source, version=request.ort_version, suite=profile.bootstrap_suite)
    # upstream's options are its release's packaging's: read now (a real build fetches the source first).
    variant = release_variant(variant, source, fetch=None if request.dry_run else say)
    cpus, memory = machine_resources()
    if engine is not None:
        info = engine.info()
        cpus, memory = int(info.get("NCPU", cpus)), int(info.get("MemTotal", memory))
    options = BuildOptions(
        source=source,
        extra_defines=tuple(parse_define(d) for d in request.cmake_defines),
        execution_provider=request.execution_provider,
        parallel=request.parallel,
        cpus=cpus,
        memory_bytes=memory,
        scope=request.scope,
        docker_host=context.docker_host,
        force_flags=request.force_flags,
        cache=context.cache,
        sysroot=context.sysroot,
        # A profile-guided build's --model files are what it trains on, not a kernel selection.
        operator_config=None if variant.profile_guided else request.operator_config,
        dependencies=request.dependencies,
    )
    return make_plan(profile, variant, options)
