"""The bench's stored formats, as types: what ``results/<run>/<board>.json`` and ``run.json`` hold, and
the agent's JSON document as the bench reads it.

They are written by ``board_document.BoardDocument.as_dict`` and ``execute.run_bench`` and read back in
one place, ``reading`` (a stored file that does not fit becomes the store's *damaged* record, naming
the file and the key). Everything else takes these types, never a bare JSON object.

TypedDicts, not classes: the documents are JSON read and written as they are, and a reader of a
stored file (a test, a script, ``results show --json``) indexes them by the names on disk. The keys
below are those orch reads; a document may hold more (the agent records much that only a person
reads), and they are kept. A metric added to the agent's document is a key of ``AgentDocument`` (or
of a part of it, like ``Timing``) and its kind in ``reading._AGENT``; records without it still load.
"""

from __future__ import annotations

from typing import TypedDict

BOARD_SCHEMA = "orch-bench-board/1"  # the tag of a board record

# --------------------------------------------------------------------------- the agent's document


class Timing(TypedDict, total=False):
    """``timing`` of an agent's (or the native runner's) document: what was timed, in ms unless named."""

    latencies_ms: list[float]  # every timed inference: the series
    runs: int
    session_create_s: float
    first_inference_ms: float
    launch_source: str | None
    launch_to_main_ms: float | None  # cold start (a launch with ORCH_LAUNCH_T0_NS): exec -> main
    launch_to_session_ms: float | None
    launch_to_first_result_ms: float | None


class AgentStats(TypedDict, total=False):
    """``stats``: the agent's own summary of its latencies (shown while a run goes on)."""

    n: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    throughput_ips: float


class OrtInfo(TypedDict, total=False):
    version: str  # the onnxruntime the process really loaded


class CoreState(TypedDict, total=False):
    governor: str | None


class ThermalZone(TypedDict, total=False):
    zone: str
    type: str | None
    temp_c: float | None


class BoardState(TypedDict, total=False):
    """What the agent read of the board before (and after) it measured."""

    kernel: str
    cpu_model: str | None
    online_cores: int
    cpufreq: dict[str, CoreState]  # per CPU
    thermal: list[ThermalZone]


class BoardStates(TypedDict, total=False):
    before: BoardState
    after: BoardState


class Memory(TypedDict, total=False):
    peak_rss_kb: int | None


class AgentDocument(TypedDict, total=False):
    """One agent process's JSON document (``board_side/bench_agent.py``; the native runner's is shaped
    alike). A measurement's has ``timing.latencies_ms``."""

    schema: str
    ok: bool
    error: str
    stage: str
    timing: Timing
    stats: AgentStats
    ort: OrtInfo
    board: BoardStates
    memory: Memory


# --------------------------------------------------------------------------- the board document


class MeasurementKey(TypedDict):
    """What one agent run measured (``plan.Step.key``); ``series.SeriesKey`` is the same, computed with.
    Results of older orch lack the later keys: ``reading`` fills in what they were then."""

    runner: str  # "python" or "native"
    variant: str
    release: str
    model: str
    quant: str  # "fp32", "int8", "int8-static"
    ep: str
    opt_level: str
    intra_threads: int
    inter_threads: int


class _Measurement(TypedDict):
    key: MeasurementKey
    round: int
    agent: AgentDocument


class StoredMeasurement(_Measurement, total=False):
    """One agent run: its key, its round, the agent's document and how its process started (records
    of older orch lack the last three)."""

    step: int
    remote_duration_s: float
    started_as: str


class _ColdStarts(TypedDict):
    key: MeasurementKey
    round: int
    launches: list[AgentDocument]


class StoredColdStarts(_ColdStarts, total=False):
    """One cold-start step: one document per launched process."""

    step: int


class NativeFiles(TypedDict, total=False):
    """release.json's ``native``: the runner and ORT's C library, paths relative to the release."""

    runner: str
    runner_size: int | None
    library: str
    library_size: int | None


