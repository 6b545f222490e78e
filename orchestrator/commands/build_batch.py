"""What `orch build` shows of a batch (several targets, variants or engines): the dry run's plans,
or the summary table of what each engine built (the batch itself is ``builds.batch``)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from orchestrator.builds.batch import BatchBuild
from orchestrator.builds.queue import BatchResult, engine_label
from orchestrator.console import console, emit_json, print_whole
from orchestrator.errors import BuildError, PartialFailure


def show_batch(batch: BatchBuild, *, as_json: bool) -> int:
    """The dry run's plans, or the batch's outcomes; the exit code says whether every build, some
    or none succeeded."""
    if batch.result is None:
        _show_plans(batch, as_json=as_json)
        return 0
    result = batch.result
    _report(result, as_json=as_json)
    if result.ok:
        return 0
    if any(o.ok for o in result.outcomes):
        return PartialFailure.exit_code
    return BuildError.exit_code


def _show_plans(batch: BatchBuild, *, as_json: bool) -> None:
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


def _report(result: BatchResult, *, as_json: bool) -> None:
    if as_json:
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
