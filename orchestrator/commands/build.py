"""`orch build`: cross-compile ONNX Runtime for a target in a Docker build container.

orch build --target rpi4 --variant tuned [--dry-run] [--json]
orch build --target lab --variant stock          # the official wheel, pre-flighted
orch build list [--json]                         # artifacts with their manifests
orch build clean [--target T] [--ccache] [--sources] [--dry-run]   # free the engine's build volumes
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any

from rich.markup import escape
from rich.table import Table

from orchestrator.adapters.engine import Engine
from orchestrator.artifacts.store import list_artifacts
from orchestrator.builds.build_report import CompilerCacheUse, IncrementalBuild
from orchestrator.builds.endpoints import check_docker_host
from orchestrator.builds.execute import BuildResult, ExecuteOptions, execute
from orchestrator.builds.image import base_image_refusal, made_offline
from orchestrator.builds.pgo.loop import refuse_what_cannot_train
from orchestrator.builds.plan import SCOPES, BuildPlan, refused_error
from orchestrator.builds.queue import LOCAL
from orchestrator.builds.release_checks import check_stock_python
from orchestrator.builds.request import (
    BuildRequest,
    PlanContext,
    plan_build,
    read_build_request,
    remote_cache,
)
from orchestrator.builds.routes import DEPENDENCY_CHOICES
from orchestrator.builds.stock import default_version, fetch_stock
from orchestrator.builds.sysroots.store import find_sysroot
from orchestrator.builds.sysroots.target import profile_for_sysroot
from orchestrator.builds.variants import resolve_variant
from orchestrator.builds.workspace import volumes_to_clean
from orchestrator.commands import options
from orchestrator.commands.build_batch import run_batch_command
from orchestrator.commands.build_on_board import run_on_board
from orchestrator.commands.build_pgo import build_profile_guided
from orchestrator.commands.build_show import show_footprint, show_plan, show_stock_plan
from orchestrator.commands.options import add_dry_run_option, add_json_option
from orchestrator.console import compile_progress, console, emit_json, print_whole
from orchestrator.errors import UsageError
from orchestrator.targets import TargetProfile, resolve_target

NAME = "build"
HELP = "cross-compile ONNX Runtime for a target in a Docker build container"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=["list", "clean"],
        help="`list`: built artifacts with their manifests; `clean`: remove this home's build"
        " directories (Docker volumes) on the engine",
    )
    parser.add_argument(
        "--target", "-t", metavar="NAME", help="target profile (lab, rpi4, rpi5, jetson, nano, ...)"
    )
    parser.add_argument(
        "--variant",
        # tuned is what a user building for a board wants: -mcpu for its core, LTO, the inline limit.
        default="tuned",
        metavar="NAME",
        help="stock, default, lto, tuned, the levers xnnpack, nchwc, kleidiai-off, reduced (with --model),"
        " or one of $ORCH_HOME/variants.yaml (default: tuned)",
    )
    parser.add_argument(
        "--ort-source",
        metavar="SRC",
        help="'debian' (offline source package), a git URL[@ref], a local checkout or a source tarball"
        " (default: debian when it carries --ort-version, else upstream git)",
    )
    parser.add_argument(
        "--ort-version",
        metavar="X.Y.Z",
        help="ONNX Runtime version (default: the release orch builds for the target, stock included,"
        " so that an A/B compares one release)",
    )
    parser.add_argument(
        "--cmake-define",
        "-D",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra CMake define, validated against the ORT tree (repeatable)",
    )
    parser.add_argument(
        "--ep", default="cpu", metavar="EP", help="execution provider: cpu, xnnpack, cuda, tensorrt"
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        type=options.onnx_model_file,
        metavar="FILE",
        help="--variant reduced: keep only the kernels this ONNX model needs; --variant pgo: train on"
        " this model (repeatable)",
    )
    _add_engine_options(parser)
    _add_training_options(parser)
    parser.add_argument("--ccache", action="store_true", help="clean: also the compiler cache volumes")
    parser.add_argument("--sources", action="store_true", help="clean: also the ORT source volumes")
    parser.add_argument("--no-preflight", action="store_true", help=argparse.SUPPRESS)
    add_dry_run_option(parser)
    add_json_option(parser)


def _add_training_options(parser: argparse.ArgumentParser) -> None:
    """A profile-guided variant (pgo): where it is trained, or the stored profile it takes."""
    group = parser.add_argument_group("profile-guided builds (--variant pgo)")
    options.add_inventory_option(group)  # type: ignore[arg-type]
    group.add_argument(
        "--train-on",
        metavar="BOARD",
        action="append",
        help="build with counters, run it on this board (its CPU must be the target's), build again"
        " with what they measured; repeat it (or BOARD,BOARD) to add up several boards' counters",
    )
    group.add_argument(
        "--train-runs", type=options.positive_int, default=1, metavar="N", help="training runs (default 1)"
    )
    group.add_argument(
        "--train-inferences",
        type=options.positive_int,
        default=10,
        metavar="N",
        help="a wheel: inferences per training run of each --model (default 10)",
    )
    group.add_argument(
        "--train-threads",
        type=int,
        default=0,
        metavar="N",
        help="a wheel: intra-op threads of the training runs (default 0: onnxruntime's own choice)",
    )
    group.add_argument(
        "--train-shard",
        default="2/80",
        metavar="K/N",
        help="--scope mlas-test: the shard of ORT's MLAS tests the board runs (default 2/80)",
    )
    group.add_argument(
        "--profile",
        type=options.path_arg,
        metavar="DIR",
        help="a profile stored by an earlier --train-on, instead of a training (refused unless it was"
        " measured on this very build)",
    )
    group.add_argument(
        "--force-profile",
        action="store_true",
        help="take a profile trained on a board of another CPU",
    )


def _add_engine_options(parser: argparse.ArgumentParser) -> None:
    """Where and how the build runs: engines, the shared compiler cache, the board's OS, the jobs."""
    parser.add_argument(
        "--docker-host",
        action="append",
        metavar="URL",
        help="build on another Docker engine (e.g. ssh://me@bigbox); repeat it (`local` is this"
        " machine's) to run several builds in parallel, one per engine (default: build.engines of orch.yaml)",
    )
    parser.add_argument(
        "--cache",
        metavar="URL",
        help="shared compiler cache: ccache remote storage on a Redis server, redis://host[:port][/db]"
        " (as seen from the engine's machine; default: build.cache of orch.yaml)",
    )
    parser.add_argument(
        "--remote-cache-only",
        action="store_true",
        help="use only the --cache server, no local ccache volume (ephemeral CI machines)",
    )
    parser.add_argument(
        "--sysroot-from",
        metavar="NAME",
        help="build for the OS of a stored sysroot (`orch sysroot pull --host NAME` first): its glibc,"
        " Python and distribution replace the target profile's; the wheel is checked against it",
    )
    parser.add_argument(
        "--on-board",
        metavar="BOARD",
        help="build on the board itself, over SSH, with its own compiler (for CUDA/TensorRT on a Jetson,"
        " which cannot be cross-compiled here): ORT's tree and dependency sources are sent once, the"
        " board keeps its build tree and compiler cache; what it made comes back (--scope wheel or mlas-test)",
    )
    parser.add_argument(
        "--force-flags", action="store_true", help="build even with unknown CMake/build.py names"
    )
    parser.add_argument(
        "--parallel",
        type=options.positive_int,
        metavar="N",
        help="compile jobs (default: from cores and memory)",
    )
    parser.add_argument(
        "--scope",
        default="wheel",
        choices=list(SCOPES),
        help="wheel (default); library: ORT's C library and orch's native runner, no Python (for a board"
        " whose Python the release cannot target); mlas-test: only MLAS + onnxruntime_mlas_test",
    )
    parser.add_argument(
        "--dependencies",
        default="auto",
        choices=DEPENDENCY_CHOICES,
        help="auto (default): the first route that applies (the board's packages, orch's Debian sources,"
        " else ORT's downloads); fetch: ORT's own FetchContent downloads of cmake/deps.txt (needs the"
        " network, not with --ort-source debian)",
    )


