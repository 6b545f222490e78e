"""`orch tune`'s search: successive halving of the candidates (``tune_space``) within a time
budget, decided from run medians. Pure: no SSH; each rung is measured by the bench executor (a
BenchPlan per rung, see ``tune_execute``), and ``tune_result`` states the outcome.

**The search.** Rung 1 runs every candidate ``FIRST_RUNS`` times (2, the fewest a run-level interval
needs), interleaved in rounds as any bench A/B. After each rung every candidate is compared with
the best so far (the lowest median of all its inferences, all rungs together) by
``stats.compare_runs``: one whose ratio to the best has a 95% interval wholly above 1 + threshold
(or whose verdict is already ``slower``) is clearly worse and dropped; the others are close
contenders and stay. Each further rung gives every survivor twice the runs of the last (2, 4, 8,
16: 30 in all), as many as the budget left allows at the measured cost of a run. The halving
stops when one candidate is left, the budget is spent, the survivors are proven close (with the
runs a verdict needs, every one's interval lies below 1 + threshold: more runs would not separate
them) or they have ``MAX_RUNS`` runs each; among close ones the lowest median wins and the report
names the others. A last *confirm* rung tops the winner, its variant's default settings and
stock's default settings (the winner alone when it is both) up to ``stats.runs_needed()`` runs
each, interleaved, so the final ratios can reach a verdict and the winner's interval rests on more
than two runs (budget permitting).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

import numpy as np

from orchestrator.bench import stats
from orchestrator.bench.plan import BenchPlan, Combination
from orchestrator.bench.records import RungRecord, StandingRecord, TuneRecord
from orchestrator.bench.tune_space import default_of
from orchestrator.console import duration_text
from orchestrator.errors import BenchError, UsageError

FIRST_RUNS = stats.MIN_RUNS_CI
MAX_RUNS = 30  # per candidate, every rung together (2 + 4 + 8 + 16)
# A rung halves the candidates, or confirms the result; the search is then done.
RungKind = Literal["halving", "confirm"]
Phase = Literal["halving", "confirm", "done"]
HALVING: RungKind = "halving"
CONFIRM: RungKind = "confirm"
# Before anything is measured a run's cost is a guess: interpreter + onnxruntime start-up (about 3 s
# on a Pi 4 class board, 15 s on an emulated one) plus the agent's minimum time and the cooldown.
START_UP_S, START_UP_QUICK_S = 3.0, 15.0

Run = stats.Run


# --------------------------------------------------------------------------- budget


def parse_budget(text: str) -> float:
    """``90s``, ``20m``, ``1h30m``, ``1.5h`` or plain seconds -> seconds (> 0)."""
    value = text.strip().lower()
    parts = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?", value)
    if not value or parts is None or not any(parts.groups()):
        raise ValueError(f"must be a duration such as 90s, 20m or 1h30m, not {text!r}")
    hours, minutes, seconds = (float(group) if group else 0.0 for group in parts.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise ValueError(f"must be longer than 0 s, not {text!r}")
    return total


def run_guess(plan: BenchPlan, *, quick: bool) -> float:
    """A run's cost before any is measured (see START_UP_S)."""
    return (START_UP_QUICK_S if quick else START_UP_S) + plan.agent.min_duration + plan.cooldown_s


def fit(wanted: int, candidates: int, per_run_s: float, remaining_s: float) -> int:
    """How many of ``wanted`` runs each of ``candidates`` fit in what is left of the budget."""
    if candidates < 1 or remaining_s <= 0:
        return 0
    if per_run_s <= 0:
        return wanted
    return max(0, min(wanted, math.floor(remaining_s / (per_run_s * candidates))))


