"""Reading the bench's stored formats (``records``): the one place a JSON document becomes a typed one.

``board_record`` and ``run_meta`` read what the results store loads, ``agent_document`` what an agent
printed. Each checks the keys orch reads (those it must have, and the type of those it may have) and
raises ``Malformed`` naming the key that is wrong, as a path into the document
(``measurements[2].key: key 'release' is missing``); the store turns that into its *damaged* record
of the file. A board record is completed on the way with what records of older orch left out (a
measurement key without ``runner`` was the Python agent's), so its readers need no defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar, cast

from orchestrator.bench.records import (
    BOARD_SCHEMA,
    AgentDocument,
    Agreement,
    BoardInfo,
    BoardRecord,
    ClocksRecord,
    MeasurementKey,
    PlanRecord,
    Progress,
    QuantisedRecord,
    ReleaseRecord,
    RunMeta,
    StoredColdStarts,
    StoredMeasurement,
    TuneRecord,
)
from orchestrator.bench.series import series_of

_Entry = TypeVar("_Entry")


class Malformed(ValueError):
    """A document that is not of its format; the message names the key."""


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _any_number(value: object) -> bool:
    """A number, NaN included (a statistic that could not be computed is stored as NaN)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What each kind of value must be; "kind?" is that kind or null.
KINDS: dict[str, Callable[[object], bool]] = {
    "text": lambda value: isinstance(value, str),
    "flag": lambda value: isinstance(value, bool),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": _number,
    "figure": _any_number,
    "list": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
    "objects": lambda value: isinstance(value, list) and all(isinstance(item, dict) for item in value),
    "texts": lambda value: isinstance(value, list) and all(isinstance(item, str) for item in value),
    "numbers": lambda value: isinstance(value, list) and all(_number(item) for item in value),
}
_WORDS = {
    "figure": "number",
    "objects": "list of objects",
    "texts": "list of texts",
    "numbers": "list of numbers",
}


def get(document: object, path: str) -> tuple[bool, object]:
    """(present, value) of a dotted key path."""
    current = document
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return False, None
        current = current[part]
    return True, current


def fits(value: object, kind: str) -> bool:
    if kind.endswith("?"):
        return value is None or fits(value, kind[:-1])
    check = KINDS.get(kind)
    if check is None:
        raise ValueError(kind)
    return check(value)


def kind_text(kind: str) -> str:
    bare = kind.rstrip("?")
    return _WORDS.get(bare, "an object" if bare == "object" else bare) + (
        " or null" if kind.endswith("?") else ""
    )


Checks = Sequence[tuple[str, str]]  # (dotted key, kind)


def problems(document: object, required: Checks, optional: Checks = ()) -> list[str]:
    """What is wrong with ``document``: each key of ``required`` missing or of another kind, each of
    ``optional`` present but of another kind."""
    found = []
    for checks, must in ((required, True), (optional, False)):
        for key, kind in checks:
            present, value = get(document, key)
            if not present:
                if must:
                    found.append(f"key '{key}' is missing")
            elif not fits(value, kind):
                found.append(f"key '{key}' must be {kind_text(kind)}")
    return found


def check(document: object, where: str, required: Checks, optional: Checks = ()) -> dict[str, object]:
    """``document`` as an object whose keys fit, or Malformed naming ``where`` and the first key wrong."""
    if not isinstance(document, dict):
        raise Malformed(f"{where}: not an object (a JSON {type(document).__name__})")
    wrong = problems(document, required, optional)
    if wrong:
        raise Malformed(f"{where}: {wrong[0]}")
    return document


# --------------------------------------------------------------------------- the agent's document

_AGENT = (
    ("timing", "object"),
    ("stats", "object"),
    ("ort", "object"),
    ("ort.version", "text?"),
    ("board", "object"),
    ("board.before", "object"),
    ("board.after", "object"),
    ("board.before.cpufreq", "object"),
    ("board.before.thermal", "objects"),
    ("board.after.thermal", "objects"),
    ("memory", "object"),
    ("memory.peak_rss_kb", "integer?"),
    ("timing.launch_to_main_ms", "figure?"),
    ("timing.launch_to_session_ms", "figure?"),
    ("timing.launch_to_first_result_ms", "figure?"),
    ("stats.p50_ms", "figure"),
    ("stats.p99_ms", "figure"),
    ("stats.n", "integer"),
    ("stats.throughput_ips", "figure"),
)


