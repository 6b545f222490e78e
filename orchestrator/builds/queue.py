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

from orchestrator.errors import OrchError

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine
    from orchestrator.builds.execute import BuildResult
    from orchestrator.builds.plan import BuildPlan

LOCAL = "local"


@dataclass(frozen=True, kw_only=True)
class BuildRequest:
    """One build of the batch: a target and a variant (the rest of the options are shared)."""

    target: str
    variant: str

    @property
    def name(self) -> str:
        return f"{self.target}/{self.variant}"


@dataclass(kw_only=True)
class BuildOutcome:
    request: BuildRequest
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
                    "target": o.request.target,
                    "variant": o.request.variant,
                    "engine": o.engine,
                    "ok": o.ok,
                    "error": o.error,
                    "started_s": None if o.started_s is None else round(o.started_s, 1),
                    "duration_s": round(o.duration_s, 1),
                    "ccache": o.result.ccache if o.result else None,
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


# (request, engine) -> the plan for that engine's cores and memory.
Planner = Callable[[BuildRequest, "Engine"], "BuildPlan"]
# (plan, engine, the workstation's engine or None when they are the same, log) -> result.
Executor = Callable[["BuildPlan", "Engine", "Engine | None", Callable[[str], None]], "BuildResult"]
# An engine URL ("local" or a --docker-host address) -> a connected engine.
Connector = Callable[[str], "Engine"]


def run_batch(
    requests: Sequence[BuildRequest],
    engines: Sequence[str],
    *,
    connect: Connector,
    plan: Planner,
    execute: Executor,
    log: Callable[[str], None],
) -> BatchResult:
    """Every request built on one of ``engines`` (one build per engine at a time), in parallel."""
    started = time.monotonic()
    queue: deque[BuildRequest] = deque(requests)
    lock = threading.Lock()
    outcomes = {request: BuildOutcome(request=request) for request in requests}
    reports = [EngineReport(engine=url) for url in engines]

    def next_request() -> BuildRequest | None:
        with lock:
            return queue.popleft() if queue else None

    def worker(report: EngineReport) -> None:
        url = report.engine
        say = _prefixed(log, url)
        try:
            engine = connect(url)
            engine.ping()
            local = None if url == LOCAL else connect(LOCAL)
        except OrchError as error:
            report.error = error.message
            say(f"engine unreachable: {error.message}; its builds go to the other engines")
            return
        while (request := next_request()) is not None:
            outcome = outcomes[request]
            outcome.engine = url
            report.builds.append(request.name)
            build_say = _prefixed(log, f"{url} {request.name}")
            build_say("starting")
            begun = time.monotonic()
            outcome.started_s = begun - started
            try:
                outcome.result = execute(plan(request, engine), engine, local, build_say)
                build_say(f"done in {time.monotonic() - begun:.0f} s")
            except OrchError as error:
                outcome.error = error.message + (f" ({error.hint})" if error.hint else "")
                build_say(f"failed: {error.message}")
                if not _engine_alive(engine):
                    report.error = f"stopped answering during {request.name}: {error.message}"
                    return
            except Exception as error:  # noqa: BLE001 - one build's surprise must not lose the others'
                outcome.error = f"{type(error).__name__}: {error}"
                build_say(f"failed: {outcome.error}")
            finally:
                outcome.duration_s = time.monotonic() - begun

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
        outcomes=[outcomes[r] for r in requests], engines=reports, duration_s=time.monotonic() - started
    )


def _engine_alive(engine: Engine) -> bool:
    try:
        return engine.ping()
    except OrchError:
        return False


def _prefixed(log: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    def say(line: str) -> None:
        log(f"[{prefix}] {line}")

    return say


def prepare_shared(plans: Sequence[BuildPlan], local: Engine, log: Callable[[str], None]) -> None:
    """What several builds share, made once on the workstation before they start in parallel: each
    distinct source tree (fetched, extracted, patched) and each build image. The engines then get
    the image sent as a single remote build gets it, and nothing is fetched twice at once."""
    from orchestrator.builds.execute import ensure_base_image_on, ensure_build_image
    from orchestrator.builds.sources.ort import prepare_source

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
