"""What `orch build` shows: a build's plan (``--dry-run``, as JSON or for a human), the stock
wheel's plan, the native runner's command, a finished build and its artifact's footprint, and what
the build stage tells while it runs (``ConsoleView``, the ``BuildView`` of ``builds.run``)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from rich.markup import escape

from orchestrator.artifacts.store import Manifest, artifact_dir
from orchestrator.builds.build_log import Progress
from orchestrator.builds.build_report import CompilerCacheUse, IncrementalBuild
from orchestrator.builds.on_board.plan import OnBoardPlan
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.run import ContainerBuild, StockWheel, plan_document
from orchestrator.commands.build_on_board import show_on_board_plan
from orchestrator.console import compile_progress, console, emit_json


def show_plan(plan: BuildPlan, *, force_flags: bool, as_json: bool) -> None:
    """``orch build --dry-run``: the plan as JSON, or for a human."""
    document = plan_document(plan, force_flags=force_flags)
    if as_json:
        emit_json(document)
        return
    _print_plan(plan, document)


def _print_plan(plan: BuildPlan, document: dict[str, Any]) -> None:
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
    if plan.scope == "wheel":
        c.print("[bold]then:[/] " + escape(shlex.join(plan.package_argv)), soft_wrap=True)
        c.print(
            f"[bold]wheel check:[/] aarch64 ELF, GLIBC <= {plan.target.os.glibc}, {plan.target.os.python_tag};"
            f" [bold]pre-flight:[/] QEMU_CPU={plan.target.qemu_cpu}"
        )
        show_runner(document["native_runner"])
    if plan.scope == "library":
        c.print("[bold]then:[/] " + escape(shlex.join(plan.package_argv)), soft_wrap=True)
        c.print(
            f"[bold]check:[/] aarch64 ELF files, GLIBC <= {plan.target.os.glibc}"
            + (f", every symbol version against sysroot {plan.sysroot.name}" if plan.sysroot else "")
        )
        show_runner(document["native_runner"])
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
    if plan.refused:
        c.print(f"[red]running this plan is refused here:[/] {escape(plan.refused)}", soft_wrap=True)


def show_runner(runner: dict[str, Any]) -> None:
    console.print(
        f"[bold]native runner:[/] {escape(runner['source'])} against {escape(runner['header'])}, linked with"
        f" {escape(runner['library'])}:",
        soft_wrap=True,
    )
    console.print("    " + escape(shlex.join(runner["argv"])), soft_wrap=True)


def show_stock_plan(stock: StockWheel, *, as_json: bool) -> None:
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
    show_runner(document["native_runner"])


def show_footprint(manifest: Manifest) -> None:
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


class ConsoleView:
    """``BuildView`` on the console: log lines dim, ninja's steps as a bar (plain lines when stderr
    is not a terminal), the dry run's plan as ``--json`` asks."""

    def __init__(self, *, force_flags: bool, as_json: bool) -> None:
        self.force_flags = force_flags
        self.as_json = as_json

    def log(self, line: str) -> None:
        console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    def note(self, text: str) -> None:
        console.print(text)

    def compile_progress(self) -> AbstractContextManager[Progress]:
        return compile_progress()

    def dry_run_plan(self, plan: BuildPlan) -> None:
        show_plan(plan, force_flags=self.force_flags, as_json=self.as_json)

    def on_board_plan(self, plan: OnBoardPlan) -> None:
        show_on_board_plan(plan, as_json=False, brief=True)  # a line before the long steps, --json or not

    def batch_starting(self, builds: Sequence[str], engines: Sequence[str]) -> None:
        console.print(
            f"[bold]{len(builds)} builds on {len(engines)} engines[/] (one build per engine at a time):"
            f" {', '.join(builds)}"
        )


def show_built(built: ContainerBuild, *, as_json: bool) -> None:
    """A finished build: its JSON document, or a line with its figures and its footprint."""
    plan, result = built.plan, built.result
    assert result is not None
    if as_json:
        emit_json(built.as_dict())
        return
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


def show_stock(stock: StockWheel, *, as_json: bool) -> None:
    """The official wheel fetched: its JSON document, or where it is and its footprint."""
    assert stock.artifact is not None
    if as_json:
        emit_json(stock.as_dict())
        return
    console.print(
        f"[green]stock wheel ready[/] {stock.artifact.wheel_path} (pre-flight ok on {stock.profile.qemu_cpu})"
    )
    show_footprint(stock.artifact.manifest)
