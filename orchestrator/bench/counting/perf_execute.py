"""Cycles from a real board's PMU (``orch bench --metric cycles``): a meter for ``measure_on_boards``
that asks the board whether it can count (its facts, ``fleet.board_facts.HardwareCounters``) and
runs the counting agent under ``perf stat``."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.adapters.session import BoardSession
from orchestrator.bench.counting.execute import run_counted
from orchestrator.bench.counting.perf_counters import CYCLES, parse_perf_csv, perf_argv, unread_events
from orchestrator.bench.counting.plan import BASE_INFERENCES, COUNT_ENVIRONMENT, CountPlan, agent_argv
from orchestrator.bench.plan import ReleaseRef
from orchestrator.board_side import read_text
from orchestrator.deploy import releases
from orchestrator.errors import BenchError
from orchestrator.fleet.board_probe import read_facts


class NoCounters(BenchError):
    """The board cannot count its own cycles (why, in one line): not a failure of the run."""


@dataclass(kw_only=True)
class PerfMeter:
    """User-space cycles of the counting agent's process, read by the board's perf."""

    count: CountPlan
    unit: str = "cycles"
    _perf: str = ""
    _output: str = ""

    def prepare(self, session: BoardSession, say: Callable[[str], None]) -> str:
        board = session.board
        workdir = releases.layout_for(board).workdir
        counters = read_facts(session, board, workdir).counters
        if not counters.usable:
            raise NoCounters(f"{board.name}: no hardware counters: {counters.reason}")
        say(f"hardware counters: {counters.summary()}")
        self._perf = counters.perf
        self._output = posixpath.join(workdir, "perf-count.csv")
        return ", ".join(counters.cpu_pmus)

    def extra_count(self, session: BoardSession, release: ReleaseRef, model: str, extra: int) -> float:
        # Two processes, 1 and 1 + k inferences: perf stat counts a forked child into its parent.
        base = self._measure(session, release, model, BASE_INFERENCES)
        return self._measure(session, release, model, BASE_INFERENCES + extra) - base

    def _measure(self, session: BoardSession, release: ReleaseRef, model: str, inferences: int) -> int:
        agent = agent_argv(
            release=release,
            model=model,
            inferences=(inferences,),
            agent_text=read_text("count_agent.py"),
            plan=self.count,
        )
        session.run(["rm", "-f", self._output], timeout=60)  # never a reading from an earlier count
        run_counted(session, perf_argv(self._perf, self._output, ["env", *COUNT_ENVIRONMENT, *agent]), model)
        reading = parse_perf_csv(session.run(["cat", self._output], timeout=60).stdout)
        value = reading.value(CYCLES)
        if value is None:
            raise BenchError(
                f"{session.board.name}: perf read no {CYCLES} counting {model}"
                f" (unread: {', '.join(unread_events(reading))})",
                hint="`perf stat -e cycles:u true` on the board says why",
            )
        return value
