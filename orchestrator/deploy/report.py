"""One board's deploy outcome: what was done, sent and verified (``BoardReport``), and its --json form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict

from orchestrator.deploy.plan import BoardPlan, BoardPlanDocument, RollbackDocument, RollbackPlan
from orchestrator.deploy.verification import Verification, VerificationDocument

DeployAction = Literal["deployed", "unchanged", "rolled back", "planned"]


class _BoardReportKeys(TypedDict):
    board: str
    action: DeployAction
    release_id: str
    previous: str | None
    python: str | None
    files_sent: int
    bytes_sent: int
    files_skipped: int
    bytes_skipped: int
    transfer_seconds: float
    rate_bytes_per_s: int
    seconds: float
    verification: VerificationDocument | dict[str, object]  # {}: not verified (a dry run)
    verified_at: str | None
    verification_recorded: bool
    remote_calls: int
    pruned: list[str]
    phases: dict[str, float]


class BoardReportDocument(_BoardReportKeys, total=False):
    """One board's deploy in ``orch deploy --json``."""

    plan: BoardPlanDocument | RollbackDocument  # a dry run's
    runner: str  # a C library build's release


@dataclass(frozen=True, kw_only=True)
class BoardReport:
    """One board's outcome value: what was done, sent, verified."""

    board: str
    action: DeployAction
    release_id: str
    previous: str | None
    python: str | None  # absolute path of the release's interpreter on the board (None: a C library's)
    files_sent: int = 0
    bytes_sent: int = 0
    files_skipped: int = 0
    bytes_skipped: int = 0
    transfer_seconds: float = 0.0
    seconds: float = 0.0
    verification: Verification | None = None  # None: not verified (a dry run)
    verified_at: str | None = None  # when that verification ran (UTC, ISO 8601)
    verification_recorded: bool = False  # it is the board's record of an earlier run, not run now
    remote_calls: int = 0  # commands and file operations sent to the board after connecting
    pruned: tuple[str, ...] = ()
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step: facts, upload, install...
    plan: BoardPlan | RollbackPlan | None = None  # a dry run's plan
    runner: str | None = None  # a C library build's release: the absolute path of its native runner

    @property
    def rate(self) -> float:
        """Upload rate in bytes/s (0 when nothing was sent)."""
        return self.bytes_sent / self.transfer_seconds if self.transfer_seconds > 0 else 0.0

    def as_dict(self) -> BoardReportDocument:
        document = BoardReportDocument(
            board=self.board,
            action=self.action,
            release_id=self.release_id,
            previous=self.previous,
            python=self.python,
            files_sent=self.files_sent,
            bytes_sent=self.bytes_sent,
            files_skipped=self.files_skipped,
            bytes_skipped=self.bytes_skipped,
            transfer_seconds=round(self.transfer_seconds, 3),
            rate_bytes_per_s=round(self.rate),
            seconds=round(self.seconds, 3),
            verification=self.verification.as_dict() if self.verification else {},
            verified_at=self.verified_at,
            verification_recorded=self.verification_recorded,
            remote_calls=self.remote_calls,
            pruned=list(self.pruned),
            phases={k: round(v, 3) for k, v in self.phases.items()},
        )
        if self.plan:
            document["plan"] = self.plan.as_dict()
        if self.runner:
            document["runner"] = self.runner
        return document
