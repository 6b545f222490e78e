"""Run a VerifyPlan: the cases go to each board once (cached by content), each build runs them in
one board-side process (a new one after a case that kills it), the x86 stock wheel of each build's
release runs the same cases on the workstation, and each build is judged against it.

Per board: connect, list the releases, choose the builds, push the node-case bundle if the board
lacks it, fetch the deployed models (cached by sha256) and make their bundle with the reference's
outputs, push it, run. Boards run in parallel (``orchestrator.fleet.parallel``); a board that fails
keeps its error and the others carry on.
"""

from __future__ import annotations

import json
import posixpath
import secrets
import tarfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from orchestrator.adapters import ssh
from orchestrator.adapters.session import BoardSession
from orchestrator.bench.plan import INT8_SUFFIX
from orchestrator.board import Board
from orchestrator.board_side import read_text
from orchestrator.deploy import releases
from orchestrator.deploy.releases import ReleaseInfo
from orchestrator.errors import VerifyError
from orchestrator.fleet.parallel import FleetResult, run_on_boards
from orchestrator.paths import orch_home
from orchestrator.verify import outcome
from orchestrator.verify.cases import CASES_FILE, node_cases, subset, tree_digest
from orchestrator.verify.models import ModelBundle, model_bundle
from orchestrator.verify.outcome import BuildVerdict, CaseResult, VerdictDocument
from orchestrator.verify.plan import VerifyPlan, pick_releases
from orchestrator.verify.reference import Reference, ensure_reference, run_reference

Progress = Callable[[str, str], None]
RUNNER = "verify_cases.py"
# Verify results are stored as $ORCH_RESULTS/verify-<run id>.json.
VERIFY_PREFIX = "verify-"


def cache_root() -> Path:
    path = orch_home() / "cache" / "verify"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True, kw_only=True)
class Bundle:
    """A directory of cases on the workstation, named on the board by its content digest."""

    directory: Path
    digest: str
    names: tuple[str, ...]

    @property
    def remote_name(self) -> str:
        return self.digest[:16]

    def archive(self) -> Path:
        """The bundle as one .tar.gz (made once): one transfer instead of thousands of small files."""
        path = self.directory.with_name(f"{self.directory.name}-{self.remote_name}.tar.gz")
        if not path.exists():
            # Boards ask at the same time: each writes its own partial file, the last rename wins (same bytes).
            partial = path.with_name(f"{path.name}.{secrets.token_hex(4)}.partial")
            with tarfile.open(partial, "w:gz", compresslevel=6) as archive:
                for item in sorted(self.directory.iterdir()):
                    archive.add(item, arcname=item.name)
            partial.replace(path)
        return path


def node_bundle(plan: VerifyPlan) -> tuple[Bundle, dict[str, int]]:
    """ONNX's node cases (all, or the subset), with the runner beside them."""
    generated = node_cases(cache_root())
    runner = read_text(RUNNER)
    path = generated.directory / RUNNER
    if not path.exists() or path.read_text(encoding="utf-8") != runner:
        path.write_text(runner, encoding="utf-8")
    chosen = subset(generated.cases, plan.subset)
    if not chosen:
        raise VerifyError(f"onnx {generated.onnx_version} gave no node case that can be written as .npy")
    digest = tree_digest(generated.directory)
    return Bundle(directory=generated.directory, digest=digest, names=tuple(c.name for c in chosen)), dict(
        generated.skipped
    )


class References:
    """The x86 stock onnxruntime per release and its results on the node cases, computed once per
    release however many boards ask at the same time."""

    def __init__(self, node: Bundle) -> None:
        self.node = node
        self._lock = threading.Lock()
        self._done: dict[str, tuple[Reference, dict[str, CaseResult]]] = {}
        self._models: dict[tuple[str, tuple[str, ...]], ModelBundle] = {}

    def node_results(self, version: str) -> tuple[Reference, dict[str, CaseResult]]:
        with self._lock:
            if version not in self._done:
                reference = ensure_reference(version)
                result = run_reference(reference, self.node.directory, self.node.names)
                run = outcome.parse_run(result.stdout)
                if run.hello is None or not run.done:
                    raise VerifyError(
                        f"the reference {reference.describe()} did not finish the cases: "
                        f"{run.error or result.tail(3)}"
                    )
                self._done[version] = (reference, {r.case: r for r in run.results})
            return self._done[version]

    def models(self, reference: Reference, models: Mapping[str, Path]) -> ModelBundle:
        key = (reference.version, tuple(sorted(f"{k}={v}" for k, v in models.items())))
        with self._lock:
            if key not in self._models:
                self._models[key] = model_bundle(cache_root(), reference, models)
            return self._models[key]