class _Release(TypedDict):
    id: str


class ReleaseRecord(_Release, total=False):
    """A measured release (``plan.ReleaseRef.as_json``)."""

    variant: str
    path: str
    python: str
    models: list[str]
    ort_version: str
    created: str
    current: bool
    route: str
    providers: list[str]
    native: NativeFiles | None
    wheel_size: int | None
    kind: str


class ClocksRecord(TypedDict):
    """What --pin-clocks did (``clocks.ClockState``)."""

    requested: bool
    pinned: bool
    previous: dict[str, str]  # sysfs file -> the governor it had
    jetson_clocks: str | None
    restored: bool | None
    messages: list[str]


class CalibrationRecord(TypedDict, total=False):
    source: str  # "user" or "generated"
    files: dict[str, str]
    id: str
    samples: int


class AgreementOutput(TypedDict, total=False):
    name: str
    max_abs_diff: float
    mean_abs_diff: float
    max_abs_fp32: float
    classifier: bool
    top1_agreement: float
    top1_rows: int


class Agreement(TypedDict, total=False):
    """fp32 against int8 on the board (``board_side/quant_agreement.py``)."""

    ok: bool
    samples: int
    outputs: list[AgreementOutput]


class QuantisedRecord(TypedDict):
    """An int8 copy measured beside its fp32 model (``quantise.Quantised``)."""

    int8_file: str
    mode: str
    calibration: CalibrationRecord
    ops: dict[str, int]  # quantisation operators in the int8 graph
    agreement: Agreement | None
    warnings: list[str]


class BoardInfo(TypedDict, total=False):
    hostname: str
    port: int
    target: str
    tags: list[str]
    groups: list[str]


class SettingRecord(TypedDict):
    ep: str
    opt_level: str
    intra_threads: int
    inter_threads: int


class CombinationRecord(SettingRecord):
    variant: str
    quant: str


class AgentOptionsRecord(TypedDict, total=False):
    warmup: int
    min_runs: int
    min_duration: float
    max_runs: int
    shapes: list[str]
    sysfs_root: str | None
    pin_cores: list[int]


class PlanRecord(TypedDict, total=False):
    """The plan a run measured (``plan.BenchPlan.as_dict``), as run.json and every board record keep it."""

    boards: list[str]
    variants: list[str]
    models: list[str]
    settings: list[SettingRecord]
    quantize: str | None
    calibration: CalibrationRecord
    rounds: int
    cooldown_s: float
    agent: AgentOptionsRecord
    pin_clocks: bool
    parallel: int
    step_timeout_s: float
    lock_timeout_s: float
    threshold: float
    ort_versions: dict[str, str]
    allow_version_mismatch: bool
    runners: list[str]
    cold_starts: int
    only: list[CombinationRecord]


class Progress(TypedDict):
    """What an interrupted board had done."""

    steps_done: int
    steps_planned: int
    rounds_complete: int


# --------------------------------------------------------------------------- `orch tune`'s record


class StandingRecord(TypedDict):
    candidate: CombinationRecord
    label: str
    runs: int
    n: int
    median_ms: float
    ratio_to_best: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    dropped: bool
    reason: str


class _Rung(TypedDict):
    rung: int
    kind: str  # "halving" or "confirm"
    runs_each: int
    candidates: int


class RungRecord(_Rung, total=False):
    wanted_runs: int
    rounds: list[int]  # first and last
    wall_s: float
    standings: list[StandingRecord]
    dropped: list[StandingRecord]


class SummaryRecord(TypedDict):
    """``stats.Summary.as_dict``: a series' latencies summarised, in ms."""

    n: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float


class ComparisonRecord(TypedDict):
    """``stats.Comparison.as_dict``: B against baseline A, run against run."""

    n_a: int
    n_b: int
    median_a_ms: float
    median_b_ms: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    threshold: float
    alpha: float
    verdict: str
    change_percent: float
    runs_a: int
    runs_b: int
    run_spread_a: float
    run_spread_b: float
    runs_disagree: bool
    method: str


