"""What a build's plan looks like to the one who asked for it: the dry run of each route (one build
container, the official wheel, a batch, a build on the board itself, the profile-guided loop),
printed for a human or as ``--json``'s document; one function per route.

The plans themselves are the stage's pure pieces (``builds.plan`` and the route's own); this module
only shows them (``orch build --dry-run``, and ``ConsoleView`` before a long step).
"""

from __future__ import annotations

import shlex
from typing import Any

from rich.markup import escape

from orchestrator.artifacts.store import artifact_dir
from orchestrator.builds.batch import BatchBuild
from orchestrator.builds.on_board.plan import OnBoardPlan
from orchestrator.builds.pgo.loop import PgoPlan
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.queue import engine_label
from orchestrator.builds.run import StockWheel, plan_document
from orchestrator.console import console, emit_json


def show_build_plan(plan: BuildPlan, *, force_flags: bool, as_json: bool) -> None:
    """One build container's plan: the image, the flags and defines, the network it needs, the
    commands and the checks after them."""
    document = plan_document(plan, force_flags=force_flags)
    if as_json:
        emit_json(document)
        return
    c = console
    c.print(
        f"[bold]orch build plan[/] — target [cyan]{plan.target.name}[/], variant [cyan]{plan.variant.name}[/]"
        f" ({escape(plan.variant.description)}), ORT {plan.ort_version}, EP {plan.execution_provider}"
    )
    forced = " (--dependencies fetch)" if plan.dependencies_wanted == "fetch" else ""
    c.print(f"[bold]source:[/] {escape(plan.source.describe())}; dependencies: {plan.dependencies}{forced}")
    c.print(f"[bold]image:[/] {plan.image.tag}  FROM {plan.image.base_image}  ({plan.image.dockerfile})")
    for key, value in plan.image.buildargs:
        c.print(f"    {key}={escape(value)}", soft_wrap=True)
    c.print(f"[bold]toolchain file:[/] {plan.toolchain_file}")
    c.print(f"[bold]compiler flags:[/] {escape(' '.join(plan.compiler_flags)) or '(ORT defaults)'}")
    if plan.linker_flags:
        c.print(f"[bold]linker flags:[/] {escape(' '.join(plan.linker_flags))}")
    c.print("[bold]CMake defines:[/]")
    for key, value in plan.defines:
        c.print(f"    -D{key}={escape(value)}", soft_wrap=True)
    c.print(
        f"[bold]parallel jobs:[/] {plan.parallel}   [bold]ccache volume:[/] {document['ccache_volume'] or 'none'}"
        f"   [bold]network:[/] {plan.network or 'default'}"
    )
    _print_network(plan)
    if plan.cache is not None:
        c.print(
            f"[bold]shared compiler cache:[/] {escape(plan.cache.display)}"
            f"{' (remote only)' if plan.cache.remote_only else ''}, through a relay container on the"
            f" engine's network; the build container's network stays {plan.network or 'default'}"
        )
    _print_commands(plan, document)


def _print_network(plan: BuildPlan) -> None:
    """Whether the build needs the network, and every URL known before it starts."""
    needs = plan.network_needs
    if not needs.needed:
        console.print("[bold]needs the network:[/] no (nothing is downloaded)")
        return
    console.print("[bold]needs the network:[/] yes")
    for download in needs.downloads:
        console.print(f"    {escape(download.what)}: {escape(download.url)}", soft_wrap=True)
    if needs.pending:
        console.print(f"    {escape(needs.pending)}", soft_wrap=True)


def _print_commands(plan: BuildPlan, document: dict[str, Any]) -> None:
    """The build and packaging commands, the checks after them, and the plan's notes."""
    c = console
    c.print("[bold]build command (in the build container):[/]")
    c.print("    " + escape(shlex.join(plan.build_argv)), soft_wrap=True)
    if plan.scope in ("wheel", "library"):
        c.print("[bold]then:[/] " + escape(shlex.join(plan.package_argv)), soft_wrap=True)
    if plan.scope == "wheel":
        c.print(
            f"[bold]wheel check:[/] aarch64 ELF, GLIBC <= {plan.target.os.glibc}, {plan.target.os.python_tag};"
            f" [bold]pre-flight:[/] QEMU_CPU={plan.target.qemu_cpu}"
        )
        _print_runner(document["native_runner"])
    if plan.scope == "library":
        c.print(
            f"[bold]check:[/] aarch64 ELF files, GLIBC <= {plan.target.os.glibc}"
            + (f", every symbol version against sysroot {plan.sysroot.name}" if plan.sysroot else "")
        )
        _print_runner(document["native_runner"])
        where = artifact_dir(plan.target.name, plan.artifact_variant, plan.ort_version, kind="library")
        c.print(
            f"[bold]artifact:[/] {escape(str(where))} (orch deploy --scope library takes it)", soft_wrap=True
        )
    validation = document["flag_validation"]
    if validation["checked"]:
        problems = validation["problems"]
        c.print("[bold]flag validation:[/] " + ("all names known" if not problems else "; ".join(problems)))
    else:
        c.print("[bold]flag validation:[/] against the source tree, before the build starts")
    for note in plan.notes:
        c.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)


def _print_runner(runner: dict[str, Any]) -> None:
    """The native runner's compile command, against the headers and library of the build."""
    console.print(
        f"[bold]native runner:[/] {escape(runner['source'])} against {escape(runner['header'])}, linked with"
        f" {escape(runner['library'])}:",
        soft_wrap=True,
    )
    console.print("    " + escape(shlex.join(runner["argv"])), soft_wrap=True)


def show_stock_plan(stock: StockWheel, *, as_json: bool) -> None:
    """The official wheel's download, its checks, and the native runner built against it."""
    profile = stock.profile
    document = stock.plan_document()
    if as_json:
        emit_json(document)
        return
    console.print(
        f"[bold]orch build plan[/] — target [cyan]{profile.name}[/], variant [cyan]stock[/]:"
        " the official wheel, no build"
    )
    console.print("    " + escape(shlex.join(document["download_argv"])), soft_wrap=True)
    console.print(f"then the wheel check and the pre-flight on QEMU_CPU={profile.qemu_cpu}")
    _print_runner(document["native_runner"])


def show_batch_plan(batch: BatchBuild, *, as_json: bool) -> None:
    """A batch's engines and a line per build (each build's full plan is its own dry run's)."""
    if as_json:
        emit_json(batch.plan_document())
        return
    plans, engines = batch.plans, batch.engines
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


def show_on_board_plan(plan: OnBoardPlan, *, as_json: bool, brief: bool = False) -> None:
    """The build on the board: where, its notes and (unless ``brief``) its command."""
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


def show_profile_guided_plan(plan: PgoPlan, *, as_json: bool) -> None:
    """The loop's three steps with the flags of the toolchain's loop (GCC's, or clang's on the
    sysroot route) and the tool that adds the boards' counters up."""
    base, instrumented, train = plan.base, plan.instrumented, plan.request.train
    flavour, boards = plan.flavour, plan.boards
    optimise = [*base.compiler_flags, *flavour.optimise_flags("0" * 64)[1:], "-fprofile-use=..."]
    merge = f"{flavour.merge_tool(base.target.cross_prefix)} merge" if flavour.merges(len(boards)) else None
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
    if as_json:
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