def agent_document(raw: object, where: str, *, timed: bool = True) -> AgentDocument:
    """An agent's (or the native runner's) document; ``timed``: it must hold its latencies."""
    required = (("timing.latencies_ms", "numbers"),) if timed else ()
    document = check(raw, where, required, _AGENT)
    for state in ("before", "after"):
        for index, zone in enumerate(cast(list[object], get(document, f"board.{state}.thermal")[1] or [])):
            check(zone, f"{where}.board.{state}.thermal[{index}]", (), (("temp_c", "figure?"),))
    cores = cast(dict[str, object], get(document, "board.before.cpufreq")[1] or {})
    for cpu, core in cores.items():
        check(core, f"{where}.board.before.cpufreq.{cpu}", (), (("governor", "text?"),))
    return cast(AgentDocument, document)


# --------------------------------------------------------------------------- the board record


def measurement_key(raw: object, where: str) -> MeasurementKey:
    """A measurement's key, with the defaults of what older orch did not record."""
    optional = (("runner", "text"), ("quant", "text"), ("ep", "text"), ("opt_level", "text"))
    threads = (("intra_threads", "integer"), ("inter_threads", "integer"))
    required = (("variant", "text"), ("release", "text"), ("model", "text"))
    key = check(raw, where, required, (*optional, *threads))
    return {
        "runner": str(key.get("runner", "python")),
        "variant": str(key["variant"]),
        "release": str(key["release"]),
        "model": str(key["model"]),
        "quant": str(key.get("quant", "fp32")),
        "ep": str(key.get("ep", "cpu")),
        "opt_level": str(key.get("opt_level", "all")),
        "intra_threads": cast(int, key.get("intra_threads", 0)),
        "inter_threads": cast(int, key.get("inter_threads", 0)),
    }


_MEASURED = (
    ("round", "integer"),
    ("step", "integer"),
    ("remote_duration_s", "number"),
    ("started_as", "text"),
)


def measurement(raw: object, where: str) -> StoredMeasurement:
    entry = check(raw, where, (("key", "object"), ("agent", "object")), _MEASURED)
    found: StoredMeasurement = {
        "key": measurement_key(entry["key"], f"{where}.key"),
        "round": cast(int, entry.get("round", 0)),
        "agent": agent_document(entry["agent"], f"{where}.agent"),
    }
    if "step" in entry:
        found["step"] = cast(int, entry["step"])
    if "remote_duration_s" in entry:
        found["remote_duration_s"] = cast(float, entry["remote_duration_s"])
    if "started_as" in entry:
        found["started_as"] = cast(str, entry["started_as"])
    return found


def cold_start(raw: object, where: str) -> StoredColdStarts:
    entry = check(raw, where, (("key", "object"), ("launches", "objects")), _MEASURED[:2])
    launches = cast(list[object], entry["launches"])
    found: StoredColdStarts = {
        "key": measurement_key(entry["key"], f"{where}.key"),
        "round": cast(int, entry.get("round", 0)),
        "launches": [
            agent_document(doc, f"{where}.launches[{index}]", timed=False)
            for index, doc in enumerate(launches)
        ],
    }
    if "step" in entry:
        found["step"] = cast(int, entry["step"])
    return found


_BOARD_OPTIONAL = (
    ("run_id", "text"),
    ("status", "text?"),
    ("error", "text?"),
    ("started", "text"),
    ("finished", "text?"),
    ("board_info", "object"),
    ("board_info.tags", "texts"),
    ("plan", "object"),
    ("plan.rounds", "integer"),
    ("releases", "objects"),
    ("clocks", "object?"),
    ("clocks.pinned", "flag"),
    ("clocks.restored", "flag?"),
    ("measurements", "list"),
    ("cold_starts", "list"),
    ("quantization", "object"),
    ("agent_host_fallbacks", "texts"),
    ("tune", "object"),
)
_RELEASE = (("id", "text"),)
_RELEASE_OPTIONAL = (
    ("variant", "text"),
    ("ort_version", "text"),
    ("route", "text"),
    ("wheel_size", "integer?"),
    ("native", "object?"),
    ("native.runner_size", "integer?"),
    ("native.library_size", "integer?"),
)
_QUANTISED = (("int8_file", "text"), ("mode", "text"))
_QUANTISED_OPTIONAL = (
    ("calibration", "object"),
    ("calibration.source", "text"),
    ("ops", "object"),
    ("agreement", "object?"),
    ("agreement.samples", "integer"),
    ("agreement.outputs", "objects"),
)