def run(args: argparse.Namespace) -> int:
    if args.action == "list":
        return _list(as_json=args.json)
    if args.action == "clean":
        return _clean(
            CleanRequest(
                target=args.target,
                docker_hosts=tuple(args.docker_host or ()),
                ccache=args.ccache,
                sources=args.sources,
                dry_run=args.dry_run,
                json=args.json,
            )
        )
    request = read_build_request(args)
    if request.on_board:
        if request.is_batch:
            raise UsageError("--on-board builds one target and one variant on one board at a time")
        return run_on_board(request, resolve_target(request.targets[0]), resolve_variant(request.variants[0]))
    for name in request.variants:
        refuse_what_cannot_train(request, resolve_variant(name), request.train)
    if request.is_batch:
        if request.sysroot_from:
            raise UsageError(
                "--sysroot-from builds for one board's OS: one --target, one --variant, one engine at a time",
                hint=f"orch build --target {request.targets[0]} --variant {request.variants[0]}"
                f" --sysroot-from {request.sysroot_from}",
            )
        return run_batch_command(request, remote_cache(request))
    return _build_one(request)


def _build_one(request: BuildRequest) -> int:
    profile = resolve_target(request.targets[0])
    sysroot = None
    if request.sysroot_from:
        profile, sysroot = profile_for_sysroot(profile, find_sysroot(request.sysroot_from))
    variant = resolve_variant(request.variants[0])
    if not variant.build:
        return _stock(request, profile)
    # One engine at most here: the one given or configured, unless it is this machine's.
    engine_url = request.engines[0] if request.engines else LOCAL
    docker_host = None if engine_url == LOCAL else engine_url
    context = PlanContext(docker_host=docker_host, cache=remote_cache(request), sysroot=sysroot)

    # The engine that compiles: the local one, or another machine's (--docker-host), asked for its
    # cores and memory so the job count fits the machine that does the work.
    engine = Engine(docker_host) if docker_host and not request.dry_run else None
    if variant.profile_guided:
        return build_profile_guided(request, profile, variant, context, execute_build=_execute_with_progress)
    plan = plan_build(request, profile, variant, context, engine)
    if request.dry_run:
        show_plan(plan, force_flags=request.force_flags, as_json=request.json)
        _refuse_as_the_real_run(plan, docker_host)
        return 0
    return _execute(request, plan, engine or Engine(), remote=bool(docker_host))