def check_budget(budget_s: float, candidates: int, per_run_s: float) -> None:
    """Refuse a budget the first rung cannot fit even by the guess (every candidate needs its runs)."""
    needed = FIRST_RUNS * candidates * per_run_s
    if needed > budget_s:
        suggestion = f"{math.ceil(needed * 1.25 / 60)}m"
        raise UsageError(
            f"--budget {duration_text(budget_s)}: the first rung alone runs each of the {candidates} candidates"
            f" {FIRST_RUNS} times, about {duration_text(needed)} at ~{per_run_s:.0f} s a run (a guess until"
            " runs are measured)",
            hint=f"give --budget {suggestion} or more, or fewer candidates"
            " (--threads, --opt-level, --ep, --variant)",
        )


class ScheduledRung(TypedDict):
    """A rung of ``expected_schedule``."""

    rung: int
    candidates: int
    runs_each: int
    estimated_s: float


def expected_schedule(candidates: int, budget_s: float, per_run_s: float) -> list[ScheduledRung]:
    """The rungs a search of ``candidates`` would run if each rung dropped half of them (what the dry
    run shows: the real cut is statistical, close contenders all stay), within the budget."""
    rungs: list[ScheduledRung] = []
    left, runs, done, spent = candidates, FIRST_RUNS, 0, 0.0
    while left >= 1 and done < MAX_RUNS:
        wanted = min(runs, MAX_RUNS - done)
        got = wanted if not rungs else fit(wanted, left, per_run_s, budget_s - spent)
        if got < 1:
            break
        cost = got * left * per_run_s
        rungs.append({"rung": len(rungs) + 1, "candidates": left, "runs_each": got, "estimated_s": cost})
        spent, done = spent + cost, done + got
        if left == 1:
            break
        left, runs = math.ceil(left / 2), runs * 2
    return rungs


# --------------------------------------------------------------------------- the search


@dataclass(frozen=True, kw_only=True)
class Rung:
    number: int
    kind: RungKind
    candidates: tuple[Combination, ...]
    runs: int  # runs (rounds) each candidate gets in this rung
    wanted: int  # what the schedule wanted (runs < wanted: cut to the budget)


@dataclass(frozen=True, kw_only=True)
class Standing:
    """A candidate after a rung: its runs so far and how it compares with the best."""

    candidate: Combination
    runs: int
    n: int
    median_ms: float
    vs_best: stats.Comparison | None  # None: this is the best
    dropped: bool = False
    reason: str = ""

    def as_dict(self) -> StandingRecord:
        c = self.vs_best
        return {
            "candidate": self.candidate.as_dict(),
            "label": self.candidate.label(),
            "runs": self.runs,
            "n": self.n,
            "median_ms": self.median_ms,
            "ratio_to_best": c.ratio if c else 1.0,
            "ci_low": c.ci_low if c else None,
            "ci_high": c.ci_high if c else None,
            "p_value": c.p_value if c else None,
            "dropped": self.dropped,
            "reason": self.reason,
        }


def _interval(c: stats.Comparison) -> str:
    return "no interval" if math.isnan(c.ci_low) else f"95% CI [{c.ci_low:.2f}, {c.ci_high:.2f}]"


def judge(
    runs: Mapping[Combination, Sequence[Run]], *, threshold: float, drop: bool = True
) -> list[Standing]:
    """Rank the candidates by the median of all their inferences and compare each with the best; with
    ``drop``, one clearly worse (its ratio's interval wholly above 1 + threshold, or verdict slower) is
    dropped, and the close ones stay."""
    medians = {
        c: float(np.median(np.concatenate([np.asarray(r, dtype=float) for r in rs])))
        for c, rs in runs.items()
    }
    order = sorted(runs, key=lambda c: medians[c])
    best = order[0]

    def n_of(c: Combination) -> int:
        return sum(len(r) for r in runs[c])

    standings = [
        Standing(
            candidate=best,
            runs=len(runs[best]),
            n=n_of(best),
            median_ms=medians[best],
            vs_best=None,
            reason="the best so far",
        )
    ]
    for candidate in order[1:]:
        c = stats.compare_runs(runs[best], runs[candidate], threshold=threshold)
        clearly = c.verdict == stats.SLOWER or (not math.isnan(c.ci_low) and c.ci_low > 1.0 + threshold)
        if clearly:
            reason = f"{c.ratio:.2f}x the best, {_interval(c)} above 1 + {threshold:g}"
        else:
            reason = f"close: {c.ratio:.2f}x the best, {_interval(c)}"
        standings.append(
            Standing(
                candidate=candidate,
                runs=len(runs[candidate]),
                n=n_of(candidate),
                median_ms=medians[candidate],
                vs_best=c,
                dropped=drop and clearly,
                reason=reason,
            )
        )
    return standings


