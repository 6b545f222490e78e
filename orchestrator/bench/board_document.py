"""One board's record of a bench run, built step by step while the board runs and written to the
results store (``results.ResultStore.write_board``) as JSON only at the end: ``as_dict`` gives the
stored record (``records.BoardRecord``), which ``series.series_of`` and the reports read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from orchestrator.bench.agent_host import StartedAs
from orchestrator.bench.clocks import ClockState
from orchestrator.bench.plan import BenchPlan, ReleaseRef
from orchestrator.bench.quantise import Quantised
from orchestrator.bench.records import (
    BOARD_SCHEMA,
    AgentDocument,
    BoardInfo,
    BoardRecord,
    MeasurementKey,
    PlanRecord,
    Progress,
    StoredColdStarts,
    StoredMeasurement,
    TuneRecord,
)
from orchestrator.bench.results import utc_now
from orchestrator.board import Board

# How a board's part of a run stands: "running" until it ends, then "ok" or "failed"; "interrupted"
# when orch was stopped first (what it measured until then is kept).
RunState = Literal["running", "ok", "failed", "interrupted"]


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One agent run's document, with which step and round it was and how its process started."""

    key: MeasurementKey  # Step.key(): what was measured
    round: int
    step: int
    # The run's duration seen from the workstation: agent_wall_s plus the fork and the reply, or for
    # a command (the native runner, a fallback) plus its start and SSH.
    remote_duration_s: float
    started_as: StartedAs
    agent: AgentDocument  # the agent's (or native runner's) document

    def as_dict(self) -> StoredMeasurement:
        return {
            "key": self.key,
            "round": self.round,
            "step": self.step,
            "remote_duration_s": self.remote_duration_s,
            "started_as": self.started_as,
            "agent": self.agent,
        }


@dataclass(frozen=True, kw_only=True)
class ColdStarts:
    """One cold-start step: ``launches`` fresh processes, one document each."""

    key: MeasurementKey
    round: int
    step: int
    launches: list[AgentDocument]

    def as_dict(self) -> StoredColdStarts:
        return {"key": self.key, "round": self.round, "step": self.step, "launches": self.launches}


@dataclass(kw_only=True)
class BoardDocument:
    run_id: str
    board: str
    board_info: BoardInfo
    plan: PlanRecord  # BenchPlan.as_dict()
    started: str
    status: RunState = "running"
    error: str | None = None
    finished: str | None = None
    releases: list[ReleaseRef] = field(default_factory=list)
    clocks: ClockState | None = None
    measurements: list[Measurement] = field(default_factory=list)
    cold_starts: list[ColdStarts] = field(default_factory=list)
    # --quantize: release id -> fp32 model file -> its int8 copy (None: not asked for).
    quantization: dict[str, dict[str, Quantised]] | None = None
    agent_host_fallbacks: list[str] | None = None  # why runs started as commands instead of forks
    tune: TuneRecord | None = None  # `orch tune`'s record of the search on this board
    planned_rounds: list[int] = field(default_factory=list)  # the round of every step planned

    def rounds_complete(self) -> int:
        """How many planned rounds have every one of their steps measured."""
        done: dict[int, int] = {}
        for number in [m.round for m in self.measurements] + [c.round for c in self.cold_starts]:
            done[number] = done.get(number, 0) + 1
        planned: dict[int, int] = {}
        for number in self.planned_rounds:
            planned[number] = planned.get(number, 0) + 1
        return sum(1 for number, steps in planned.items() if done.get(number, 0) >= steps)

    def progress(self) -> Progress:
        """What an interrupted board had done: steps measured of those planned, whole rounds."""
        return {
            "steps_done": len(self.measurements) + len(self.cold_starts),
            "steps_planned": len(self.planned_rounds),
            "rounds_complete": self.rounds_complete(),
        }

    @classmethod
    def begin(cls, run_id: str, board: Board, plan: BenchPlan) -> BoardDocument:
        return cls(
            run_id=run_id,
            board=board.name,
            board_info={
                "hostname": board.hostname,
                "port": board.port,
                "target": board.target,
                "tags": list(board.tags),
                "groups": list(board.groups),
            },
            plan=plan.as_dict(),
            started=utc_now(),
        )

    def release_ids(self) -> list[str]:
        return [release.id for release in self.releases]

    def as_dict(self) -> BoardRecord:
        """The stored record."""
        document: BoardRecord = {
            "schema": BOARD_SCHEMA,
            "run_id": self.run_id,
            "board": self.board,
            "status": self.status,
            "error": self.error,
            "started": self.started,
            "finished": self.finished,
            "board_info": self.board_info,
            "plan": self.plan,
            "releases": [release.as_json() for release in self.releases],
            "clocks": self.clocks.as_dict() if self.clocks is not None else None,
            "measurements": [measurement.as_dict() for measurement in self.measurements],
            "cold_starts": [cold.as_dict() for cold in self.cold_starts],
        }
        if self.quantization is not None:
            document["quantization"] = {
                release: {model: made.as_dict() for model, made in models.items()}
                for release, models in self.quantization.items()
            }
        if self.agent_host_fallbacks is not None:
            document["agent_host_fallbacks"] = self.agent_host_fallbacks
        if self.tune is not None:
            document["tune"] = self.tune
        if self.status == "interrupted":
            document["interrupted"] = self.progress()
        return document