def _refuse_as_the_real_run(plan: BuildPlan, docker_host: str | None) -> None:
    """The dry run ends with the refusal the real run would meet before any download or compile:
    the plan's own (a toolkit the image lacks), then a base image no engine has and orch cannot
    make offline (asked of the engine only then: Debian images are made offline)."""
    refusal = refused_error(plan)
    if refusal is not None:
        raise refusal
    if made_offline(plan):
        return
    engine = Engine(docker_host)
    engine.ping()
    refusal = base_image_refusal(engine, plan, local=Engine() if docker_host else None)
    if refusal is not None:
        raise refusal


def _execute(request: BuildRequest, plan: BuildPlan, engine: Engine, *, remote: bool) -> int:

    refusal = refused_error(plan)
    if refusal is not None:
        raise refusal
    # With --docker-host the workstation's own engine still fetches the source, lends its images
    # and runs the pre-flight (its qemu emulation is the one `orch doctor` checked).
    options = ExecuteOptions(
        local_engine=Engine() if remote else None,
        force_flags=request.force_flags,
        preflight=request.preflight,
    )
    result = _execute_with_progress(plan, engine, options)
    if request.json:
        emit_json(_result_document(plan, engine, result))
        return 0
    where = result.build_dir
    if result.artifact is not None:
        # A C library build's artifact is its directory (runner, lib/, include/): it has no wheel.
        where = result.artifact.directory if result.artifact.kind == "library" else result.artifact.wheel_path
    console.print(
        f"[green]built[/] {plan.target.name}/{plan.artifact_variant} ORT {plan.ort_version} in "
        f"{result.duration_s / 60:.1f} min -> {where}  (ccache hits {result.ccache.hits},"
        f" misses {result.ccache.misses}{_remote_summary(result.ccache)}"
        f"{_incremental_summary(result.incremental)})"
    )
    if result.artifact:
        show_footprint(result.artifact.manifest)
    if result.library is not None:
        library = result.library
        needs = "; ".join(f"{lib}: {versions[-1]}" for lib, versions in library.needs.items() if versions)
        checked = f" (checked against sysroot {library.sysroot})" if library.sysroot else ""
        console.print(
            f"    {library.library} ({library.library_size / 1e6:.1f} MB) and orch-runner; newest needs{checked}:"
            f" {needs or 'none'}",
            soft_wrap=True,
        )
        console.print(
            f"    deploy it: orch deploy --variant {plan.artifact_variant} --scope library --host BOARD",
            soft_wrap=True,
        )
    return 0


