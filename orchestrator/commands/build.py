"""`orch build`: cross-compile ONNX Runtime for a target in a Docker build container.

orch build --target rpi4 --variant tuned [--dry-run] [--json]
orch build --target lab --variant stock          # the official wheel, pre-flighted
orch build list [--json]                         # artifacts with their manifests
orch build clean [--target T] [--ccache] [--sources] [--dry-run]   # free the engine's build volumes

The command reads the request, and the build stage's entry (``builds.run.run_build``) chooses the
route and runs it, showing the running build through ``ConsoleView``; the command prints what it
returns: a dry run's plan (``builds.plan_view``), or what the build made (``build_results``).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape
from rich.table import Table

from orchestrator.artifacts.store import Manifest, list_artifacts
from orchestrator.builds import plan_view
from orchestrator.builds.batch import BatchBuild
from orchestrator.builds.clean import CleanRequest, clean_builds
from orchestrator.builds.console_view import ConsoleView
from orchestrator.builds.on_board.run import OnBoardBuild
from orchestrator.builds.plan import SCOPES
from orchestrator.builds.request import read_build_request
from orchestrator.builds.routes import DEPENDENCY_CHOICES
from orchestrator.builds.run import BuildRun, ContainerBuild, ProfileGuidedBuild, StockWheel, run_build
from orchestrator.commands import build_results, options
from orchestrator.commands.options import add_dry_run_option, add_json_option
from orchestrator.console import console, emit_json, print_whole

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
        help="train on, or take a profile trained on, a board that reports another CPU than the target's",
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
        return _clean(args)
    request = read_build_request(args)
    built = run_build(request, ConsoleView(force_flags=request.force_flags, as_json=request.json))
    return _show(built, as_json=request.json)


def _show(built: BuildRun, *, as_json: bool) -> int:
    """The dry run's plan (one build's was shown before the refusals, by ``ConsoleView``) or what
    the build made; the exit code of a batch says whether some of its builds failed."""
    if isinstance(built, BatchBuild):
        if built.result is None:
            plan_view.show_batch_plan(built, as_json=as_json)
            return 0
        return build_results.show_batch(built.result, as_json=as_json)
    if isinstance(built, OnBoardBuild):
        if built.result is None:
            plan_view.show_on_board_plan(built.plan, as_json=as_json)
        else:
            build_results.show_built_on_board(built, as_json=as_json)
    elif isinstance(built, StockWheel):
        if built.artifact is None:
            plan_view.show_stock_plan(built, as_json=as_json)
        else:
            build_results.show_stock(built, as_json=as_json)
    elif isinstance(built, ProfileGuidedBuild):
        if built.plan is not None:
            plan_view.show_profile_guided_plan(built.plan, as_json=as_json)
        if built.result is not None:
            build_results.show_profile_guided(built, as_json=as_json)
    elif isinstance(built, ContainerBuild) and built.result is not None:
        build_results.show_built(built, as_json=as_json)
    return 0


def _clean(args: argparse.Namespace) -> int:
    cleaned = clean_builds(
        CleanRequest(
            target=args.target,
            docker_hosts=tuple(args.docker_host or ()),
            ccache=args.ccache,
            sources=args.sources,
            dry_run=args.dry_run,
        )
    )
    if args.json:
        emit_json(cleaned.as_dict())
        return 0
    verb = "would remove" if cleaned.dry_run else "removed"
    if not cleaned.volumes:
        console.print(f"nothing to remove on {cleaned.engine}")
    for name in cleaned.volumes:
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
            _preflight_cell(a.manifest),
            f"{(duration or 0) / 60:.1f} min",
            _cache_cell(a.manifest.build.ccache),
            # The footprint a product without Python ships: ORT's C library and the runner.
            f"{runner.library_size / 1e6:.1f} MB" if runner and runner.library_size else "-",
            f"{runner.size / 1e3:.0f} kB" if runner and runner.size else "-",
            a.created,
        )
    print_whole(table)  # at 80 columns (a log, a pipe) one block per artifact
    return 0


def _preflight_cell(manifest: Manifest) -> str:
    """ "ok", "failed", or for a CUDA wheel the CPU's and the GPU's verdicts apart ("CPU ok; GPU path not run")."""
    if not manifest.preflight_ok:
        return "[red]failed[/]"
    gpu = manifest.preflight.gpu_verdict if manifest.preflight else None
    return f"CPU ok; [yellow]{escape(gpu.split(' (')[0])}[/]" if gpu else "ok"


def _cache_cell(ccache: dict[str, Any] | None) -> str:
    """The compiler cache's work for that build: "812 hits, 3 misses (99.6%)"; "-" when not recorded
    (the official wheel, an older manifest)."""
    if not ccache or ccache.get("hits") is None:
        return "-"
    rate = ccache.get("hit_rate")
    shown = f" ({rate:.1%})" if isinstance(rate, (int, float)) else ""
    return f"{ccache['hits']} hits, {ccache.get('misses', 0)} misses{shown}"