def board_record(raw: object) -> BoardRecord:
    """A stored board record (``results/<run>/<board>.json``), completed with the defaults of older
    orch; Malformed names what is wrong."""
    if not isinstance(raw, dict):
        raise Malformed(f"not a board record (a JSON {type(raw).__name__}, not an object)")
    if raw.get("schema") != BOARD_SCHEMA:
        raise Malformed(f"not an orch board record (schema {raw.get('schema')!r}, expected {BOARD_SCHEMA!r})")
    if not isinstance(raw.get("board"), str) or not raw["board"]:
        raise Malformed("no 'board' name")
    document = check(raw, "the board record", (), _BOARD_OPTIONAL)
    releases = cast(list[object], document.get("releases", []))
    for index, release in enumerate(releases):
        check(release, f"releases[{index}]", _RELEASE, _RELEASE_OPTIONAL)
    record: BoardRecord = {
        "schema": BOARD_SCHEMA,
        "run_id": cast(str, document.get("run_id", "")),
        "board": cast(str, document["board"]),
        "status": cast("str | None", document.get("status")),
        "error": cast("str | None", document.get("error")),
        "started": cast(str, document.get("started", "")),
        "finished": cast("str | None", document.get("finished")),
        "board_info": cast(BoardInfo, document.get("board_info", {})),
        "plan": cast(PlanRecord, document.get("plan", {})),
        "releases": cast(list[ReleaseRecord], releases),
        "clocks": cast("ClocksRecord | None", document.get("clocks")),
        "measurements": _each(document, "measurements", measurement, "a measurement is malformed"),
        "cold_starts": _each(document, "cold_starts", cold_start, "a cold start is malformed"),
    }
    if "quantization" in document:
        record["quantization"] = _quantization(document["quantization"])
    if "agent_host_fallbacks" in document:
        record["agent_host_fallbacks"] = cast(list[str], document["agent_host_fallbacks"])
    if "tune" in document:
        record["tune"] = tune_record(document["tune"], "tune")
    if "interrupted" in document:
        record["interrupted"] = cast(Progress, check(document["interrupted"], "interrupted", _PROGRESS))
    for series in series_of(record):
        if not series.latencies_ms:
            raise Malformed(f"a measurement is malformed: {series.label} has no latencies")
    return record


_PROGRESS = (("steps_done", "integer"), ("steps_planned", "integer"), ("rounds_complete", "integer"))


def _each(
    document: Mapping[str, object], name: str, read: Callable[[object, str], _Entry], what: str
) -> list[_Entry]:
    """Every entry of the list ``name``, read; Malformed says ``what`` and which entry."""
    entries = cast(list[object], document.get(name, []))
    try:
        return [read(entry, f"{name}[{index}]") for index, entry in enumerate(entries)]
    except Malformed as error:
        raise Malformed(f"{what}: {error}") from None


def _quantization(raw: object) -> dict[str, dict[str, QuantisedRecord]]:
    """release id -> fp32 model -> its int8 copy."""
    releases = check(raw, "quantization", ())
    for release, models in releases.items():
        for model, made in check(models, f"quantization.{release}", ()).items():
            where = f"quantization.{release}.{model}"
            check(made, where, _QUANTISED, _QUANTISED_OPTIONAL)
            outputs = cast(list[object], get(made, "agreement.outputs")[1] or [])
            for index, output in enumerate(outputs):
                check(output, f"{where}.agreement.outputs[{index}]", _AGREEMENT_OUTPUT, _TOP1)
    return cast(dict[str, dict[str, QuantisedRecord]], releases)


_AGREEMENT_OUTPUT = (("max_abs_diff", "figure"), ("max_abs_fp32", "figure"))
_TOP1 = (("classifier", "flag"), ("top1_agreement", "figure"), ("top1_rows", "integer"))


