"""VerifyPlan: what `orch verify` will run, decided before anything runs (no SSH, no processes).

Boards x builds (deployed releases, chosen by variant and ORT release) x cases (ONNX's node
cases, or an evenly spread subset of them, plus the user's deployed models). The releases are
only known once connected, so ``pick_releases`` runs per board with what the board reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from orchestrator.board import Board
from orchestrator.deploy.release_listing import ReleaseInfo
from orchestrator.errors import UsageError, VerifyError

# Each case's own tolerances come from ONNX (rtol 1e-3, atol 1e-7 by default). A deployed model's
# outputs are compared with x86-64 stock onnxruntime of the same release: other kernels and
# another summation order, so an absolute floor suited to float32 sums is added.
MODEL_RTOL = 1e-3
MODEL_ATOL = 1e-5
# A build that kills its runner process this many times is not worth running further.
MAX_CRASHES = 20
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([.+-][0-9A-Za-z.+-]+)?$")


class _Tolerance(TypedDict):
    rtol: float
    atol: float


class _Tolerances(TypedDict):
    node_cases: str  # each case's own, in words
    models: _Tolerance


class VerifyPlanDocument(TypedDict):
    """The plan as ``--dry-run`` prints it and the stored result keeps it."""

    boards: list[str]
    variants: list[str]
    ort_version: str
    node_cases: str  # "all" or "subset of N"
    models: bool
    tolerances: _Tolerances
    reference: str
    parallel: int
    timeout_s: float
    execution_provider: str


# `orch verify --ep`: the providers the runner makes each case's session with (ORT puts the nodes
# a provider cannot run on the CPU, as in an application).
EXECUTION_PROVIDERS = ("cpu", "cuda", "tensorrt", "xnnpack")


@dataclass(frozen=True, kw_only=True)
class VerifyPlan:
    boards: tuple[Board, ...]
    variants: tuple[str, ...] = ()  # empty: each board's current release
    ort_version: str | None = None
    subset: int | None = None  # None: every node case
    models: bool = True  # also the models deployed in each release
    parallel: int = 4
    timeout_s: float = 3600.0  # one runner process (all cases of one build)
    max_crashes: int = MAX_CRASHES
    execution_provider: str = "cpu"  # --ep: a board where it cannot be created is named, not verified

    def as_dict(self) -> VerifyPlanDocument:
        return VerifyPlanDocument(
            boards=[board.name for board in self.boards],
            variants=list(self.variants) or ["<current release>"],
            ort_version=self.ort_version or "<any>",
            node_cases=f"subset of {self.subset}" if self.subset is not None else "all",
            models=self.models,
            tolerances={
                "node_cases": "each case's own (ONNX default rtol 1e-3, atol 1e-7)",
                "models": {"rtol": MODEL_RTOL, "atol": MODEL_ATOL},
            },
            reference="x86-64 stock onnxruntime of each build's release, on the workstation",
            parallel=self.parallel,
            timeout_s=self.timeout_s,
            execution_provider=self.execution_provider,
        )


def make_plan(  # noqa: PLR0913 -- one keyword per option of `orch verify`, each checked here
    boards: Sequence[Board],
    *,
    variants: Sequence[str] = (),
    ort_version: str | None = None,
    subset: int | None = None,
    models: bool = True,
    parallel: int = 4,
    timeout_s: float = 3600.0,
    execution_provider: str = "cpu",
) -> VerifyPlan:
    if len(set(variants)) != len(variants):
        raise UsageError(f"--variant lists a variant twice: {','.join(variants)}")
    if ort_version is not None and not _VERSION.match(ort_version):
        raise UsageError(f"--ort-version {ort_version!r}: expected a release number such as 1.21.0")
    if subset is not None and subset < 1:
        raise UsageError(f"--subset {subset}: must be at least 1")
    if parallel < 1 or timeout_s <= 0:
        raise UsageError("--parallel must be >= 1 and --timeout > 0")
    if not boards:
        raise UsageError("no board selected", hint="use --host NAME, --group NAME or --all-devices")
    if execution_provider not in EXECUTION_PROVIDERS:
        raise UsageError(f"--ep {execution_provider}: one of {', '.join(EXECUTION_PROVIDERS)}")
    return VerifyPlan(
        boards=tuple(boards),
        variants=tuple(variants),
        ort_version=ort_version,
        subset=subset,
        models=models,
        parallel=parallel,
        timeout_s=timeout_s,
        execution_provider=execution_provider,
    )


def pick_releases(plan: VerifyPlan, releases: Sequence[ReleaseInfo], board: str) -> tuple[ReleaseInfo, ...]:
    """The builds verified on a board: the newest release of each variant asked for (of the ORT
    release asked for), or the current release."""
    if not releases:
        raise VerifyError(f"{board}: no release is deployed", hint=f"orch deploy --host {board}")
    pool = [r for r in releases if plan.ort_version is None or r.ort_version == plan.ort_version]
    if not pool:
        present = ", ".join(sorted({f"{r.variant} {r.ort_version}" for r in releases}))
        raise VerifyError(
            f"{board}: no release of onnxruntime {plan.ort_version} is deployed (deployed: {present})",
            hint=f"orch deploy --host {board} --ort-version {plan.ort_version}",
        )
    if not plan.variants:
        current = [r for r in pool if r.current]
        if current:
            return (current[0],)
        if plan.ort_version is None:
            raise VerifyError(f"{board}: no release is current", hint=f"orch deploy --host {board}")
        return tuple(_newest(pool, variant) for variant in dict.fromkeys(r.variant for r in pool))
    chosen = []
    for variant in plan.variants:
        mine = [r for r in pool if r.variant == variant]
        if not mine:
            present = ", ".join(sorted({f"{r.variant} {r.ort_version}" for r in releases}))
            version = f" of onnxruntime {plan.ort_version}" if plan.ort_version else ""
            raise VerifyError(
                f"{board}: no release of variant {variant!r}{version} is deployed (deployed: {present})",
                hint=f"orch deploy --host {board} --variant {variant}",
            )
        chosen.append(_newest(mine, variant))
    return tuple(chosen)


def _newest(releases: Sequence[ReleaseInfo], variant: str) -> ReleaseInfo:
    mine = [r for r in releases if r.variant == variant]
    return max(enumerate(mine), key=lambda item: (item[1].created, item[0]))[1]
