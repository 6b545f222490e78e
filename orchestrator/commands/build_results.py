"""What `orch build` prints of what a build made, one function per route: a line with its figures
(and the artifact's footprint), a batch's table, or the JSON document (``--json``). The plans of
a dry run are the build stage's to show (``builds.plan_view``)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from orchestrator.artifacts.store import Manifest
from orchestrator.builds.build_report import CompilerCacheUse, IncrementalBuild
from orchestrator.builds.on_board.run import OnBoardBuild
from orchestrator.builds.queue import BatchResult, engine_label
from orchestrator.builds.run import ContainerBuild, ProfileGuidedBuild, StockWheel
from orchestrator.console import console, emit_json, print_whole
from orchestrator.errors import BuildError, PartialFailure


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
        _show_footprint(result.artifact.manifest)
        _show_gpu(result.artifact.manifest)
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


def _show_gpu(manifest: Manifest) -> None:
    """A CUDA wheel: the GPU code in its provider, the board's GPU libraries it links (from the
    sysroot, not in the wheel) and the pre-flight's GPU verdict, apart from the CPU's."""
    cuda = manifest.build.cuda
    if not cuda:
        return
    code = cuda.get("gpu_code") or {}
    libraries = cuda.get("board_libraries") or {}
    if isinstance(code, dict):
        console.print(
            f"CUDA provider: SASS for {', '.join(code.get('sass', [])) or 'no GPU'} in {code.get('sass_files', 0)}"
            f" cubins, PTX for {', '.join(code.get('ptx', [])) or 'none'}",
            soft_wrap=True,
        )
    if isinstance(libraries, dict):
        linked = ", ".join(
            f"{name} -> {str(path).rsplit('/', 1)[-1]}" for name, path in sorted(libraries.items())
        )
        console.print(
            f"the board's GPU libraries it links (not in the wheel): {escape(linked)}", soft_wrap=True
        )
    verdict = manifest.preflight.gpu_verdict if manifest.preflight else None
    if verdict:
        console.print(f"pre-flight: CPU result matches x86; [yellow]{escape(verdict)}[/]", soft_wrap=True)


def show_stock(stock: StockWheel, *, as_json: bool) -> None:
    """The official wheel fetched: its JSON document, or where it is and its footprint."""
    assert stock.artifact is not None
    if as_json:
        emit_json(stock.as_dict())
        return
    console.print(
        f"[green]stock wheel ready[/] {stock.artifact.wheel_path} (pre-flight ok on {stock.profile.qemu_cpu})"
    )
    _show_footprint(stock.artifact.manifest)


def show_built_on_board(built: OnBoardBuild, *, as_json: bool) -> None:
    """What the board built and the board's compiler cache: a line, or the JSON document."""
    result = built.result
    assert result is not None
    if as_json:
        emit_json(built.as_dict())
        return
    ccache = result.manifest.get("ccache") or {}
    outputs = ", ".join(str(p) for p in result.outputs)
    if result.artifact is not None:
        outputs = str(result.artifact.wheel_path)
    console.print(
        f"[green]built on {result.plan.board}[/] in {result.duration_s / 60:.1f} min -> {outputs}"
        f"  (board's ccache hits {ccache.get('hits', '?')}, misses {ccache.get('misses', '?')})",
        soft_wrap=True,
    )


def show_profile_guided(built: ProfileGuidedBuild, *, as_json: bool) -> None:
    """The optimised build with its profile: one line, or its JSON document."""
    result = built.result
    assert result is not None
    if as_json:
        emit_json(built.as_dict())
        return
    optimised, use, coverage = result.optimised, result.use, result.coverage
    console.print(
        f"[green]built[/] {optimised.plan.target.name}/{optimised.plan.artifact_variant} with the profile of"
        f" {', '.join(t.board for t in result.trainings)} ({result.trainings[0].workload}):"
        f" {use.with_counters} of {use.compiled}"
        f" compiled sources had counters; {coverage.functions_run} of {coverage.functions}"
        f" instrumented functions ran -> {optimised.build_dir}"
    )


def show_batch(result: BatchResult, *, as_json: bool) -> int:
    """Each build's outcome and each engine that failed; the exit code says whether every build,
    some or none succeeded."""
    if as_json:
        emit_json(result.as_dict())
    else:
        _print_batch(result)
    if result.ok:
        return 0
    if any(o.ok for o in result.outcomes):
        return PartialFailure.exit_code
    return BuildError.exit_code


def _print_batch(result: BatchResult) -> None:
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
