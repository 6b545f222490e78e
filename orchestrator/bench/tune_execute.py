"""Run `orch tune`: on every board in parallel, the search of ``tune.Search``, each rung through the
bench executor (``execute.measure_board``: one BenchPlan of the rung's candidates, interleaved in
rounds, each run its own agent process), all rungs into one board document, stored like a bench
run. The board document's ``tune`` (and run.json's, per board) holds the rungs, who was dropped and
why, and the result."""

from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape

from orchestrator.adapters import ssh
from orchestrator.adapters.session import BoardSession
from orchestrator.bench import tune, tune_result, tune_space
from orchestrator.bench.board_document import BoardDocument
from orchestrator.bench.execute import (
    BenchRun,
    BoardBody,
    Progress,
    RunKind,
    board_locked,
    measure_board,
    run_bench,
)
from orchestrator.bench.plan import BenchPlan, Combination, ReleaseRef
from orchestrator.bench.records import TunePlanRecord, TuneRecord
from orchestrator.bench.results import ResultStore
from orchestrator.bench.steps import pick_models
from orchestrator.board import Board
from orchestrator.console import duration_text
from orchestrator.deploy import releases


@dataclass(frozen=True, kw_only=True)
class TunePlan:
    """What `orch tune` searches, decided before any board is reached."""

    bench: BenchPlan  # boards, the one model, run lengths, --variant/--ort-version, --quantize
    space: tune_space.Space
    budget_s: float
    run_guess_s: float  # a run's cost until runs are measured (tune.run_guess)

    def as_dict(self) -> TunePlanRecord:
        return {
            "budget_s": self.budget_s,
            "run_guess_s": self.run_guess_s,
            "threads": list(self.space.threads),
            "opt_levels": list(self.space.opt_levels),
            "eps": list(self.space.eps) or ["cpu", "xnnpack where the release offers it"],
            "int8": self.space.int8,
        }


def tune_body(plan: TunePlan, found: dict[str, TuneRecord]) -> BoardBody:
    """What each board runs inside a run; ``found`` gets each board's tune record as it grows."""

    def body(board: Board, base: BenchPlan, document: BoardDocument, progress: Progress) -> None:
        progress(board.name, "connecting")
        with ssh.connect(board) as session, board_locked(session, base, "tune", progress):
            _BoardTune(plan=plan, session=session, document=document, progress=progress).run(base, found)

    return body


@dataclass(frozen=True, kw_only=True)
class _BoardTune:
    """The search on one board: its releases and model, each rung measured into the board document."""

    plan: TunePlan
    session: BoardSession
    document: BoardDocument
    progress: Progress

    def say(self, message: str) -> None:
        self.progress(self.session.board.name, message)

    def run(self, base: BenchPlan, found: dict[str, TuneRecord]) -> None:
        name = self.session.board.name
        deployed = [
            ReleaseRef.from_info(info) for info in releases.list_releases(self.session, self.session.board)
        ]
        chosen = tune_space.choose_releases(base, deployed, name)
        fixed = tune_space.pinned(base, chosen)
        [model] = pick_models(fixed, chosen, name)  # in every release, before any run
        search = tune.Search(
            self.plan.space.candidates(chosen), budget_s=self.plan.budget_s, threshold=base.threshold
        )
        record = search.as_dict()
        record["model"] = model
        record["stock_note"] = tune_space.stock_note(deployed, chosen)
        self.document.tune = found[name] = record
        self._announce(model, search)

        def measure(rung: tune.Rung, first_round: int) -> dict[Combination, tuple[tuple[float, ...], ...]]:
            return self._measure(fixed, rung, first_round)

        def after(rung: tune.Rung, standings: list[tune.Standing]) -> None:
            for standing in standings:
                if standing.dropped:
                    self.say(f"  dropped {escape(standing.candidate.label())}: {escape(standing.reason)}")
            record.update(search.as_dict())

        runs = tune.run_search(search, measure, run_guess_s=self.plan.run_guess_s, after=after)
        no_stock = record["stock_note"] or "no stock release deployed"
        result = tune_result.final_result(search, runs, no_stock=no_stock)
        versions = {release.variant: release.ort_version for release in chosen}
        result["command"] = tune_result.reproduce_command(fixed, name, model, result, versions)
        record.update(search.as_dict())
        record["result"] = result
        self.say(f"best: [bold]{escape(result['label'])}[/] ({search.stopped})")

    def _announce(self, model: str, search: tune.Search) -> None:
        """What is searched, and a warning when the first rung alone is estimated over the budget."""
        budget_s = self.plan.budget_s
        self.say(
            f"tuning {escape(model)}: {len(search.candidates)} candidates, budget {duration_text(budget_s)}"
        )
        first = tune.FIRST_RUNS * len(search.candidates) * self.plan.run_guess_s
        if first > budget_s:
            self.say(
                f"[yellow]warning:[/] the first rung ({tune.FIRST_RUNS} runs of each candidate) is estimated"
                f" at {duration_text(first)}, over the budget: it runs in full"
            )

    def _measure(
        self, fixed: BenchPlan, rung: tune.Rung, first_round: int
    ) -> dict[Combination, tuple[tuple[float, ...], ...]]:
        """One rung on the board, its rounds numbered on from ``first_round``; every candidate's runs so far."""
        cut = f" (of {rung.wanted}: the budget)" if rung.runs < rung.wanted else ""
        self.say(
            f"[bold]rung {rung.number}[/] ({rung.kind}): {len(rung.candidates)} candidates x"
            f" {rung.runs} runs{cut}"
        )
        plan = tune_space.rung_plan(fixed, rung.candidates, rung.runs)
        measure_board(self.session, plan, self.document, self.progress, round_offset=first_round - 1)
        return tune_space.runs_of(self.document.as_dict())


def run_tune(
    plan: TunePlan, *, run_id: str, command: str, store: ResultStore | None = None
) -> tuple[BenchRun, dict[str, TuneRecord]]:
    """Tune every board of the plan; stored as a bench run whose run.json says it was a tune."""
    found: dict[str, TuneRecord] = {}
    kind = RunKind(
        label="orch tune",
        body=tune_body(plan, found),
        meta={"kind": "tune", "tune": {"plan": plan.as_dict(), "boards": found}},
    )
    done = run_bench(plan.bench, run_id=run_id, command=command, store=store, kind=kind)
    return done, found