class BoardVerifyDocument(TypedDict):
    """One board's verification in verify's JSON (``--json``, the stored result)."""

    board: str
    sent_bytes: int
    notes: list[str]
    builds: list[VerdictDocument]
    # case -> release id -> status, for the cases whose status is not the same on every build
    pass_set_differences: dict[str, dict[str, str]]


@dataclass(frozen=True, kw_only=True)
class BoardVerify:
    board: str
    verdicts: tuple[BuildVerdict, ...]
    sent_bytes: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> BoardVerifyDocument:
        return BoardVerifyDocument(
            board=self.board,
            sent_bytes=self.sent_bytes,
            notes=list(self.notes),
            builds=[verdict.as_dict() for verdict in self.verdicts],
            pass_set_differences=outcome.pass_set_differences(self.verdicts),
        )


def push_bundle(session: BoardSession, python: str, workdir_abs: str, bundle: Bundle) -> tuple[str, int]:
    """The bundle's directory on the board (``<workdir>/verify/<digest>``), sent only when missing;
    returns it and the bytes sent. Unpacked into a temporary name, then renamed: a cut transfer
    never leaves a half bundle that looks complete."""
    base = posixpath.join(workdir_abs, "verify")
    target = posixpath.join(base, bundle.remote_name)
    if session.stat(posixpath.join(target, CASES_FILE)) is not None:
        return target, 0
    archive = bundle.archive()
    session.mkdir_p(base)
    temporary = f"{target}.partial-{secrets.token_hex(4)}"
    session.put(archive, temporary + ".tar.gz")
    try:
        # The release's own Python unpacks it: a board needs no tar of a particular flavour.
        session.run([python, "-m", "tarfile", "-e", temporary + ".tar.gz", temporary], timeout=900)
        if session.stat(posixpath.join(target, CASES_FILE)) is None:
            session.rename(temporary, target)
    finally:
        session.run(["rm", "-rf", temporary, temporary + ".tar.gz"], timeout=300, check=False)
    return target, archive.stat().st_size


def run_build(
    session: BoardSession,
    release: ReleaseInfo,
    bundles: Sequence[str],
    names: Sequence[str],
    plan: VerifyPlan,
) -> tuple[dict[str, CaseResult], dict[str, object], int, float]:
    """Every case on one build: results, the runner's hello, processes used, wall time."""
    started = time.monotonic()
    todo = list(names)
    results: dict[str, CaseResult] = {}
    hello: dict[str, object] = {}
    processes = crashes = 0
    argv = [release.python, posixpath.join(bundles[0], RUNNER)]
    for bundle in bundles:
        argv += ["--bundle", bundle]
    if plan.execution_provider != "cpu":
        argv += ["--ep", plan.execution_provider]
    while todo:
        processes += 1
        result = session.run(argv, stdin=json.dumps(todo).encode(), timeout=plan.timeout_s, check=False)
        run = outcome.parse_run(result.stdout)
        if run.hello is None:
            raise VerifyError(
                f"{session.board.name}: {release.id}: the case runner did not start: "
                f"{run.error or result.tail(3)}"
            )
        hello = run.hello
        results.update({r.case: r for r in run.results})
        todo = outcome.remaining(todo, run.results)
        if run.done or not todo:
            break
        tail = " | ".join(result.stderr.strip().splitlines()[-2:])
        results[todo[0]] = outcome.crashed(todo[0], result.exit_code, tail)
        todo, crashes = todo[1:], crashes + 1
        if crashes >= plan.max_crashes:
            for name in todo:
                results[name] = CaseResult(
                    case=name,
                    status="fail",
                    stage="crash",
                    detail=f"not run: the runner died {crashes} times",
                )
            break
    return results, hello, processes, time.monotonic() - started


