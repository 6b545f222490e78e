"""Several build engines at once: builds of several targets or variants, one per engine at a time.

``orch build --target lab --variant tuned,default --docker-host local --docker-host ssh://bigbox``
(or ``build.engines`` in orch.yaml) puts the builds in one queue; every engine takes the next
build whenever it is free, with its own cores (each build is planned for the engine that runs it).
The workstation first prepares what every build shares, once: the source tree and the build
image, which the other engines then receive as a single build would. Results land where a single
build puts them (one ``artifacts/`` and the home's build directories).

An engine that cannot be reached is named and leaves the queue to the others, so its builds are
not lost; a build that fails is named with its engine, and the others' builds are kept.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.builds.build_log import Log
from orchestrator.builds.image import ensure_base_image_on, ensure_build_image
from orchestrator.builds.sources.ort import prepare_source
from orchestrator.errors import OrchError

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine
    from orchestrator.builds.execute import BuildResult
    from orchestrator.builds.plan import BuildPlan

LOCAL = "local"


@dataclass(frozen=True, kw_only=True)
class QueuedBuild:
    """One build of the batch: a target and a variant (the rest of the options are shared)."""

    target: str
    variant: str

    @property
    def name(self) -> str:
        return f"{self.target}/{self.variant}"


@dataclass(kw_only=True)
class BuildOutcome:
    build: QueuedBuild
    engine: str | None = None  # the engine that ran it (None: no engine was left to run it)
    result: BuildResult | None = None
    error: str | None = None
    started_s: float | None = None  # from the batch's start
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.result is not None


@dataclass(kw_only=True)
class EngineReport:
    engine: str
    error: str | None = None  # why this engine left the queue
    builds: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(kw_only=True)
class BatchResult:
    outcomes: list[BuildOutcome]
    engines: list[EngineReport]
    duration_s: float

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes) and all(e.ok for e in self.engines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "duration_s": round(self.duration_s, 1),
            "builds": [
                {
                    "target": o.build.target,
                    "variant": o.build.variant,
                    "engine": o.engine,
                    "ok": o.ok,
                    "error": o.error,
                    "started_s": None if o.started_s is None else round(o.started_s, 1),
                    "duration_s": round(o.duration_s, 1),
                    "ccache": o.result.ccache.as_dict() if o.result else None,
                    "build_dir": str(o.result.build_dir) if o.result else None,
                    "artifact": str(o.result.artifact.directory) if o.result and o.result.artifact else None,
                }
                for o in self.outcomes
            ],
            "engines": [
                {"engine": e.engine, "ok": e.ok, "error": e.error, "builds": e.builds} for e in self.engines
            ],
        }


def engine_label(url: str) -> str:
    return "the local Docker engine" if url == LOCAL else url


# (build, engine) -> the plan for that engine's cores and memory.
Planner = Callable[[QueuedBuild, "Engine"], "BuildPlan"]
# (plan, engine, the workstation's engine or None when they are the same, log) -> result.
Executor = Callable[["BuildPlan", "Engine", "Engine | None", Log], "BuildResult"]
# An engine URL ("local" or a --docker-host address) -> a connected engine.
Connector = Callable[[str], "Engine"]


@dataclass(frozen=True, kw_only=True)
class BatchSteps:
    """How the batch reaches an engine, plans a build for it and runs the build there."""

    connect: Connector
    plan: Planner
    execute: Executor


def run_batch(
    builds: Sequence[QueuedBuild], engines: Sequence[str], steps: BatchSteps, *, log: Log
) -> BatchResult:
    """Every build made on one of ``engines`` (one build per engine at a time), in parallel."""
    started = time.monotonic()
    queue: deque[QueuedBuild] = deque(builds)
    lock = threading.Lock()
    outcomes = {build: BuildOutcome(build=build) for build in builds}
    reports = [EngineReport(engine=url) for url in engines]

    def next_build() -> QueuedBuild | None:
        with lock:
            return queue.popleft() if queue else None

    def worker(report: EngineReport) -> None:
        engine = _EngineWorker(steps=steps, report=report, started=started, log=log)
        if not engine.connect():
            return
        while (build := next_build()) is not None:
            if not engine.build(outcomes[build]):
                return

    threads = [threading.Thread(target=worker, args=(report,), daemon=True) for report in reports]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for outcome in outcomes.values():
        if outcome.engine is None:
            outcome.error = (
                "not built: no engine was left to build it ("
                + "; ".join(f"{engine_label(r.engine)}: {r.error}" for r in reports if r.error)
                + ")"
            )
    return BatchResult(
        outcomes=[outcomes[b] for b in builds], engines=reports, duration_s=time.monotonic() - started
    )


class _EngineWorker:
    """One engine's worker: it connects, then builds what it takes from the queue, one at a time."""

    def __init__(self, *, steps: BatchSteps, report: EngineReport, started: float, log: Log) -> None:
        self.steps = steps
        self.report = report
        self.started = started  # the batch's start
        self.log = log
        self.engine: Engine | None = None
        self.local: Engine | None = None  # the workstation's, when the engine is another machine's

    def connect(self) -> bool:
        """False when the engine cannot be reached: it then leaves the queue to the others."""
        url = self.report.engine
        try:
            self.engine = self.steps.connect(url)
            self.engine.ping()
            self.local = None if url == LOCAL else self.steps.connect(LOCAL)
        except OrchError as error:
            self.report.error = error.message
            _prefixed(self.log, url)(
                f"engine unreachable: {error.message}; its builds go to the other engines"
            )
            return False
        return True

    def build(self, outcome: BuildOutcome) -> bool:
        """One build on the engine, its outcome recorded; False when the engine stopped answering."""
        engine, url, build = self.engine, self.report.engine, outcome.build
        assert engine is not None, "connect() first"
        outcome.engine = url
        self.report.builds.append(build.name)
        build_say = _prefixed(self.log, f"{url} {build.name}")
        build_say("starting")
        begun = time.monotonic()
        outcome.started_s = begun - self.started
        try:
            outcome.result = self.steps.execute(self.steps.plan(build, engine), engine, self.local, build_say)
            build_say(f"done in {time.monotonic() - begun:.0f} s")
        except OrchError as error:
            outcome.error = error.message + (f" ({error.hint})" if error.hint else "")
            build_say(f"failed: {error.message}")
            if not _engine_alive(engine):
                self.report.error = f"stopped answering during {build.name}: {error.message}"
                return False
        except Exception as error:  # noqa: BLE001 -- one build's surprise must not lose the others'
            outcome.error = f"{type(error).__name__}: {error}"
            build_say(f"failed: {outcome.error}")
        finally:
            outcome.duration_s = time.monotonic() - begun
        return True


def _engine_alive(engine: Engine) -> bool:
    try:
        return engine.ping()
    except OrchError:
        return False


def _prefixed(log: Log, prefix: str) -> Log:
    def say(line: str) -> None:
        log(f"[{prefix}] {line}")

    return say


def prepare_shared(plans: Sequence[BuildPlan], local: Engine, log: Log) -> None:
    """What several builds share, made once on the workstation before they start in parallel: each
    distinct source tree (fetched, extracted, patched) and each build image. The engines then get
    the image sent as a single remote build gets it, and nothing is fetched twice at once."""
    sources: set[tuple[Any, ...]] = set()
    images: set[str] = set()
    for plan in plans:
        key = (plan.source.kind, plan.source.location, plan.source.ref, plan.source.version)
        if key not in sources:
            sources.add(key)
            base = ensure_base_image_on(local, plan, log) if plan.source.kind == "debian" else None
            prepare_source(plan.source, engine=local, base_image=base, log=log)
        if plan.image.tag not in images:
            images.add(plan.image.tag)
            ensure_build_image(local, plan, log)
