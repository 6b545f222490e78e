"""The native runner's side of a bench run: its JSON document, cold starts and footprint. Pure.

``board_side/native_runner.c`` prints one document per process (schema ``orch-native-runner/1``),
shaped like the Python agent's so series, tables and exports read both alike. Its schema is
checked here before anything is stored: a runner of another orch, or a truncated document, is named
with the key that is wrong instead of turning into a KeyError in a table.

A *cold start* is one process launch, from the exec (``cold_launch.sh`` passes the launch time in
``ORCH_LAUNCH_T0_NS``) to its first result; each launch is one sample. The Python agent reports the
same three moments (main, session created, first result), so the two runners compare like for like.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from orchestrator.bench import stats
from orchestrator.bench.reading import fits, get
from orchestrator.bench.records import AgentDocument, BoardRecord, MeasurementKey, StoredColdStarts
from orchestrator.bench.series import SeriesKey
from orchestrator.builds.native_runner.plan import RUNNER_SCHEMA

SCHEMA = RUNNER_SCHEMA
COLD_FIELDS = ("launch_to_main_ms", "launch_to_session_ms", "launch_to_first_result_ms")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# (key, what it must be) of a runner document; "?" = may also be null.
_ALWAYS = (
    ("schema", "text"),
    ("ok", "flag"),
    ("runner.built_for", "text"),
    ("runner.api_version", "integer"),
    ("argv", "texts"),
    ("memory.peak_rss_kb", "integer"),
)
_WHEN_OK = (
    ("ort.version", "text"),
    ("ort.library", "text?"),
    ("model.name", "text"),
    ("model.sha256", "text"),
    ("model.size", "integer"),
    ("model.inputs", "list"),
    ("model.outputs", "list"),
    ("session.providers", "texts"),
    ("session.opt_level", "text"),
    ("session.intra_op_num_threads", "integer"),
    ("session.inter_op_num_threads", "integer"),
    ("timing.launch_source", "text?"),
    ("timing.launch_to_main_ms", "number?"),
    ("timing.launch_to_session_ms", "number?"),
    ("timing.launch_to_first_result_ms", "number?"),
    ("timing.session_create_s", "number"),
    ("timing.first_inference_ms", "number"),
    ("timing.runs", "integer"),
    ("timing.latencies_ms", "numbers"),
    ("stats.n", "integer"),
    ("stats.p50_ms", "number"),
    ("stats.p99_ms", "number"),
)
_WHEN_FAILED = (("error", "text"), ("stage", "text"))


def runner_problems(document: object) -> list[str]:
    """What is wrong with a runner document (empty: it is one), each naming the key."""
    if not isinstance(document, dict):
        return ["the runner's output is not a JSON object"]
    if document.get("schema") != SCHEMA:
        return [f"schema is {document.get('schema')!r}, expected {SCHEMA!r} (a runner of another orch?)"]
    checks = list(_ALWAYS)
    checks += _WHEN_OK if document.get("ok") is True else _WHEN_FAILED
    problems = []
    for key, kind in checks:
        present, value = get(document, key)
        if not present:
            problems.append(f"key '{key}' is missing")
        elif not fits(value, kind):
            problems.append(
                f"key '{key}' must be {kind.rstrip('?')}{' or null' if kind.endswith('?') else ''}"
            )
    if document.get("ok") is True and not problems:
        latencies = document["timing"]["latencies_ms"]
        if len(latencies) != document["timing"]["runs"] or document["stats"]["n"] != len(latencies):
            problems.append("timing.runs, stats.n and the number of timing.latencies_ms differ")
    return problems


@dataclass(frozen=True, kw_only=True)
class ColdSample:
    """One launch: milliseconds from the exec to main, to the session, to the first result."""

    launch_to_main_ms: float | None
    launch_to_session_ms: float | None
    launch_to_first_result_ms: float
    peak_rss_kb: int | None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def cold_sample(document: AgentDocument) -> ColdSample | None:
    """The cold-start figures of one launched process's document (agent or runner), or None when
    the process was not launched with a launch time."""
    timing = document.get("timing", {})
    first = _finite(timing.get("launch_to_first_result_ms"))
    if first is None:
        return None
    return ColdSample(
        launch_to_main_ms=_finite(timing.get("launch_to_main_ms")),
        launch_to_session_ms=_finite(timing.get("launch_to_session_ms")),
        launch_to_first_result_ms=float(first),
        peak_rss_kb=document.get("memory", {}).get("peak_rss_kb"),
    )


@dataclass(frozen=True, kw_only=True)
class ColdStart:
    """Every cold-start sample of one (board, series key) over a run, with the footprint on disk."""

    board: str
    key: MeasurementKey
    samples: tuple[ColdSample, ...]
    peak_rss_kb: tuple[int, ...]  # of every process measured (cold and warm)
    runner_bytes: int | None  # native: the runner binary
    library_bytes: int | None  # native: ORT's C library; python: the wheel
    label: str

    def first_result(self) -> stats.Summary:
        return stats.summarize([s.launch_to_first_result_ms for s in self.samples])

    def to_main(self) -> stats.Summary | None:
        values = [s.launch_to_main_ms for s in self.samples if s.launch_to_main_ms is not None]
        return stats.summarize(values) if values else None


def _release_footprint(board: BoardRecord, release_id: str, runner: str) -> tuple[int | None, int | None]:
    for release in board["releases"]:
        if release["id"] != release_id:
            continue
        native = release.get("native") or {}
        if runner == "native":
            return native.get("runner_size"), native.get("library_size")
        return None, release.get("wheel_size")
    return None, None


def cold_starts(boards: Iterable[BoardRecord]) -> list[ColdStart]:
    """Cold starts per board and series key, in first-measured order."""
    found: list[ColdStart] = []
    for board in boards:
        grouped: dict[SeriesKey, list[StoredColdStarts]] = {}
        for entry in board["cold_starts"]:
            grouped.setdefault(SeriesKey.from_json(entry["key"]), []).append(entry)
        rss_by_key: dict[SeriesKey, list[int]] = {}
        for measurement in board["measurements"]:
            peak = measurement["agent"].get("memory", {}).get("peak_rss_kb")
            if peak is not None:
                rss_by_key.setdefault(SeriesKey.from_json(measurement["key"]), []).append(peak)
        for identity, entries in grouped.items():
            key = entries[0]["key"]
            samples = [
                sample
                for entry in entries
                for launched in entry["launches"]
                if (sample := cold_sample(launched)) is not None
            ]
            if not samples:
                continue
            rss = [s.peak_rss_kb for s in samples if s.peak_rss_kb is not None] + rss_by_key.get(identity, [])
            runner_bytes, library_bytes = _release_footprint(board, key["release"], key["runner"])
            found.append(
                ColdStart(
                    board=board["board"],
                    key=key,
                    samples=tuple(samples),
                    peak_rss_kb=tuple(rss),
                    runner_bytes=runner_bytes,
                    library_bytes=library_bytes,
                    label=f"{key['variant']} · {key['model']} · {key['runner']}",
                )
            )
    return found


def ratio(native: ColdStart, python: ColdStart) -> float:
    """Median cold start of native over Python's (below 1: native starts faster)."""
    return native.first_result().p50 / python.first_result().p50


def pair_runners(found: Sequence[ColdStart]) -> list[tuple[ColdStart, ColdStart]]:
    """(native, python) cold starts of the same board and measurement."""
    pairs = []
    for native in found:
        if native.key["runner"] != "native":
            continue
        wanted: MeasurementKey = {**native.key, "runner": "python"}
        python = next((c for c in found if c.board == native.board and c.key == wanted), None)
        if python is not None:
            pairs.append((native, python))
    return pairs
