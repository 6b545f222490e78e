"""What `orch build` shows: a build's plan (``--dry-run``, as JSON or for a human), the stock
wheel's plan, the native runner's command, and the footprint of a finished artifact."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from rich.markup import escape

from orchestrator.artifacts.store import Manifest, artifact_dir
from orchestrator.builds.container_paths import SYSROOT
from orchestrator.builds.flags import flags_of, validate_or_raise
from orchestrator.builds.native_runner.plan import runner_plan
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.stock import plan_dict
from orchestrator.console import console, emit_json
from orchestrator.targets import TargetProfile


def show_plan(plan: BuildPlan, *, force_flags: bool, as_json: bool) -> None:
    """``orch build --dry-run``: the plan as JSON, or for a human."""
    document = plan_document(plan, force_flags=force_flags)
    if as_json:
        emit_json(document)
        return
    _print_plan(plan, document)


def plan_document(plan: BuildPlan, *, force_flags: bool) -> dict[str, Any]:
    """The plan's document, with the toolchain file, the flag validation (a local tree is checked
    now) and, for a wheel or a C library, the native runner's plan."""
    document = plan.as_dict()
    document["toolchain_file_text"] = plan.toolchain_file.read_text()
    validation: dict[str, Any] = {"checked": False}
    if plan.source.kind == "dir":
        # Refused here exactly as the real build would refuse it (--force-flags lists them instead).
        problems = validate_or_raise(
            Path(plan.source.location),
            [k for k, _ in plan.defines],
            flags_of(plan.build_args),
            force=force_flags,
        )
        validation = {"checked": True, "problems": problems}
    document["flag_validation"] = validation
    if plan.scope in ("wheel", "library"):
        sysroot = SYSROOT if plan.toolchain == "clang-sysroot" else None
        runner = runner_plan(plan.target, plan.ort_version, sysroot=sysroot)
        document["native_runner"] = runner.as_dict(beside_library=plan.scope == "library")
    return document


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


def show_stock_plan(profile: TargetProfile, version: str, *, as_json: bool) -> None:
    document = plan_dict(profile, version)
    document["native_runner"] = runner_plan(profile, version).as_dict()
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