@dataclass
class Search:
    """Successive halving over ``candidates`` within ``budget_s`` (see the module's docstring). The
    caller asks ``next_rung``, runs it, and gives every candidate's runs so far to ``record``."""

    candidates: tuple[Combination, ...]
    budget_s: float
    threshold: float = stats.DEFAULT_THRESHOLD
    alive: list[Combination] = field(default_factory=list)
    rungs: list[RungRecord] = field(default_factory=list)
    phase: Phase = HALVING
    stopped: str = ""  # why the halving ended
    confirm_note: str = ""
    winner: Combination | None = None
    counts: dict[Combination, int] = field(default_factory=dict)
    per_run_s: float = 0.0  # the measured cost of a run (wall time of the rungs / their runs)
    elapsed_s: float = 0.0
    _last_runs: int = 0

    def __post_init__(self) -> None:
        if not self.candidates:
            raise BenchError("nothing to tune: the candidate space is empty")
        self.alive = self.alive or list(self.candidates)

    def next_rung(self, *, elapsed_s: float, per_run_s: float) -> Rung | None:
        """The next rung to run, or None when the search is over."""
        remaining = self.budget_s - elapsed_s
        number = len(self.rungs) + 1
        if self.phase == HALVING:
            if not self.rungs:  # the first rung always runs in full: every candidate needs its runs
                return Rung(
                    number=number,
                    kind=HALVING,
                    candidates=tuple(self.alive),
                    runs=FIRST_RUNS,
                    wanted=FIRST_RUNS,
                )
            have = min(self.counts.get(c, 0) for c in self.alive)
            wanted = min(self._last_runs * 2, MAX_RUNS - have)
            if wanted < 1:
                self._end_halving(
                    f"every candidate left has {have} runs: {len(self.alive)} stay within the threshold of each other"
                )
            else:
                runs = fit(wanted, len(self.alive), per_run_s, remaining)
                if runs >= 1:
                    return Rung(
                        number=number, kind=HALVING, candidates=tuple(self.alive), runs=runs, wanted=wanted
                    )
                self._end_halving(f"budget spent ({len(self.alive)} candidates left)")
        if self.phase == CONFIRM:
            targets = self.confirm_targets()
            need = stats.runs_needed() - min(self.counts.get(c, 0) for c in targets)
            self.phase = "done"
            if need < 1:
                self.confirm_note = "not needed: the comparisons have their runs" if len(targets) > 1 else ""
                return None
            runs = fit(need, len(targets), per_run_s, remaining)
            if runs < 1:
                self.confirm_note = "skipped: the budget is spent"
                return None
            return Rung(number=number, kind=CONFIRM, candidates=targets, runs=runs, wanted=need)
        return None

    def _end_halving(self, why: str) -> None:
        self.phase, self.stopped = CONFIRM, why

    def references(self) -> tuple[Combination | None, Combination | None]:
        """(the winner's variant's default settings, stock's default settings or None)."""
        if self.winner is None:
            return None, None
        stock = default_of("stock")
        return default_of(self.winner.variant), stock if stock in self.candidates else None

    def confirm_targets(self) -> tuple[Combination, ...]:
        default, stock = self.references()
        found = [c for c in (stock, default, self.winner) if c is not None and c in self.candidates]
        return tuple(dict.fromkeys(found))

    def record(
        self,
        rung: Rung,
        runs: Mapping[Combination, Sequence[Run]],
        *,
        wall_s: float = 0.0,
        first_round: int = 1,
    ) -> list[Standing]:
        """Judge the rung's candidates on all their runs so far; drop the clearly worse (halving)."""
        mine = {c: runs[c] for c in rung.candidates if runs.get(c)}
        missing = [c.label() for c in rung.candidates if c not in mine]
        if missing:
            raise BenchError(f"rung {rung.number}: no runs were recorded for {', '.join(missing)}")
        for candidate, its_runs in mine.items():
            self.counts[candidate] = len(its_runs)
        standings = judge(mine, threshold=self.threshold, drop=rung.kind == HALVING)
        self.rungs.append(
            {
                "rung": rung.number,
                "kind": rung.kind,
                "runs_each": rung.runs,
                "wanted_runs": rung.wanted,
                "rounds": [first_round, first_round + rung.runs - 1],
                "candidates": len(rung.candidates),
                "wall_s": wall_s,
                "standings": [s.as_dict() for s in standings],
                "dropped": [s.as_dict() for s in standings if s.dropped],
            }
        )
        if rung.kind == HALVING:
            self._last_runs = rung.runs
            self.alive = [s.candidate for s in standings if not s.dropped]
            self.winner = standings[0].candidate
            if len(self.alive) == 1:
                self._end_halving("one candidate left")
            elif self._equivalent(standings):
                self._end_halving(
                    f"the {len(self.alive)} candidates left are within {self.threshold:.0%} of the best"
                    " (95% CIs): more runs would not separate them"
                )
        return standings

    def _equivalent(self, standings: Sequence[Standing]) -> bool:
        """Every survivor's ratio to the best is surely below 1 + threshold, on enough runs for a verdict."""
        kept = [s for s in standings if not s.dropped]
        return all(s.runs >= stats.runs_needed() for s in kept) and all(
            s.vs_best is not None and s.vs_best.ci_high < 1.0 + self.threshold for s in kept[1:]
        )

    def as_dict(self) -> TuneRecord:
        """The search as it stands: a tune record without the model, the note and the result."""
        default, stock = self.references()
        return {
            "budget_s": self.budget_s,
            "elapsed_s": self.elapsed_s,
            "per_run_s": self.per_run_s,
            "threshold": self.threshold,
            "candidates": [c.as_dict() for c in self.candidates],
            "rungs": self.rungs,
            "alive": [c.as_dict() for c in self.alive],
            "stopped": self.stopped,
            "confirm": self.confirm_note,
            "winner": self.winner.as_dict() if self.winner else None,
            "default": default.as_dict() if default else None,
            "stock": stock.as_dict() if stock else None,
        }


