"""Run `orch tune`: on every board in parallel, the search of ``tune.Search``, each rung through the
bench executor (``execute.measure_board``: one BenchPlan of the rung's candidates, interleaved in
rounds, each run its own agent process), all rungs into one board document, stored like a bench
run. The board document's ``tune`` (and run.json's, per board) holds the rungs, who was dropped and
why, and the result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.markup import escape

from orchestrator.adapters import ssh as remote
from orchestrator.bench import plan as bench_plan
from orchestrator.bench import tune
from orchestrator.bench.execute import BenchRun, BoardBody, Progress, measure_board, run_bench
from orchestrator.bench.plan import BenchPlan, Combination, ReleaseRef
from orchestrator.bench.results import ResultStore
from orchestrator.board import Board
from orchestrator.deploy import releases


@dataclass(frozen=True, kw_only=True)
class TunePlan:
    """What `orch tune` searches, decided before any board is reached."""

    bench: BenchPlan  # boards, the one model, run lengths, --variant/--ort-version, --quantize
    space: tune.Space
    budget_s: float
    run_guess_s: float  # a run's cost until runs are measured (tune.run_guess)

    def as_dict(self) -> dict[str, Any]:
        return {
            "budget_s": self.budget_s,
            "run_guess_s": self.run_guess_s,
            "threads": list(self.space.threads),
            "opt_levels": list(self.space.opt_levels),
            "eps": list(self.space.eps) or ["cpu", "xnnpack where the release offers it"],
            "int8": self.space.int8,
        }


def tune_body(plan: TunePlan, found: dict[str, dict[str, Any]]) -> BoardBody:
    """What each board runs inside bench_board; ``found`` gets each board's tune record as it grows."""

    def body(board: Board, base: BenchPlan, document: dict[str, Any], progress: Progress) -> None:
        progress(board.name, "connecting")
        with remote.connect(board) as session:
            deployed = [ReleaseRef.from_info(info) for info in releases.list_releases(session, board)]
            chosen = tune.choose_releases(base, deployed, board.name)
            fixed = tune.pinned(base, chosen)
            [model] = bench_plan.pick_models(fixed, chosen, board.name)  # in every release, before any run
            search = tune.Search(
                plan.space.candidates(chosen), budget_s=plan.budget_s, threshold=base.threshold
            )
            record: dict[str, Any] = {
                **search.as_dict(),
                "model": model,
                "stock_note": tune.stock_note(deployed, chosen),
            }
            document["tune"] = found[board.name] = record
            progress(
                board.name,
                f"tuning {escape(model)}: {len(search.candidates)} candidates, budget {tune.fmt_duration(plan.budget_s)}",
            )
            first = tune.FIRST_RUNS * len(search.candidates) * plan.run_guess_s
            if first > plan.budget_s:
                progress(
                    board.name,
                    f"[yellow]warning:[/] the first rung ({tune.FIRST_RUNS} runs of each candidate) is estimated"
                    f" at {tune.fmt_duration(first)}, over the budget: it runs in full",
                )

            def measure(
                rung: tune.Rung, first_round: int
            ) -> dict[Combination, tuple[tuple[float, ...], ...]]:
                cut = f" (of {rung.wanted}: the budget)" if rung.runs < rung.wanted else ""
                progress(
                    board.name,
                    f"[bold]rung {rung.number}[/] ({rung.kind}): {len(rung.candidates)} candidates x"
                    f" {rung.runs} runs{cut}",
                )
                rung_plan = tune.rung_plan(fixed, rung.candidates, rung.runs)
                measure_board(session, board, rung_plan, document, progress, round_offset=first_round - 1)
                return tune.runs_of(document)

            def after(rung: tune.Rung, standings: list[tune.Standing]) -> None:
                for standing in standings:
                    if standing.dropped:
                        progress(
                            board.name,
                            f"  dropped {escape(standing.candidate.label())}: {escape(standing.reason)}",
                        )
                record.update(search.as_dict())

            runs = tune.run_search(search, measure, run_guess_s=plan.run_guess_s, after=after)
            no_stock = record["stock_note"] or "no stock release deployed"
            result = tune.final_result(search, runs, no_stock=no_stock)
            versions = {release.variant: release.ort_version for release in chosen}
            result["command"] = tune.reproduce_command(fixed, board.name, model, result, versions)
            record.update(search.as_dict(), result=result)
            progress(board.name, f"best: [bold]{escape(result['label'])}[/] ({search.stopped})")

    return body


def run_tune(
    plan: TunePlan, *, run_id: str, command: str, store: ResultStore | None = None
) -> tuple[BenchRun, dict[str, dict[str, Any]]]:
    """Tune every board of the plan; stored as a bench run whose run.json says it was a tune."""
    found: dict[str, dict[str, Any]] = {}
    meta: dict[str, Any] = {"kind": "tune", "tune": {"plan": plan.as_dict(), "boards": found}}
    done = run_bench(
        plan.bench,
        run_id=run_id,
        command=command,
        store=store,
        body=tune_body(plan, found),
        meta=meta,
        label="orch tune",
    )
    return done, found
