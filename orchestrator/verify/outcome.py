"""What the conformance runs mean: per-case results, counts per build, and the cases where a build
fails what the x86 stock wheel of the same release passes. Pure (no SSH, no processes).

A case ends in one of three states: ``pass`` (outputs within the case's tolerances), ``fail`` (it
ran and was wrong, raised at run time, was refused at load for another reason, or killed the
process), ``unsupported`` (the build has no kernel, type, opset or IR version for it). A
*regression* is a case stock passes and the build fails; a case stock passes and the build does
not support (an operator set left out of the build, e.g. ``--disable_ml_ops``) is a *gap*:
listed, not a failure.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

Status = Literal["pass", "fail", "unsupported"]
STATUSES: tuple[Status, ...] = ("pass", "fail", "unsupported")
DifferenceKind = Literal["regression", "gap"]


class _CaseResultKeys(TypedDict):
    case: str
    status: Status


class CaseResultDocument(_CaseResultKeys, total=False):
    """A case's outcome in verify's JSON (``--json``, the stored result)."""

    stage: str  # absent for a pass
    detail: str


class DifferenceDocument(TypedDict):
    case: str
    kind: DifferenceKind
    build: CaseResultDocument
    reference: CaseResultDocument


class VerdictDocument(TypedDict):
    """One build on one board in verify's JSON: written by ``BuildVerdict.as_dict``, printed by
    ``orch verify``."""

    board: str
    release: str
    variant: str
    ort_version: str
    onnxruntime: dict[str, object]  # the runner's hello: version, file, build_info
    counts: dict[str, int]  # status -> cases
    reference_counts: dict[str, int]
    cases: int
    wall_s: float
    case_s: float
    processes: int
    regressions: list[DifferenceDocument]
    gaps: list[DifferenceDocument]
    improvements: list[str]
    results: dict[str, CaseResultDocument]


def _status(value: object) -> Status | None:
    """A runner's status as one of STATUSES, or None."""
    return next((status for status in STATUSES if status == value), None)


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    case: str
    status: Status
    stage: str = ""  # the runner's: load | run | compare | crash | bundle | reference ("" for a pass)
    detail: str = ""
    load_ms: float | None = None
    run_ms: float | None = None
    outputs: tuple[tuple[str, str], ...] = ()  # --write-expected: (output name, .npy file)

    def as_dict(self) -> CaseResultDocument:
        out = CaseResultDocument(case=self.case, status=self.status)
        if self.stage:
            out["stage"] = self.stage
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True, kw_only=True)
class RunOutput:
    """One runner process's output, parsed: who ran (``hello``), the cases it finished, and whether
    it reached the end."""

    hello: dict[str, object] | None  # the runner's onnxruntime: version, file, build_info
    results: tuple[CaseResult, ...]
    done: bool
    error: str = ""


def parse_run(stdout: str) -> RunOutput:
    """The runner's JSON lines -> RunOutput. Lines that are not JSON (a library printing on stdout)
    are ignored; a truncated last line (the process died mid-write) too."""
    hello: dict[str, object] | None = None
    error = ""
    results: list[CaseResult] = []
    done = False
    for line in stdout.splitlines():
        document = _json_object(line.strip())
        if document is None:
            continue
        status = _status(document.get("status"))
        if "hello" in document:
            hello = document["hello"] if isinstance(document["hello"], dict) else None
            error = str(document.get("error") or "")
        elif "case" in document and status is not None:
            results.append(_case_result(document, status))
        elif document.get("done") is True:
            done = True
    return RunOutput(hello=hello, results=tuple(results), done=done, error=error)


def _json_object(line: str) -> dict[str, object] | None:
    """A line's JSON object, or None when the line is not one."""
    if not line.startswith("{"):
        return None
    try:
        document = json.loads(line)
    except json.JSONDecodeError:
        return None
    return document if isinstance(document, dict) else None


def _case_result(document: dict[str, object], status: Status) -> CaseResult:
    outputs = document.get("outputs")
    return CaseResult(
        case=str(document["case"]),
        status=status,
        stage=str(document.get("stage") or ""),
        detail=str(document.get("detail") or ""),
        load_ms=_milliseconds(document.get("load_ms")),
        run_ms=_milliseconds(document.get("run_ms")),
        outputs=tuple(
            (str(item["name"]), str(item["file"]))
            for item in (outputs if isinstance(outputs, list) else ())
            if isinstance(item, dict) and "name" in item and "file" in item
        ),
    )


