"""`orch build`: cross-compile ONNX Runtime for a target in a Docker build container.

orch build --target rpi4 --variant tuned [--dry-run] [--json]
orch build --target lab --variant stock          # the official wheel, pre-flighted
orch build list [--json]                         # artifacts with their manifests
orch build clean [--target T] [--ccache] [--sources] [--dry-run]   # free the engine's build volumes
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from orchestrator.artifacts.store import Manifest, list_artifacts
from orchestrator.builds import flags as flag_check
from orchestrator.builds.execute import execute
from orchestrator.builds.native_runner.plan import runner_plan
from orchestrator.builds.plan import (
    BuildOptions,
    BuildPlan,
    machine_resources,
    make_plan,
    parse_define,
)
from orchestrator.builds.queue import LOCAL
from orchestrator.builds.reduced_ops import operator_config
from orchestrator.builds.sources.ort import parse_source
from orchestrator.builds.stock import default_version, fetch_stock, plan_dict
from orchestrator.builds.sysroots.store import find_sysroot
from orchestrator.builds.sysroots.target import profile_for_sysroot
from orchestrator.builds.variants import Variant, resolve_variant
from orchestrator.builds.workspace import volumes_to_clean
from orchestrator.commands import options
from orchestrator.commands.options import add_dry_run_option, add_json_option
from orchestrator.config import BuildSettings, load_config
from orchestrator.console import PlainProgress, console, emit_json, print_whole
from orchestrator.endpoints import RemoteCache, check_docker_host, parse_cache_url
from orchestrator.errors import BuildError, UsageError
from orchestrator.ort_versions import check_ort_version
from orchestrator.targets import TargetProfile, resolve_target

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

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
        type=Path,
        metavar="FILE",
        help="--variant reduced: keep only the kernels this ONNX model needs (repeatable)",
    )
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
        choices=["wheel", "mlas-test"],
        help="wheel (default) or only MLAS + onnxruntime_mlas_test",
    )
    parser.add_argument("--ccache", action="store_true", help="clean: also the compiler cache volumes")
    parser.add_argument("--sources", action="store_true", help="clean: also the ORT source volumes")
    parser.add_argument("--no-preflight", action="store_true", help=argparse.SUPPRESS)
    add_dry_run_option(parser)
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    if args.action == "list":
        return _list(args)
    if args.action == "clean":
        return _clean(args)
    if not args.target:
        raise UsageError("orch build needs --target", hint="e.g. orch build --target lab --variant tuned")
    if args.parallel is not None and args.parallel < 1:
        raise UsageError("--parallel must be at least 1")

    check_ort_version(args.ort_version)
    settings = load_config().build
    engines = _engines(args, settings)
    if args.cache is not None:
        parse_cache_url(args.cache)  # refused before anything else, by the dry run as by the real one
    targets, variants = _names(args.target, "--target"), _names(args.variant, "--variant")
    args.sysroot = None
    # Read once, before any plan (every build of a batch plans with it), so that the dry run
    # refuses a model the real run would refuse.
    args.operator_config = operator_config(args.model) if args.model else None
    if len(targets) > 1 or len(variants) > 1 or len(engines) > 1:
        if args.sysroot_from:
            raise UsageError(
                "--sysroot-from builds for one board's OS: one --target, one --variant, one engine at a time",
                hint=f"orch build --target {targets[0]} --variant {variants[0]} --sysroot-from {args.sysroot_from}",
            )
        args.remote_cache = _remote_cache(args, settings)
        from orchestrator.commands.build_batch import run_batch_command

        return run_batch_command(args, targets, variants, engines or [LOCAL], _plan)
    args.target, args.variant = targets[0], variants[0]
    profile = resolve_target(args.target)
    if args.sysroot_from:
        profile, args.sysroot = profile_for_sysroot(profile, find_sysroot(args.sysroot_from))
    variant = resolve_variant(args.variant)
    if not variant.build:
        return _stock(args, profile)
    if engines and engines[0] != LOCAL:
        args.docker_host = engines[0]
    args.remote_cache = _remote_cache(args, settings)
    from orchestrator.adapters.engine import Engine

    # The engine that compiles: the local one, or another machine's (--docker-host), asked for its
    # cores and memory so the job count fits the machine that does the work.
    engine = Engine(args.docker_host) if args.docker_host and not args.dry_run else None
    plan = _plan(args, profile, variant, engine)
    if args.dry_run:
        _show_plan(plan, args)
        return 0
    return _execute(args, plan, engine or Engine())


def _plan(
    args: argparse.Namespace, profile: TargetProfile, variant: Variant, engine: Engine | None
) -> BuildPlan:
    source = parse_source(args.ort_source, version=args.ort_version, suite=profile.bootstrap_suite)
    cpus, memory = machine_resources()
    if engine is not None:
        info = engine.info()
        cpus, memory = int(info.get("NCPU", cpus)), int(info.get("MemTotal", memory))
    options = BuildOptions(
        source=source,
        extra_defines=tuple(parse_define(d) for d in args.cmake_define),
        execution_provider=args.ep,
        parallel=args.parallel,
        cpus=cpus,
        memory_bytes=memory,
        scope=args.scope,
        docker_host=args.docker_host,
        force_flags=args.force_flags,
        cache=args.remote_cache,
        sysroot=args.sysroot,
        operator_config=args.operator_config,
    )
    return make_plan(profile, variant, options)


def _engines(args: argparse.Namespace, settings: BuildSettings) -> list[str]:
    """The engines to build on: --docker-host (repeated), else build.engines; [] = the local one.
    ``args.docker_host`` is left as the one address given on the command line, or None."""
    given = list(args.docker_host or [])
    for url in given:
        if url != LOCAL:
            check_docker_host(url)
    repeated = sorted({url for url in given if given.count(url) > 1})
    if repeated:
        raise UsageError(f"--docker-host {repeated[0]} is given twice", hint="name each engine once")
    args.docker_host = given[0] if len(given) == 1 and given[0] != LOCAL else None
    args.docker_hosts_given = bool(given)
    return given or list(settings.engines)


def _names(value: str, option: str) -> list[str]:
    """``a,b`` -> [a, b] (several targets or variants build as a batch on the engines)."""
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        raise UsageError(
            f"{option} {value!r}: an empty name in the list", hint=f"e.g. {option} tuned,default"
        )
    if len(set(names)) != len(names):
        raise UsageError(f"{option} {value!r} names one twice")
    return names


def _remote_cache(args: argparse.Namespace, settings: BuildSettings) -> RemoteCache | None:
    """--cache / --remote-cache-only, else the settings file's build.cache / build.remote_cache_only."""
    url = args.cache if args.cache is not None else settings.cache
    remote_only = args.remote_cache_only or (settings.remote_cache_only and args.cache is None)
    if url is None:
        if remote_only:
            raise UsageError(
                "--remote-cache-only needs a shared cache",
                hint="add --cache redis://host:port, or build.cache in orch.yaml",
            )
        return None
    return parse_cache_url(url, remote_only=remote_only, option="--cache" if args.cache else "build.cache")