def _fetch_models(session: BoardSession, release: ReleaseInfo) -> dict[str, Path]:
    """The release's models on the workstation (cached by sha256; fetched only when missing)."""
    cache = cache_root() / "deployed-models"
    cache.mkdir(parents=True, exist_ok=True)
    local = {}
    for name, sha256 in sorted(release.models.items()):
        if name.endswith(INT8_SUFFIX):
            continue  # bench's int8 copies are derived from a model already listed
        path = cache / f"{sha256}.onnx"
        if not path.exists():
            partial = path.with_name(f"{sha256}.{secrets.token_hex(4)}.partial")
            session.get(posixpath.join(release.path, "models", name), partial)
            partial.replace(path)
        local[name] = path
    return local


def verify_board(board: Board, plan: VerifyPlan, references: References, progress: Progress) -> BoardVerify:
    progress(board.name, "connecting")
    with ssh.connect(board) as session:
        listing = releases.read_listing(session, releases.layout_for(board))
        chosen = pick_releases(plan, listing.releases, board.name)
        verifier = _BoardVerifier(
            session=session, plan=plan, references=references, progress=progress, workdir=listing.workdir_abs
        )
        verdicts = tuple(verifier.build(release) for release in chosen)
        return BoardVerify(
            board=board.name, verdicts=verdicts, sent_bytes=verifier.sent, notes=tuple(verifier.notes)
        )


@dataclass(kw_only=True)
class _BoardVerifier:
    """The builds of one board, one after the other; counts the bytes sent and notes what was left out."""

    session: BoardSession
    plan: VerifyPlan
    references: References
    progress: Progress
    workdir: str  # the board's work directory, absolute
    sent: int = 0
    notes: list[str] = field(default_factory=list)

    def say(self, message: str) -> None:
        self.progress(self.session.board.name, message)

    def build(self, release: ReleaseInfo) -> BuildVerdict:
        """Every case (node cases, and the release's models) on one build, judged against the reference."""
        reference, node_reference = self.references.node_results(release.ort_version)
        self.say(f"{release.id}: reference {reference.describe()}")
        bundles, names = [self._push(release, self.references.node)], list(self.references.node.names)
        expected = dict(node_reference)
        if self.plan.models and release.models:
            models = self._model_bundle(release, reference)
            if models is not None:
                bundles.append(self._push(release, models))
                names += models.names
                # By construction the reference's own outputs are the expected ones.
                expected.update({n: CaseResult(case=n, status="pass") for n in models.names})
        self.say(f"{release.id}: running {len(names)} cases in one process")
        results, hello, processes, wall = run_build(self.session, release, bundles, names, self.plan)
        verdict = BuildVerdict(
            board=self.session.board.name,
            release=release.id,
            variant=release.variant,
            ort_version=release.ort_version,
            results=results,
            reference=expected,
            hello={**hello, "reference": reference.as_dict()},
            wall_s=wall,
            processes=processes,
        )
        counted = verdict.counts
        self.say(
            f"{release.id}: {counted['pass']} pass, {counted['fail']} fail, "
            f"{counted['unsupported']} not supported in {wall:.0f} s "
            f"({len(verdict.regressions)} fail where stock passes)"
        )
        return verdict

    def _push(self, release: ReleaseInfo, bundle: Bundle) -> str:
        directory, count = push_bundle(self.session, release.python, self.workdir, bundle)
        self.sent += count
        return directory

    def _model_bundle(self, release: ReleaseInfo, reference: Reference) -> Bundle | None:
        """The release's models as cases with the reference's outputs (None: none the reference runs)."""
        models = self.references.models(reference, _fetch_models(self.session, release))
        for name, why in sorted(models.refused.items()):
            self.notes.append(f"{release.id}: {name} left out: the reference cannot run it: {why}")
        if not models.cases:
            return None
        return Bundle(
            directory=models.directory,
            digest=tree_digest(models.directory),
            names=tuple(c.name for c in models.cases),
        )


@dataclass(frozen=True, kw_only=True)
class VerifyRun:
    outcome: FleetResult[BoardVerify]
    node_cases: int
    skipped: dict[str, int]
    onnx_version: str
    wall_s: float


def run_verify(plan: VerifyPlan, progress: Progress) -> VerifyRun:
    import onnx

    started = time.monotonic()
    node, skipped = node_bundle(plan)
    references = References(node)
    result = run_on_boards(
        plan.boards,
        lambda board: verify_board(board, plan, references, progress),
        parallel=plan.parallel,
        label="orch verify",
    )
    return VerifyRun(
        outcome=result,
        node_cases=len(node.names),
        skipped=skipped,
        onnx_version=onnx.__version__,
        wall_s=time.monotonic() - started,
    )
