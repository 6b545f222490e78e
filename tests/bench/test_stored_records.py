"""The bench's stored formats are read in one place (``orchestrator.bench.reading``): a record orch
writes comes back as it was written, a record of older orch comes back completed, and a record
missing a key orch needs is the store's damaged file, named with the key, while the rest of the run
is still shown."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from orchestrator.adapters.session import CommandResult
from orchestrator.bench import results, tune
from orchestrator.bench.board_document import BoardDocument, ColdStarts, Measurement
from orchestrator.bench.clocks import ClockState
from orchestrator.bench.execute import parse_agent
from orchestrator.bench.plan import Combination, ReleaseRef, Setting
from orchestrator.bench.plan_options import make_plan
from orchestrator.bench.quantise import Quantised
from orchestrator.bench.records import AgentDocument, BoardRecord
from orchestrator.bench.report.sections import latest_verify
from orchestrator.bench.results import ResultStore
from orchestrator.bench.steps import board_steps
from orchestrator.board import Board
from orchestrator.errors import BenchError

BOARD = Board(name="pi01", hostname="127.0.0.1", port=1, tags=("lab", "emulated"))
RELEASE = ReleaseRef(
    id="tuned-1.21.0-aaaa0000",
    variant="tuned",
    path="/home/u/orch/releases/tuned-1.21.0-aaaa0000",
    python="/home/u/orch/releases/tuned-1.21.0-aaaa0000/venv/bin/python",
    models=("mlp.onnx", "mlp.int8.onnx"),
    ort_version="1.21.0",
    created="2026-12-01T00:00:00Z",
    current=True,
    route="official",
    native={"runner": "native/orch-runner", "runner_size": 70_000, "library_size": 14_000_000},
    wheel_size=10_700_000,
)


def agent(latencies: list[float], *, launched: float | None = None) -> AgentDocument:
    """An agent's document as ``board_side/bench_agent.py`` prints it (the keys orch reads and a few
    only a person reads, which must be kept too)."""
    state = {
        "kernel": "6.6.31+rpt-rpi-v8",
        "cpu_model": "Cortex-A76",
        "online_cores": 4,
        "cpufreq": {"cpu0": {"governor": "ondemand", "cur_khz": 2400000}},
        "thermal": [{"zone": "thermal_zone0", "type": "cpu-thermal", "temp_c": 51.2}],
        "loadavg": [0.1, 0.2, 0.3],
    }
    timing: dict[str, object] = {"runs": len(latencies), "latencies_ms": latencies, "session_create_s": 0.4}
    if launched is not None:
        timing |= {"launch_to_main_ms": launched / 10, "launch_to_first_result_ms": launched}
    document = {
        "schema": "orch-bench-agent/1",
        "ok": True,
        "ort": {"version": "1.21.0", "file": "/x/onnxruntime/__init__.py"},
        "session": {"providers": ["CPUExecutionProvider"], "intra_op_num_threads": 2},
        "timing": timing,
        "stats": {"n": len(latencies), "p50_ms": 2.0, "p99_ms": 3.0, "throughput_ips": 400.0},
        "board": {"before": state, "after": {"thermal": state["thermal"]}},
        "memory": {"peak_rss_kb": 81_000},
    }
    return json.loads(json.dumps(document))  # type: ignore[no-any-return]


def board_document() -> BoardDocument:
    """A board's record with every part orch writes: measurements, cold starts, clocks, int8 copies."""
    plan = make_plan(
        [BOARD], variants=["tuned"], settings=[Setting(intra_threads=2)], rounds=2, cold_starts=2
    )
    document = BoardDocument.begin("20261201-000000-abcd", BOARD, plan)
    document.releases = [RELEASE]
    steps = board_steps(plan, [RELEASE], ["mlp.onnx"])
    for step in steps:
        if step.launches:
            launches = [agent([2.5], launched=300.0), agent([2.4], launched=280.0)]
            document.cold_starts.append(
                ColdStarts(key=step.key(), round=step.round, step=step.index, launches=launches)
            )
        else:
            document.measurements.append(
                Measurement(
                    key=step.key(),
                    round=step.round,
                    step=step.index,
                    remote_duration_s=1.5,
                    started_as="fork",
                    agent=agent([2.0, 2.1, 1.9 + step.round / 10]),
                )
            )
    document.planned_rounds = [step.round for step in steps]
    document.clocks = ClockState(
        pinned=True, previous={"/sys/cpu0/scaling_governor": "ondemand"}, restored=True
    )
    agreement = {
        "ok": True,
        "samples": 4,
        "outputs": [{"name": "y", "max_abs_diff": 0.01, "max_abs_fp32": 3.0}],
    }
    document.quantization = {
        RELEASE.id: {"mlp.onnx": Quantised(int8_file="mlp.int8.onnx", mode="static", agreement=agreement)}  # type: ignore[typeddict-item]
    }
    document.status = "ok"
    document.finished = "2026-12-01T00:10:00Z"
    return document