class Against(TypedDict, total=False):
    """The tune's winner against a baseline: the same configuration, a comparison, or none (missing)."""

    baseline: CombinationRecord
    label: str
    same: bool
    missing: str  # why there is no baseline (no stock release deployed)
    # the comparison's figures (ComparisonRecord) when it is another configuration
    n_a: int
    n_b: int
    median_a_ms: float
    median_b_ms: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    threshold: float
    alpha: float
    verdict: str
    change_percent: float
    runs_a: int
    runs_b: int
    run_spread_a: float
    run_spread_b: float
    runs_disagree: bool
    method: str


class _TuneResult(TypedDict):
    winner: CombinationRecord
    label: str
    median_ms: float
    ci_low: float
    ci_high: float
    runs: int
    n: int
    vs_default: Against
    vs_stock: Against
    ties: list[str]


class TuneResult(_TuneResult, total=False):
    command: str  # the `orch bench` line that measures the comparison again


class _Search(TypedDict):
    """``tune.Search.as_dict``: the search as it stands."""

    budget_s: float
    elapsed_s: float
    per_run_s: float
    threshold: float
    candidates: list[CombinationRecord]
    rungs: list[RungRecord]
    alive: list[CombinationRecord]
    stopped: str
    confirm: str
    winner: CombinationRecord | None
    default: CombinationRecord | None
    stock: CombinationRecord | None


class TuneRecord(_Search, total=False):
    """A board's record of `orch tune` (its board record's ``tune``, and run.json's per board)."""

    model: str
    stock_note: str
    result: TuneResult


class TunePlanRecord(TypedDict):
    budget_s: float
    run_guess_s: float
    threads: list[int]
    opt_levels: list[str]
    eps: list[str]
    int8: str | None  # the int8 quantisation searched too (None: fp32 only)


class TuneRun(TypedDict):
    """run.json's ``tune``: the search asked for and every board's record."""

    plan: TunePlanRecord
    boards: dict[str, TuneRecord]


# --------------------------------------------------------------------------- the stored files


class _Board(TypedDict):
    schema: str
    run_id: str
    board: str
    status: str | None  # "ok", "failed", "interrupted" (None: a record of older orch without one)
    error: str | None
    started: str
    finished: str | None
    board_info: BoardInfo
    plan: PlanRecord
    releases: list[ReleaseRecord]
    clocks: ClocksRecord | None
    measurements: list[StoredMeasurement]
    cold_starts: list[StoredColdStarts]


class BoardRecord(_Board, total=False):
    """``results/<run>/<board>.json``: one board's part of a run (schema ``BOARD_SCHEMA``)."""

    quantization: dict[str, dict[str, QuantisedRecord]]  # release id -> fp32 model -> its int8 copy
    agent_host_fallbacks: list[str]  # why runs started as commands instead of forks
    tune: TuneRecord
    interrupted: Progress


class BoardOutcome(TypedDict, total=False):
    """How one board ended, as run.json says."""

    status: str
    error: str | None
    duration_s: float
    timed_out: bool
    progress: Progress


class Owner(TypedDict, total=False):
    """``results/<run>/running``: the orch process running the run (``run_state``)."""

    host: str
    pid: int
    start_ticks: int | None  # when the process started (clock ticks after boot), None: unknown


class RunMeta(TypedDict, total=False):
    """``results/<run>/run.json``: the command, the plan and how each board ended (written at the end;
    a run without one has only ``run_id`` and its ``status`` here, see ``results.ResultStore.load``)."""

    run_id: str
    created: str
    command: str
    plan: PlanRecord
    boards: dict[str, BoardOutcome]
    wall_s: float
    status: str
    rounds_complete: int  # an interrupted run: rounds complete on every board
    kind: str  # "tune" for `orch tune`'s runs
    tune: TuneRun