def agreement(raw: object, where: str) -> Agreement:
    """What ``board_side/quant_agreement.py`` printed: fp32 against int8 per output."""
    document = check(raw, where, (("samples", "integer"), ("outputs", "objects")))
    for index, output in enumerate(cast(list[object], document["outputs"])):
        check(output, f"{where}: outputs[{index}]", _AGREEMENT_OUTPUT, _TOP1)
    return cast(Agreement, document)


# --------------------------------------------------------------------------- `orch tune`'s record

_RUNG = (("rung", "integer"), ("kind", "text"), ("runs_each", "integer"), ("candidates", "integer"))
_RUNG_OPTIONAL = (("wanted_runs", "integer"), ("wall_s", "figure"), ("dropped", "objects"))
_DROPPED = (("label", "text"), ("reason", "text"))
_RESULT = (
    ("label", "text"),
    ("median_ms", "figure"),
    ("ci_low", "figure?"),
    ("ci_high", "figure?"),
    ("runs", "integer"),
    ("n", "integer"),
    ("vs_default", "object"),
    ("vs_stock", "object"),
)
_AGAINST_OPTIONAL = (("missing", "text"), ("same", "flag"), ("label", "text"))
_COMPARED = (
    ("ratio", "figure"),
    ("ci_low", "figure?"),
    ("ci_high", "figure?"),
    ("runs_a", "integer"),
    ("runs_b", "integer"),
    ("n_a", "integer"),
    ("n_b", "integer"),
    ("verdict", "text"),
)


_SEARCH = (
    ("budget_s", "figure"),
    ("elapsed_s", "figure"),
    ("per_run_s", "figure"),
    ("threshold", "figure"),
    ("candidates", "objects"),
    ("rungs", "objects"),
    ("alive", "objects"),
    ("stopped", "text"),
    ("confirm", "text"),
    ("winner", "object?"),
    ("default", "object?"),
    ("stock", "object?"),
)
_TUNE_OPTIONAL = (("model", "text"), ("stock_note", "text"), ("result", "object"), ("result.command", "text"))


def tune_record(raw: object, where: str) -> TuneRecord:
    """A board's `orch tune` record: the search, its rungs and, once the search ended, its result."""
    record = check(raw, where, _SEARCH, _TUNE_OPTIONAL)
    for index, rung in enumerate(cast(list[object], record["rungs"])):
        check(rung, f"{where}.rungs[{index}]", _RUNG, _RUNG_OPTIONAL)
        for dropped, item in enumerate(cast(list[object], get(rung, "dropped")[1] or [])):
            check(item, f"{where}.rungs[{index}].dropped[{dropped}]", _DROPPED)
    if "result" in record:
        result = check(record["result"], f"{where}.result", _RESULT)
        for side in ("vs_default", "vs_stock"):
            against = check(result[side], f"{where}.result.{side}", (), _AGAINST_OPTIONAL)
            if "missing" not in against and not against.get("same"):
                check(against, f"{where}.result.{side}", (*_COMPARED, ("label", "text")))
    return cast(TuneRecord, record)


# --------------------------------------------------------------------------- run.json

_RUN_OPTIONAL = (
    ("run_id", "text"),
    ("created", "text"),
    ("command", "text"),
    ("status", "text"),
    ("plan", "object"),
    ("plan.rounds", "integer"),
    ("boards", "object"),
    ("rounds_complete", "integer"),
    ("kind", "text"),
    ("tune", "object"),
    ("tune.boards", "object"),
)


def run_meta(raw: object) -> RunMeta:
    """A run's run.json, as it is (``results show --json`` prints it whole)."""
    if not isinstance(raw, dict):
        raise Malformed(f"not a run record (a JSON {type(raw).__name__}, not an object)")
    meta = check(raw, "run.json", (), _RUN_OPTIONAL)
    for board, outcome in cast(dict[str, object], meta.get("boards", {})).items():
        check(outcome, f"boards.{board}", (), (("status", "text?"), ("error", "text?")))
    for board, record in cast(dict[str, object], get(meta, "tune.boards")[1] or {}).items():
        tune_record(record, f"tune.boards.{board}")
    return cast(RunMeta, meta)