def stored(tmp_path: Path, record: object, name: str = "pi01.json") -> tuple[ResultStore, Path]:
    """``record`` stored as a board's file of a finished run."""
    store = ResultStore(tmp_path / "results")
    run_id = results.new_run_id()
    store.begin_run(run_id, command="orch bench --host pi01")
    path = store.run_dir(run_id) / name
    path.write_text(json.dumps(record))
    store.finish_run(run_id, {"run_id": run_id, "command": "orch bench --host pi01", "boards": {}})
    return store, path


def test_a_board_record_comes_back_as_it_was_written(tmp_path: Path) -> None:
    written = board_document().as_dict()
    store = ResultStore(tmp_path / "results")
    run_id = results.new_run_id()
    store.begin_run(run_id, command="orch bench --host pi01")
    path = store.write_board(run_id, written)
    meta = {"run_id": run_id, "command": "orch bench", "plan": written["plan"], "status": "ok", "wall_s": 1.0}
    store.finish_run(run_id, meta)  # type: ignore[arg-type]
    record = store.load(run_id)
    on_disk = json.loads(path.read_text())
    assert record.damaged == ()
    assert record.boards["pi01"] == on_disk == json.loads(json.dumps(written))
    assert record.meta == json.loads(json.dumps(meta))
    # What the readers make of it: one series of 2 rounds, its cold starts and the board's facts.
    (series,) = record.series()
    assert series.key.runner == "python" and series.key.intra_threads == 2 and len(series.runs) == 2
    assert series.ort_version == "1.21.0" and series.route == "official"
    assert (
        record.boards["pi01"]["cold_starts"][0]["launches"][0]["timing"]["launch_to_first_result_ms"] == 300.0
    )


def test_a_record_of_older_orch_is_completed_with_what_it_meant(tmp_path: Path) -> None:
    older = {
        "schema": results.BOARD_SCHEMA,
        "board": "pi01",
        "status": "ok",
        "measurements": [
            {"key": {"variant": "stock", "release": "stock-1", "model": "m.onnx"}, "agent": {"timing": {"latencies_ms": [1.0, 2.0]}}}
        ],
    }  # fmt: skip
    store, _ = stored(tmp_path, older)
    record = store.load("latest")
    assert record.damaged == ()
    board = record.boards["pi01"]
    assert board["measurements"][0]["key"] == {
        "runner": "python", "variant": "stock", "release": "stock-1", "model": "m.onnx", "quant": "fp32",
        "ep": "cpu", "opt_level": "all", "intra_threads": 0, "inter_threads": 0,
    }  # fmt: skip
    assert board["measurements"][0]["round"] == 0
    assert board["releases"] == [] and board["cold_starts"] == [] and board["clocks"] is None


def without(document: BoardRecord, path: str) -> dict[str, object]:
    """A copy of ``document`` with the key at ``path`` (``a.0.b``: list entries by index) removed."""
    copied: dict[str, object] = copy.deepcopy(json.loads(json.dumps(document)))
    *parents, last = path.split(".")
    parent: object = copied
    for part in parents:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]  # type: ignore[index]
    del parent[last]  # type: ignore[attr-defined]
    return copied