# One rung measured: every candidate's runs so far (all rungs) after running ``rung`` from round
# ``first_round`` on. The executor runs it on a board; tests give synthetic runs.
Measure = Callable[[Rung, int], Mapping[Combination, Sequence[Run]]]


def run_search(
    search: Search,
    measure: Measure,
    *,
    run_guess_s: float,
    clock: Callable[[], float] = time.monotonic,
    after: Callable[[Rung, list[Standing]], None] | None = None,
) -> Mapping[Combination, Sequence[Run]]:
    """Drive ``search`` to its end: ask for a rung, measure it, judge it; the budget is counted from the
    call, and a run's cost is the measured wall time per run (``run_guess_s`` before the first rung).
    Returns every candidate's runs; ``after`` hears of each rung as it is judged."""
    started = clock()
    runs: Mapping[Combination, Sequence[Run]] = {}
    first_round, spent_runs, spent_s = 1, 0, 0.0
    while True:
        per_run = spent_s / spent_runs if spent_runs else run_guess_s
        rung = search.next_rung(elapsed_s=clock() - started, per_run_s=per_run)
        if rung is None:
            return runs
        began = clock()
        runs = measure(rung, first_round)
        wall = clock() - began
        standings = search.record(rung, runs, wall_s=wall, first_round=first_round)
        first_round += rung.runs
        spent_runs, spent_s = spent_runs + rung.runs * len(rung.candidates), spent_s + wall
        search.per_run_s = spent_s / spent_runs
        search.elapsed_s = clock() - started
        if after is not None:
            after(rung, standings)