def _log(line: str) -> None:
    console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)


def _execute_with_progress(plan: BuildPlan, engine: Engine, options: ExecuteOptions) -> BuildResult:
    """The build, with ninja's steps as a progress bar (plain lines when stderr is not a terminal)."""
    with compile_progress() as on_progress:
        return execute(plan, engine, log=_log, options=replace(options, progress=on_progress))


def _result_document(plan: BuildPlan, engine: Engine, result: BuildResult) -> dict[str, Any]:
    document: dict[str, Any] = {
        "target": plan.target.name,
        "variant": plan.artifact_variant,
        "ort_version": plan.ort_version,
        "scope": plan.scope,
        "engine": engine.label,
        "duration_s": round(result.duration_s, 1),
        "ccache": result.ccache.as_dict(),
        "incremental": result.incremental.as_dict(),
        "log": str(result.log_path),
        "build_dir": str(result.build_dir),
    }
    if result.artifact and result.artifact.kind == "wheel":
        document.update(
            artifact=str(result.artifact.directory),
            wheel=result.artifact.manifest.wheel,
            manifest=result.artifact.manifest.to_json(),
        )
    elif result.record is not None:
        # No wheel (--scope library or mlas-test): the build's record, written beside its output.
        document.update(
            manifest=result.record.to_json(), manifest_path=str(result.build_dir / "manifest.json")
        )
        if result.library is not None:
            document["library"] = result.library.as_dict()
        if result.artifact is not None:  # a C library build, recorded as an artifact deploy takes
            document.update(
                artifact=str(result.artifact.directory), artifact_manifest=result.artifact.manifest.to_json()
            )
    return document


def _incremental_summary(incremental: IncrementalBuild) -> str:
    if incremental.configure != "reused":
        return ""
    steps = incremental.ninja_steps
    return "; build directory configured already" + (
        f", {steps} ninja steps" if steps else ", nothing to compile"
    )


def _remote_summary(ccache: CompilerCacheUse) -> str:
    if ccache.remote_storage is None:
        return ""
    if not ccache.remote_reachable:
        return f"; shared cache {ccache.remote_storage} unreachable"
    stats = ccache.stats
    return (
        f"; local {stats.local_hits if stats else 0} hits, shared cache {stats.remote_hits if stats else 0} hits,"
        f" {stats.remote_misses if stats else 0} misses"
    )