@pytest.mark.parametrize(
    ("missing", "said"),
    [
        (
            "measurements.0.key.release",
            "a measurement is malformed: measurements[0].key: key 'release' is missing",
        ),
        (
            "measurements.1.agent.timing.latencies_ms",
            "measurements[1].agent: key 'timing.latencies_ms' is missing",
        ),
        ("measurements.0.agent", "measurements[0]: key 'agent' is missing"),
        ("cold_starts.0.launches", "a cold start is malformed: cold_starts[0]: key 'launches' is missing"),
        ("releases.0.id", "releases[0]: key 'id' is missing"),
        ("tune.stopped", "tune: key 'stopped' is missing"),
        ("board", "no 'board' name"),
    ],
)
def test_a_record_missing_a_key_is_damaged_naming_the_file_and_the_key(
    tmp_path: Path, missing: str, said: str
) -> None:
    written = board_document().as_dict()
    written["tune"] = tune.Search((Combination(variant="tuned"),), budget_s=60.0).as_dict()
    good, _ = stored(tmp_path / "good", written)
    assert good.load("latest").damaged == ()

    store, path = stored(tmp_path, without(written, missing), name="pi02.json")
    record = store.load("latest")
    assert record.boards == {}  # skipped, the file left as it is
    (damaged,) = record.damaged
    assert damaged.path == path and said in damaged.reason
    assert damaged.sentence().startswith(f"{path}: ") and "skipped" in damaged.sentence()
    assert json.loads(path.read_text()) == without(written, missing)


def test_a_run_file_of_another_shape_is_damaged_and_its_boards_still_shown(tmp_path: Path) -> None:
    store, board_path = stored(tmp_path, board_document().as_dict())
    run_file = board_path.parent / results.RUN_FILE
    run_file.write_text(json.dumps({"run_id": "x", "boards": {"pi01": "ok"}}))
    record = ResultStore(store.root).load("latest")
    assert list(record.boards) == ["pi01"] and record.status == "damaged"
    (damaged,) = record.damaged
    assert damaged.path == run_file and "boards.pi01: not an object" in damaged.reason


def test_an_agent_document_missing_its_latencies_is_refused_naming_the_key() -> None:
    plan = make_plan([BOARD], variants=["tuned"], rounds=1)
    (step,) = board_steps(plan, [RELEASE], ["mlp.onnx"])
    good = agent([1.0, 2.0])
    result = CommandResult(exit_code=0, stdout=json.dumps(good), stderr="", duration=1.0)
    assert parse_agent("pi01", step, result) == good
    del good["timing"]["latencies_ms"]
    broken = CommandResult(exit_code=0, stdout=json.dumps(good), stderr="", duration=1.0)
    with pytest.raises(
        BenchError, match=r"the agent's document is malformed: .*key 'timing.latencies_ms' is missing"
    ):
        parse_agent("pi01", step, broken)


def test_a_record_that_cannot_be_read_back_is_stored_and_named_not_raised(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    run_id = results.new_run_id()
    store.begin_run(run_id, command="orch bench --host pi01")
    unreadable = without(board_document().as_dict(), "measurements.0.key.model")
    path = store.write_board(run_id, unreadable)  # type: ignore[arg-type]
    assert json.loads(path.read_text()) == unreadable  # kept as it was, never changed
    (damaged,) = store.damaged
    assert damaged.path == path and "measurements[0].key: key 'model' is missing" in damaged.reason


def test_the_reports_verify_section_skips_a_verify_result_missing_a_key(tmp_path: Path) -> None:
    def verify(run_id: str, build: dict[str, object]) -> None:
        document = {"schema": "orch-verify/1", "run_id": run_id, "onnx": "1.19.1", "boards": {"pi01": {"status": "ok", "builds": [build]}}}  # fmt: skip
        (tmp_path / f"verify-{run_id}.json").write_text(json.dumps(document))

    build = {
        "release": RELEASE.id, "ort_version": "1.21.0", "cases": 10, "gaps": [], "regressions": [{"case": "test_abs"}],
        "counts": {"pass": 8, "fail": 1, "unsupported": 1}, "reference_counts": {"pass": 9, "fail": 0, "unsupported": 1},
    }  # fmt: skip
    verify("20261201-100000-aaaa", build)
    verify("20261201-110000-bbbb", {key: value for key, value in build.items() if key != "counts"})
    found = latest_verify(["pi01"], tmp_path)
    assert found["pi01"]["run_id"] == "20261201-100000-aaaa" and found["pi01"]["builds"] == [build]