def _milliseconds(value: object) -> float | None:
    """A runner's timing: a number, or None (a runner that did not time the case)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def remaining(wanted: Sequence[str], finished: Iterable[CaseResult]) -> list[str]:
    """The cases still to run, in order, after a process ended."""
    seen = {result.case for result in finished}
    return [name for name in wanted if name not in seen]


def crashed(case: str, exit_code: int, tail: str) -> CaseResult:
    """The case a runner process died in (the first one without a result line)."""
    how = f"signal {-exit_code}" if exit_code < 0 else f"exit code {exit_code}"
    if exit_code in (132, -4):
        how += " (SIGILL: an instruction this CPU lacks)"
    elif exit_code in (139, -11):
        how += " (SIGSEGV)"
    detail = f"the runner process died ({how})" + (f": {tail}" if tail else "")
    return CaseResult(case=case, status="fail", stage="crash", detail=detail)


def counts(results: Iterable[CaseResult]) -> dict[str, int]:
    counted = Counter(result.status for result in results)
    return {status: counted.get(status, 0) for status in STATUSES}


@dataclass(frozen=True, kw_only=True)
class Difference:
    """A case whose outcome on the build is worse than on the reference (stock, same release)."""

    case: str
    build: CaseResult
    reference: CaseResult

    @property
    def kind(self) -> DifferenceKind:
        return "regression" if self.build.status == "fail" else "gap"

    def as_dict(self) -> DifferenceDocument:
        return DifferenceDocument(
            case=self.case, kind=self.kind, build=self.build.as_dict(), reference=self.reference.as_dict()
        )


def differences(
    build: Mapping[str, CaseResult], reference: Mapping[str, CaseResult]
) -> tuple[Difference, ...]:
    """Cases the reference passes and the build does not, sorted by name."""
    found = []
    for name in sorted(build):
        mine, theirs = build[name], reference.get(name)
        if theirs is not None and theirs.status == "pass" and mine.status != "pass":
            found.append(Difference(case=name, build=mine, reference=theirs))
    return tuple(found)


def improvements(build: Mapping[str, CaseResult], reference: Mapping[str, CaseResult]) -> tuple[str, ...]:
    """Cases the build passes and the reference does not (worth knowing, never a failure)."""
    return tuple(
        sorted(
            name
            for name, mine in build.items()
            if mine.status == "pass" and name in reference and reference[name].status != "pass"
        )
    )


@dataclass(frozen=True, kw_only=True)
class BuildVerdict:
    """One build (release) on one board, against the x86 stock wheel of its release."""

    board: str
    release: str
    variant: str
    ort_version: str
    results: Mapping[str, CaseResult]
    reference: Mapping[str, CaseResult]
    hello: Mapping[str, object] = field(default_factory=dict)
    wall_s: float = 0.0
    processes: int = 1

    @property
    def counts(self) -> dict[str, int]:
        return counts(self.results.values())

    @property
    def differences(self) -> tuple[Difference, ...]:
        return differences(self.results, self.reference)

    @property
    def regressions(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.kind == "regression")

    @property
    def gaps(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.kind == "gap")

    @property
    def pass_set(self) -> frozenset[str]:
        return frozenset(name for name, result in self.results.items() if result.status == "pass")

    def as_dict(self) -> VerdictDocument:
        return VerdictDocument(
            board=self.board,
            release=self.release,
            variant=self.variant,
            ort_version=self.ort_version,
            onnxruntime=dict(self.hello),
            counts=self.counts,
            reference_counts=counts(self.reference.values()),
            cases=len(self.results),
            wall_s=round(self.wall_s, 2),
            # Inside the cases (session creation + run), so wall_s - case_s is the runner's start-up
            # (the interpreter, import onnxruntime) and the transfer of results.
            case_s=round(
                sum((r.load_ms or 0.0) + (r.run_ms or 0.0) for r in self.results.values()) / 1000, 2
            ),
            processes=self.processes,
            regressions=[d.as_dict() for d in self.regressions],
            gaps=[d.as_dict() for d in self.gaps],
            improvements=list(improvements(self.results, self.reference)),
            results={name: r.as_dict() for name, r in sorted(self.results.items())},
        )


def pass_set_differences(verdicts: Sequence[BuildVerdict]) -> dict[str, dict[str, str]]:
    """Per case, the status on each build of the same board, for every case whose status is not the
    same on all of them (the "same pass set?" question for stock vs tuned)."""
    names = sorted(set().union(*(v.results for v in verdicts))) if verdicts else []
    out: dict[str, dict[str, str]] = {}
    for name in names:
        statuses = {v.release: (v.results[name].status if name in v.results else "-") for v in verdicts}
        if len(set(statuses.values())) > 1:
            out[name] = statuses
    return out