def _stock(request: BuildRequest, profile: TargetProfile) -> int:
    if (
        request.cmake_defines
        or request.ort_source
        or request.docker_hosts_given
        or request.cache_url is not None
        or request.dependencies != "auto"
    ):
        raise UsageError(
            "the stock variant is not built: --cmake-define, --ort-source, --docker-host, --cache and"
            " --dependencies do not apply"
        )
    # The same release as the builds it will be compared with, unless asked otherwise.
    version = request.ort_version or default_version(profile)
    check_stock_python(profile, version)  # before pip, in the dry run as in the real one
    if not request.ort_version:
        console.print(
            f"stock baseline: ONNX Runtime {version}, the release orch builds for {profile.name}"
            " (--ort-version to choose another)"
        )
    if request.dry_run:
        show_stock_plan(profile, version, as_json=request.json)
        return 0

    artifact = fetch_stock(Engine(), profile, version, log=_log, preflight=request.preflight)
    if request.json:
        emit_json(
            {
                "target": profile.name,
                "variant": "stock",
                "artifact": str(artifact.directory),
                "wheel": artifact.manifest.wheel,
                "manifest": artifact.manifest.to_json(),
            }
        )
    else:
        console.print(
            f"[green]stock wheel ready[/] {artifact.wheel_path} (pre-flight ok on {profile.qemu_cpu})"
        )
        show_footprint(artifact.manifest)
    return 0


@dataclass(frozen=True, kw_only=True)
class CleanRequest:
    """``orch build clean``: which build volumes to remove, on which engine."""

    target: str | None
    docker_hosts: tuple[str, ...]
    ccache: bool  # also the compiler cache volumes
    sources: bool  # also the ORT source volumes
    dry_run: bool
    json: bool


def _clean(request: CleanRequest) -> int:

    target = resolve_target(request.target).name if request.target else None
    hosts = request.docker_hosts
    if len(hosts) > 1:
        raise UsageError("orch build clean cleans one engine at a time: give one --docker-host")
    engine = Engine(check_docker_host(hosts[0]) if hosts and hosts[0] != LOCAL else None)
    names = volumes_to_clean(engine, target=target, ccache=request.ccache, sources=request.sources)
    if not request.dry_run:
        for name in names:
            engine.remove_volume(name)
    if request.json:
        emit_json({"engine": engine.label, "dry_run": request.dry_run, "volumes": names})
        return 0
    verb = "would remove" if request.dry_run else "removed"
    if not names:
        console.print(f"nothing to remove on {engine.label}")
    for name in names:
        console.print(f"{verb} volume {name}")
    return 0


def _list(*, as_json: bool) -> int:
    artifacts = list_artifacts()
    if as_json:
        emit_json([{"directory": str(a.directory), **a.manifest.to_json()} for a in artifacts])
        return 0
    if not artifacts:
        console.print("no artifacts yet; build one: orch build --target lab --variant tuned")
        return 0
    table = Table(title="artifacts")
    columns = (
        "target",
        "variant",
        "ORT",
        "wheel",
        "size",
        "pre-flight",
        "built",
        "ccache",
        "C library",
        "runner",
    )
    for column in (*columns, "created"):
        table.add_column(column)
    for a in artifacts:
        size = a.manifest.wheel_size
        duration = a.manifest.build.build_duration_s
        runner = a.manifest.native_runner
        table.add_row(
            a.target,
            a.variant,
            a.ort_version,
            a.manifest.wheel or "none: C library build",
            f"{size / 1e6:.1f} MB" if size else "",
            "ok" if a.manifest.preflight_ok else "[red]failed[/]",
            f"{(duration or 0) / 60:.1f} min",
            _cache_cell(a.manifest.build.ccache),
            # The footprint a product without Python ships: ORT's C library and the runner.
            f"{runner.library_size / 1e6:.1f} MB" if runner and runner.library_size else "-",
            f"{runner.size / 1e3:.0f} kB" if runner and runner.size else "-",
            a.created,
        )
    print_whole(table)  # at 80 columns (a log, a pipe) one block per artifact
    return 0


def _cache_cell(ccache: dict[str, Any] | None) -> str:
    """The compiler cache's work for that build: "812 hits, 3 misses (99.6%)"; "-" when not recorded
    (the official wheel, an older manifest)."""
    if not ccache or ccache.get("hits") is None:
        return "-"
    rate = ccache.get("hit_rate")
    shown = f" ({rate:.1%})" if isinstance(rate, (int, float)) else ""
    return f"{ccache['hits']} hits, {ccache.get('misses', 0)} misses{shown}"