def _show_plan(plan: BuildPlan, args: argparse.Namespace) -> None:
    document = plan.as_dict()
    document["toolchain_file_text"] = plan.toolchain_file.read_text()
    validation: dict[str, Any] = {"checked": False}
    if plan.source.kind == "dir":
        # Refused here exactly as the real build would refuse it (--force-flags lists them instead).
        problems = flag_check.validate_or_raise(
            Path(plan.source.location),
            [k for k, _ in plan.defines],
            flag_check.flags_of(plan.build_args),
            force=args.force_flags,
        )
        validation = {"checked": True, "problems": problems}
    document["flag_validation"] = validation
    if plan.scope == "wheel":
        document["native_runner"] = runner_plan(plan.target, plan.ort_version).as_dict()
    if args.json:
        emit_json(document)
        return
    c = console
    c.print(
        f"[bold]orch build plan[/] — target [cyan]{plan.target.name}[/], variant [cyan]{plan.variant.name}[/]"
        f" ({escape(plan.variant.description)}), ORT {plan.ort_version}, EP {plan.execution_provider}"
    )
    c.print(f"[bold]source:[/] {escape(plan.source.describe())}; dependencies: {plan.dependencies}")
    c.print(f"[bold]image:[/] {plan.image.tag}  FROM {plan.image.base_image}  ({plan.image.dockerfile})")
    for key, value in plan.image.buildargs:
        c.print(f"    {key}={escape(value)}", soft_wrap=True)
    c.print(f"[bold]toolchain file:[/] {plan.toolchain_file}")
    c.print(f"[bold]compiler flags:[/] {escape(' '.join(plan.compiler_flags)) or '(ORT defaults)'}")
    c.print("[bold]CMake defines:[/]")
    for key, value in plan.defines:
        c.print(f"    -D{key}={escape(value)}", soft_wrap=True)
    c.print(
        f"[bold]parallel jobs:[/] {plan.parallel}   [bold]ccache volume:[/] {document['ccache_volume'] or 'none'}"
        f"   [bold]network:[/] {plan.network or 'default'}"
    )
    if plan.cache is not None:
        c.print(
            f"[bold]shared compiler cache:[/] {escape(plan.cache.display)}"
            f"{' (remote only)' if plan.cache.remote_only else ''}, through a relay container on the"
            f" engine's network; the build container's network stays {plan.network or 'default'}"
        )
    c.print("[bold]build command (in the build container):[/]")
    c.print("    " + escape(shlex.join(plan.build_argv)), soft_wrap=True)
    if plan.scope == "wheel":
        c.print("[bold]then:[/] " + escape(shlex.join(plan.package_argv)), soft_wrap=True)
        c.print(
            f"[bold]wheel check:[/] aarch64 ELF, GLIBC <= {plan.target.os.glibc}, {plan.target.os.python_tag};"
            f" [bold]pre-flight:[/] QEMU_CPU={plan.target.qemu_cpu}"
        )
        _show_runner(document["native_runner"])
    if validation["checked"]:
        problems = validation["problems"]
        c.print("[bold]flag validation:[/] " + ("all names known" if not problems else "; ".join(problems)))
    else:
        c.print("[bold]flag validation:[/] against the source tree, before the build starts")
    for note in plan.notes:
        c.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    if plan.refused:
        c.print(f"[red]running this plan is refused here:[/] {escape(plan.refused)}", soft_wrap=True)


def _show_runner(runner: dict[str, Any]) -> None:
    console.print(
        f"[bold]native runner:[/] {escape(runner['source'])} against {escape(runner['header'])}, linked with"
        f" {escape(runner['library'])}:",
        soft_wrap=True,
    )
    console.print("    " + escape(shlex.join(runner["argv"])), soft_wrap=True)


def _execute(args: argparse.Namespace, plan: BuildPlan, engine: Engine) -> int:
    from orchestrator.adapters.engine import Engine  # the docker SDK costs start-up time: loaded when used

    if plan.refused:
        raise BuildError(
            f"cannot build {plan.target.name} with --ep {plan.execution_provider} here: {plan.refused}",
            hint="`--dry-run` shows the exact build.py arguments for an image that has the toolkit",
        )
    # With --docker-host the workstation's own engine still fetches the source, lends its images
    # and runs the pre-flight (its qemu emulation is the one `orch doctor` checked).
    local_engine = Engine() if args.docker_host else None

    def log(line: str) -> None:
        console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    plain = None if console.is_terminal else PlainProgress("compiling (ninja steps)")
    with Progress(
        TextColumn("[bold]compiling"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=plain is not None,
    ) as progress:
        task = progress.add_task("compile", total=None)

        def on_progress(done: int, total: int) -> None:
            if plain is not None:
                plain(done, total)
            else:
                progress.update(task, completed=done, total=total)

        result = execute(
            plan,
            engine,
            local_engine=local_engine,
            force_flags=args.force_flags,
            log=log,
            progress=on_progress,
            preflight=not args.no_preflight,
        )
    document: dict[str, Any] = {
        "target": plan.target.name,
        "variant": plan.artifact_variant,
        "ort_version": plan.ort_version,
        "scope": plan.scope,
        "engine": engine.label,
        "duration_s": round(result.duration_s, 1),
        "ccache": result.ccache,
        "incremental": result.incremental,
        "log": str(result.log_path),
        "build_dir": str(result.build_dir),
    }
    if result.artifact:
        document.update(
            artifact=str(result.artifact.directory),
            wheel=result.artifact.manifest.wheel,
            manifest=result.artifact.manifest.to_json(),
        )
    if args.json:
        emit_json(document)
    else:
        where = result.artifact.wheel_path if result.artifact else result.build_dir
        console.print(
            f"[green]built[/] {plan.target.name}/{plan.artifact_variant} ORT {plan.ort_version} in "
            f"{result.duration_s / 60:.1f} min -> {where}  (ccache hits {result.ccache.get('hits')},"
            f" misses {result.ccache.get('misses')}{_remote_summary(result.ccache)}"
            f"{_incremental_summary(result.incremental)})"
        )
        if result.artifact:
            _show_footprint(result.artifact.manifest)
    return 0


def _incremental_summary(incremental: dict[str, Any]) -> str:
    if incremental.get("configure") != "reused":
        return ""
    steps = incremental.get("ninja_steps", 0)
    return "; build directory configured already" + (
        f", {steps} ninja steps" if steps else ", nothing to compile"
    )


def _remote_summary(ccache: dict[str, Any]) -> str:
    if "remote_storage" not in ccache:
        return ""
    if not ccache.get("remote_reachable"):
        return f"; shared cache {ccache['remote_storage']} unreachable"
    return (
        f"; local {ccache.get('local_hits', 0)} hits, shared cache {ccache.get('remote_hits', 0)} hits,"
        f" {ccache.get('remote_misses', 0)} misses"
    )


def _show_footprint(manifest: Manifest) -> None:
    """The C library's size (what `reduced` or `lto` builds change) and the native runner's."""
    runner = manifest.native_runner
    if runner is None:
        return
    library = (
        f"{runner.library} {runner.library_size / 1e6:.1f} MB" if runner.library_size else "no C library"
    )
    made = (
        f"native runner {runner.size / 1e3:.0f} kB" if runner.size else f"no native runner: {runner.skipped}"
    )
    console.print(f"footprint: {escape(library)}; {escape(made)}", soft_wrap=True)


def _stock(args: argparse.Namespace, profile: TargetProfile) -> int:
    if args.cmake_define or args.ort_source or args.docker_hosts_given or args.cache is not None:
        raise UsageError(
            "the stock variant is not built: --cmake-define, --ort-source, --docker-host and --cache"
            " do not apply"
        )
    # The same release as the builds it will be compared with, unless asked otherwise.
    version = args.ort_version or default_version(profile)
    if not args.ort_version:
        console.print(
            f"stock baseline: ONNX Runtime {version}, the release orch builds for {profile.name}"
            " (--ort-version to choose another)"
        )
    if args.dry_run:
        document = plan_dict(profile, version)
        document["native_runner"] = runner_plan(profile, version).as_dict()
        if args.json:
            emit_json(document)
        else:
            console.print(
                f"[bold]orch build plan[/] — target [cyan]{profile.name}[/], variant [cyan]stock[/]:"
                " the official wheel, no build"
            )
            console.print("    " + escape(shlex.join(document["download_argv"])), soft_wrap=True)
            console.print(f"then the wheel check and the pre-flight on QEMU_CPU={profile.qemu_cpu}")
            _show_runner(document["native_runner"])
        return 0

    def log(line: str) -> None:
        console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    from orchestrator.adapters.engine import Engine

    artifact = fetch_stock(Engine(), profile, version, root=None, log=log, preflight=not args.no_preflight)
    if args.json:
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
        _show_footprint(artifact.manifest)
    return 0


def _clean(args: argparse.Namespace) -> int:
    from orchestrator.adapters.engine import Engine

    target = resolve_target(args.target).name if args.target else None
    hosts = args.docker_host or []
    if len(hosts) > 1:
        raise UsageError("orch build clean cleans one engine at a time: give one --docker-host")
    engine = Engine(check_docker_host(hosts[0]) if hosts and hosts[0] != LOCAL else None)
    names = volumes_to_clean(engine, target=target, ccache=args.ccache, sources=args.sources)
    if not args.dry_run:
        for name in names:
            engine.remove_volume(name)
    if args.json:
        emit_json({"engine": engine.label, "dry_run": args.dry_run, "volumes": names})
        return 0
    verb = "would remove" if args.dry_run else "removed"
    if not names:
        console.print(f"nothing to remove on {engine.label}")
    for name in names:
        console.print(f"{verb} volume {name}")
    return 0


def _list(args: argparse.Namespace) -> int:

    artifacts = list_artifacts()
    if args.json:
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
            a.manifest.wheel,
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
